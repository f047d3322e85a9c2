package engine

import (
	"fmt"

	"github.com/onceflow/onceflow/state"
)

// The generic constructors flow's operators call: each adds a node whose
// closures build the typed operator for every subtask.

func typedFanout[T any](outs []any) any {
	ins := make([]input[T], len(outs))
	for i, o := range outs {
		ins[i] = o.(input[T])
	}
	return fanout[T](ins)
}

func rebalanceOf[T any](att *attempt, senders, receivers int) exchangeImpl {
	return newExchange[T](att, senders, receivers, nil)
}

// keyedOf returns the exchange constructor of a key-by edge: records go
// to the subtask owning their key's key group.
func keyedOf[T any](key func(T) string) exchangeFunc {
	return func(att *attempt, senders, receivers int) exchangeImpl {
		return newExchange[T](att, senders, receivers, key)
	}
}

func exchangesOf(ex ...exchangeFunc) []exchangeFunc { return ex }

// AddSource adds a source. impl is the user's value (for optional
// interfaces such as ParallelismHinter).
func AddSource[T any](g *Graph, open SourceOpener[T], impl any, opts ...NodeOption) *Node {
	n := &Node{name: "source", kind: kindSource, fanout: typedFanout[T], impl: impl}
	if h, ok := impl.(ParallelismHinter); ok {
		n.hint = h.ParallelismHint
	}
	n.runSource = func(st *subtask, out any) { runSource(st, open, out.(input[T])) }
	g.add(n, opts)
	if n.watermarks != nil {
		spec, ok := n.watermarks.(WatermarkSpec[T])
		switch {
		case !ok:
			n.Invalid(fmt.Errorf("source %q: its watermark strategy is for records of type %T, not of the source's type", n.uid, n.watermarks))
		case spec.Timestamp == nil:
			n.Invalid(fmt.Errorf("source %q: its watermark strategy has no Timestamp function: give the function that reads a record's event time", n.uid))
		case spec.MaxOutOfOrderness < 0 || spec.IdleTimeout < 0 || spec.Interval < 0:
			n.Invalid(fmt.Errorf("source %q: its watermark strategy has a negative duration (out-of-orderness %v, idle timeout %v, interval %v)", n.uid, spec.MaxOutOfOrderness, spec.IdleTimeout, spec.Interval))
		}
	}
	return n
}

// AddMap adds an operator applying f to each record.
func AddMap[T, U any](in *Node, f func(T) U, opts ...NodeOption) *Node {
	n := &Node{name: "map", kind: kindOp, inputs: []*Node{in}, fanout: typedFanout[U]}
	n.chain = func(st *subtask, n *Node, out any) any {
		return &mapOp[T, U]{stateless: newStateless(st, n), f: f, out: out.(input[U])}
	}
	n.exchanges = exchangesOf(rebalanceOf[T])
	return in.g.add(n, opts)
}

// AddFlatMap adds an operator emitting zero or more records per record:
// build makes, per subtask, the function called with each record, given
// where it emits.
func AddFlatMap[T, U any](in *Node, build func(out Input[U]) func(T), opts ...NodeOption) *Node {
	n := &Node{name: "flatmap", kind: kindOp, inputs: []*Node{in}, fanout: typedFanout[U]}
	n.chain = func(st *subtask, n *Node, out any) any {
		o := out.(input[U])
		return &flatMapOp[T, U]{stateless: newStateless(st, n), f: build(Input[U]{o}), out: o}
	}
	n.exchanges = exchangesOf(rebalanceOf[T])
	return in.g.add(n, opts)
}

// AddFilter adds an operator keeping the records keep accepts.
func AddFilter[T any](in *Node, keep func(T) bool, opts ...NodeOption) *Node {
	n := &Node{name: "filter", kind: kindOp, inputs: []*Node{in}, fanout: typedFanout[T]}
	n.chain = func(st *subtask, n *Node, out any) any {
		return &filterOp[T]{stateless: newStateless(st, n), f: keep, out: out.(input[T])}
	}
	n.exchanges = exchangesOf(rebalanceOf[T])
	return in.g.add(n, opts)
}

// AddKeyed adds a keyed operator with state, fed through a key-by
// exchange partitioned by key.
func AddKeyed[T, U any](in *Node, uid string, key func(T) string, setup KeyedSetup[T, U], opts ...NodeOption) *Node {
	return addKeyed(in, uid, key, func(s *state.Store, ctx KeyedContext, out Input[U]) (KeyedFuncs[T], error) {
		fn, err := setup(s, ctx, out)
		return KeyedFuncs[T]{OnRecord: fn}, err
	}, opts)
}

func addKeyed[T, U any](in *Node, uid string, key func(T) string, setup KeyedTimedSetup[T, U], opts []NodeOption) *Node {
	g := in.g
	n := &Node{name: "process", uid: uid, kind: kindKeyed, inputs: []*Node{in}, edge: edgeKeyed, fanout: typedFanout[U]}
	if uid == "" {
		g.Cfg.Errs = append(g.Cfg.Errs, fmt.Errorf("keyed operator #%d has an empty uid: keyed state needs a stable uid to be found again after a restart", len(g.nodes)))
	}
	n.exchanges = exchangesOf(keyedOf(key))
	n.chain = func(st *subtask, n *Node, out any) any {
		return mark[T](st, n, newKeyedOp(st, n, setup, out.(input[U])))
	}
	return g.add(n, opts)
}

// AddRebalance adds a round-robin redistribution.
func AddRebalance[T any](in *Node, opts ...NodeOption) *Node {
	n := &Node{name: "rebalance", kind: kindOp, inputs: []*Node{in}, edge: edgeRebalance, fanout: typedFanout[T]}
	n.chain = func(st *subtask, n *Node, out any) any {
		return &identityOp[T]{stateless: newStateless(st, n), out: out.(input[T])}
	}
	n.exchanges = exchangesOf(rebalanceOf[T])
	return in.g.add(n, opts)
}

// AddSink adds a sink. cp is its commit point, nil if it has none; impl is
// the user's value.
func AddSink[T any](in *Node, open SinkOpener[T], committer CommitterOpener, cp JobCommitPoint, impl any, opts ...NodeOption) *Node {
	n := &Node{name: "sink", kind: kindSink, inputs: []*Node{in}, impl: impl, commitPoint: cp, committer: committer}
	n.chain = func(st *subtask, n *Node, _ any) any { return newSinkOp(st, n, open) }
	n.exchanges = exchangesOf(rebalanceOf[T])
	return in.g.add(n, opts)
}

// AddTryMap adds an operator applying f, with policy (FailOnError,
// SkipOnError or DeadLetterOnError) for the records it fails on.
func AddTryMap[T, U any](in *Node, f func(T) (U, error), policy int, opts ...NodeOption) *Node {
	n := &Node{name: "trymap", kind: kindOp, inputs: []*Node{in}, fanout: typedFanout[TryResult[T, U]]}
	n.chain = func(st *subtask, n *Node, out any) any {
		return &tryMapOp[T, U]{stateless: newStateless(st, n), n: n, f: f, policy: policy, out: out.(input[TryResult[T, U]])}
	}
	n.exchanges = exchangesOf(rebalanceOf[T])
	return in.g.add(n, opts)
}
