package pipeline

import (
	"context"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
)

// BenchmarkOperators measures the stateless expression operators on one
// JSON record, without the engine: ns and allocations per record.
func BenchmarkOperators(b *testing.B) {
	val := `{"user":"user-42","amount":129.50,"country":"DE","order":1234567,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`
	for _, tc := range []struct {
		name string
		cfg  func() (Operator, error)
	}{
		{"filter", FilterConfig{If: `value.amount >= 0 && value.country != "XX"`}.operator},
		{"map-set-remove", MapConfig{Set: map[string]string{"gross": "value.amount * 1.19"}, Remove: []string{"pad"}}.operator},
		{"map-value", MapConfig{Value: `{"u": value.user, "g": value.amount * 1.19}`}.operator},
		{"key-by", KeyByConfig{Key: "value.user"}.operator},
	} {
		b.Run(tc.name, func(b *testing.B) {
			op, err := tc.cfg()
			if err != nil {
				b.Fatal(err)
			}
			h := &handle[krec]{acc: &kAccess}
			b.ReportAllocs()
			for b.Loop() {
				h.rec = krec{Key: "k", Value: val}
				if op.Map != nil {
					err = op.Map(h)
				} else {
					err = op.Each(h, func() {})
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWindow runs a one-minute tumbling count and sum per key over
// 100k keys through the engine (one source split, keyed state in the
// heap, a discarding sink), event time rising 1 ms per 16 records (about
// ten records per key and window), so the watermark fires windows as it
// goes: the whole job's ns and allocations per record, window included.
// One op is one record; per state backend.
func BenchmarkWindow(b *testing.B) {
	for _, backend := range []string{flow.MemoryBackend, flow.PebbleBackend} {
		b.Run(backend, func(b *testing.B) { benchWindow(b, backend) })
	}
}

func benchWindow(b *testing.B, backend string) {
	const keys = 100_000
	in := make([]krec, 0, b.N)
	for i := range b.N {
		in = append(in, krec{Key: "user-" + strconv.Itoa(i%keys), Value: `{"a":12.5}`, TS: int64(i / 16)})
	}
	env := flow.New(flow.JobName("bench"), flow.Logger(slog.New(slog.DiscardHandler)), flow.StateBackend(backend))
	src := flow.From(env, flowtest.NewSource([][]krec{in}, flowtest.PerPoll(1024)), flow.UID("src"),
		flow.WithWatermarks(flow.Watermarks[krec]{Timestamp: func(r krec) int64 { return r.TS }, MaxOutOfOrderness: 5 * time.Second}))
	out, _, err := Window(src, kAccess, WindowConfig{Size: time.Minute, Fields: map[string]string{"n": "count()", "s": "sum(value.a)"}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	var emitted atomic.Int64
	flow.To(flow.Map(out, func(r krec) krec { emitted.Add(1); return r }), flowtest.NewSink[krec](), flow.UID("sink"))
	b.ReportAllocs()
	b.ResetTimer()
	if err := env.Run(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if b.N >= keys && emitted.Load() < keys {
		b.Fatalf("%d windows emitted for %d records over %d keys", emitted.Load(), b.N, keys)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
