package flow_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
)

// firstSink remembers, per open, SinkContext.FirstCheckpoint and the id of
// the first Prepare that followed.
type firstSink struct {
	mu    sync.Mutex
	pairs [][2]int64
}

func (s *firstSink) Open(_ context.Context, sc flow.SinkContext) (flow.SinkWriter[int], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pairs = append(s.pairs, [2]int64{sc.FirstCheckpoint, 0})
	return &firstWriter{s: s, i: len(s.pairs) - 1}, nil
}

func (s *firstSink) Committer(context.Context, string, string) (flow.SinkCommitter, error) {
	return nopCommitter{}, nil
}

type firstWriter struct {
	s *firstSink
	i int
}

func (w *firstWriter) Write(context.Context, int) error { return nil }
func (w *firstWriter) Prepare(_ context.Context, id int64) ([]byte, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if w.s.pairs[w.i][1] == 0 {
		w.s.pairs[w.i][1] = id
	}
	return nil, nil
}
func (w *firstWriter) Commit(context.Context, int64, []byte) error { return nil }
func (w *firstWriter) Close() error                                { return nil }

// SinkContext.FirstCheckpoint is the id of the attempt's first
// checkpoint, also after a restore whose store holds higher ids than the
// restored one (ids continue above them).
func TestSinkContextFirstCheckpoint(t *testing.T) {
	dir := t.TempDir()
	nums := make([]int, 3000)
	for run := range 2 {
		sink := &firstSink{}
		env := flow.New(quiet(), flow.JobName("first"), flow.Checkpointing(5*time.Millisecond), flow.StateDir(dir), flow.Parallelism(1))
		flow.To(flow.From(env, flowtest.NewSource([][]int{nums}, flowtest.PerPoll(10))), sink)
		if err := env.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(sink.pairs) == 0 {
			t.Fatalf("run %d: the sink was never opened", run)
		}
		for _, p := range sink.pairs {
			if p[0] == 0 || p[0] != p[1] {
				t.Errorf("run %d: FirstCheckpoint %d, first prepared checkpoint %d", run, p[0], p[1])
			}
		}
	}
}
