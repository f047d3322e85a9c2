package dbtest

import (
	"context"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
)

// EpochsAboveTheTable is the SQL sinks' check of at-least-once after the
// job's checkpoint ids began again below the table's epochs (offsets
// reset, lost checkpoints, an older savepoint): the new run's rows still
// replace the old ones, and a late batch of the old run does not replace
// them. newSink returns the at-least-once sink of another process of the
// job "shift", bound to it, upserting Count rows by key; row returns key
// "a"'s count and epoch as "n|epoch".
func EpochsAboveTheTable(t *testing.T, newSink func() flow.Sink[Count], row func() string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	open := func(s flow.Sink[Count], first int64) flow.SinkWriter[Count] {
		t.Helper()
		w, err := s.Open(ctx, flow.SinkContext{Job: "shift", UID: "out", Parallelism: 1, FirstCheckpoint: first})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		return w
	}
	write := func(w flow.SinkWriter[Count], id, n int64) {
		t.Helper()
		if err := w.Write(ctx, Count{Key: "a", N: n}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Prepare(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	want := func(when, v string) {
		t.Helper()
		if got := row(); got != v {
			t.Errorf("%s: %q, want %s", when, got, v)
		}
	}
	old := newSink()
	w0 := open(old, 100)
	write(w0, 100, 1)
	write(w0, 101, 2)
	if got := row(); got != "2|101" {
		t.Fatalf("after the old run: %q, want 2|101", got)
	}
	// The new run starts at checkpoint 1: its epochs are shifted up to 101.
	fresh := newSink()
	w := open(fresh, 1)
	write(w, 1, 10)
	want("after the new run's first epoch", "10|101")
	write(open(fresh, 1), 1, 11) // another writer of the attempt shares the shift
	want("after a second writer of the attempt", "11|101")
	// A late batch of the old run (a zombie's writer, epoch 100) does not
	// replace the new run's. (A zombie that runs on past the new run's
	// epochs would: row epochs order epochs, not runs.)
	write(open(old, 100), 100, 3)
	want("after the old run's late batch", "11|101")
	write(w, 2, 20)
	want("after the new run's second epoch", "20|102")
}
