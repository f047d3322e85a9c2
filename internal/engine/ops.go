package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/onceflow/onceflow/internal/barrier"
	"github.com/onceflow/onceflow/state"
)

type ctlKind uint8

const (
	// ctlFlush asks exchanges to send partial batches (input went idle).
	ctlFlush ctlKind = iota
	// ctlBarrier is checkpoint barrier b.
	ctlBarrier
	// ctlEOS is the end of the stream.
	ctlEOS
	// ctlWatermark is event time: no record at or before wm is expected
	// any more from this input, or (idle) the input is idle and must not
	// hold event time back until it sends records again.
	ctlWatermark
)

type ctl struct {
	kind ctlKind
	b    barrier.Barrier
	wm   int64
	idle bool
}

// input is the typed entry of an operator: records and in-band control, in
// order, from one goroutine.
type input[T any] interface {
	push(T)
	control(ctl)
}

// Input is where an operator's function emits records: the typed input of
// the operators downstream.
type Input[T any] struct{ in input[T] }

// Push hands rec downstream.
func (i Input[T]) Push(rec T) { i.in.push(rec) }

// keyedInput is the entry of a keyed operator: the exchange already computed
// the key and its key group.
type keyedInput[T any] interface {
	input[T]
	pushKeyed(key string, kg int, rec T)
}

type fanout[T any] []input[T]

func (f fanout[T]) push(x T) {
	for _, in := range f {
		in.push(x)
	}
}

func (f fanout[T]) control(c ctl) {
	for _, in := range f {
		in.control(c)
	}
}

// userError carries an error returned by user code up to the subtask, which
// turns it into a task failure; it travels by panic so the per-record path
// has no error plumbing.
type userError struct{ err error }

func fail(err error) { panic(userError{err}) }

// stateless is embedded by operators without state: they ack barriers empty.
type stateless struct {
	st   *subtask
	part int
}

func newStateless(st *subtask, n *Node) stateless {
	return stateless{st: st, part: st.att.partOf(n, st.index)}
}

func (s *stateless) barrier(c ctl) {
	if c.kind == ctlBarrier {
		s.st.att.ack(ackMsg{cp: c.b.ID, part: s.part})
	}
}

type mapOp[T, U any] struct {
	stateless
	f   func(T) U
	out input[U]
}

func (m *mapOp[T, U]) push(x T)      { m.out.push(m.f(x)) }
func (m *mapOp[T, U]) control(c ctl) { m.barrier(c); m.out.control(c) }

type flatMapOp[T, U any] struct {
	stateless
	f   func(T)
	out input[U]
}

func (m *flatMapOp[T, U]) push(x T)      { m.f(x) }
func (m *flatMapOp[T, U]) control(c ctl) { m.barrier(c); m.out.control(c) }

type filterOp[T any] struct {
	stateless
	f   func(T) bool
	out input[T]
}

func (m *filterOp[T]) push(x T) {
	if m.f(x) {
		m.out.push(x)
	}
}
func (m *filterOp[T]) control(c ctl) { m.barrier(c); m.out.control(c) }

type identityOp[T any] struct {
	stateless
	out input[T]
}

func (m *identityOp[T]) push(x T)      { m.out.push(x) }
func (m *identityOp[T]) control(c ctl) { m.barrier(c); m.out.control(c) }

// KeyedContext is what a keyed function sees besides the record: the
// current key and its subtask.
type KeyedContext struct{ op keyedState }

type keyedState interface {
	key() string
	subtask() int
	Watermark() int64
	Timer() state.Timer
	ProcessingTime() int64
	RegisterEventTimeTimer(at int64)
	DeleteEventTimeTimer(at int64)
	RegisterProcessingTimeTimer(at int64)
	DeleteProcessingTimeTimer(at int64)
}

// Key returns the key of the record being processed.
func (c KeyedContext) Key() string { return c.op.key() }

// Subtask returns the index of the subtask processing the record.
func (c KeyedContext) Subtask() int { return c.op.subtask() }

// Watermark returns the operator's event time: the watermark of its input
// (ms since the Unix epoch; NoWatermark before the first).
func (c KeyedContext) Watermark() int64 { return c.op.Watermark() }

// Timer returns the timer being handled by OnTimer (Domain 0 otherwise).
func (c KeyedContext) Timer() state.Timer { return c.op.Timer() }

// ProcessingTime returns the wall clock in ms (the job's clock).
func (c KeyedContext) ProcessingTime() int64 { return c.op.ProcessingTime() }

// RegisterEventTimeTimer makes OnTimer run for the current key once the
// watermark reaches at; once per key and time.
func (c KeyedContext) RegisterEventTimeTimer(at int64) { c.op.RegisterEventTimeTimer(at) }

// DeleteEventTimeTimer removes the current key's event-time timer at at.
func (c KeyedContext) DeleteEventTimeTimer(at int64) { c.op.DeleteEventTimeTimer(at) }

