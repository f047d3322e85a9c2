package flow_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
	"github.com/onceflow/onceflow/internal/restart"
)

// flakySink declines the checkpoints whose Prepare call numbers are in fail.
type flakySink struct {
	*flowtest.Sink[count]
	calls   atomic.Int64
	fail    map[int64]bool
	aborted atomic.Int64
}

func (f *flakySink) Open(ctx context.Context, sc flow.SinkContext) (flow.SinkWriter[count], error) {
	w, err := f.Sink.Open(ctx, sc)
	return &flakyWriter{SinkWriter: w, f: f}, err
}

type flakyWriter struct {
	flow.SinkWriter[count]
	f *flakySink
}

func (w *flakyWriter) Prepare(ctx context.Context, id int64) ([]byte, error) {
	if w.f.fail[w.f.calls.Add(1)] {
		return nil, errors.New("injected prepare failure")
	}
	return w.SinkWriter.Prepare(ctx, id)
}

func (w *flakyWriter) CheckpointAborted(context.Context, int64) { w.f.aborted.Add(1) }

// runFlaky runs a keyed count of 5 keys × 400 events into sink with 1 ms
// checkpoints and opts, and returns the finished job's stats.
func runFlaky(t *testing.T, sink *flakySink, opts ...flow.Option) flow.Stats {
	t.Helper()
	src := flowtest.NewSource(flowtest.Split(events(5, 400), 1), flowtest.PerPoll(10))
	env := flow.New(append([]flow.Option{quiet(), flow.JobName("tol"), flow.Checkpointing(time.Millisecond), flow.StateDir(t.TempDir())}, opts...)...)
	// Slow until the sink has prepared 6 times, so the checkpoints the
	// tests decline (call numbers up to 4) are not the job's final one,
	// however loaded the machine is; a record at a time, so barriers go
	// between them.
	slow := flow.Map(flow.From(env, src), func(e event) event {
		if sink.calls.Load() < 6 {
			time.Sleep(time.Millisecond)
		}
		return e
	})
	keyed := flow.KeyBy(slow, func(e event) string { return e.Key })
	flow.To(flow.Process(keyed, "count", countFn), sink)
	job, err := env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	checkCounts(t, sink.Committed(), 5, 400)
	return job.Stats()
}

// With tolerable failures, a declined checkpoint does not restart the job
// and its records are committed by the next checkpoint: still exactly once.
func TestDeclinedCheckpointWithinTolerance(t *testing.T) {
	sink := &flakySink{Sink: flowtest.NewSink[count](), fail: map[int64]bool{2: true, 4: true}}
	st := runFlaky(t, sink, flow.TolerableCheckpointFailures(1), flow.Restart(restart.Config{Strategy: restart.None}))
	if st.CheckpointsFailed < 2 || st.Restarts != 0 {
		t.Fatalf("stats %+v: want 2 failed checkpoints and no restart", st)
	}
	if sink.aborted.Load() < 2 {
		t.Fatalf("sink was told of %d aborts, want 2", sink.aborted.Load())
	}
}

// Without tolerance the first declined checkpoint fails the job over; the
// restart strategy restores it and the output is still exactly once.
func TestDeclinedCheckpointBeyondTolerance(t *testing.T) {
	sink := &flakySink{Sink: flowtest.NewSink[count](), fail: map[int64]bool{3: true}}
	st := runFlaky(t, sink, flow.Restart(restart.Config{Strategy: restart.FixedDelay, Attempts: 1, Delay: time.Millisecond}))
	if st.Restarts != 1 {
		t.Fatalf("stats %+v: want one restart", st)
	}
}
