package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
	"github.com/onceflow/onceflow/metrics"
	"github.com/onceflow/onceflow/state"
)

// BenchmarkGather is the cost of one scrape of a running job's collector
// (Stats, the components' reports, encoding into the registry's metric
// families): the whole cost of metrics besides the engine's counters,
// paid once per scrape interval, off the records' path.
func BenchmarkGather(b *testing.B) {
	var evs []event
	for i := range 1000 {
		evs = append(evs, event{Key: "k", Seq: i})
	}
	m := metrics.New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	env := flow.New(flow.JobName("bench"), quiet(), flow.StateDir(b.TempDir()), flow.Checkpointing(50*time.Millisecond), flow.WithHooks(m))
	src := flowtest.NewSource(flowtest.Split(evs, 4), flowtest.Unbounded())
	keyed := flow.KeyBy(flow.From(env, src, flow.UID("src")), func(e event) string { return e.Key })
	counted := flow.Process(keyed, "pass", func(*state.Store) flow.ProcessFunc[event, event] {
		return func(_ flow.Context, e event, out flow.Collector[event]) error { out.Emit(e); return nil }
	})
	flow.To(counted, flowtest.NewSink[event](), flow.UID("sink"))
	ctx, cancel := context.WithCancel(context.Background())
	j, err := env.Start(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { cancel(); _ = j.Wait() }()
	for !j.Stats().Running || j.Stats().CheckpointsCompleted == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}
