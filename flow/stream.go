package flow

import (
	"context"
	"fmt"

	"github.com/onceflow/onceflow/internal/engine"
	"github.com/onceflow/onceflow/state"
)

// Env holds a job definition: its options and its dataflow graph. Build the
// graph with From, Map, KeyBy, Process, To and friends, then Run or Start it.
type Env struct {
	g     *engine.Graph
	hooks []Hook
}

// New returns an empty job definition.
func New(opts ...Option) *Env {
	e := &Env{g: engine.NewGraph(engine.DefaultConfig())}
	for _, o := range opts {
		o(e)
	}
	return e
}

// Stream is a typed stream of records between operators.
type Stream[T any] struct {
	n *engine.Node
}

// OpOption configures one operator.
type OpOption func(*[]engine.NodeOption)

func nodeOpts(opts []OpOption) []engine.NodeOption {
	var out []engine.NodeOption
	for _, o := range opts {
		o(&out)
	}
	return out
}

// UID gives an operator a stable id. Operators with state (sources, keyed
// operators, sinks) must keep their uid across versions of a job for a
// savepoint to restore into them; the default uid is derived from the
// operator's position in the graph.
func UID(uid string) OpOption {
	return func(o *[]engine.NodeOption) { *o = append(*o, engine.UID(uid)) }
}

// StateLayout says how a stateful operator keeps its state, as text that
// changes whenever the state of a checkpoint could no longer be read by
// the operator as built now (another aggregate function, another window
// size, another key): checkpoints record it per operator, and a restore
// into an operator of another layout is refused with ErrRestoreRefused
// (or, with AllowNonRestoredState, starts that operator's state empty).
// Job files and SQL set it for their stateful steps; not set: not checked.
func StateLayout(layout string) OpOption {
	return func(o *[]engine.NodeOption) { *o = append(*o, engine.StateLayout(layout)) }
}

// Name sets the operator's display name, used in logs.
func Name(name string) OpOption {
	return func(o *[]engine.NodeOption) { *o = append(*o, engine.Name(name)) }
}

// WithParallelism sets the operator's parallelism. Default: its input's (a
// source's: the source's hint, else the job's Parallelism).
func WithParallelism(p int) OpOption {
	return func(o *[]engine.NodeOption) { *o = append(*o, engine.Parallelism(p)) }
}

// From adds a source to the job.
func From[T any](e *Env, src Source[T], opts ...OpOption) Stream[T] {
	open := func(ctx context.Context, sc engine.SourceContext, restored map[string][]byte) (engine.SourceReader[T], error) {
		r, err := src.Open(ctx, SourceContext(sc), restored)
		if r == nil {
			return nil, err
		}
		return r, err
	}
	return Stream[T]{engine.AddSource[T](e.g, open, src, nodeOpts(opts)...)}
}

// Map transforms each record.
func Map[T, U any](s Stream[T], f func(T) U, opts ...OpOption) Stream[U] {
	return Stream[U]{engine.AddMap(s.n, f, nodeOpts(opts)...)}
}

// FlatMap turns each record into zero or more records.
func FlatMap[T, U any](s Stream[T], f func(T, Collector[U]), opts ...OpOption) Stream[U] {
	return Stream[U]{engine.AddFlatMap(s.n, func(out engine.Input[U]) func(T) {
		c := Collector[U]{out}
		return func(x T) { f(x, c) }
	}, nodeOpts(opts)...)}
}

// Filter keeps the records for which keep returns true.
func Filter[T any](s Stream[T], keep func(T) bool, opts ...OpOption) Stream[T] {
	return Stream[T]{engine.AddFilter(s.n, keep, nodeOpts(opts)...)}
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
	kc engine.KeyedContext
}

// Key returns the key of the record being processed.
func (c Context) Key() string { return c.kc.Key() }

