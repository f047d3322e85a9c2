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
	open := func(s flow.Sink[Count], first int64) flow.SinkWriter[Count] { return openShift(ctx, t, s, first) }
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
	// replace the new run's: the old attempt is fenced
	// (ZombieAttemptFenced has the zombie that writes above).
	late := open(old, 100)
	if err := late.Write(ctx, Count{Key: "a", N: 3}); err == nil {
		if _, err := late.Prepare(ctx, 100); err == nil {
			t.Error("the old run's late batch was taken without an error")
		}
	}
	want("after the old run's late batch", "11|101")
	write(w, 2, 20)
	want("after the new run's second epoch", "20|102")
}

// ZombieAttemptFenced is the SQL sinks' check that an at-least-once
// writer of an older attempt of the job (a process that was paused, then
// resumed: a zombie) cannot replace the rows of the attempt that took
// over, whatever epoch it writes: its current one (which the new
// attempt's first epoch equals after the shift up to the table's
// highest) or a later one. newSink and row are EpochsAboveTheTable's.
func ZombieAttemptFenced(t *testing.T, newSink func() flow.Sink[Count], row func() string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	open := func(s flow.Sink[Count], first int64) flow.SinkWriter[Count] { return openShift(ctx, t, s, first) }
	// write writes key a's count n in checkpoint id; an error is the
	// writer's first (Write or Prepare).
	write := func(w flow.SinkWriter[Count], id, n int64) error {
		if err := w.Write(ctx, Count{Key: "a", N: n}); err != nil {
			return err
		}
		_, err := w.Prepare(ctx, id)
		return err
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	want := func(when, v string) {
		t.Helper()
		if got := row(); got != v {
			t.Errorf("%s: %q, want %s", when, got, v)
		}
	}
	zombie := open(newSink(), 100)
	must(write(zombie, 100, 1))
	must(write(zombie, 101, 2))
	want("after the old attempt", "2|101")
	// Another process takes over; its checkpoint ids begin at 1, its
	// epochs are shifted up to the table's highest, 101.
	fresh := newSink()
	w := open(fresh, 1)
	must(write(w, 1, 10))
	want("after the new attempt's first epoch", "10|101")
	// The zombie resumes: its epoch is now 102, above the new attempt's.
	err := write(zombie, 102, 3)
	want("after the zombie's batch", "10|101")
	if err == nil {
		t.Error("the zombie's batch was taken without an error")
	} else {
		CheckError(t, err, "fenced", "another instance")
	}
	must(write(w, 2, 20))
	want("after the new attempt's second epoch", "20|102")
	// A restart in the new process is a new attempt (ids continue), its
	// epochs shifted up to 102; a writer of the attempt before it, which
	// would write epoch 103, is fenced too.
	restarted := open(fresh, 3)
	must(write(restarted, 3, 30))
	want("after the restart", "30|102")
	if err := write(w, 3, 31); err == nil {
		t.Error("a writer of the attempt before the restart wrote without an error")
	}
	want("after the earlier attempt's late batch", "30|102")
}

// openShift opens s's only writer for the job "shift", starting at
// checkpoint first, and closes it when the test ends.
func openShift(ctx context.Context, t *testing.T, s flow.Sink[Count], first int64) flow.SinkWriter[Count] {
	t.Helper()
	w, err := s.Open(ctx, flow.SinkContext{Job: "shift", UID: "out", Parallelism: 1, FirstCheckpoint: first})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}
