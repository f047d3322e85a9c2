package flow_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
)

// gateSink blocks every Write until the gate opens.
type gateSink struct {
	*flowtest.Sink[event]
	gate    chan struct{}
	written atomic.Int64
}

func (g *gateSink) Open(ctx context.Context, sc flow.SinkContext) (flow.SinkWriter[event], error) {
	w, err := g.Sink.Open(ctx, sc)
	return &gateWriter{SinkWriter: w, g: g}, err
}

type gateWriter struct {
	flow.SinkWriter[event]
	g *gateSink
}

func (w *gateWriter) Write(ctx context.Context, e event) error {
	<-w.g.gate
	w.g.written.Add(1)
	return w.SinkWriter.Write(ctx, e)
}

// A blocked sink stops the source after a bounded number of records: the
// channels between subtasks are bounded (backpressure), nothing buffers
// without limit.
func TestBackpressureBoundsRecordsInFlight(t *testing.T) {
	const batch, capacity = 64, 2
	sink := &gateSink{Sink: flowtest.NewSink[event](), gate: make(chan struct{})}
	var emitted atomic.Int64
	env := flow.New(quiet(), flow.BatchSize(batch), flow.ChannelCapacity(capacity))
	src := flow.Map(flow.From(env, flowtest.NewSource(flowtest.Split(events(10, 10000), 1), flowtest.PerPoll(16))), func(e event) event {
		emitted.Add(1)
		return e
	})
	// Rebalance into a separate task so records cross a bounded channel.
	flow.To(flow.Rebalance(src, flow.WithParallelism(2)), sink)
	job, err := env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Let the source run into the wall, then look at how far it got.
	time.Sleep(300 * time.Millisecond)
	first := emitted.Load()
	time.Sleep(200 * time.Millisecond)
	stalled := emitted.Load()
	// Per receiver: capacity batches queued + one being written + one the
	// sender is filling; plus one poll in progress.
	bound := int64(2*(capacity+2)*batch + 16)
	if stalled > bound || stalled != first {
		t.Fatalf("source emitted %d then %d records with the sink blocked; want it stalled at ≤ %d", first, stalled, bound)
	}
	close(sink.gate)
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := len(sink.Committed()); got != 100000 {
		t.Fatalf("committed %d records, want 100000", got)
	}
}
