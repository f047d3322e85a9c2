package flow

import (
	"errors"

	"github.com/onceflow/onceflow/internal/engine"
	"github.com/onceflow/onceflow/state"
)

// Union merges s and more, streams of one record type built on the same
// Env, into one stream. Records of different inputs come in no particular
// order. Union is stateless; it checkpoints like any operator: its
// barrier waits for every input (docs/design.md, "Multi-input nodes").
// With no more it returns s.
func Union[T any](s Stream[T], more ...Stream[T]) Stream[T] {
	if len(more) == 0 {
		return s
	}
	ins := []*engine.Node{s.n}
	for _, m := range more {
		ins = append(ins, m.n)
	}
	return Stream[T]{engine.AddUnion[T](ins)}
}

// Connected is two keyed streams read together by CoProcess.
type Connected[L, R any] struct {
	l KeyedStream[L]
	r KeyedStream[R]
}

// Connect pairs two keyed streams for CoProcess: a record of either one
// reaches the subtask that owns its key, so a key's records of both
// sides meet in the same state. Equal keys must be equal strings on both
// sides (encode them the same way: "1000" and "1000.0" are two keys).
func Connect[L, R any](l KeyedStream[L], r KeyedStream[R]) Connected[L, R] {
	return Connected[L, R]{l: l, r: r}
}

// CoProcessFuncs are the functions of a CoProcess operator for one
// subtask: OnLeft handles each record of the left stream, OnRight each
// of the right, both with the state handles of the current key; OnTimer,
// if not nil, handles each due timer (as in ProcessWithTimers). Timers
// are only available when OnTimer is set.
type CoProcessFuncs[L, R, U any] struct {
	OnLeft  ProcessFunc[L, U]
	OnRight ProcessFunc[R, U]
	OnTimer TimerFunc[U]
}

// CoProcess applies a keyed operator with state to two connected streams
// (Flink's KeyedCoProcessFunction): both sides share one state and one
// set of timers per key, so it can join them, enrich one with the other
// or correlate them. uid identifies its state in checkpoints and
// savepoints, as for Process; setup runs once per subtask, and again
// after every restore, before any record: create the state handles there,
// once for both sides.
//
// Its checkpoints are consistent across the two inputs: a barrier is
// taken once it has arrived from every sender of both, and its event
// time is the smaller of the two sides' watermarks (an idle side does
// not hold it back). Restores and rescales work as for Process
// (docs/design.md, "Multi-input nodes").
func CoProcess[L, R, U any](c Connected[L, R], uid string, setup func(*state.Store) CoProcessFuncs[L, R, U], opts ...OpOption) Stream[U] {
	return Stream[U]{engine.AddKeyed2(c.l.s.n, c.r.s.n, uid, c.l.key, c.r.key, func(s *state.Store, kc engine.KeyedContext, out engine.Input[U]) (engine.Keyed2Funcs[L, R], error) {
		fns := setup(s)
		if fns.OnLeft == nil || fns.OnRight == nil {
			return engine.Keyed2Funcs[L, R]{}, errors.New("setup returned CoProcessFuncs without OnLeft or OnRight: both are required")
		}
		ctx, col := Context{kc}, Collector[U]{out}
		onLeft, onRight := fns.OnLeft, fns.OnRight
		f := engine.Keyed2Funcs[L, R]{
			OnLeft:  func(x L) error { return onLeft(ctx, x, col) },
			OnRight: func(x R) error { return onRight(ctx, x, col) },
		}
		if onTimer := fns.OnTimer; onTimer != nil {
			f.OnTimer = func(state.Timer) error { return onTimer(ctx, col) }
		}
		return f, nil
	}, nodeOpts(opts)...)}
}
