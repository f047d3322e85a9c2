package flow_test

import (
	"context"
	"errors"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
	"github.com/onceflow/onceflow/internal/restart"
)

// MapBatches handles every record before the barrier after it goes on
// (docs/design.md, "Pipeline operators and expressions"): with batches
// far larger than what arrives between checkpoints, failures that
// restart the job from its last checkpoint, and a transactional sink,
// every record comes out exactly once and in order within its source
// split. A batch held across a barrier would be lost when the job
// restarts from that checkpoint.
func TestMapBatchesExactlyOnce(t *testing.T) {
	const n = 20000
	var in []int
	for i := range n {
		in = append(in, i)
	}
	src := flowtest.NewSource(flowtest.Split(in, 2), flowtest.PerPoll(37))
	sink := flowtest.NewSink[int]()
	var batches, failures atomic.Int64
	env := flow.New(quiet(), flow.JobName("batches"), flow.Checkpointing(2*time.Millisecond), flow.StateDir(t.TempDir()),
		flow.Restart(restart.Config{Strategy: restart.FixedDelay, Attempts: 10, Delay: time.Millisecond}))
	out := flow.MapBatches(flow.From(env, src), 100000, func(b []int, c flow.Collector[int]) error {
		if batches.Add(1)%7 == 0 && failures.Load() < 9 {
			failures.Add(1)
			return errors.New("injected: the table did not answer")
		}
		time.Sleep(300 * time.Microsecond) // a query: the input queues up, so batches rarely end at a pause
		for _, x := range b {
			c.Emit(x * 10)
		}
		return nil
	}, nil, flow.WithParallelism(3)) // behind an exchange: records reach it between barriers with no pause
	flow.To(out, sink)
	job, err := env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	if failures.Load() == 0 || job.Stats().Restarts != failures.Load() {
		t.Fatalf("%d failures injected, %d restarts", failures.Load(), job.Stats().Restarts)
	}
	got := sink.Committed()
	if len(got) != n {
		t.Fatalf("%d records out, want %d exactly once", len(got), n)
	}
	sorted := append([]int(nil), got...)
	sort.Ints(sorted)
	for i, x := range sorted {
		if x != i*10 {
			t.Fatalf("record %d is %d: lost or duplicated", i, x)
		}
	}
	if batches.Load() < 30 {
		t.Errorf("only %d batches: they end at barriers and pauses, so there should be many", batches.Load())
	}
}
