package kafka

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// Lag sums, over this process's open readers, the records between each
// partition's next offset and its end; with read_committed the end is the
// last stable offset, so records of an open transaction do not count.
func TestSourceLag(t *testing.T) {
	c := startBroker(t, map[string]int32{"in": 2})
	ctx := kafkatest.Context(t)
	c.produceValues(t, "in", 0, time.Time{}, values(50, "a")...)
	c.produceValues(t, "in", 1, time.Time{}, values(50, "b")...)
	// An open transaction on partition 0 behind the committed records.
	p := c.Client(t, kgo.TransactionalID("open"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if err := p.ProduceSync(ctx, &kgo.Record{Topic: "in", Partition: 0, Value: []byte("open")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	src := newSource(t, SourceConfig{Client: c.client(), Topics: []string{"in"}, MaxPollRecords: 10})
	if got := src.Lag(); got != -1 {
		t.Errorf("Lag before any reader = %d, want -1", got)
	}
	r0, r1 := openReader(t, src, 0, 2, nil), openReader(t, src, 1, 2, nil)
	if got := src.Lag(); got != -1 {
		t.Errorf("Lag before the first fetch = %d, want -1", got)
	}
	// Each subtask owns one partition; which one is the owner function's
	// business, and both hold 50 committed records.
	n0, n1 := len(pollN(t, r0, 1)), len(pollN(t, r1, 1))
	if got, want := src.Lag(), int64(100-n0-n1); got != want {
		t.Errorf("Lag after reading %d and %d records = %d, want %d", n0, n1, got, want)
	}
	pollN(t, r0, 50-n0)
	pollN(t, r1, 50-n1)
	if got := src.Lag(); got != 0 {
		t.Errorf("Lag after reading every committed record = %d, want 0 (the open transaction does not count)", got)
	}
	if pos := r0.(flow.Positioner).Position(); pos != "in/0@49" && pos != "in/1@49" {
		t.Errorf("Position = %q, want the last record read, in/<p>@49", pos)
	}
	r0.Close()
	r1.Close()
	if got := src.Lag(); got != -1 {
		t.Errorf("Lag after the readers closed = %d, want -1", got)
	}
}

// A caught-up source knows its lag: no fetch response carries a partition
// without new records, so the reader lists the end offsets itself. Here
// the topic is empty; a subtask that owns no partition reports 0 at once.
func TestLagKnownWhenCaughtUp(t *testing.T) {
	c := startBroker(t, map[string]int32{"in": 2})
	src := newSource(t, SourceConfig{Client: c.client(), Topics: []string{"in"}})
	// Three subtasks for two partitions: one is idle.
	var rs []flow.SourceReader[Record]
	for i := range 3 {
		rs = append(rs, openReader(t, src, i, 3, nil))
	}
	ctx := kafkatest.Context(t)
	deadline := time.Now().Add(5 * time.Second)
	for src.Lag() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("Lag = %d 5s after the readers started on an empty topic, want 0", src.Lag())
		}
		for _, r := range rs {
			if err := r.Poll(ctx, func(rec Record) { t.Errorf("read %q from an empty topic", rec.Value) }); err != nil {
				t.Fatal(err)
			}
		}
	}
}
