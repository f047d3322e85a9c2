package flow

import (
	"context"
	"fmt"

	"github.com/onceflow/onceflow/state"
)

// Env holds a job definition: its options and its dataflow graph. Build the
// graph with From, Map, KeyBy, Process, To and friends, then Run or Start it.
type Env struct {
	cfg   config
	nodes []*node
	uids  map[string]*node
}

// New returns an empty job definition.
func New(opts ...Option) *Env {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	return &Env{cfg: cfg, uids: map[string]*node{}}
}

type nodeKind int

const (
	kindSource nodeKind = iota
	kindOp
	kindKeyed
	kindSink
)

type edgeKind int

const (
	edgeForward edgeKind = iota // same parallelism: chained
	edgeRebalance
	edgeKeyed
)

// node is one operator of the graph, with its type erased; the typed
// behaviour lives in the closures set by the generic constructors.
type node struct {
	env       *Env
	id        int
	uid       string
	name      string
	kind      nodeKind
	par       int // explicit parallelism, 0 = inherit
	input     *node
	edge      edgeKind
	consumers []*node

	// hint returns the source's own parallelism (sources only).
	hint func(ctx context.Context) (int, error)
	// runSource runs one source subtask (sources only).
	runSource func(st *subtask, out any)
	// chain builds this operator for subtask st, pushing to out (the typed
	// input of its consumers, fanned out) and returns its own typed input.
	chain func(st *subtask, n *node, out any) any
	// fanout combines the typed inputs of several consumers into one.
	fanout func(outs []any) any
	// exchange creates the typed channels of an exchange edge into this node.
	exchange func(att *attempt, senders, receivers int) exchangeImpl
	// committer returns the sink's recovery committer (sinks only).
	committer func(ctx context.Context, job, uid string) (SinkCommitter, error)
	// commitPoint is set for sinks that own the commit point.
	commitPoint CommitPoint
	// impl is the Source or Sink value (sources and sinks), for the
	// optional interfaces the runtime looks for (JobBinder,
	// PriorProgressReporter).
	impl any
}

func (e *Env) add(n *node) *node {
	n.env = e
	n.id = len(e.nodes)
	if n.uid == "" {
		n.uid = fmt.Sprintf("%s-%d", n.name, n.id)
	} else if prev, dup := e.uids[n.uid]; dup {
		e.cfg.errs = append(e.cfg.errs, fmt.Errorf("operator uid %q is used by both %s (#%d) and %s (#%d): uids map state in checkpoints to operators, give each a different one", n.uid, prev.name, prev.id, n.name, n.id))
	}
	e.uids[n.uid] = n
	e.nodes = append(e.nodes, n)
	if n.input != nil {
		n.input.consumers = append(n.input.consumers, n)
	}
	return n
}

// Stream is a typed stream of records between operators.
type Stream[T any] struct {
	n *node
}

// OpOption configures one operator.
type OpOption func(*node)

// UID gives an operator a stable id. Operators with state (sources, keyed
// operators, sinks) must keep their uid across versions of a job for a
// savepoint to restore into them; the default uid is derived from the
// operator's position in the graph.
func UID(uid string) OpOption { return func(n *node) { n.uid = uid } }

// Name sets the operator's display name, used in logs.
func Name(name string) OpOption { return func(n *node) { n.name = name } }

// WithParallelism sets the operator's parallelism. Default: its input's (a
// source's: the source's hint, else the job's Parallelism).
func WithParallelism(p int) OpOption {
	return func(n *node) {
		if p < 1 {
			n.env.cfg.errs = append(n.env.cfg.errs, fmt.Errorf("operator %q: parallelism %d is below 1", n.name, p))
			return
		}
		n.par = p
	}
}

func applyOpts(e *Env, n *node, opts []OpOption) {
	n.env = e
	for _, o := range opts {
		o(n)
	}
}

func typedFanout[T any](outs []any) any {
	ins := make([]input[T], len(outs))
	for i, o := range outs {
		ins[i] = o.(input[T])
	}
	return fanout[T](ins)
}

// From adds a source to the job.
func From[T any](e *Env, src Source[T], opts ...OpOption) Stream[T] {
	n := &node{name: "source", kind: kindSource, fanout: typedFanout[T]}
	applyOpts(e, n, opts)
	if h, ok := src.(ParallelismHinter); ok {
		n.hint = h.ParallelismHint
	}
	n.impl = src
	n.runSource = func(st *subtask, out any) { runSource(st, src, out.(input[T])) }
	return Stream[T]{e.add(n)}
}

// Map transforms each record.
func Map[T, U any](s Stream[T], f func(T) U, opts ...OpOption) Stream[U] {
	n := &node{name: "map", kind: kindOp, input: s.n, fanout: typedFanout[U]}
	applyOpts(s.n.env, n, opts)
	n.chain = func(st *subtask, n *node, out any) any {
		return &mapOp[T, U]{stateless: newStateless(st, n), f: f, out: out.(input[U])}
	}
	n.exchange = rebalanceOf[T]
	return Stream[U]{s.n.env.add(n)}
}

