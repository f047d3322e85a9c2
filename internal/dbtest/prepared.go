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
