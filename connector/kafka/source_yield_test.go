package kafka

import (
	"slices"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// A Poll told to yield stops after the record it emitted, its Snapshot
// positions the split right after that record, and the next Poll emits
// the rest of what was fetched before fetching again; a reader restored
// from that snapshot reads the rest, nothing twice (docs/design.md,
// "Checkpoints under backpressure").
func TestPollYieldsToABarrier(t *testing.T) {
	c := startBroker(t, map[string]int32{"in": 1})
	want := values(50, "v")
	c.produceValues(t, "in", 0, time.Time{}, want...)
	src := newSource(t, SourceConfig{Client: c.client(), Topics: []string{"in"}, Bounded: true})
	r := openReader(t, src, 0, 1, nil)
	y, ok := r.(flow.Yielder)
	if !ok {
		t.Fatal("the Kafka reader does not implement flow.Yielder")
	}
	// Yield once 10 records were emitted in this poll.
	var emitted int
	y.SetYield(func() bool { return emitted >= 10 })
	ctx := kafkatest.Context(t)
	var got []string
	for len(got) < 10 {
		emitted = 0
		if err := r.Poll(ctx, func(rec Record) { got = append(got, string(rec.Value)); emitted++ }); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 10 {
		t.Fatalf("a poll told to yield after 10 records emitted %d", len(got))
	}
	snap, err := r.Snapshot(1)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := decodePosition(snap["in/0"]); err != nil || p.next != 10 {
		t.Fatalf("position after 10 records %q (%v), want next 10", snap["in/0"], err)
	}
	if n := len(r.(*reader).fetched); n == 0 {
		t.Fatal("the records fetched and not emitted were not kept")
	}
	// The rest, without yielding.
	y.SetYield(func() bool { return false })
	got = append(got, pollToEOF(t, r)...)
	if !slices.Equal(got, want) {
		t.Fatalf("read %q, want every record once in order", got)
	}
	// Restored from the snapshot taken at the yield: the other 40.
	again := openReader(t, src, 0, 1, snap)
	if rest := pollToEOF(t, again); !slices.Equal(rest, want[10:]) {
		t.Fatalf("restored at the yield, read %q, want the 40 records after it", rest)
	}
}
