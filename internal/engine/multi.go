package engine

import (
	"fmt"
	"reflect"
	"time"

	"github.com/onceflow/onceflow/state"
)

// Multi-input nodes (docs/design.md, "Multi-input nodes"): a union of
// streams of one type, and a two-input keyed operator whose inputs are
// routed by the same key. Such a node heads a task, never chained; each
// input is an exchange of its own type, and the receiver numbers the
// channels of all of them globally (input 0's senders first), with one
// barrier aligner and one watermark combiner over all of them. Nodes with
// one input keep exchange.receive, the loop without the indirection.

// multiIn is what a multi-input node's chain returns: per input, the
// typed entry its records go into (input[T] or keyedInput[T] of that
// input's type), and the node's control, which takes the aligned
// barriers, the combined watermark and the end of stream.
type multiIn struct {
	ins []any
	ctl controller
}

// inPort is one input of a multi-input node at one receiver subtask: the
// channels from that input's sender subtasks, with their record type.
type inPort interface {
	channels() int
	// poll takes a message from channel i if one is ready: its records go
	// into the node, a control message is returned.
	poll(i int) (c ctl, isCtl, got bool)
	// chanOf is channel i, for reflect.Select.
	chanOf(i int) reflect.Value
	// take handles a message reflect.Select received, like poll.
	take(v reflect.Value) (c ctl, isCtl bool)
	// current is the record being processed, for error reports.
	current() any
}

type exPort[T any] struct {
	ex    *exchange[T]
	st    *subtask
	chans []chan exMsg[T]
	keyed keyedInput[T]
	plain input[T]
	cur   exMsg[T]
	idx   int
}

func (ex *exchange[T]) port(st *subtask, in any) inPort {
	p := &exPort[T]{ex: ex, st: st, chans: ex.chans[st.index]}
	ex.rx[st.index].idle = &st.idle
	if ex.key != nil {
		p.keyed = in.(keyedInput[T])
	} else {
		p.plain = in.(input[T])
	}
	return p
}

func (p *exPort[T]) channels() int              { return len(p.chans) }
func (p *exPort[T]) chanOf(i int) reflect.Value { return reflect.ValueOf(p.chans[i]) }

func (p *exPort[T]) current() any {
	if p.idx < len(p.cur.recs) {
		return p.cur.recs[p.idx]
	}
	return nil
}

func (p *exPort[T]) poll(i int) (ctl, bool, bool) {
	select {
	case m := <-p.chans[i]:
		c, isCtl := p.deliver(m)
		return c, isCtl, true
	default:
		return ctl{}, false, false
	}
}

func (p *exPort[T]) take(v reflect.Value) (ctl, bool) { return p.deliver(v.Interface().(exMsg[T])) }

func (p *exPort[T]) deliver(m exMsg[T]) (ctl, bool) {
	if m.isCtl {
		return m.c, true
	}
	p.cur = m
	p.st.in.Add(int64(len(m.recs)))
	if p.keyed != nil {
		for p.idx = range m.recs {
			p.keyed.pushKeyed(m.keys[p.idx], int(m.kgs[p.idx]), m.recs[p.idx])
		}
	} else {
		for p.idx = range m.recs {
			p.plain.push(m.recs[p.idx])
		}
	}
	p.idx = len(m.recs)
	p.cur = exMsg[T]{}
	p.ex.rx[p.st.index].taken(m.sender, len(m.recs), time.Now())
	p.ex.recycle(m)
	return ctl{}, false
}

// receiveMulti runs receiver subtask st of a multi-input node until every
// channel of every input ended. Channel g of the aligner and the
// watermark combiner is input k's sender g-base(k).
func receiveMulti(st *subtask, ports []inPort, out controller) {
	type chRef struct {
		p inPort
		i int
	}
	var refs []chRef
	for _, p := range ports {
		for i := range p.channels() {
			refs = append(refs, chRef{p, i})
		}
	}
	cs := newCtlIn(st, len(refs), out)
	al := cs.al
	var cur inPort
	st.describeRecord = func() any {
		if cur != nil {
			return cur.current()
		}
		return nil
	}
	cases := make([]reflect.SelectCase, 2+len(refs))
	cases[0] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(st.att.ctx.Done())}
	cases[1] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(st.mail.Wake())}
	chans := make([]reflect.Value, len(refs))
	for g, r := range refs {
		chans[g] = r.p.chanOf(r.i)
		cases[2+g].Dir = reflect.SelectRecv
	}
	for {
		// Fast path: take whatever is ready without blocking.
		progressed := false
		for g, r := range refs {
			if al.Blocked(g) {
				continue
			}
			cur = r.p
			c, isCtl, got := r.p.poll(r.i)
			if !got {
				continue
			}
			progressed = true
			if isCtl && cs.on(g, c) {
				return
			}
		}
		st.handleMail()
		if progressed {
			continue
		}
		out.control(ctl{kind: ctlFlush})
		for g := range refs {
			if al.Blocked(g) {
				cases[2+g].Chan = reflect.Value{}
			} else {
				cases[2+g].Chan = chans[g]
			}
		}
		chosen, v, ok := st.waitSelect(cases)
		switch {
		case chosen == 0:
			panic(errAttemptCanceled)
		case chosen == 1:
			st.handleMail()
		case ok:
			g := chosen - 2
			cur = refs[g].p
			if c, isCtl := cur.take(v); isCtl && cs.on(g, c) {
				return
			}
		}
	}
}

