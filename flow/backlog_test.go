package flow_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
)

// slowSink sleeps every Write for delay: a sink that takes records at a
// bounded rate, whatever the machine's speed.
type slowSink struct {
	*flowtest.Sink[event]
	delay   time.Duration
	written atomic.Int64
}

func (g *slowSink) Open(ctx context.Context, sc flow.SinkContext) (flow.SinkWriter[event], error) {
	w, err := g.Sink.Open(ctx, sc)
	return &slowWriter{SinkWriter: w, g: g}, err
}

type slowWriter struct {
	flow.SinkWriter[event]
	g *slowSink
}

func (w *slowWriter) Write(ctx context.Context, e event) error {
	if err := ctx.Err(); err != nil {
		return err // canceled: do not sleep through the queue
	}
	if w.g.delay >= time.Millisecond {
		time.Sleep(w.g.delay)
	} else if w.g.delay > 0 {
		// Sleeps this short last a millisecond or more on a busy
		// machine: spin.
		for start := time.Now(); time.Since(start) < w.g.delay; {
		}
	}
	w.g.written.Add(1)
	return w.SinkWriter.Write(ctx, e)
}

// Behind slow receivers the records in flight are bounded by time: each
// receiver takes about 1,000 records a second (at most), so with the
// default in-flight target of 100ms its channel holds some 100 records
// (the floor is 64; plus the source's poll of 512 being emitted), not
// ChannelCapacity batches of 512 (docs/design.md,
// "Checkpoints under backpressure"). With the target off the old bound
// comes back, which shows the check can fail.
func TestInflightBoundedByTimeBehindSlowReceiver(t *testing.T) {
	for _, tc := range []struct {
		name     string
		target   time.Duration
		atMost   int64
		atLeast  int64
		capacity int
	}{
		{name: "target 100ms", target: 100 * time.Millisecond, atMost: 1500},
		{name: "target off", target: 0, atLeast: 2000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &slowSink{Sink: flowtest.NewSink[event](), delay: time.Millisecond}
			var emitted atomic.Int64
			env := flow.New(quiet(), flow.InflightTarget(tc.target))
			src := flow.Map(flow.From(env, flowtest.NewSource(flowtest.Split(events(10, 1000), 1), flowtest.PerPoll(512))), func(e event) event {
				emitted.Add(1)
				return e
			})
			// Rebalance into a task of its own so records cross channels.
			flow.To(flow.Rebalance(src, flow.WithParallelism(2)), sink)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			job, err := env.Start(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// Past the first measurements (every 100ms), the most in
			// flight over a second.
			time.Sleep(time.Second)
			var most int64
			for range 20 {
				time.Sleep(50 * time.Millisecond)
				most = max(most, emitted.Load()-sink.written.Load())
			}
			cancel()
			_ = job.Wait()
			if tc.atMost > 0 && most > tc.atMost {
				t.Fatalf("up to %d records in flight behind a sink taking ≤ 1,000 a second, want ≤ %d", most, tc.atMost)
			}
			if most < tc.atLeast {
				t.Fatalf("only %d records in flight with the target off, want ≥ %d (the channel's capacity)", most, tc.atLeast)
			}
			t.Logf("most in flight: %d records", most)
		})
	}
}

// A source that yields (flow.Yielder) lets a barrier in part-way through
// a poll: with polls of 20,000 records into a sink taking one every 20µs
// or more, the first checkpoint commits after a fraction of the first
// poll. A reader that does not yield holds the barrier until its poll is
// emitted. Either way every record is committed once.
func TestBarrierOvertakesTheRestOfAPoll(t *testing.T) {
	const perPoll, total = 20_000, 40_000
	for _, tc := range []struct {
		name  string
		yield bool
	}{{"yielding", true}, {"not yielding", false}} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &slowSink{Sink: flowtest.NewSink[event](), delay: 20 * time.Microsecond}
			opts := []flowtest.SourceOption{flowtest.PerPoll(perPoll)}
			if !tc.yield {
				opts = append(opts, flowtest.NoYield())
			}
			var atFirst atomic.Int64
			atFirst.Store(-1)
			hook := completedHook(func(c flow.CheckpointCompleted) {
				atFirst.CompareAndSwap(-1, sink.written.Load())
			})
			env := flow.New(quiet(), flow.Checkpointing(20*time.Millisecond), flow.StateDir(t.TempDir()), flow.WithHooks(hook))
			flow.To(flow.From(env, flowtest.NewSource(flowtest.Split(events(10, total/10), 1), opts...)), sink)
			if err := env.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := len(sink.Committed()); got != total {
				t.Fatalf("committed %d records, want %d", got, total)
			}
			first := atFirst.Load()
			t.Logf("records written when the first checkpoint committed: %d", first)
			if tc.yield && (first < 0 || first >= perPoll/2) {
				t.Fatalf("the first checkpoint committed after %d records, want fewer than half a poll (%d)", first, perPoll/2)
			}
			if !tc.yield && first < perPoll {
				t.Fatalf("without yielding the first checkpoint committed after %d records, within the first poll of %d", first, perPoll)
			}
		})
	}
}

type completedHook func(flow.CheckpointCompleted)

func (h completedHook) OnCheckpointCompleted(c flow.CheckpointCompleted) { h(c) }