// RegisterProcessingTimeTimer makes OnTimer run for the current key once
// the wall clock reaches at.
func (c KeyedContext) RegisterProcessingTimeTimer(at int64) { c.op.RegisterProcessingTimeTimer(at) }

// DeleteProcessingTimeTimer removes the current key's processing-time
// timer at at.
func (c KeyedContext) DeleteProcessingTimeTimer(at int64) { c.op.DeleteProcessingTimeTimer(at) }

// KeyedSetup builds a keyed operator's function for one subtask: it
// registers state handles in s and returns the function called with each
// record (the current key set), emitting to out.
type KeyedSetup[T, U any] func(s *state.Store, ctx KeyedContext, out Input[U]) (func(T) error, error)

// keyedOp runs a keyed function with keyed state.
type keyedOp[T, U any] struct {
	st      *subtask
	n       *Node
	part    int
	store   *state.Runtime
	db      *dbState   // nil: state in the heap
	heap    *heapChain // the heap's incremental snapshots; nil with a database or without a store
	fn      func(T) error
	out     input[U]
	lastKey string
	kg      int // the current key's key group
	records int
	time    keyedTime
}

// Expired state leaves a database through the TTL index (state.Runtime.Sweep):
// every sweepEvery records up to sweepBatch entries (four times what those
// records can have written to the index), and as many at each barrier, so
// an idle job drains it too. A sweep costs a few microseconds per entry;
// the barrier's stays within the checkpoint's short synchronous part.
const (
	sweepEvery = 1024
	sweepBatch = 4096
)

func (k *keyedOp[T, U]) key() string  { return k.store.CurrentKey() }
func (k *keyedOp[T, U]) subtask() int { return k.st.index }

func newKeyedOp[T, U any](st *subtask, n *Node, setup KeyedTimedSetup[T, U], out input[U]) *keyedOp[T, U] {
	att := st.att
	first, last := state.KeyGroupRange(st.index, st.par, att.cfg.MaxParallelism)
	var (
		backend state.Backend
		ds      *dbState
	)
	if att.pool != nil {
		var err error
		if ds, err = att.openKeyedDB(n, st.index, first, last); err != nil {
			panic(userError{err})
		}
		backend = ds.db
	}
	store := state.NewRuntime(first, last, att.cfg.MaxParallelism, att.cfg.Clock, backend)
	op := &keyedOp[T, U]{st: st, n: n, part: att.partOf(n, st.index), store: store, db: ds, out: out}
	op.time.wm = NoWatermark
	fns, err := setup(store.Store(), KeyedContext{op}, Input[U]{out})
	if err != nil {
		panic(userError{fmt.Errorf("keyed operator %q: %w", n.uid, err)})
	}
	if fns.OnRecord == nil {
		panic(userError{fmt.Errorf("keyed operator %q: setup returned a nil ProcessFunc", n.uid)})
	}
	op.fn = fns.OnRecord
	if fns.OnTimer != nil {
		op.time.onTimer = fns.OnTimer
		op.time.timers = store.Timers()
		st.onTimers = append(st.onTimers, op.fireProcessing)
	}
	store.Seal()
	if err := att.restoreKeyed(n.uid, store); err != nil {
		panic(userError{err})
	}
	if err := op.restoreTime(); err != nil {
		panic(userError{err})
	}
	if ds == nil && att.store != nil {
		store.TrackChanges()
		op.heap = newHeapChain()
		if files := att.inheritedHeapChain(n.uid, first, last); files != nil {
			op.heap.inherit(files)
			store.ResumeChanges()
		}
	}
	if names := store.Unclaimed(); len(names) > 0 {
		att.log.Warn("restored keyed state that no handle registered is kept but unused", "operator", n.uid, "states", names)
	}
	st.describe = func() string { return fmt.Sprintf("key %q", op.lastKey) }
	return op
}

func (k *keyedOp[T, U]) push(x T) {
	panic(fmt.Sprintf("onceflow: keyed operator %q received a record without a key (it must follow KeyBy)", k.n.uid))
}

func (k *keyedOp[T, U]) pushKeyed(key string, kg int, x T) {
	k.lastKey, k.kg = key, kg
	k.store.SetKeyInGroup(key, kg)
	if err := k.fn(x); err != nil {
		fail(fmt.Errorf("operator %q: %w", k.n.uid, err))
	}
	if k.db != nil {
		if k.records++; k.records%sweepEvery == 0 {
			k.sweep(sweepBatch)
		}
	}
}

func (k *keyedOp[T, U]) sweep(limit int) {
	if _, err := k.store.Sweep(limit); err != nil {
		fail(fmt.Errorf("operator %q: remove expired state: %w", k.n.uid, err))
	}
}

