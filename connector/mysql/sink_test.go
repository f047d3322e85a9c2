package mysql_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/connector/mysql"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/dbtest"
	"github.com/onceflow/onceflow/internal/sqlsink"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func bind(t *testing.T, s *mysql.Sink[dbtest.Count], job string) {
	t.Helper()
	if err := s.BindJob(flow.JobInfo{Name: job, Checkpointing: flow.CheckpointSettings{Mode: flow.ExactlyOnce}}); err != nil {
		t.Fatal(err)
	}
}

// A zombie cannot commit once a newer instance recovered: its connection
// is killed (its transaction rolled back) and its commit refused.
func TestZombieIsFenced(t *testing.T) {
	dsn, srv := dbtest.MariaDB(t)
	db := dsn[strings.LastIndex(dsn, "/")+1:]
	createTables(t, srv, db)
	ctx := ctxT(t)
	open := func() (*mysql.Sink[dbtest.Count], flow.CommitPoint, flow.SinkWriter[dbtest.Count]) {
		s, err := mysql.NewSink(sinkConfig(dsn, "append"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
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
	_, newCP, newW := open()
	if err := newW.Write(ctx, dbtest.Count{Key: "new", N: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := newW.Prepare(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := newCP.Commit(ctx, flow.CommitRecord{Job: "zombie", Checkpoint: 1, Manifest: "m1", Time: time.Now()}); err != nil {
		t.Fatalf("the new instance's commit: %v", err)
	}
	_, werr := oldW.Prepare(ctx, 1)
	cerr := oldCP.Commit(ctx, flow.CommitRecord{Job: "zombie", Checkpoint: 1, Manifest: "zombie", Time: time.Now()})
	if werr == nil && cerr == nil {
		t.Fatal("the zombie committed after a newer instance recovered")
	}
	if got, _ := srv.Client(db, "SELECT k, COUNT(*) FROM append GROUP BY k ORDER BY k"); got != "new|1" {
		t.Errorf("append: %q, want only the new instance's row", got)
	}
	if got, _ := srv.Client(db, "SELECT checkpoint, manifest, fence FROM onceflow_progress WHERE job = 'zombie'"); got != "1|m1|2" {
		t.Errorf("progress row: %q, want 1|m1|2", got)
	}
	rec, err := newCP.Peek(ctx)
	if err != nil || rec.Checkpoint != 1 || rec.Manifest != "m1" {
		t.Errorf("Peek: %+v, %v; want checkpoint 1", rec, err)
	}
}

// The errors users meet say what is wrong and what to do, without the
// password; a value the server refuses names the row, and restarting
// cannot fix it.
func TestErrorsSayWhatToDo(t *testing.T) {
	dsn, srv := dbtest.MariaDB(t)
	db := dsn[strings.LastIndex(dsn, "/")+1:]
	createTables(t, srv, db)
	ctx := ctxT(t)
	for _, q := range []string{"CREATE TABLE nokey (k VARCHAR(32), n BIGINT) ENGINE=InnoDB", "CREATE TABLE myisam (k VARCHAR(32), n BIGINT) ENGINE=MyISAM"} {
		if err := srv.Exec(ctx, db, q); err != nil {
			t.Fatal(err)
		}
	}
	row := func(c dbtest.Count) ([]any, error) { return []any{c.Key, c.N}, nil }
	cols := []string{"k", "n"}
	cases := []struct {
		name string
		cfg  mysql.Config[dbtest.Count]
		want []string
	}{
		{"missing table", mysql.Config[dbtest.Count]{DSN: dsn, Table: "nosuch", Columns: cols, Row: row}, []string{"table nosuch does not exist", "create it"}},
		{"missing column", mysql.Config[dbtest.Count]{DSN: dsn, Table: "append", Columns: []string{"k", "count"}, Row: row}, []string{"has no column count", "it has k, n"}},
		{"no transactions", mysql.Config[dbtest.Count]{DSN: dsn, Table: "myisam", Columns: cols, Row: row}, []string{"uses the MyISAM engine, which has no transactions", "ENGINE=InnoDB"}},
		{"no unique key", mysql.Config[dbtest.Count]{DSN: dsn, Table: "nokey", Columns: cols, Key: []string{"k"}, Row: row}, []string{"no primary or unique key on (k)", "ADD PRIMARY KEY"}},
		{"no epoch column", mysql.Config[dbtest.Count]{DSN: dsn, Table: "upsert", Columns: cols, Key: []string{"k"}, Row: row, Delivery: mysql.DeliveryAtLeastOnce}, []string{"no BIGINT column onceflow_epoch", "ALTER TABLE"}},
		{"unreachable server", mysql.Config[dbtest.Count]{DSN: "u:s3cret@tcp(127.0.0.1:1)/db?timeout=5s", Table: "append", Columns: cols, Row: row}, []string{"connect to u:xxxxx@tcp(127.0.0.1:1)/db", "check that the server runs"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := mysql.NewSink(c.cfg)
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

	s, err := mysql.NewSink(mysql.Config[dbtest.Count]{DSN: dsn, Table: "upsert", Columns: cols, Key: []string{"k"}, BatchRows: 3,
		Row: func(c dbtest.Count) ([]any, error) {
			if c.N == 2 {
				return []any{c.Key, "not a number"}, nil
			}
			return []any{c.Key, c.N}, nil
		}})
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
	var errs []error
	for n := range int64(3) {
		errs = append(errs, w.Write(ctx, dbtest.Count{Key: "k" + string(rune('a'+n)), N: n + 1}))
	}
	// Refused on the client (rejected: the sink's error policy decides),
	// the other rows of its batch are written.
	if err := errs[1]; err == nil || !strings.Contains(err.Error(), `column n of table upsert is bigint NOT NULL, and the record's value "not a number" (a string) does not fit it: it is not a number`) ||
		!errors.Is(err, flow.ErrRejected) || !errors.Is(err, flow.ErrUnrecoverable) {
		t.Errorf("a string into a BIGINT column: %v; want a rejected record naming the column and the value", err)
	}
	if errs[0] != nil || errs[2] != nil {
		t.Errorf("the other records: %v, %v", errs[0], errs[2])
	}

	// What only the server refuses (the 30th of February) fails the batch,
	// naming the row.
	if err := srv.Exec(ctx, db, "CREATE TABLE dates (d DATE NOT NULL) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	ds, err := mysql.NewSink(mysql.Config[dbtest.Count]{DSN: dsn, Table: "dates", Columns: []string{"d"}, Delivery: mysql.DeliveryTwoPhase,
		Row: func(c dbtest.Count) ([]any, error) { return []any{fmt.Sprintf("2024-02-%02d", c.N)}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	bind(t, ds, "dates")
	dw, err := ds.Open(ctx, flow.SinkContext{Job: "dates", UID: "d", Parallelism: 1, FirstCheckpoint: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer dw.Close()
	for _, n := range []int64{28, 30} {
		if err := dw.Write(ctx, dbtest.Count{N: n}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dw.Prepare(ctx, 1); err == nil || !strings.Contains(err.Error(), "refuses the row [2024-02-30]") || !errors.Is(err, flow.ErrUnrecoverable) {
		t.Errorf("a date only the server refuses: %v; want an unrecoverable error naming the row", err)
	}

	_, err = mysql.NewSink(mysql.Config[dbtest.Count]{DSN: "u:p@tcp(h:3306)/", Table: "t", Columns: []string{"k"}, Row: row})
	if err == nil || !strings.Contains(err.Error(), "names no database") {
		t.Errorf("a DSN without a database: %v", err)
	}
}

// The server answers "unknown XID" for a prepared XA transaction still
// attached to the session that prepared it (a writer's closed session, or
// a crashed process's, before the server has cleaned it up). A commit then
// waits for it instead of taking it as committed: before, the transaction
// stayed prepared and the next start rolled back a committed checkpoint's
// rows.
func TestCommitWaitsForAttachedXA(t *testing.T) {
	dsn, srv := dbtest.MariaDB(t)
	db := dsn[strings.LastIndex(dsn, "/")+1:]
	createTables(t, srv, db)
	ctx := ctxT(t)
	pool, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	a, err := pool.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"XA START 'held'", "INSERT INTO append VALUES ('k', 1)", "XA END 'held'", "XA PREPARE 'held'"} {
		if _, err := a.ExecContext(ctx, q); err != nil {
			t.Fatal(q, err)
		}
	}
	// The preparing session goes away a moment after the commit starts.
	time.AfterFunc(300*time.Millisecond, func() {
		_ = a.Raw(func(any) error { return driver.ErrBadConn })
		_ = a.Close()
	})
	s, err := mysql.NewSink(sinkConfig(dsn, "twophase"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Committer(ctx, "job", "sink")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Commit(ctx, 1, []byte("held")); err != nil {
		t.Fatalf("commit of a transaction its session still held: %v", err)
	}
	if got, _ := srv.Client(db, "SELECT COUNT(*) FROM append"); got != "1" {
		t.Errorf("after the commit the table holds %s rows, want 1", got)
	}
	if xa, err := srv.PreparedXA(ctx, "held"); err != nil || len(xa) != 0 {
		t.Errorf("the transaction is still prepared after its commit: %v (%v)", xa, err)
	}
}

// A user with only the table privileges: two-phase delivery works (MariaDB
// lists XA transactions to any user; MySQL 8 needs XA_RECOVER_ADMIN, which
// the error of a refused XA RECOVER names), and exactly-once delivery,
// which creates its progress table, says which privilege to grant or what
// to create.
func TestLimitedPrivileges(t *testing.T) {
	dsn, srv := dbtest.MariaDB(t)
	db := dsn[strings.LastIndex(dsn, "/")+1:]
	createTables(t, srv, db)
	ctx := ctxT(t)
	for _, q := range []string{"CREATE USER 'limited'@'%' IDENTIFIED BY 's3cret'", "GRANT SELECT, INSERT, UPDATE, DELETE ON `" + db + "`.* TO 'limited'@'%'"} {
		if err := srv.Exec(ctx, "", q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = srv.Exec(context.Background(), "", "DROP USER 'limited'@'%'") })
	limited := strings.Replace(dsn, srv.User+"@", "limited:s3cret@", 1)

	s, err := mysql.NewSink(sinkConfig(limited, "twophase"))
	if err != nil {
		t.Fatal(err)
	}
	bind(t, s, "limited-2pc")
	w, err := s.Open(ctx, flow.SinkContext{Job: "limited-2pc", UID: "sink", Parallelism: 1, FirstCheckpoint: 1})
	if err != nil {
		t.Fatalf("two-phase with the table privileges only: %v", err)
	}
	if err := w.Write(ctx, dbtest.Count{Key: "a", N: 1}); err != nil {
		t.Fatal(err)
	}
	h, err := w.Prepare(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(ctx, 1, h); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if got, _ := srv.Client(db, "SELECT k, n FROM append"); got != "a|1" {
		t.Errorf("append holds %q after the two-phase commit, want a|1", got)
	}

	s2, err := mysql.NewSink(sinkConfig(limited, "append"))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	bind(t, s2, "limited-eo")
	_, err = s2.CommitPoint().Recover(ctx)
	for _, want := range []string{"CREATE command denied", "create the progress table onceflow_progress", "create it yourself or grant CREATE"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("exactly-once without CREATE: %v; want it to say %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "s3cret") {
		t.Errorf("the error shows the password: %v", err)
	}
}

// Records whose row the table refuses (text for a BIGINT column) follow
// the sink's error policy in each delivery: dead letters go to the
// dead-letter table with the rows, exactly once each; skipped ones are
// counted.
func TestRejectedRows(t *testing.T) {
	dsn, srv := dbtest.MariaDB(t)
	db := dsn[strings.LastIndex(dsn, "/")+1:]
	createTables(t, srv, db)
	row := func(c dbtest.Count) ([]any, error) {
		if c.N%10 == 0 {
			return []any{c.Key, "bad"}, nil
		}
		return []any{c.Key, c.N}, nil
	}
	bad := dbtest.RejectsRecords / 10
	for _, mode := range []string{"append", "twophase", "fenced"} {
		t.Run(mode, func(t *testing.T) {
			cfg := sinkConfig(dsn, mode)
			cfg.Row, cfg.BatchRows = row, 37
			cfg.DeadLetters = &mysql.DeadLetters[dbtest.Count]{Table: "dead_" + mode, Of: dbtest.RejectsDeadLetters}
			s, err := mysql.NewSink(cfg)
			if err != nil {
				t.Fatal(err)
			}
			st, err := dbtest.RunRejects(t, "rejects-"+mode, s, flow.DeadLetterOnError)
			if err != nil {
				t.Fatal(err)
			}
			if st.RecordsDeadLettered != int64(bad) {
				t.Errorf("%d records dead-lettered, want %d", st.RecordsDeadLettered, bad)
			}
			if got, _ := srv.Client(db, "SELECT COUNT(*), COUNT(DISTINCT n) FROM "+cfg.Table); got != fmt.Sprintf("%d|%d", dbtest.RejectsRecords-bad, dbtest.RejectsRecords-bad) {
				t.Errorf("%s holds (rows, distinct) %s, want %d", cfg.Table, got, dbtest.RejectsRecords-bad)
			}
			q := fmt.Sprintf("SELECT COUNT(*), COUNT(DISTINCT id), SUM(CAST(id AS SIGNED) %% 10), MIN(job), MIN(sink), MIN(error LIKE '%%column n of table %s is bigint%%') FROM dead_%s", cfg.Table, mode)
			if got, _ := srv.Client(db, q); got != fmt.Sprintf("%d|%d|0|rejects-%s|sink|1", bad, bad, mode) {
				t.Errorf("dead letters (rows, ids, ids not /10, job, sink, errors name the column): %s", got)
			}
			if err := srv.Exec(context.Background(), db, "DELETE FROM "+cfg.Table); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("skip", func(t *testing.T) {
		cfg := sinkConfig(dsn, "append")
		cfg.Row = row
		s, err := mysql.NewSink(cfg)
		if err != nil {
			t.Fatal(err)
		}
		st, err := dbtest.RunRejects(t, "rejects-skip", s, flow.SkipOnError)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := srv.Client(db, "SELECT COUNT(*) FROM append"); got != fmt.Sprint(dbtest.RejectsRecords-bad) || st.RecordsSkipped != int64(bad) {
			t.Errorf("skip: %s rows, %d skipped; want %d, %d", got, st.RecordsSkipped, dbtest.RejectsRecords-bad, bad)
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
// the table fenced, reading key a's count and epoch with the mariadb
// client.
func fencedRowScenario(t *testing.T, scenario func(*testing.T, func() flow.Sink[dbtest.Count], func() string)) {
	dsn, srv := dbtest.MariaDB(t)
	db := dsn[strings.LastIndex(dsn, "/")+1:]
	createTables(t, srv, db)
	scenario(t, func() flow.Sink[dbtest.Count] {
		s, err := mysql.NewSink(sinkConfig(dsn, "fenced"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		bind(t, s, "shift")
		return s
	}, func() string {
		got, err := srv.Client(db, "SELECT CONCAT(n, '|', onceflow_epoch) FROM fenced WHERE k = 'a'")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(got)
	})
}

// A start that restores no checkpoint settles what an earlier run left
// prepared by the commit record (dbtest.PreparedSettledByTheRecord).
func TestPreparedSettledByTheRecord(t *testing.T) {
	twoPhaseScenario(t, "twophase", "SELECT k, n FROM append ORDER BY k", dbtest.PreparedSettledByTheRecord)
}

// An aborted checkpoint's prepared upserts are rolled back and sent with
// the next checkpoint (dbtest.AbortedCheckpointSentAgain).
func TestAbortedCheckpointSentAgain(t *testing.T) {
	twoPhaseScenario(t, "upsert", "SELECT k, n FROM upsert ORDER BY k", dbtest.AbortedCheckpointSentAgain)
}

// twoPhaseScenario runs a dbtest scenario of the two-phase (XA) sink on
// mode's table and key, reading its rows with the query and counting the
// job's XA transactions, both with the mariadb client.
func twoPhaseScenario(t *testing.T, mode, rows string, scenario func(*testing.T, func() flow.Sink[dbtest.Count], func() string, func() string)) {
	dsn, srv := dbtest.MariaDB(t)
	db := dsn[strings.LastIndex(dsn, "/")+1:]
	createTables(t, srv, db)
	query := func(q string) string {
		got, err := srv.Client(db, q)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	scenario(t, func() flow.Sink[dbtest.Count] {
		cfg := sinkConfig(dsn, mode)
		cfg.Delivery = mysql.DeliveryTwoPhase
		s, err := mysql.NewSink(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		bind(t, s, "settle")
		return s
	}, func() string { return query(rows) },
		func() string {
			// XA RECOVER is server-wide: only the scenario's job counts.
			xids, err := srv.PreparedXA(context.Background(), sqlsink.GIDPrefix("settle", "out"))
			if err != nil {
				t.Fatal(err)
			}
			return strconv.Itoa(len(xids))
		})
}

// Scale-out tasks of one job are jobs of their own (<job>-<topic>-<p>,
// docs/design.md, "Scale-out"): a task's Recover fences its own earlier
// owner (its fence, which also starts its checkpoint ids, grows) and
// kills only the connection its progress row records, never another
// task's, even one whose name starts with its own.
func TestTasksFenceOnlyThemselves(t *testing.T) {
	dsn, srv := dbtest.MariaDB(t)
	db := dsn[strings.LastIndex(dsn, "/")+1:]
	createTables(t, srv, db)
	ctx := ctxT(t)
	type fenceEpocher interface{ FenceEpoch() int64 }
	open := func(task string) (flow.CommitPoint, flow.SinkWriter[dbtest.Count]) {
		s, err := mysql.NewSink(sinkConfig(dsn, "append"))
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
	write := func(w flow.SinkWriter[dbtest.Count], key string, n int) {
		for i := range n { // more than a batch: rows reach the server
			if err := w.Write(ctx, dbtest.Count{Key: key, N: int64(i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	commit := func(cp flow.CommitPoint, w flow.SinkWriter[dbtest.Count], task string) error {
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
	if got, _ := srv.Client(db, "SELECT k, COUNT(*) FROM append GROUP BY k ORDER BY k"); got != "new|1\nother|600" {
		t.Errorf("append: %q, want the new owner's row and the other task's", got)
	}
}

// Retractions delete the rows of their keys in every delivery
// (dbtest.DeletesApplied).
func TestDeletes(t *testing.T) {
	for _, c := range []struct {
		table    string
		delivery connector.Delivery
	}{
		{"upsert", connector.ExactlyOnce},
		{"upsert", connector.TwoPhase},
		{"fenced", connector.AtLeastOnce},
	} {
		t.Run(string(c.delivery), func(t *testing.T) {
			dsn, srv := dbtest.MariaDB(t)
			db := dsn[strings.LastIndex(dsn, "/")+1:]
			createTables(t, srv, db)
			dbtest.DeletesApplied(t, c.delivery, func() flow.Sink[dbtest.Count] {
				cfg := sinkConfig(dsn, c.table)
				if c.delivery == connector.TwoPhase {
					cfg.Delivery = mysql.DeliveryTwoPhase
				}
				s, err := mysql.NewSink(cfg)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				bind(t, s, "deletes")
				return s
			}, func() string {
				got, err := srv.Client(db, "SELECT k, n FROM "+c.table+" ORDER BY k")
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
	twoPhaseScenario(t, "upsert", "SELECT k, n FROM upsert ORDER BY k", dbtest.AbortedDeletesSentAgain)
}

// Retractions stay fenced in at-least-once (dbtest.ZombieDeletesFenced).
func TestZombieDeletesFenced(t *testing.T) { fencedRowScenario(t, dbtest.ZombieDeletesFenced) }

// A retraction into an appended table fails the job
// (dbtest.RetractionIntoAppendedTable).
func TestRetractionIntoAppendedTable(t *testing.T) {
	dsn, srv := dbtest.MariaDB(t)
	createTables(t, srv, dsn[strings.LastIndex(dsn, "/")+1:])
	dbtest.RetractionIntoAppendedTable(t, "append", func() flow.Sink[dbtest.Count] {
		s, err := mysql.NewSink(sinkConfig(dsn, "append"))
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
	dsn, srv := dbtest.MariaDB(t)
	db := dsn[strings.LastIndex(dsn, "/")+1:]
	if err := srv.Exec(context.Background(), db, "CREATE TABLE pairs (k VARCHAR(32), n BIGINT, PRIMARY KEY (k, n)) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	dbtest.CompositeKeyDeletes(t, func() flow.Sink[dbtest.Count] {
		s, err := mysql.NewSink(mysql.Config[dbtest.Count]{DSN: dsn, Table: "pairs", Columns: []string{"k", "n"}, Key: []string{"k", "n"},
			Row: func(c dbtest.Count) ([]any, error) { return []any{c.Key, c.N}, nil }, Retracts: dbtest.Retracts})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		bind(t, s, "pairs")
		return s
	}, func() string {
		got, err := srv.Client(db, "SELECT k, n FROM pairs ORDER BY k, n")
		if err != nil {
			t.Fatal(err)
		}
		return got
	})
}
