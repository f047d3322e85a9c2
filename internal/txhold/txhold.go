// Package txhold keeps the order of rows that share one transaction per
// checkpoint: the bookkeeping of the sinks whose transaction is the job's
// commit point, the database sinks (docs/design.md, "Database sinks") and
// the Kafka sink (docs/design.md, "The Kafka commit point").
//
// The sink's writers send rows into one open transaction, which the commit
// point commits as checkpoint n. Rows a writer gets after it passed barrier
// n belong to the next transaction, so while n is unresolved (prepared by
// some writer, neither committed nor aborted) they wait here; the commit of
// n, or its abort, releases them. A Hold is bounded by a size function the
// sink chooses: rows for the database sinks, bytes for the Kafka sink. A
// Hold is not safe for concurrent use: the sink guards it with the mutex
// that guards its transaction.
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
	size          int64 // the sum of the held batches' sizes
	maxSize       int64
	sizeOf        func(B) int64
	released      chan struct{}
}

type entry[B any] struct {
	epoch int64
	b     B
	size  int64
}

// New returns a hold of batches whose sizes, as sizeOf measures them (rows,
// bytes), sum to at most maxSize; a batch is held even when it alone is
// more, so that one large batch cannot block its writer forever.
func New[B any](maxSize int64, sizeOf func(B) int64) *Hold[B] {
	return &Hold[B]{aborted: map[int64]bool{}, maxSize: maxSize, sizeOf: sizeOf, released: make(chan struct{})}
}

// Reset forgets everything (a new incarnation recovered lastCommitted)
// and wakes the waiters.
func (h *Hold[B]) Reset(lastCommitted int64) {
	h.unresolved, h.lastCommitted = nil, lastCommitted
	clear(h.aborted)
	clear(h.held)
	h.held, h.size = h.held[:0], 0
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

// Add holds b, a batch of epoch e, unless it does not fit: false when the
// held batches and b would be more than the bound and the hold is not
// empty (the writer waits for Released, then tries again).
func (h *Hold[B]) Add(e int64, b B) bool {
	n := h.sizeOf(b)
	if h.size > 0 && h.size+n > h.maxSize {
		return false
	}
	h.held = append(h.held, entry[B]{epoch: e, b: b, size: n})
	h.size += n
	return true
}

// Size is the sum of the held batches' sizes.
func (h *Hold[B]) Size() int64 { return h.size }

// Drop forgets, without writing them, the held batches drop picks (a
// writer closed: its rows' epoch is replayed). The caller wakes the
// waiters.
func (h *Hold[B]) Drop(drop func(B) bool) {
	keep := h.held[:0]
	for _, e := range h.held {
		if drop(e.b) {
			h.size -= e.size
			continue
		}
		keep = append(keep, e)
	}
	clear(h.held[len(keep):])
	h.held = keep
}

// Release passes to write, in order, the held batches that may enter the
// open transaction now, and with upTo >= 0 every batch of an epoch up to
// it (the commit of upTo covers them). It stops at write's first error.
func (h *Hold[B]) Release(upTo int64, write func(B) error) error {
	keep := h.held[:0]
	var err error
	for _, e := range h.held {
		if err == nil && (e.epoch <= upTo || !h.MustHold(e.epoch)) {
			h.size -= e.size
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