// Subtask returns the index of the subtask processing the record.
func (c Context) Subtask() int { return c.kc.Subtask() }

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
	return Stream[U]{engine.AddKeyed(k.s.n, uid, k.key, func(s *state.Store, kc engine.KeyedContext, out engine.Input[U]) (func(T) error, error) {
		fn := setup(s)
		if fn == nil {
			return nil, nil
		}
		ctx, c := Context{kc}, Collector[U]{out}
		return func(x T) error { return fn(ctx, x, c) }, nil
	}, nodeOpts(opts)...)}
}

// Rebalance spreads records round-robin over the next operator's subtasks;
// use it before an operator whose parallelism differs from its input's.
// (A forward edge between different parallelisms is rebalanced anyway.)
func Rebalance[T any](s Stream[T], opts ...OpOption) Stream[T] {
	return Stream[T]{engine.AddRebalance[T](s.n, nodeOpts(opts)...)}
}

// To writes the stream into sink.
func To[T any](s Stream[T], sink Sink[T], opts ...OpOption) {
	open := func(ctx context.Context, sc engine.SinkContext) (engine.SinkWriter[T], error) {
		w, err := sink.Open(ctx, SinkContext(sc))
		if w == nil {
			return nil, err
		}
		return w, err
	}
	committer := func(ctx context.Context, job, uid string) (engine.SinkCommitter, error) {
		c, err := sink.Committer(ctx, job, uid)
		if c == nil {
			return nil, err
		}
		return c, err
	}
	var cp engine.JobCommitPoint
	if p, ok := sink.(CommitPointProvider); ok {
		if c := p.CommitPoint(); c != nil {
			cp = commitPointAdapter{c}
		}
	}
	n := engine.AddSink[T](s.n, open, committer, cp, sink, nodeOpts(opts)...)
	if ErrorPolicy(n.OnRejectedPolicy()) == DeadLetterOnError {
		if k, ok := sink.(DeadLetterKeeper); !ok || !k.KeepsDeadLetters() {
			n.Invalid(fmt.Errorf("sink %q: OnRejected(DeadLetterOnError) needs a sink that keeps dead letters (a DeadLetterKeeper, such as the database sinks); use SkipOnError or FailOnError", n.Name()))
		}
	}
}

// OnRejected sets what a sink does with a record its writer rejects (an
// error wrapping ErrRejected: a value the destination refuses, such as
// text for an integer column): FailOnError (the default) stops the job,
// SkipOnError drops, counts (Stats.RecordsSkipped) and logs it,
// DeadLetterOnError hands it to the writer's WriteDeadLetter, which keeps
// it with the sink's output (counted in Stats.RecordsDeadLettered). Only
// for To.
func OnRejected(policy ErrorPolicy) OpOption {
	return func(o *[]engine.NodeOption) { *o = append(*o, engine.OnRejected(int(policy))) }
}

// Collector receives the records an operator emits.
type Collector[T any] struct {
	out engine.Input[T]
}

// Emit sends rec downstream.
func (c Collector[T]) Emit(rec T) { c.out.Push(rec) }

// MapBatches hands the records of s to f in batches of up to size, in
// order; f emits what it makes of them on out. A batch ends when it is
// full and whenever the input pauses or a barrier, watermark or the end
// of the stream comes: every record before a checkpoint's barrier has
// been through f, and its outputs emitted, before the barrier goes on,
// so the operator keeps no state. An error from f fails the task (the
// restart strategy decides; the batch's records are replayed from the
// last checkpoint). reporter, when not nil, reports metrics of the
// operator (ReportMetrics). For lookups that serve many records with one
// round trip (pipeline's lookup step).
func MapBatches[T, U any](s Stream[T], size int, f func(batch []T, out Collector[U]) error, reporter MetricsReporter, opts ...OpOption) Stream[U] {
	var impl any
	if reporter != nil {
		impl = reporter
	}
	return Stream[U]{engine.AddBatch(s.n, size, func(out engine.Input[U]) func([]T) error {
		c := Collector[U]{out}
		return func(b []T) error { return f(b, c) }
	}, impl, nodeOpts(opts)...)}
}
