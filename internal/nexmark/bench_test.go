package nexmark

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/onceflow/onceflow/flow"
)

// Generation and encoding speed (docs/benchmarks.md, "The Nexmark
// generator"):
//
//	go test -run '^$' -bench . -benchmem ./internal/nexmark/

func reportRate(b *testing.B, bytes int) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	if bytes > 0 {
		b.ReportMetric(float64(bytes)/float64(b.N), "B/event")
	}
}

// BenchmarkGenerate makes events without encoding them.
func BenchmarkGenerate(b *testing.B) {
	g := mustNew(b, Config{})
	var e Event
	b.ReportAllocs()
	for b.Loop() {
		g.NextInto(&e)
	}
	reportRate(b, 0)
}

// BenchmarkGenerateJSON makes events and encodes them as JSON, as
// `onceflow nexmark generate` does.
func BenchmarkGenerateJSON(b *testing.B) {
	g := mustNew(b, Config{})
	var e Event
	buf := make([]byte, 0, 4096)
	total := 0
	b.ReportAllocs()
	for b.Loop() {
		g.NextInto(&e)
		buf = e.AppendJSON(buf[:0])
		total += len(buf)
	}
	b.SetBytes(int64(total / max(b.N, 1)))
	reportRate(b, total)
}

// BenchmarkGenerateEncodingJSON is the same with encoding/json
// (reflection) over the table's row with pointers, for comparison.
func BenchmarkGenerateEncodingJSON(b *testing.B) {
	g := mustNew(b, Config{})
	type row struct {
		EventType EventType `json:"event_type"`
		Person    *Person   `json:"person"`
		Auction   *Auction  `json:"auction"`
		Bid       *Bid      `json:"bid"`
	}
	var e Event
	total := 0
	b.ReportAllocs()
	for b.Loop() {
		g.NextInto(&e)
		r := row{EventType: e.Type}
		switch e.Type {
		case PersonEvent:
			r.Person = &e.Person
		case AuctionEvent:
			r.Auction = &e.Auction
		default:
			r.Bid = &e.Bid
		}
		out, err := json.Marshal(&r)
		if err != nil {
			b.Fatal(err)
		}
		total += len(out)
	}
	reportRate(b, total)
}

// BenchmarkSource reads events through the flow source's reader, as an
// engine-only run does.
func BenchmarkSource(b *testing.B) {
	src := &Source{Config: Config{}, Events: int64(b.N)}
	r, err := src.Open(context.Background(), flow.SourceContext{Subtask: 0, Parallelism: 1}, nil)
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	b.ReportAllocs()
	b.ResetTimer()
	for {
		if err := r.Poll(context.Background(), func(Event) { n++ }); err != nil {
			break
		}
	}
	if n != b.N {
		b.Fatalf("read %d events, want %d", n, b.N)
	}
	reportRate(b, 0)
}
