// Package barrier aligns checkpoint barriers over an operator's input
// channels (docs/design.md, "The checkpoint protocol"): the
// type-independent part of the runtime that decides when barrier n has
// arrived on every channel.
package barrier

import (
	"cmp"
	"fmt"
	"slices"
)

// Barrier is a checkpoint barrier as it travels with the records.
type Barrier struct {
	ID int64
	// Savepoint marks a checkpoint that is copied into a savepoint the
	// user asked for: keyed state is written in the portable format then,
	// whatever the state backend (docs/design.md, "State backends").
	Savepoint bool
}

// Aligner decides when an operator with several input channels has seen
// barrier n on all of them.
//
// In exactly-once mode a channel that delivered barrier n is blocked: the
// operator must not read from it until n is aligned, so the snapshot holds
// exactly the records before n on every channel. In at-least-once mode no
// channel is ever blocked and barrier n is released once every channel has
// delivered it (records after n on a fast channel are processed before the
// snapshot and will be replayed after a failure).
//
// A channel that reached end of stream counts as having delivered every
// future barrier. Aligner is a pure state machine; it is not safe for
// concurrent use.
type Aligner struct {
	exactlyOnce bool
	seen        []int64 // last barrier id delivered per channel
	eos         []bool
	blocked     []bool
	released    int64 // highest barrier id released downstream
	pending     map[int64]Barrier
	open        int // channels not at end of stream
}

// NewAligner returns an aligner for n input channels.
func NewAligner(n int, exactlyOnce bool) *Aligner {
	if n < 1 {
		panic(fmt.Sprintf("runtime: aligner needs at least one channel, got %d", n))
	}
	return &Aligner{
		exactlyOnce: exactlyOnce,
		seen:        make([]int64, n),
		eos:         make([]bool, n),
		blocked:     make([]bool, n),
		pending:     map[int64]Barrier{},
		open:        n,
	}
}

// Blocked reports whether channel ch must not be read now.
func (a *Aligner) Blocked(ch int) bool { return a.blocked[ch] || a.eos[ch] }

// Aligning reports whether a barrier has arrived on some channel and not
// yet on all of them: the time until it is released is alignment time.
func (a *Aligner) Aligning() bool { return len(a.pending) > 0 }

// Open returns how many channels have not reached end of stream.
func (a *Aligner) Open() int { return a.open }

// OnBarrier records barrier b on channel ch and returns the barriers that
// are now aligned on every channel, oldest first, to be forwarded downstream
// after the operator snapshots for each.
func (a *Aligner) OnBarrier(ch int, b Barrier) []Barrier {
	if a.eos[ch] {
		panic(fmt.Sprintf("runtime: barrier %d on channel %d after its end of stream", b.ID, ch))
	}
	if b.ID <= a.seen[ch] {
		panic(fmt.Sprintf("runtime: barrier %d on channel %d after barrier %d: barriers must arrive in order", b.ID, ch, a.seen[ch]))
	}
	a.seen[ch] = b.ID
	if _, seen := a.pending[b.ID]; !seen && b.ID > a.released {
		a.pending[b.ID] = b
	}
	if a.exactlyOnce {
		a.blocked[ch] = true
	}
	return a.release()
}

// OnEOS records the end of stream on channel ch. It returns the barriers
// this completes, and whether every channel has now ended.
func (a *Aligner) OnEOS(ch int) ([]Barrier, bool) {
	if a.eos[ch] {
		panic(fmt.Sprintf("runtime: second end of stream on channel %d", ch))
	}
	a.eos[ch] = true
	a.blocked[ch] = false
	a.open--
	return a.release(), a.open == 0
}

// release returns the pending barriers every open channel has delivered.
func (a *Aligner) release() []Barrier {
	if a.open == 0 {
		// Nothing more will come; barriers still pending cannot complete
		// (an upstream ended before delivering them), drop them.
		a.pending = map[int64]Barrier{}
		return nil
	}
	low := int64(-1)
	for ch, s := range a.seen {
		if a.eos[ch] {
			continue
		}
		if low < 0 || s < low {
			low = s
		}
	}
	// Over the pending barriers, not the ids between: ids can jump by
	// billions (fenced checkpoint ids).
	var out []Barrier
	for id, b := range a.pending {
		if id > a.released && id <= low {
			out = append(out, b)
			delete(a.pending, id)
		}
	}
	slices.SortFunc(out, func(x, y Barrier) int { return cmp.Compare(x.ID, y.ID) })
	if low > a.released {
		a.released = low
	}
	if a.exactlyOnce && len(out) > 0 {
		for ch := range a.blocked {
			// Only channels whose newest barrier is released may flow again.
			if a.seen[ch] <= a.released {
				a.blocked[ch] = false
			}
		}
	}
	return out
}
