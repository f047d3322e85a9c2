package dbtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
)

// PreparedSettledByTheRecord is the two-phase SQL sinks' check of what a
// start that restores no checkpoint does with transactions an earlier run
// left prepared (flow.PreparedResolver): without a commit record it
// refuses, naming each transaction, and leaves them prepared; with one it
// commits those of checkpoints up to the record's and rolls back the
// rest. newSink returns a two-phase sink bound to the job "settle",
// appending Count rows; rows lists the table's rows as "key|n" lines in
// key order; prepared counts the prepared transactions.
func PreparedSettledByTheRecord(t *testing.T, newSink func() flow.Sink[Count], rows, prepared func() string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := newSink()
	r, ok := s.(flow.PreparedResolver)
	if !ok {
		t.Fatalf("%T is no flow.PreparedResolver", s)
	}
	w, err := s.Open(ctx, flow.SinkContext{Job: "settle", UID: "out", Parallelism: 1, FirstCheckpoint: 1})
	if err != nil {
		t.Fatal(err)
	}
	var handles []string
	for _, c := range []struct {
		id  int64
		key string
	}{{1, "a"}, {2, "b"}} {
		if err := w.Write(ctx, Count{Key: c.key, N: c.id}); err != nil {
			t.Fatal(err)
		}
		h, err := w.Prepare(ctx, c.id)
		if err != nil || len(h) == 0 {
			t.Fatalf("prepare %d: %q, %v", c.id, h, err)
		}
		handles = append(handles, string(h))
	}
	// The process dies: its prepared transactions stay.
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	err = r.ResolvePrepared(ctx, "settle", "out", 0, false)
	CheckError(t, err, handles[0], handles[1], "no record", "COMMIT", "ROLLBACK")
	if !errors.Is(err, flow.ErrUnrecoverable) {
		t.Errorf("the refusal is not unrecoverable (a restart cannot settle it): %v", err)
	}
	if got := prepared(); got != "2" {
		t.Errorf("after the refusal %s transactions are prepared, want the 2 left", got)
	}
	// The record says checkpoint 1 committed.
	if err := r.ResolvePrepared(ctx, "settle", "out", 1, true); err != nil {
		t.Fatal(err)
	}
	if got := prepared(); got != "0" {
		t.Errorf("after settling %s transactions are still prepared", got)
	}
	if got := rows(); got != "a|1" {
		t.Errorf("the table holds %q, want checkpoint 1's row a|1 only", got)
	}
}

// AbortedCheckpointSentAgain is the two-phase SQL sinks' check of an
// aborted checkpoint (flow.AbortNotifier): the writer rolls back what it
// prepared for it and sends those rows with the next checkpoint, so a
// later row of the same key neither waits for the aborted transaction's
// locks nor has every later checkpoint declined; a checkpoint aborted
// before its barrier came is not prepared at all; one followed by a
// prepared checkpoint, or by a barrier that had nothing to prepare,
// stays prepared, to commit with it. newSink, rows and
// prepared are as for PreparedSettledByTheRecord (job "settle").
func AbortedCheckpointSentAgain(t *testing.T, newSink func() flow.Sink[Count], rows, prepared func() string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := newSink()
	w, err := s.Open(ctx, flow.SinkContext{Job: "settle", UID: "out", Parallelism: 1, FirstCheckpoint: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	an, ok := w.(flow.AbortNotifier)
	if !ok {
		t.Fatalf("%T is no flow.AbortNotifier", w)
	}
	write := func(key string, n int64) {
		t.Helper()
		if err := w.Write(ctx, Count{Key: key, N: n}); err != nil {
			t.Fatal(err)
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
	commit := func(ids []int64, hs ...[]byte) {
		t.Helper()
		for i, h := range hs {
			if err := w.Commit(ctx, ids[i], h); err != nil {
				t.Fatalf("commit %d: %v", ids[i], err)
			}
		}
	}
	// Checkpoint 1 is prepared, then aborted; 2 writes key a again.
	write("a", 1)
	write("b", 1)
	h1 := prepare(1)
	if len(h1) == 0 {
		t.Fatal("checkpoint 1 prepared no transaction")
	}
	an.CheckpointAborted(ctx, 1)
	if got := prepared(); got != "0" {
		t.Errorf("after the abort %s transactions are prepared, want checkpoint 1's rolled back", got)
	}
	write("a", 2)
	h2 := prepare(2)
	if got := rows(); got != "" {
		t.Errorf("before any commit the table holds %q", got)
	}
	// The engine commits the aborted checkpoint's handle with the next.
	commit([]int64{1, 2}, h1, h2)
	if got := rows(); got != "a|2\nb|1" {
		t.Errorf("after committing checkpoint 2 the table holds %q, want a|2 and b|1", got)
	}
	// Checkpoint 3 is aborted before its barrier reaches the writer: it
	// prepares nothing, its rows go with checkpoint 4.
	write("a", 3)
	an.CheckpointAborted(ctx, 3)
	if h := prepare(3); len(h) != 0 {
		t.Errorf("aborted checkpoint 3 prepared %q", h)
	}
	write("c", 1)
	h4 := prepare(4)
	commit([]int64{3, 4}, nil, h4)
	if got := rows(); got != "a|3\nb|1\nc|1" {
		t.Errorf("after committing checkpoint 4 the table holds %q, want a|3, b|1, c|1", got)
	}
	// Checkpoints overlap: 5 is aborted once 6 is prepared, so 6's
	// commit commits 5 as well.
	write("d", 1)
	h5 := prepare(5)
	write("e", 1)
	h6 := prepare(6)
	an.CheckpointAborted(ctx, 5)
	if got := prepared(); got != "2" {
		t.Errorf("with checkpoint 6 prepared after the aborted 5, %s transactions are prepared, want both", got)
	}
	commit([]int64{5, 6}, h5, h6)
	if got := rows(); got != "a|3\nb|1\nc|1\nd|1\ne|1" {
		t.Errorf("after committing checkpoint 6 the table holds %q, want d|1 and e|1 added", got)
	}
	// Checkpoint 7 is aborted after the barrier of 8 passed with nothing
	// to prepare: 8 may commit, and its commit commits 7's transaction,
	// so 7's must stay prepared (rolled back, its row would be lost
	// with sources past it).
	write("f", 1)
	h7 := prepare(7)
	h8 := prepare(8)
	if len(h8) != 0 {
		t.Errorf("checkpoint 8 with no rows prepared %q", h8)
	}
	an.CheckpointAborted(ctx, 7)
	if got := prepared(); got != "1" {
		t.Errorf("with checkpoint 8's barrier passed after the aborted 7, %s transactions are prepared, want 7's", got)
	}
	commit([]int64{7, 8}, h7, h8)
	if got := rows(); got != "a|3\nb|1\nc|1\nd|1\ne|1\nf|1" {
		t.Errorf("after committing checkpoint 8 the table holds %q, want f|1 added", got)
	}
	if got := prepared(); got != "0" {
		t.Errorf("at the end %s transactions are still prepared", got)
	}
}