// AddUnion adds an operator merging ins, two or more streams of one
// record type, into one (no order between them). Every input is
// rebalanced into it.
func AddUnion[T any](ins []*Node, opts ...NodeOption) *Node {
	if len(ins) == 0 {
		panic("engine: AddUnion needs inputs")
	}
	n := &Node{name: "union", kind: kindOp, inputs: ins, edge: edgeRebalance, fanout: typedFanout[T]}
	if len(ins) < 2 {
		ins[0].Invalid(fmt.Errorf("a union needs at least two inputs, got %d", len(ins)))
	}
	for range ins {
		n.exchanges = append(n.exchanges, rebalanceOf[T])
	}
	n.chain = func(st *subtask, n *Node, out any) any {
		op := &identityOp[T]{stateless: newStateless(st, n), out: out.(input[T])}
		m := &multiIn{ctl: op}
		for range n.inputs {
			m.ins = append(m.ins, input[T](op))
		}
		return m
	}
	return ins[0].g.add(n, opts)
}

// Keyed2Funcs are a two-input keyed operator's functions: OnLeft and
// OnRight are called with each record of their input, the current key set
// to the record's; OnTimer with each due timer of a key. Both sides share
// the subtask's state and timers. OnTimer nil: no timers.
type Keyed2Funcs[L, R any] struct {
	OnLeft  func(L) error
	OnRight func(R) error
	OnTimer func(tm state.Timer) error
}

// Keyed2Setup builds a two-input keyed operator for one subtask: it
// registers state handles in s, once for both inputs.
type Keyed2Setup[L, R, U any] func(s *state.Store, ctx KeyedContext, out Input[U]) (Keyed2Funcs[L, R], error)

// either is a record of one side of a two-input keyed operator: the
// operator is a one-input keyed operator of either[L, R], so state,
// timers, snapshots and restores are the one-input operator's.
type either[L, R any] struct {
	l     L
	r     R
	right bool
}

// AddKeyed2 adds a keyed operator reading two streams, l keyed by keyL
// and r by keyR: a key's records from either side reach the same subtask
// (the one owning its key group), whose one state.Store and timers both
// sides share. uid names its state, one state file per subtask as for
// AddKeyed (docs/design.md, "Multi-input nodes").
func AddKeyed2[L, R, U any](l, r *Node, uid string, keyL func(L) string, keyR func(R) string, setup Keyed2Setup[L, R, U], opts ...NodeOption) *Node {
	g := l.g
	n := &Node{name: "coprocess", uid: uid, kind: kindKeyed, inputs: []*Node{l, r}, edge: edgeKeyed, fanout: typedFanout[U]}
	if uid == "" {
		g.Cfg.Errs = append(g.Cfg.Errs, fmt.Errorf("keyed operator #%d has an empty uid: keyed state needs a stable uid to be found again after a restart", len(g.nodes)))
	}
	n.exchanges = exchangesOf(keyedOf(keyL), keyedOf(keyR))
	n.chain = func(st *subtask, n *Node, out any) any {
		op := newKeyedOp(st, n, func(s *state.Store, ctx KeyedContext, out Input[U]) (KeyedFuncs[either[L, R]], error) {
			fns, err := setup(s, ctx, out)
			if err != nil {
				return KeyedFuncs[either[L, R]]{}, err
			}
			if fns.OnLeft == nil || fns.OnRight == nil {
				return KeyedFuncs[either[L, R]]{}, fmt.Errorf("setup returned no function for the left or the right input")
			}
			onLeft, onRight := fns.OnLeft, fns.OnRight
			return KeyedFuncs[either[L, R]]{
				OnRecord: func(e either[L, R]) error {
					if e.right {
						return onRight(e.r)
					}
					return onLeft(e.l)
				},
				OnTimer: fns.OnTimer,
			}, nil
		}, out.(input[U]))
		k := mark[either[L, R]](st, n, op).(keyedInput[either[L, R]])
		return &multiIn{ins: []any{leftIn[L, R]{k}, rightIn[L, R]{k}}, ctl: k}
	}
	return g.add(n, opts)
}

// leftIn and rightIn are the entries of a two-input keyed operator's
// inputs.
type leftIn[L, R any] struct{ k keyedInput[either[L, R]] }

func (s leftIn[L, R]) push(L)        { s.k.push(either[L, R]{}) }
func (s leftIn[L, R]) control(c ctl) { s.k.control(c) }
func (s leftIn[L, R]) pushKeyed(key string, kg int, x L) {
	s.k.pushKeyed(key, kg, either[L, R]{l: x})
}

type rightIn[L, R any] struct{ k keyedInput[either[L, R]] }

func (s rightIn[L, R]) push(R)        { s.k.push(either[L, R]{}) }
func (s rightIn[L, R]) control(c ctl) { s.k.control(c) }
func (s rightIn[L, R]) pushKeyed(key string, kg int, x R) {
	s.k.pushKeyed(key, kg, either[L, R]{r: x, right: true})
}
