// Package txhold keeps the order of rows that share one transaction per
// checkpoint: the bookkeeping of the database sinks whose transaction is
// the job's commit point (docs/design.md, "Database sinks").
//
// The sink's writers send rows into one open transaction, which the commit
// point commits as checkpoint n. Rows a writer gets after it passed barrier
// n belong to the next transaction, so while n is unresolved (prepared by
// some writer, neither committed nor aborted) they wait here; the commit of
// n, or its abort, releases them. A Hold is not safe for concurrent use:
// the sink guards it with the mutex that guards its transaction.
package txhold

import "slices"

// Hold holds batches of type B, in the order they came.
type Hold[B any] struct {
	// unresolved holds, ascending, the checkpoints some writer prepared
	// that have neither committed nor been aborted; aborted remembers
	// aborted ids above lastCommitted, so that a late Prepare of an
	// aborted checkpoint does not hold rows forever.
	unresolved    []int64
	aborted       map[int64]bool
	lastCommitted int64
	held          []entry[B]
	rows          int
	maxRows       int
	released      chan struct{}
}

type entry[B any] struct {
	epoch int64
	b     B
	rows  int
}

// New returns a hold of at most maxRows rows (a batch is held even when
// it alone is more).
func New[B any](maxRows int) *Hold[B] {
	return &Hold[B]{aborted: map[int64]bool{}, maxRows: maxRows, released: make(chan struct{})}
}

// Reset forgets everything (a new incarnation recovered lastCommitted)
// and wakes the waiters.
func (h *Hold[B]) Reset(lastCommitted int64) {
	h.unresolved, h.lastCommitted = nil, lastCommitted
	clear(h.aborted)
	clear(h.held)
	h.held, h.rows = h.held[:0], 0
	h.Wake()
}

// LastCommitted is the newest committed checkpoint.
func (h *Hold[B]) LastCommitted() int64 { return h.lastCommitted }

// MustHold reports whether rows of epoch e (written after barrier e-1)
// must wait: a checkpoint below e is unresolved, so the open transaction
// may still commit as that one.
func (h *Hold[B]) MustHold(e int64) bool {
	return len(h.unresolved) > 0 && h.unresolved[0] < e
}

// Prepared records that a writer prepared checkpoint id.
func (h *Hold[B]) Prepared(id int64) {
	if id <= h.lastCommitted || h.aborted[id] {
		return // resolved already: a late barrier of an aborted checkpoint
	}
	if i, found := slices.BinarySearch(h.unresolved, id); !found {
		h.unresolved = slices.Insert(h.unresolved, i, id)
	}
}

// Committed records that checkpoint id committed, with every one below.
func (h *Hold[B]) Committed(id int64) {
	h.lastCommitted = max(h.lastCommitted, id)
	h.unresolved = slices.DeleteFunc(h.unresolved, func(u int64) bool { return u <= id })
	for a := range h.aborted {
		if a <= id {
			delete(h.aborted, a)
		}
	}
}

// Aborted records that checkpoint id will never commit: what waited for it
// joins the epoch the next commit covers.
func (h *Hold[B]) Aborted(id int64) {
	if id > h.lastCommitted {
		h.aborted[id] = true
		h.unresolved = slices.DeleteFunc(h.unresolved, func(u int64) bool { return u == id })
	}
}

// Add holds b, rows rows of epoch e; false when the hold is full (the
// writer waits for Released, then tries again).
func (h *Hold[B]) Add(e int64, b B, rows int) bool {
	if h.rows > 0 && h.rows+rows > h.maxRows {
		return false
	}
	h.held = append(h.held, entry[B]{epoch: e, b: b, rows: rows})
	h.rows += rows
	return true
}

// Rows is how many rows are held.
func (h *Hold[B]) Rows() int { return h.rows }

// Release passes to write, in order, the held batches that may enter the
// open transaction now, and with upTo >= 0 every batch of an epoch up to
// it (the commit of upTo covers them). It stops at write's first error.
func (h *Hold[B]) Release(upTo int64, write func(B) error) error {
	keep := h.held[:0]
	var err error
	for _, e := range h.held {
		if err == nil && (e.epoch <= upTo || !h.MustHold(e.epoch)) {
			h.rows -= e.rows
			err = write(e.b)
			continue
		}
		keep = append(keep, e)
	}
	clear(h.held[len(keep):])
	h.held = keep
	return err
}

// Released is closed at the next Wake: a writer waiting for room waits on
// it (after releasing the sink's mutex).
func (h *Hold[B]) Released() <-chan struct{} { return h.released }

// Wake wakes the writers waiting for room (rows were released, or the
// transaction failed).
func (h *Hold[B]) Wake() {
	close(h.released)
	h.released = make(chan struct{})
}
