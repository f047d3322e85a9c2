package flow_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
)

// orderSink's writers check, at each Prepare, that the commit of the
// writer's previous prepared checkpoint has already reached it.
type orderSink struct {
	mu         sync.Mutex
	prepares   int
	violations []string
}

func (s *orderSink) Open(context.Context, flow.SinkContext) (flow.SinkWriter[int], error) {
	return &orderWriter{s: s}, nil
}

func (s *orderSink) Committer(context.Context, string, string) (flow.SinkCommitter, error) {
	return nopCommitter{}, nil
}

type orderWriter struct {
	s           *orderSink
	uncommitted int64 // the prepared checkpoint whose commit has not come; 0: none
}

func (w *orderWriter) Write(context.Context, int) error { return nil }

func (w *orderWriter) Prepare(_ context.Context, id int64) ([]byte, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	w.s.prepares++
	if w.uncommitted != 0 {
		w.s.violations = append(w.s.violations, fmt.Sprintf("prepare of checkpoint %d before the commit of checkpoint %d", id, w.uncommitted))
	}
	w.uncommitted = id
	return []byte(strconv.FormatInt(id, 10)), nil
}

func (w *orderWriter) Commit(_ context.Context, id int64, _ []byte) error {
	if id >= w.uncommitted {
		w.uncommitted = 0
	}
	return nil
}

func (w *orderWriter) Close() error { return nil }

// With one checkpoint in flight at a time (the default), the commit of
// checkpoint N reaches a sink before the barrier of N+1 makes it prepare:
// a sink holding locks of N's transaction (the SQL sinks' upserts) must
// not see N+1 first, or it declines N+1 — and a declined final
// checkpoint fails the stop (docs/design.md, "Checkpoints"). The sink
// runs in its own subtasks behind a repartition, where barriers and the
// coordinator's mail arrive on different paths.
func TestCommitReachesSinkBeforeNextPrepare(t *testing.T) {
	nums := make([]int, 20000)
	for i := range nums {
		nums[i] = i
	}
	sink := &orderSink{}
	env := flow.New(quiet(), flow.JobName("order"), flow.Checkpointing(time.Millisecond), flow.StateDir(t.TempDir()), flow.Parallelism(2))
	src := flow.From(env, flowtest.NewSource(flowtest.Split(nums, 2), flowtest.PerPoll(5)))
	// Slow enough for a few hundred checkpoints.
	slow := flow.Map(src, func(n int) int {
		if n%10 == 0 {
			time.Sleep(500 * time.Microsecond)
		}
		return n
	})
	flow.To(flow.Rebalance(slow), sink)
	if err := env.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sink.prepares < 20 {
		t.Fatalf("only %d prepares: too few checkpoints to check the order", sink.prepares)
	}
	if len(sink.violations) > 0 {
		t.Fatalf("%d of %d prepares came before the previous commit, first: %s", len(sink.violations), sink.prepares, sink.violations[0])
	}
	t.Logf("%d prepares, each after the previous commit", sink.prepares)
}
