package flow_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/state"
)

// idleSource emits n records, then none: the job idles on.
type idleSource struct {
	n    int
	done *atomic.Bool
}

func (s idleSource) Open(_ context.Context, sc flow.SourceContext, _ map[string][]byte) (flow.SourceReader[event], error) {
	return &idleReader{s: s}, nil
}

type idleReader struct {
	s idleSource
	i int
}

func (r *idleReader) Poll(_ context.Context, emit func(event)) error {
	if r.i >= r.s.n {
		r.s.done.Store(true)
		time.Sleep(time.Millisecond)
		return nil
	}
	for k := 0; k < 1024 && r.i < r.s.n; k++ {
		emit(event{Key: "user-" + strconv.Itoa(r.i), Seq: r.i})
		r.i++
	}
	return nil
}

func (r *idleReader) Snapshot(int64) (map[string][]byte, error) {
	return map[string][]byte{"i": []byte(strconv.Itoa(r.i))}, nil
}
func (r *idleReader) CheckpointCommitted(context.Context, int64) error { return nil }
func (r *idleReader) Close() error                                     { return nil }

type durations struct {
	mu sync.Mutex
	d  []time.Duration
}

func (d *durations) OnCheckpointCompleted(c flow.CheckpointCompleted) {
	d.mu.Lock()
	d.d = append(d.d, c.Duration)
	d.mu.Unlock()
}

// BenchmarkIdleCheckpoint loads keys distinct keys into a keyed count on
// the memory backend (one subtask), then, with no new input, reports the
// median duration of 5 checkpoints (trigger to commit, the whole
// checkpoint) as ms/checkpoint. keys=0M is the same job without state:
// what an idle checkpoint costs besides the keyed state (the source's
// and sink's parts, the metadata and its fsyncs). Run with -benchtime 1x.
func BenchmarkIdleCheckpoint(b *testing.B) {
	for _, keys := range []int{0, 1_000_000, 5_000_000} {
		b.Run("keys="+strconv.Itoa(keys/1_000_000)+"M", func(b *testing.B) {
			done := &atomic.Bool{}
			hook := &durations{}
			env := flow.New(quiet(), flow.Checkpointing(200*time.Millisecond), flow.StateDir(b.TempDir()), flow.StateBackend(flow.MemoryBackend), flow.WithHooks(hook))
			keyed := flow.KeyBy(flow.From(env, idleSource{n: keys, done: done}), func(e event) string { return e.Key })
			counts := flow.Process(keyed, "count", func(s *state.Store) flow.ProcessFunc[event, count] {
				n := state.NewValue[int64](s, "n")
				return func(ctx flow.Context, e event, out flow.Collector[count]) error {
					c, _ := n.Get()
					n.Set(c + 1)
					return nil
				}
			})
			flow.To(counts, discardSink[count]{})
			job, err := env.Start(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			for !done.Load() {
				time.Sleep(10 * time.Millisecond)
			}
			// Two checkpoints that may still hold input, then five idle ones.
			count := func() int { hook.mu.Lock(); defer hook.mu.Unlock(); return len(hook.d) }
			start := count()
			for count() < start+7 {
				time.Sleep(10 * time.Millisecond)
			}
			job.Stop()
			if err := job.Wait(); err != nil {
				b.Fatal(err)
			}
			hook.mu.Lock()
			idle := slices.Clone(hook.d[start+2 : start+7])
			hook.mu.Unlock()
			slices.Sort(idle)
			b.ReportMetric(float64(idle[2].Microseconds())/1000, "ms/checkpoint")
			b.ReportMetric(float64(idle[4].Microseconds())/1000, "max-ms/checkpoint")
		})
	}
}