func (k *keyedOp[T, U]) control(c ctl) {
	switch c.kind {
	case ctlWatermark:
		if !c.idle {
			k.advance(c.wm)
		}
		// Downstream sees the operator's watermark, which never goes
		// back (a restored one can be ahead of the input's).
		c.wm = max(c.wm, k.time.wm)
	case ctlBarrier:
		k.store.ClearKey()
		first, last := k.store.KeyGroups()
		wm := watermarkBlob(first, last, k.time.wm)
		switch {
		case k.db != nil && !c.b.Savepoint:
			k.sweep(sweepBatch)
			if err := k.st.att.checkpointDB(c.b.ID, k.n, k.part, k.db, first, last, wm); err != nil {
				fail(fmt.Errorf("operator %q: %w", k.n.uid, err))
			}
		case k.heap != nil && !c.b.Savepoint:
			if err := k.st.att.checkpointHeap(c.b.ID, k.n, k.st.index, k.part, k.store, k.heap, wm); err != nil {
				fail(fmt.Errorf("operator %q: %w", k.n.uid, err))
			}
		default:
			// The heap's snapshot, and every savepoint: the portable
			// format, which restores into either backend.
			if k.db != nil {
				k.db.forgetStored(c.b.ID)
			}
			if k.heap != nil {
				// Once the savepoint commits, GC may remove every
				// file of the chain (docs/design.md, "Incremental
				// checkpoints").
				k.heap.restart = true
			}
			snap, err := k.store.Snapshot()
			if err != nil {
				fail(fmt.Errorf("operator %q: %w", k.n.uid, err))
			}
			k.st.att.writeKeyed(c.b.ID, k.n, k.st.index, k.part, k.store, snap, wm)
		}
	}
	k.out.control(c)
}

// Error policies of TryMap (flow.ErrorPolicy has the same values).
const (
	FailOnError = iota
	SkipOnError
	DeadLetterOnError
)

// TryResult is what a TryMap operator emits: the result, or the input and
// the error of a failed record under DeadLetterOnError.
type TryResult[T, U any] struct {
	In  T
	Out U
	Err error
}

type tryMapOp[T, U any] struct {
	stateless
	n      *Node
	f      func(T) (U, error)
	policy int
	out    input[TryResult[T, U]]
}

func (m *tryMapOp[T, U]) push(x T) {
	u, err := m.f(x)
	if err == nil {
		m.out.push(TryResult[T, U]{Out: u})
		return
	}
	switch m.policy {
	case SkipOnError:
		m.st.att.job.skipped.Add(1)
		m.st.att.log.Warn("skipped a record its function rejected (error policy skip)", "operator", m.n.uid, "subtask", m.st.index, "position", m.st.position(), "err", err)
	case DeadLetterOnError:
		m.st.att.job.deadLettered.Add(1)
		m.out.push(TryResult[T, U]{In: x, Err: err})
	default:
		fail(fmt.Errorf("operator %q: %w (error policy fail; set skip or dead-letter to let the job go past such records)", m.n.uid, err))
	}
}

func (m *tryMapOp[T, U]) control(c ctl) {
	m.barrier(c)
	m.out.control(c)
}

// pendingHandle is a prepared sink epoch not yet known to be committed.
type pendingHandle struct {
	id     int64
	handle []byte
}

func encodePending(ps []pendingHandle) []byte {
	var b []byte
	b = binary.AppendUvarint(b, uint64(len(ps)))
	for _, p := range ps {
		b = binary.AppendVarint(b, p.id)
		b = binary.AppendUvarint(b, uint64(len(p.handle)))
		b = append(b, p.handle...)
	}
	return b
}

var errBadPending = errors.New("malformed sink handle list in checkpoint")

func decodePending(b []byte) ([]pendingHandle, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, errBadPending
	}
	b = b[k:]
	out := make([]pendingHandle, 0, n)
	for i := uint64(0); i < n; i++ {
		id, k := binary.Varint(b)
		if k <= 0 {
			return nil, errBadPending
		}
		b = b[k:]
		l, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < l {
			return nil, errBadPending
		}
		out = append(out, pendingHandle{id: id, handle: append([]byte(nil), b[k:k+int(l)]...)})
		b = b[k+int(l):]
	}
	return out, nil
}

const pendingBlobPrefix = "pending/"

func pendingBlobKey(subtask int) string { return pendingBlobPrefix + strconv.Itoa(subtask) }

// restoredPending returns every pending sink handle in the blobs, by id.
func restoredPending(blobs map[string][]byte) ([]pendingHandle, error) {
	var all []pendingHandle
	for k, v := range blobs {
		if len(k) <= len(pendingBlobPrefix) || k[:len(pendingBlobPrefix)] != pendingBlobPrefix {
			continue
		}
		ps, err := decodePending(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		all = append(all, ps...)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].id < all[j].id })
	return all, nil
}
