package flow

import (
	"time"

	"github.com/onceflow/onceflow/internal/engine"
	"github.com/onceflow/onceflow/state"
)

// Event-time bounds, in ms since the Unix epoch.
const (
	// NoWatermark is the watermark before the first: every time is ahead
	// of it.
	NoWatermark = engine.NoWatermark
	// MaxWatermark is the watermark once a bounded input has ended:
	// every event-time timer is due.
	MaxWatermark = engine.MaxWatermark
	// NoTimestamp is what a Watermarks.Timestamp function returns for a
	// record it cannot date: the record does not move the watermark (the
	// operator that needs its time reports it, under its error policy).
	NoTimestamp = engine.NoTimestamp
)

// Watermarks is a source's event-time strategy (Flink's
// WatermarkStrategy with bounded out-of-orderness and idleness). The
// source tracks, per split, the newest timestamp it read; a split's
// watermark is that less MaxOutOfOrderness (and 1 ms), and the source
// subtask's is the smallest of its splits' that are not idle. Watermarks
// flow through the job with the records, and an operator with several
// inputs takes the smallest of its inputs' (idle inputs left out).
// Keyed operators see them (Context.Watermark) and fire event-time timers
// by them; checkpoints store them, so event time never goes back after a
// restore. A bounded source at its end emits MaxWatermark.
type Watermarks[T any] struct {
	// Timestamp returns a record's event time in ms since the Unix
	// epoch, or NoTimestamp. Required.
	Timestamp func(T) int64
	// Split names the split (partition) a record was read from, so each
	// split has its own watermark; nil: the subtask is one split. A
	// source reader that implements SplitLister names its splits the
	// same way (the Kafka connector: kafka.SplitOf).
	Split func(T) string
	// MaxOutOfOrderness is how far behind its split's newest record a
	// record may be and still be on time.
	MaxOutOfOrderness time.Duration
	// IdleTimeout is how long a split may deliver nothing before it stops
	// holding event time back (until it delivers again); 0: never, so an
	// empty partition holds event time back for good.
	IdleTimeout time.Duration
	// Interval is how often the source emits its watermark; default
	// 200ms.
	Interval time.Duration
}

// SplitLister is implemented by source readers that know which splits
// they read, named as Watermarks.Split names records' splits. A listed
// split that has not delivered yet holds event time back until it goes
// idle; without the list a split counts from its first record.
type SplitLister = engine.SplitLister

// WithWatermarks gives a source (flow.From) its event-time strategy.
func WithWatermarks[T any](w Watermarks[T]) OpOption {
	spec := engine.WatermarkSpec[T](w)
	return func(o *[]engine.NodeOption) { *o = append(*o, engine.WithWatermarks(spec)) }
}

// Timer is a due timer: its domain (state.EventTime or
// state.ProcessingTime) and time in ms.
type Timer = state.Timer

// Watermark returns the operator's event time: the watermark of its
// input, in ms since the Unix epoch (NoWatermark before the first).
func (c Context) Watermark() int64 { return c.kc.Watermark() }

// ProcessingTime returns the job's clock in ms since the Unix epoch.
func (c Context) ProcessingTime() int64 { return c.kc.ProcessingTime() }

// Timer returns the timer being handled, inside a TimerFunc.
func (c Context) Timer() Timer { return c.kc.Timer() }

// RegisterEventTimeTimer makes the operator's TimerFunc run for the
// current key once the watermark reaches at (ms); a key has at most one
// timer per time. Only in ProcessWithTimers.
func (c Context) RegisterEventTimeTimer(at int64) { c.kc.RegisterEventTimeTimer(at) }

// DeleteEventTimeTimer removes the current key's event-time timer at at.
func (c Context) DeleteEventTimeTimer(at int64) { c.kc.DeleteEventTimeTimer(at) }

// RegisterProcessingTimeTimer makes the TimerFunc run for the current key
// once the job's clock reaches at (ms). Only in ProcessWithTimers.
func (c Context) RegisterProcessingTimeTimer(at int64) { c.kc.RegisterProcessingTimeTimer(at) }

// DeleteProcessingTimeTimer removes the current key's processing-time
// timer at at.
func (c Context) DeleteProcessingTimeTimer(at int64) { c.kc.DeleteProcessingTimeTimer(at) }

// TimerFunc handles a due timer of a key (ctx.Key(); ctx.Timer() says
// which): state handles are scoped to that key, and it may emit records
// and register timers. A returned error fails the task.
type TimerFunc[U any] func(ctx Context, out Collector[U]) error

// ProcessWithTimers is Process with timers (Flink's KeyedProcessFunction):
// setup returns the function handling each record and the one handling
// each due timer. Timers are keyed state: checkpoints carry them, and a
// restore (at any parallelism) brings each key's timers back with its
// state. Event-time timers fire in time order as the watermark passes
// them, before the watermark goes on downstream, so what they emit is on
// time for the operators after.
func ProcessWithTimers[T, U any](k KeyedStream[T], uid string, setup func(*state.Store) (ProcessFunc[T, U], TimerFunc[U]), opts ...OpOption) Stream[U] {
	return Stream[U]{engine.AddKeyedTimed(k.s.n, uid, k.key, func(s *state.Store, kc engine.KeyedContext, out engine.Input[U]) (engine.KeyedFuncs[T], error) {
		fn, onTimer := setup(s)
		if fn == nil || onTimer == nil {
			return engine.KeyedFuncs[T]{}, nil
		}
		ctx, c := Context{kc}, Collector[U]{out}
		return engine.KeyedFuncs[T]{
			OnRecord: func(x T) error { return fn(ctx, x, c) },
			OnTimer:  func(state.Timer) error { return onTimer(ctx, c) },
		}, nil
	}, nodeOpts(opts)...)}
}

// UpstreamMark is a watermark an upstream task wrote into a source's
// input in order with its records (a scale-out repartition topic's
// watermark marker, docs/design.md "Scale-out").
type UpstreamMark = engine.UpstreamMark

// UpstreamReader is implemented by source readers whose input carries
// its upstream tasks' watermarks: with Watermarks, such a source's event
// time is the smallest over those tasks (not idle; one not heard from
// yet holds it back), not its records' timestamps (the Kafka connector
// with kafka.SourceConfig.Upstreams).
type UpstreamReader = engine.UpstreamReader

// WatermarkWriter is implemented by sink writers that pass the watermark
// reaching them on (the Kafka connector with kafka.SinkConfig.MarkWatermarks).
type WatermarkWriter = engine.WatermarkWriter
