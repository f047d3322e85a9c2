package flow

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/onceflow/onceflow/internal/runtime"
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
)

type ctl struct {
	kind ctlKind
	b    runtime.Barrier
}

// input is the typed entry of an operator: records and in-band control, in
// order, from one goroutine.
type input[T any] interface {
	push(T)
	control(ctl)
}

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

func newStateless(st *subtask, n *node) stateless {
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
	f   func(T, Collector[U])
	out Collector[U]
}

func (m *flatMapOp[T, U]) push(x T)      { m.f(x, m.out) }
func (m *flatMapOp[T, U]) control(c ctl) { m.barrier(c); m.out.out.control(c) }

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

// keyedOp runs a ProcessFunc with keyed state.
type keyedOp[T, U any] struct {
	st      *subtask
	n       *node
	part    int
	store   *state.Runtime
	fn      ProcessFunc[T, U]
	ctx     Context
	out     Collector[U]
	lastKey string
}

func newKeyedOp[T, U any](st *subtask, n *node, setup func(*state.Store) ProcessFunc[T, U], out input[U]) *keyedOp[T, U] {
	att := st.att
	first, last := state.KeyGroupRange(st.index, st.par, att.cfg.maxParallelism)
	store := state.NewRuntime(first, last, att.cfg.maxParallelism, att.cfg.clock, nil)
	fn := setup(store.Store())
	if fn == nil {
		panic(userError{fmt.Errorf("keyed operator %q: setup returned a nil ProcessFunc", n.uid)})
	}
	store.Seal()
	if err := att.restoreKeyed(n.uid, store); err != nil {
		panic(userError{err})
	}
	if names := store.Unclaimed(); len(names) > 0 {
		att.log.Warn("restored keyed state that no handle registered is kept but unused", "operator", n.uid, "states", names)
	}
	op := &keyedOp[T, U]{st: st, n: n, part: att.partOf(n, st.index), store: store, fn: fn, out: Collector[U]{out}}
	op.ctx = Context{st: st, kv: store}
	st.describe = func() string { return fmt.Sprintf("key %q", op.lastKey) }
	return op
}

func (k *keyedOp[T, U]) push(x T) {
	panic(fmt.Sprintf("onceflow: keyed operator %q received a record without a key (it must follow KeyBy)", k.n.uid))
}

func (k *keyedOp[T, U]) pushKeyed(key string, kg int, x T) {
	k.lastKey = key
	k.store.SetKeyInGroup(key, kg)
	if err := k.fn(k.ctx, x, k.out); err != nil {
		fail(fmt.Errorf("operator %q: %w", k.n.uid, err))
	}
}

func (k *keyedOp[T, U]) control(c ctl) {
	if c.kind == ctlBarrier {
		k.store.ClearKey()
		snap, err := k.store.Snapshot()
		if err != nil {
			fail(fmt.Errorf("operator %q: %w", k.n.uid, err))
		}
		k.st.att.writeKeyed(c.b.ID, k.n, k.st.index, k.part, k.store, snap)
	}
	k.out.out.control(c)
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
