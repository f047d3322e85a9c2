package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/connector/postgres"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/dbtest"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func bind(t *testing.T, s *postgres.Sink[count], job string) {
	t.Helper()
	if err := s.BindJob(flow.JobInfo{Name: job, Checkpointing: flow.CheckpointSettings{Mode: flow.ExactlyOnce}}); err != nil {
		t.Fatal(err)
	}
}

// A zombie, an instance of the job that a newer one recovered past, cannot
// commit: its connection is ended and its transaction rolled back, and the
// newer one's commits stand.
func TestZombieIsFenced(t *testing.T) {
	dsn, srv := dbtest.Postgres(t)
	createTables(t, dsn, srv)
	ctx := ctxT(t)
	open := func() (*postgres.Sink[count], flow.CommitPoint, flow.SinkWriter[count]) {
		s, err := postgres.NewSink(sinkConfig(dsn, modeAppend))
		if err != nil {
			t.Fatal(err)
		}
		bind(t, s, "zombie")
		cp := s.CommitPoint()
		if _, err := cp.Recover(ctx); err != nil {
			t.Fatal(err)
		}
		w, err := s.Open(ctx, flow.SinkContext{Job: "zombie", Parallelism: 1})
		if err != nil {
			t.Fatal(err)
		}
		return s, cp, w
	}
	_, oldCP, oldW := open()
	for i := range 600 { // more than a batch: rows reach the server
		if err := oldW.Write(ctx, dbtest.Count{Key: "old", N: int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	newSink, newCP, newW := open()
	defer newSink.Close()
	if err := newW.Write(ctx, dbtest.Count{Key: "new", N: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := newW.Prepare(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := newCP.Commit(ctx, flow.CommitRecord{Job: "zombie", Checkpoint: 1, Manifest: "m1", Time: time.Now()}); err != nil {
		t.Fatalf("the new instance's commit: %v", err)
	}
	// The zombie wakes up and tries to commit its epoch.
	_, werr := oldW.Prepare(ctx, 1)
	cerr := oldCP.Commit(ctx, flow.CommitRecord{Job: "zombie", Checkpoint: 1, Manifest: "zombie", Time: time.Now()})
	if werr == nil && cerr == nil {
		t.Fatal("the zombie committed after a newer instance recovered")
	}
	db := dbName(dsn)
	if got, _ := srv.Psql(db, "SELECT key, count(*) FROM events GROUP BY key ORDER BY key"); got != "new|1" {
		t.Errorf("events: %q, want only the new instance's row", got)
	}
	if got, _ := srv.Psql(db, "SELECT checkpoint, manifest, fence FROM onceflow_progress WHERE job = 'zombie'"); got != "1|m1|2" {
		t.Errorf("progress row: %q, want 1|m1|2", got)
	}
}

// Peek sees only committed checkpoints, and fences nobody.
func TestPeekSeesCommittedOnly(t *testing.T) {
	dsn, srv := dbtest.Postgres(t)
	createTables(t, dsn, srv)
	ctx := ctxT(t)
	s, err := postgres.NewSink(sinkConfig(dsn, modeUpsert))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	bind(t, s, "peek")
	cp := s.CommitPoint()
	if rec, err := cp.Peek(ctx); err != nil || rec.Checkpoint != 0 {
		t.Fatalf("Peek before anything: %+v, %v", rec, err)
	}
	if _, err := cp.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	w, err := s.Open(ctx, flow.SinkContext{Job: "peek", Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	for n := range int64(3) {
		if err := w.Write(ctx, dbtest.Count{Key: "a", N: n + 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Prepare(ctx, n+1); err != nil {
			t.Fatal(err)
		}
		if err := cp.Commit(ctx, flow.CommitRecord{Job: "peek", Checkpoint: n + 1, Manifest: "m", Incarnation: "i", StateID: "s", Time: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	// Rows of checkpoint 4, prepared, not committed.
	if err := w.Write(ctx, dbtest.Count{Key: "a", N: 4}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Prepare(ctx, 4); err != nil {
		t.Fatal(err)
	}
	rec, err := cp.Peek(ctx)
	if err != nil || rec.Checkpoint != 3 || rec.StateID != "s" || rec.Job != "peek" {
		t.Fatalf("Peek: %+v, %v; want checkpoint 3", rec, err)
	}
	if got, _ := srv.Psql(dbName(dsn), "SELECT n FROM counts WHERE key = 'a'"); got != "3" {
		t.Errorf("counts: a = %q, want 3 (the update of checkpoint 4 is not committed)", got)
	}
	// The commit point still commits after a Peek: nobody was fenced.
	if err := cp.Commit(ctx, flow.CommitRecord{Job: "peek", Checkpoint: 4, Manifest: "m", Time: time.Now()}); err != nil {
		t.Fatalf("commit after Peek: %v", err)
	}
	if got, _ := srv.Psql(dbName(dsn), "SELECT n FROM counts WHERE key = 'a'"); got != "4" {
		t.Errorf("counts: a = %q, want 4", got)
	}
}

// The errors users meet say what is wrong and what to do, and never show
// the DSN's password.
func TestErrorsSayWhatToDo(t *testing.T) {
	dsn, srv := dbtest.Postgres(t)
	createTables(t, dsn, srv)
	ctx := ctxT(t)
	db := dbName(dsn)
	if err := srv.Exec(ctx, db, "CREATE TABLE nokey (key text, n bigint)"); err != nil {
		t.Fatal(err)
	}
	row := func(c count) ([]any, error) { return []any{c.Key, c.N}, nil }
	cases := []struct {
		name string
		cfg  postgres.Config[count]
		want []string
	}{
		{"missing table", postgres.Config[count]{DSN: dsn, Table: "nosuch", Columns: []string{"key", "n"}, Row: row}, []string{"table nosuch does not exist", "create it"}},
		{"missing column", postgres.Config[count]{DSN: dsn, Table: "events", Columns: []string{"key", "count"}, Row: row}, []string{"has no column count", "it has key, n"}},
		{"no unique key", postgres.Config[count]{DSN: dsn, Table: "nokey", Columns: []string{"key", "n"}, Key: []string{"key"}, Row: row}, []string{"no primary key or unique constraint on (key)", "ADD PRIMARY KEY"}},
		{"no epoch column", postgres.Config[count]{DSN: dsn, Table: "counts", Columns: []string{"key", "n"}, Key: []string{"key"}, Row: row, Delivery: postgres.DeliveryAtLeastOnce}, []string{"no bigint column onceflow_epoch", "ALTER TABLE"}},
		{"unreachable server", postgres.Config[count]{DSN: "postgres://u:s3cret@127.0.0.1:1/db?connect_timeout=5", Table: "events", Columns: []string{"key", "n"}, Row: row}, []string{"connect to postgres://u:xxxxx@127.0.0.1:1/db", "check that the server runs"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := postgres.NewSink(c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			bind(t, s, "errors")
			if cp := s.CommitPoint(); cp != nil {
				_, err = cp.Recover(ctx)
			} else {
				_, err = s.Open(ctx, flow.SinkContext{Job: "errors", Parallelism: 1})
			}
			dbtest.CheckError(t, err, c.want...)
		})
	}

	// Two-phase delivery on a server with prepared transactions disabled
	// (PostgreSQL's default) names the setting and the other delivery.
	tp, err := postgres.NewSink(postgres.Config[count]{DSN: dsn, Table: "events", Columns: []string{"key", "n"}, Row: row, Delivery: postgres.DeliveryTwoPhase})
	if err != nil {
		t.Fatal(err)
	}
	bind(t, tp, "twophase")
	if tp.CommitPoint() != nil {
		t.Error("a two-phase sink offers itself as the commit point")
	}
	_, err = tp.Open(ctx, flow.SinkContext{Job: "twophase", UID: "sink", Parallelism: 1})
	for _, w := range []string{"max_prepared_transactions = 0", "delivery exactly-once"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("two-phase without prepared transactions: %v; want it to say %q", err, w)
		}
	}

	// A value that does not fit its column fails the record, naming the
	// column, and restarting cannot fix it.
	s, err := postgres.NewSink(postgres.Config[count]{DSN: dsn, Table: "counts", Columns: []string{"key", "n"}, Key: []string{"key"},
		Row: func(c count) ([]any, error) { return []any{c.Key, "not a number"}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	bind(t, s, "types")
	if _, err := s.CommitPoint().Recover(ctx); err != nil {
		t.Fatal(err)
	}
	w, err := s.Open(ctx, flow.SinkContext{Job: "types", Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	err = w.Write(ctx, dbtest.Count{Key: "a"})
	if err == nil || !strings.Contains(err.Error(), "column n of table counts is bigint") || !errors.Is(err, flow.ErrUnrecoverable) {
		t.Errorf("a string into a bigint column: %v; want an unrecoverable error naming the column and its type", err)
	}

	// Config errors come before anything connects.
	_, err = postgres.NewSink(postgres.Config[count]{DSN: dsn, Table: "t; drop table x", Columns: []string{"key"}, Row: row, Delivery: postgres.DeliveryAtLeastOnce})
	for _, w := range []string{"is not a plain SQL name", "name the table's primary key columns"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("bad config: %v; want it to say %q", err, w)
		}
	}
	if got := postgres.RedactDSN("host=h user=u password='p w' dbname=d"); strings.Contains(got, "p w") {
		t.Errorf("RedactDSN kept the password: %s", got)
	}
}

// Records whose row the table refuses (text for a bigint column) follow
// the sink's error policy in each delivery: dead letters go to the
// dead-letter table with the rows, exactly once each; skipped ones are
// counted; the default stops the job.
func TestRejectedRows(t *testing.T) {
	dsn, srv := dbtest.Postgres(t, dbtest.PostgresOptions{MaxPreparedTransactions: 16})
	createTables(t, dsn, srv)
	db := dbName(dsn)
	row := func(c count) ([]any, error) {
		if c.N%10 == 0 {
			return []any{c.Key, "bad"}, nil
		}
		return []any{c.Key, c.N}, nil
	}
	bad := dbtest.RejectsRecords / 10
	for _, mode := range []crashMode{modeAppend, modeTwoPhase, modeFenced} {
		t.Run(string(mode), func(t *testing.T) {
			cfg := sinkConfig(dsn, mode)
			cfg.Row, cfg.BatchRows = row, 37
			cfg.DeadLetters = &postgres.DeadLetters[count]{Table: "dead_" + string(mode), Of: dbtest.RejectsDeadLetters}
			s, err := postgres.NewSink(cfg)
			if err != nil {
				t.Fatal(err)
			}
			st, err := dbtest.RunRejects(t, "rejects-"+string(mode), s, flow.DeadLetterOnError)
			if err != nil {
				t.Fatal(err)
			}
			if st.RecordsDeadLettered != int64(bad) {
				t.Errorf("%d records dead-lettered, want %d", st.RecordsDeadLettered, bad)
			}
			if got, _ := srv.Psql(db, "SELECT count(*), count(DISTINCT n) FROM "+cfg.Table); got != fmt.Sprintf("%d|%d", dbtest.RejectsRecords-bad, dbtest.RejectsRecords-bad) {
				t.Errorf("%s holds (rows, distinct) %s, want %d", cfg.Table, got, dbtest.RejectsRecords-bad)
			}
			q := fmt.Sprintf("SELECT count(*), count(DISTINCT id), sum(id::bigint %% 10), min(job), min(sink), bool_and(error LIKE '%%column n of table %s is bigint%%') FROM dead_%s", cfg.Table, mode)
			if got, _ := srv.Psql(db, q); got != fmt.Sprintf("%d|%d|0|rejects-%s|sink|t", bad, bad, mode) {
				t.Errorf("dead letters (rows, ids, ids not /10, job, sink, errors name the column): %s", got)
			}
			if _, err := srv.Psql(db, "TRUNCATE "+cfg.Table); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("skip", func(t *testing.T) {
		cfg := sinkConfig(dsn, modeAppend)
		cfg.Row = row
		s, err := postgres.NewSink(cfg)
		if err != nil {
			t.Fatal(err)
		}
		st, err := dbtest.RunRejects(t, "rejects-skip", s, flow.SkipOnError)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := srv.Psql(db, "SELECT count(*) FROM events"); got != strconv.Itoa(dbtest.RejectsRecords-bad) || st.RecordsSkipped != int64(bad) {
			t.Errorf("skip: %s rows, %d skipped; want %d, %d", got, st.RecordsSkipped, dbtest.RejectsRecords-bad, bad)
		}
		if _, err := srv.Psql(db, "TRUNCATE events"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("fail", func(t *testing.T) {
		cfg := sinkConfig(dsn, modeAppend)
		cfg.Row = row
		s, err := postgres.NewSink(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dbtest.RunRejects(t, "rejects-fail", s, flow.FailOnError); !errors.Is(err, flow.ErrRejected) || !strings.Contains(err.Error(), "error policy fail") {
			t.Errorf("fail: %v, want the rejected record, naming the policy", err)
		}
	})
}

// At-least-once after the job's checkpoint ids began again below the
// table's epochs (dbtest.EpochsAboveTheTable).
func TestEpochsAboveTheTable(t *testing.T) { fencedRowScenario(t, dbtest.EpochsAboveTheTable) }

// An at-least-once writer of an older attempt (a zombie) cannot replace
// the rows of the attempt that took over (dbtest.ZombieAttemptFenced).
func TestZombieAttemptFenced(t *testing.T) { fencedRowScenario(t, dbtest.ZombieAttemptFenced) }

// fencedRowScenario runs a dbtest scenario of the at-least-once sink on
// the table fenced, reading key a's count and epoch with psql.
func fencedRowScenario(t *testing.T, scenario func(*testing.T, func() flow.Sink[count], func() string)) {
	dsn, srv := dbtest.Postgres(t)
	createTables(t, dsn, srv)
	db := dbName(dsn)
	scenario(t, func() flow.Sink[count] {
		s, err := postgres.NewSink(sinkConfig(dsn, modeFenced))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		bind(t, s, "shift")
		return s
	}, func() string {
		got, err := srv.Psql(db, "SELECT n, onceflow_epoch FROM fenced WHERE key = 'a'")
		if err != nil {
			t.Fatal(err)
		}
		return got
	})
}

// A start that restores no checkpoint settles what an earlier run left
// prepared by the commit record (dbtest.PreparedSettledByTheRecord).
func TestPreparedSettledByTheRecord(t *testing.T) {
	twoPhaseScenario(t, modeTwoPhase, "SELECT key, n FROM events ORDER BY key", dbtest.PreparedSettledByTheRecord)
}

// An aborted checkpoint's prepared upserts are rolled back and sent with
// the next checkpoint (dbtest.AbortedCheckpointSentAgain).
func TestAbortedCheckpointSentAgain(t *testing.T) {
	twoPhaseScenario(t, modeUpsert, "SELECT key, n FROM counts ORDER BY key", dbtest.AbortedCheckpointSentAgain)
}

// twoPhaseScenario runs a dbtest scenario of the two-phase sink with
// mode's table and key, reading its rows with the query and counting the
// database's prepared transactions, both with psql.
func twoPhaseScenario(t *testing.T, mode crashMode, rows string, scenario func(*testing.T, func() flow.Sink[count], func() string, func() string)) {
	dsn, srv := dbtest.Postgres(t, dbtest.PostgresOptions{MaxPreparedTransactions: 64})
	createTables(t, dsn, srv)
	db := dbName(dsn)
	query := func(q string) string {
		got, err := srv.Psql(db, q)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	scenario(t, func() flow.Sink[count] {
		cfg := sinkConfig(dsn, mode)
		cfg.Delivery = postgres.DeliveryTwoPhase
		s, err := postgres.NewSink(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		bind(t, s, "settle")
		return s
	}, func() string { return query(rows) },
		func() string {
			return query("SELECT count(*) FROM pg_prepared_xacts WHERE database = current_database()")
		})
}

// Scale-out tasks of one job are jobs of their own (<job>-<topic>-<p>,
// docs/design.md, "Scale-out"): a task's Recover fences its own earlier
// owner (its fence, which also starts its checkpoint ids, grows) and ends
// only that owner's connection, never another task's, even one whose
// name starts with its own.
func TestTasksFenceOnlyThemselves(t *testing.T) {
	dsn, srv := dbtest.Postgres(t)
	createTables(t, dsn, srv)
	ctx := ctxT(t)
	type fenceEpocher interface{ FenceEpoch() int64 }
	open := func(task string) (flow.CommitPoint, flow.SinkWriter[count]) {
		s, err := postgres.NewSink(sinkConfig(dsn, modeAppend))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		bind(t, s, task)
		cp := s.CommitPoint()
		if _, err := cp.Recover(ctx); err != nil {
			t.Fatal(err)
		}
		w, err := s.Open(ctx, flow.SinkContext{Job: task, Parallelism: 1})
		if err != nil {
			t.Fatal(err)
		}
		return cp, w
	}
	write := func(w flow.SinkWriter[count], key string, n int) {
		for i := range n { // more than a batch: rows reach the server
			if err := w.Write(ctx, dbtest.Count{Key: key, N: int64(i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	commit := func(cp flow.CommitPoint, w flow.SinkWriter[count], task string) error {
		if _, err := w.Prepare(ctx, 1); err != nil {
			return err
		}
		return cp.Commit(ctx, flow.CommitRecord{Job: task, Checkpoint: 1, Manifest: "m", Time: time.Now()})
	}
	oldCP, oldW := open("so-in-1")
	write(oldW, "old", 600)
	otherCP, otherW := open("so-in-10")
	write(otherW, "other", 600)
	newCP, newW := open("so-in-1")
	for cp, want := range map[flow.CommitPoint]int64{oldCP: 1, otherCP: 1, newCP: 2} {
		if got := cp.(fenceEpocher).FenceEpoch(); got != want {
			t.Errorf("fence epoch %d, want %d", got, want)
		}
	}
	write(newW, "new", 1)
	if err := commit(otherCP, otherW, "so-in-10"); err != nil {
		t.Fatalf("task so-in-10 could not commit after task so-in-1 recovered: %v", err)
	}
	if err := commit(newCP, newW, "so-in-1"); err != nil {
		t.Fatal(err)
	}
	if err := commit(oldCP, oldW, "so-in-1"); err == nil {
		t.Error("the fenced owner of task so-in-1 committed")
	}
	if got, _ := srv.Psql(dbName(dsn), "SELECT key, count(*) FROM events GROUP BY key ORDER BY key"); got != "new|1\nother|600" {
		t.Errorf("events: %q, want the new owner's row and the other task's", got)
	}
}

// Retractions delete the rows of their keys in every delivery
// (dbtest.DeletesApplied).
func TestDeletes(t *testing.T) {
	for _, c := range []struct {
		mode     crashMode
		table    string
		delivery connector.Delivery
	}{
		{modeUpsert, "counts", connector.ExactlyOnce},
		{modeUpsert, "counts", connector.TwoPhase},
		{modeFenced, "fenced", connector.AtLeastOnce},
	} {
		t.Run(string(c.delivery), func(t *testing.T) {
			var opts dbtest.PostgresOptions
			if c.delivery == connector.TwoPhase {
				opts.MaxPreparedTransactions = 64
			}
			dsn, srv := dbtest.Postgres(t, opts)
			createTables(t, dsn, srv)
			dbtest.DeletesApplied(t, c.delivery, func() flow.Sink[count] {
				cfg := sinkConfig(dsn, c.mode)
				if c.delivery == connector.TwoPhase {
					cfg.Delivery = postgres.DeliveryTwoPhase
				}
				s, err := postgres.NewSink(cfg)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				bind(t, s, "deletes")
				return s
			}, func() string {
				got, err := srv.Psql(dbName(dsn), "SELECT key, n FROM "+c.table+" ORDER BY key")
				if err != nil {
					t.Fatal(err)
				}
				return got
			})
		})
	}
}

// An aborted checkpoint's deletes are rolled back and sent again with the
// next checkpoint (dbtest.AbortedDeletesSentAgain).
func TestAbortedDeletesSentAgain(t *testing.T) {
	twoPhaseScenario(t, modeUpsert, "SELECT key, n FROM counts ORDER BY key", dbtest.AbortedDeletesSentAgain)
}

// Retractions stay fenced in at-least-once (dbtest.ZombieDeletesFenced).
func TestZombieDeletesFenced(t *testing.T) { fencedRowScenario(t, dbtest.ZombieDeletesFenced) }

// A retraction into an appended table fails the job
// (dbtest.RetractionIntoAppendedTable).
func TestRetractionIntoAppendedTable(t *testing.T) {
	dsn, srv := dbtest.Postgres(t)
	createTables(t, dsn, srv)
	dbtest.RetractionIntoAppendedTable(t, "events", func() flow.Sink[count] {
		s, err := postgres.NewSink(sinkConfig(dsn, modeAppend))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		bind(t, s, "appended")
		return s
	})
}

// Deletes by a key of two columns (dbtest.CompositeKeyDeletes).
func TestCompositeKeyDeletes(t *testing.T) {
	dsn, srv := dbtest.Postgres(t)
	if err := srv.Exec(context.Background(), dbName(dsn), "CREATE TABLE pairs (key text, n bigint, PRIMARY KEY (key, n))"); err != nil {
		t.Fatal(err)
	}
	dbtest.CompositeKeyDeletes(t, func() flow.Sink[count] {
		s, err := postgres.NewSink(postgres.Config[count]{DSN: dsn, Table: "pairs", Columns: []string{"key", "n"}, Key: []string{"key", "n"},
			Row: func(c count) ([]any, error) { return []any{c.Key, c.N}, nil }, Retracts: dbtest.Retracts})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		bind(t, s, "pairs")
		return s
	}, func() string {
		got, err := srv.Psql(dbName(dsn), "SELECT key, n FROM pairs ORDER BY key, n")
		if err != nil {
			t.Fatal(err)
		}
		return got
	})
}
