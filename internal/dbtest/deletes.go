package dbtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/flow"
)

// Retracts tells a Count that is a retraction (its Retract field): the
// database sinks' Retracts in the scenarios of deletes.
func Retracts(c Count) bool { return c.Retract }

// The database sinks' scenarios of retractions (docs/design.md, "Database
// sinks"): a retraction deletes the row of its key, in every delivery.

// deletesJob is the job the sinks of DeletesApplied are bound to.
const deletesJob = "deletes"

// DeletesApplied is the SQL sinks' check that retractions delete the rows
// of their keys in delivery (exactly-once, two-phase or at-least-once):
// an upsert then a delete of a key in one checkpoint, in two, a delete
// then a re-insert, a delete of a key the table never had (no error), and
// a checkpoint of deletes lost with a crash before its commit (exactly-once,
// two-phase: the new instance finds the rows; the replay deletes them).
// newSink returns a sink of the job "deletes" in delivery, upserting Count
// rows by key with Retracts; rows lists the table's rows as "key|n" lines
// in key order.
func DeletesApplied(t *testing.T, delivery connector.Delivery, newSink func() flow.Sink[Count], rows func() string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	type instance struct {
		cp flow.CommitPoint
		w  flow.SinkWriter[Count]
	}
	start := func(restored int64) instance {
		t.Helper()
		s := newSink()
		var in instance
		if delivery == connector.ExactlyOnce {
			in.cp = s.(flow.CommitPointProvider).CommitPoint()
			rec, err := in.cp.Recover(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Checkpoint != restored {
				t.Fatalf("the commit point recovered checkpoint %d, want %d", rec.Checkpoint, restored)
			}
		}
		w, err := s.Open(ctx, flow.SinkContext{Job: deletesJob, UID: "out", Parallelism: 1, FirstCheckpoint: restored + 1, RestoredCheckpoint: restored})
		if err != nil {
			t.Fatal(err)
		}
		in.w = w
		return in
	}
	write := func(in instance, recs ...Count) {
		t.Helper()
		for _, r := range recs {
			if err := in.w.Write(ctx, r); err != nil {
				t.Fatalf("write %+v: %v", r, err)
			}
		}
	}
	prepare := func(in instance, id int64) []byte {
		t.Helper()
		h, err := in.w.Prepare(ctx, id)
		if err != nil {
			t.Fatalf("prepare %d: %v", id, err)
		}
		return h
	}
	commit := func(in instance, id int64, h []byte) {
		t.Helper()
		var err error
		switch delivery {
		case connector.ExactlyOnce:
			err = in.cp.Commit(ctx, flow.CommitRecord{Job: deletesJob, Checkpoint: id, Manifest: "m", Incarnation: "i", StateID: "s", Time: time.Now()})
		case connector.TwoPhase:
			err = in.w.Commit(ctx, id, h)
		}
		if err != nil {
			t.Fatalf("commit %d: %v", id, err)
		}
	}
	checkpoint := func(in instance, id int64, recs ...Count) {
		t.Helper()
		write(in, recs...)
		commit(in, id, prepare(in, id))
	}
	want := func(when, v string) {
		t.Helper()
		if got := rows(); got != v {
			t.Errorf("%s: the table holds %q, want %q", when, got, v)
		}
	}
	add := func(k string, n int64) Count { return Count{Key: k, N: n} }
	del := func(k string, n int64) Count { return Count{Key: k, N: n, Retract: true} }

	in := start(0)
	checkpoint(in, 1, add("a", 1), add("b", 1), add("c", 1), del("a", 1), del("x", 7))
	want("after an upsert and a delete of a in one checkpoint, and a delete of x that was never there", "b|1\nc|1")
	checkpoint(in, 2, del("b", 1))
	want("after b's delete in the next checkpoint", "c|1")
	checkpoint(in, 3, del("c", 1), add("c", 2), add("d", 1), del("d", 1), add("d", 3))
	want("after deletes and re-inserts of c and d", "c|2\nd|3")
	checkpoint(in, 4, del("e", 1), add("e", 1), del("d", 3))
	want("after e's delete, e's insert and d's delete", "c|2\ne|1")

	if delivery == connector.AtLeastOnce {
		// Each batch commits as it goes: a replay writes the same
		// operations again, under a new attempt.
		write(in, del("c", 2))
		prepare(in, 5)
		want("after c's delete", "e|1")
		in.w.Close()
		in = start(4)
		checkpoint(in, 5, del("c", 2), add("f", 1))
		want("after the replay of checkpoint 5", "e|1\nf|1")
		in.w.Close()
		return
	}
	// The process dies with checkpoint 5's deletes written, prepared, not
	// committed: a new instance finds the rows, and its replay deletes
	// them.
	write(in, del("c", 2), del("e", 1), add("f", 1))
	prepare(in, 5)
	in.w.Close()
	want("after a crash before checkpoint 5's commit", "c|2\ne|1")
	in = start(4)
	defer in.w.Close()
	checkpoint(in, 5, del("c", 2), del("e", 1), add("f", 1))
	want("after the replay of checkpoint 5", "f|1")
}

// AbortedDeletesSentAgain is the two-phase SQL sinks' check that the rows
// an aborted checkpoint's rolled-back transaction wrote go again, deletes
// as deletes, ahead of later rows of their keys (a delete then an
// upsert of one key ends with the row, an upsert then a delete without
// it); and that a delete of a key a prepared, uncommitted transaction
// locks waits for its commit like an upsert. newSink, rows and prepared
// are as for PreparedSettledByTheRecord (job "settle"), with Retracts.
func AbortedDeletesSentAgain(t *testing.T, newSink func() flow.Sink[Count], rows, prepared func() string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := newSink().Open(ctx, flow.SinkContext{Job: "settle", UID: "out", Parallelism: 1, FirstCheckpoint: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	an := w.(flow.AbortNotifier)
	write := func(recs ...Count) {
		t.Helper()
		for _, r := range recs {
			if err := w.Write(ctx, r); err != nil {
				t.Fatalf("write %+v: %v", r, err)
			}
		}
	}
	prepare := func(id int64) []byte {
		t.Helper()
		h, err := w.Prepare(ctx, id)
		if err != nil {
			t.Fatalf("prepare %d: %v", id, err)
		}
		return h
	}
	commit := func(id int64, h []byte) {
		t.Helper()
		if err := w.Commit(ctx, id, h); err != nil {
			t.Fatalf("commit %d: %v", id, err)
		}
	}
	want := func(when, v string) {
		t.Helper()
		if got := rows(); got != v {
			t.Errorf("%s: the table holds %q, want %q", when, got, v)
		}
	}
	add := func(k string, n int64) Count { return Count{Key: k, N: n} }
	del := func(k string, n int64) Count { return Count{Key: k, N: n, Retract: true} }

	write(add("a", 1), add("b", 1), add("c", 1), add("d", 1))
	commit(1, prepare(1))
	want("after checkpoint 1", "a|1\nb|1\nc|1\nd|1")
	// Checkpoint 2 deletes a and d, updates b, deletes and re-inserts c;
	// it is prepared, then aborted.
	write(del("a", 1), add("b", 2), del("c", 1), add("c", 5), del("d", 1))
	h2 := prepare(2)
	if len(h2) == 0 {
		t.Fatal("checkpoint 2 prepared no transaction")
	}
	an.CheckpointAborted(ctx, 2)
	if got := prepared(); got != "0" {
		t.Errorf("after the abort %s transactions are prepared, want checkpoint 2's rolled back", got)
	}
	want("after checkpoint 2's abort", "a|1\nb|1\nc|1\nd|1")
	// Checkpoint 3 re-inserts a and deletes b: after 2's operations.
	write(add("a", 3), del("b", 2))
	h3 := prepare(3)
	commit(2, h2)
	commit(3, h3)
	want("after checkpoint 3's commit, which carries the aborted 2's operations", "a|3\nc|5")
	// A delete of a key that a prepared, uncommitted checkpoint locks
	// waits for its commit, as an upsert does.
	write(del("a", 3))
	h4 := prepare(4)
	write(add("a", 6), del("c", 5))
	commit(4, h4)
	want("after checkpoint 4", "c|5")
	commit(5, prepare(5))
	want("after checkpoint 5", "a|6")
	if got := prepared(); got != "0" {
		t.Errorf("at the end %s transactions are still prepared", got)
	}
}

// ZombieDeletesFenced is the SQL sinks' check that retractions stay
// fenced in at-least-once: a zombie (a writer of an older attempt) can
// neither resurrect a key the new attempt deleted with a late upsert nor
// delete the new attempt's row with a late retraction; and a retraction
// of an older epoch of the same attempt leaves a newer epoch's row alone,
// as an upsert does. newSink and row are EpochsAboveTheTable's, with
// Retracts; row is "" while key a has no row.
func ZombieDeletesFenced(t *testing.T, newSink func() flow.Sink[Count], row func() string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	open := func(s flow.Sink[Count], first int64) flow.SinkWriter[Count] { return openShift(ctx, t, s, first) }
	write := func(w flow.SinkWriter[Count], id int64, c Count) error {
		if err := w.Write(ctx, c); err != nil {
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
			t.Errorf("%s: %q, want %q", when, got, v)
		}
	}
	zombie := open(newSink(), 100)
	must(write(zombie, 100, Count{Key: "a", N: 1}))
	want("after the old attempt", "1|100")
	fresh := newSink()
	w := open(fresh, 1) // epochs shifted up to 100
	must(write(w, 1, Count{Key: "a", N: 1, Retract: true}))
	want("after the new attempt's delete", "")
	if err := write(zombie, 101, Count{Key: "a", N: 2}); err == nil {
		t.Error("the zombie's late upsert was taken without an error")
	} else {
		CheckError(t, err, "fenced")
	}
	want("after the zombie's late upsert", "")
	must(write(w, 2, Count{Key: "a", N: 10}))
	want("after the new attempt's upsert", "10|101")
	if err := write(zombie, 102, Count{Key: "a", N: 10, Retract: true}); err == nil {
		t.Error("the zombie's late delete was taken without an error")
	}
	want("after the zombie's late delete", "10|101")
	// Another writer of the new attempt, still in its first epoch (100),
	// retracts a: the row of epoch 101 stays, as against its upsert.
	must(write(open(fresh, 1), 1, Count{Key: "a", N: 10, Retract: true}))
	want("after an older epoch's delete", "10|101")
	must(write(w, 3, Count{Key: "a", N: 10, Retract: true}))
	want("after the new attempt's delete in a later epoch", "")
}

// RetractionIntoAppendedTable is the SQL sinks' check that a retraction
// into a table without a key fails the job, unrecoverable, naming the
// table and what to do. newSink returns an exactly-once sink bound to the
// job "appended", appending Count rows to table, with Retracts.
func RetractionIntoAppendedTable(t *testing.T, table string, newSink func() flow.Sink[Count]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := newSink()
	if _, err := s.(flow.CommitPointProvider).CommitPoint().Recover(ctx); err != nil {
		t.Fatal(err)
	}
	w, err := s.Open(ctx, flow.SinkContext{Job: "appended", UID: "out", Parallelism: 1, FirstCheckpoint: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Write(ctx, Count{Key: "a", N: 1}); err != nil {
		t.Fatal(err)
	}
	err = w.Write(ctx, Count{Key: "a", N: 1, Retract: true})
	CheckError(t, err, "retraction", "table "+table, "primary key", "key")
	if !errors.Is(err, flow.ErrUnrecoverable) {
		t.Errorf("the refusal is not unrecoverable (a restart meets the same record): %v", err)
	}
}

// CompositeKeyDeletes is the SQL sinks' check of deletes by a key of two
// columns: newSink returns an exactly-once sink of the job "pairs" whose
// key is both of Count's columns (key, n), with Retracts; rows lists the
// table's rows as "key|n" lines in order.
func CompositeKeyDeletes(t *testing.T, newSink func() flow.Sink[Count], rows func() string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := newSink()
	cp := s.(flow.CommitPointProvider).CommitPoint()
	if _, err := cp.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	w, err := s.Open(ctx, flow.SinkContext{Job: "pairs", UID: "out", Parallelism: 1, FirstCheckpoint: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for id, recs := range [][]Count{
		{{Key: "a", N: 1}, {Key: "a", N: 2}, {Key: "b", N: 1}, {Key: "b", N: 2}},
		{{Key: "a", N: 1, Retract: true}, {Key: "b", N: 2, Retract: true}, {Key: "c", N: 1, Retract: true}},
	} {
		for _, r := range recs {
			if err := w.Write(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := w.Prepare(ctx, int64(id+1)); err != nil {
			t.Fatal(err)
		}
		if err := cp.Commit(ctx, flow.CommitRecord{Job: "pairs", Checkpoint: int64(id + 1), Manifest: "m", Time: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	if got := rows(); got != "a|2\nb|1" {
		t.Errorf("after deleting (a, 1) and (b, 2) the table holds %q, want a|2 and b|1", got)
	}
}