// FlatMap turns each record into zero or more records.
func FlatMap[T, U any](s Stream[T], f func(T, Collector[U]), opts ...OpOption) Stream[U] {
	n := &node{name: "flatmap", kind: kindOp, input: s.n, fanout: typedFanout[U]}
	applyOpts(s.n.env, n, opts)
	n.chain = func(st *subtask, n *node, out any) any {
		return &flatMapOp[T, U]{stateless: newStateless(st, n), f: f, out: Collector[U]{out.(input[U])}}
	}
	n.exchange = rebalanceOf[T]
	return Stream[U]{s.n.env.add(n)}
}

// Filter keeps the records for which keep returns true.
func Filter[T any](s Stream[T], keep func(T) bool, opts ...OpOption) Stream[T] {
	n := &node{name: "filter", kind: kindOp, input: s.n, fanout: typedFanout[T]}
	applyOpts(s.n.env, n, opts)
	n.chain = func(st *subtask, n *node, out any) any {
		return &filterOp[T]{stateless: newStateless(st, n), f: keep, out: out.(input[T])}
	}
	n.exchange = rebalanceOf[T]
	return Stream[T]{s.n.env.add(n)}
}

// KeyedStream is a stream partitioned by key: records with the same key go
// to the same subtask of the next operator, which can keep state per key.
type KeyedStream[T any] struct {
	s   Stream[T]
	key func(T) string
}

// KeyBy partitions s by key. The key decides the key group
// (state.KeyGroup), which decides the subtask.
func KeyBy[T any](s Stream[T], key func(T) string) KeyedStream[T] {
	return KeyedStream[T]{s: s, key: key}
}

// Context is what a keyed process function sees besides the record.
type Context struct {
	st *subtask
	kv *state.Runtime
}

// Key returns the key of the record being processed.
func (c Context) Key() string { return c.kv.CurrentKey() }

// Subtask returns the index of the subtask processing the record.
func (c Context) Subtask() int { return c.st.index }

// ProcessFunc handles one record of a keyed stream. State handles created in
// the setup function are scoped to ctx.Key(). A returned error fails the
// task; the restart strategy decides what happens next.
type ProcessFunc[T, U any] func(ctx Context, rec T, out Collector[U]) error

// Process applies a keyed operator with state. uid identifies its state in
// checkpoints and savepoints: keep it stable across versions of the job.
// setup runs once per subtask (and again after every restore) before any
// record; create the state handles there:
//
//	counts := flow.Process(keyed, "count", func(s *state.Store) flow.ProcessFunc[Event, Count] {
//		n := state.NewValue[int64](s, "n")
//		return func(ctx flow.Context, e Event, out flow.Collector[Count]) error {
//			c, _ := n.Get()
//			n.Set(c + 1)
//			out.Emit(Count{ctx.Key(), c + 1})
//			return nil
//		}
//	})
func Process[T, U any](k KeyedStream[T], uid string, setup func(*state.Store) ProcessFunc[T, U], opts ...OpOption) Stream[U] {
	e := k.s.n.env
	n := &node{name: "process", uid: uid, kind: kindKeyed, input: k.s.n, edge: edgeKeyed, fanout: typedFanout[U]}
	if uid == "" {
		e.cfg.errs = append(e.cfg.errs, fmt.Errorf("keyed operator #%d has an empty uid: keyed state needs a stable uid to be found again after a restart", len(e.nodes)))
	}
	applyOpts(e, n, opts)
	key := k.key
	n.exchange = func(att *attempt, senders, receivers int) exchangeImpl {
		return newExchange[T](att, senders, receivers, key)
	}
	n.chain = func(st *subtask, n *node, out any) any {
		return newKeyedOp(st, n, setup, out.(input[U]))
	}
	return Stream[U]{e.add(n)}
}

// Rebalance spreads records round-robin over the next operator's subtasks;
// use it before an operator whose parallelism differs from its input's.
// (A forward edge between different parallelisms is rebalanced anyway.)
func Rebalance[T any](s Stream[T], opts ...OpOption) Stream[T] {
	n := &node{name: "rebalance", kind: kindOp, input: s.n, edge: edgeRebalance, fanout: typedFanout[T]}
	applyOpts(s.n.env, n, opts)
	n.chain = func(st *subtask, n *node, out any) any {
		return &identityOp[T]{stateless: newStateless(st, n), out: out.(input[T])}
	}
	n.exchange = rebalanceOf[T]
	return Stream[T]{s.n.env.add(n)}
}

// To writes the stream into sink.
func To[T any](s Stream[T], sink Sink[T], opts ...OpOption) {
	e := s.n.env
	n := &node{name: "sink", kind: kindSink, input: s.n, impl: sink}
	applyOpts(e, n, opts)
	if p, ok := sink.(CommitPointProvider); ok {
		n.commitPoint = p.CommitPoint()
	}
	n.chain = func(st *subtask, n *node, _ any) any { return newSinkOp(st, n, sink) }
	n.exchange = rebalanceOf[T]
	n.committer = sink.Committer
	e.add(n)
}

func rebalanceOf[T any](att *attempt, senders, receivers int) exchangeImpl {
	return newExchange[T](att, senders, receivers, nil)
}
