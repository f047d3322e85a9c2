package flow_test

import (
	"context"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/state"
)

// genSource emits n generated records without holding them in memory.
type genSource[T any] struct {
	n   int
	gen func(i int) T
}

func (g genSource[T]) Open(_ context.Context, sc flow.SourceContext, restored map[string][]byte) (flow.SourceReader[T], error) {
	return &genReader[T]{g: g, i: sc.Subtask, step: sc.Parallelism}, nil
}

type genReader[T any] struct {
	g       genSource[T]
	i, step int
}

func (r *genReader[T]) Poll(_ context.Context, emit func(T)) error {
	if r.i >= r.g.n {
		return io.EOF
	}
	for k := 0; k < 1024 && r.i < r.g.n; k++ {
		emit(r.g.gen(r.i))
		r.i += r.step
	}
	return nil
}

func (r *genReader[T]) Snapshot(int64) (map[string][]byte, error) {
	return map[string][]byte{"gen": []byte(strconv.Itoa(r.i))}, nil
}
func (r *genReader[T]) CheckpointCommitted(context.Context, int64) error { return nil }
func (r *genReader[T]) Close() error                                     { return nil }

// discardSink counts records and prepares nothing.
type discardSink[T any] struct{}

func (discardSink[T]) Open(context.Context, flow.SinkContext) (flow.SinkWriter[T], error) {
	return &discardWriter[T]{}, nil
}
func (discardSink[T]) Committer(context.Context, string, string) (flow.SinkCommitter, error) {
	return nopCommitter{}, nil
}

type nopCommitter struct{}

func (nopCommitter) Commit(context.Context, int64, []byte) error { return nil }
func (nopCommitter) Close() error                                { return nil }

type discardWriter[T any] struct{ n int }

func (w *discardWriter[T]) Write(context.Context, T) error                 { w.n++; return nil }
func (w *discardWriter[T]) Prepare(context.Context, int64) ([]byte, error) { return nil, nil }
func (w *discardWriter[T]) Commit(context.Context, int64, []byte) error    { return nil }
func (w *discardWriter[T]) Close() error                                   { return nil }

func runBench(b *testing.B, env *flow.Env) {
	b.Helper()
	b.ReportAllocs()
	b.ResetTimer()
	if err := env.Run(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkStatelessChain: source -> map -> filter -> map -> sink, chained
// in one goroutine. One op is one record.
func BenchmarkStatelessChain(b *testing.B) {
	env := flow.New(quiet())
	s := flow.From(env, genSource[int64]{n: b.N, gen: func(i int) int64 { return int64(i) }})
	s = flow.Map(s, func(x int64) int64 { return x * 3 })
	s = flow.Filter(s, func(x int64) bool { return x >= 0 })
	s = flow.Map(s, func(x int64) int64 { return x + 1 })
	flow.To(s, discardSink[int64]{})
	runBench(b, env)
}

var benchKeys = func() []string {
	ks := make([]string, 10000)
	for i := range ks {
		ks[i] = "user-" + strconv.Itoa(i)
	}
	return ks
}()

// keyedCountEnv is a count per key of b.N records, record i's key
// keyOf(i) (nil: the benchKeys, cycled).
func keyedCountEnv(b *testing.B, keyOf func(int) string, opts ...flow.Option) *flow.Env {
	if keyOf == nil {
		keyOf = func(i int) string { return benchKeys[i%len(benchKeys)] }
	}
	env := flow.New(append([]flow.Option{quiet()}, opts...)...)
	src := flow.From(env, genSource[event]{n: b.N, gen: func(i int) event { return event{Key: keyOf(i), Seq: i} }})
	keyed := flow.KeyBy(src, func(e event) string { return e.Key })
	counts := flow.Process(keyed, "count", func(s *state.Store) flow.ProcessFunc[event, count] {
		n := state.NewValue[int64](s, "n")
		return func(ctx flow.Context, e event, out flow.Collector[count]) error {
			c, _ := n.Get()
			c++
			n.Set(c)
			out.Emit(count{Key: e.Key, N: c})
			return nil
		}
	})
	flow.To(counts, discardSink[count]{})
	return env
}

// BenchmarkKeyedCount: source -> keyBy (exchange) -> count with keyed state
// -> sink, 10k keys, with and without 1 s checkpoints.
func BenchmarkKeyedCount(b *testing.B) {
	b.Run("checkpointing=off", func(b *testing.B) {
		runBench(b, keyedCountEnv(b, nil))
	})
	b.Run("checkpointing=1s", func(b *testing.B) {
		runBench(b, keyedCountEnv(b, nil, flow.Checkpointing(time.Second), flow.StateDir(b.TempDir())))
	})
}

// BenchmarkKeyedCountLarge is BenchmarkKeyedCount over 1M keys, cycled
// uniformly, on each state backend with 1 s checkpoints: state that defeats
// the CPU caches (memory) and the read cache (pebble). Run with
// -benchtime 10000000x so that every key is counted several times.
func BenchmarkKeyedCountLarge(b *testing.B) {
	keys := make([]string, 1_000_000)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	for _, backend := range []string{"memory", "pebble"} {
		b.Run("backend="+backend, func(b *testing.B) {
			benchKeyedCount(b, backend, func(i int) string { return keys[i%len(keys)] })
		})
	}
}

// BenchmarkKeyedCountDistinct counts b.N distinct keys on the memory
// backend, 1 s checkpoints: a state that only grows, each checkpoint's
// delta all new keys (docs/benchmarks.md, "Keyed count against a Go
// map"), so what it measures beyond the count itself is the incremental
// checkpoints of a growing heap chain.
func BenchmarkKeyedCountDistinct(b *testing.B) {
	benchKeyedCount(b, "memory", func(i int) string { return "user-" + strconv.Itoa(i) })
}

// benchKeyedCount runs keyedCountEnv on backend with 1 s checkpoints.
func benchKeyedCount(b *testing.B, backend string, keyOf func(int) string) {
	runBench(b, keyedCountEnv(b, keyOf, flow.Checkpointing(time.Second), flow.StateDir(b.TempDir()), flow.StateBackend(backend)))
}
