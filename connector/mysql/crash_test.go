package mysql_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/connector/mysql"
	"github.com/onceflow/onceflow/internal/dbtest"
	"github.com/onceflow/onceflow/internal/failpoint"
	"github.com/onceflow/onceflow/internal/sinktest"
)

// The crash tests re-execute this test binary as a child process that runs
// a keyed count into MariaDB (dbtest.RunCountJob), and SIGKILL it at
// random moments; the mariadb client checks the table.
const (
	childDSNEnv  = "ONCEFLOW_MYSQL_CHILD_DSN"
	childModeEnv = "ONCEFLOW_MYSQL_CHILD_MODE"
)

func TestMain(m *testing.M) {
	if code, ok := sinktest.Child(conformance()); ok {
		os.Exit(code)
	}
	if dir := os.Getenv(dbtest.ChildEnv); dir != "" {
		mode := os.Getenv(childModeEnv)
		sink, err := mysql.NewSink(sinkConfig(os.Getenv(childDSNEnv), mode))
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(dbtest.RunCountJob(dir, "my-crash-"+mode, crashSpec, dbtest.To[dbtest.Count](sink)))
	}
	os.Exit(dbtest.Main(m))
}

// The modes: append (exactly-once, no key: a duplicate is a second row),
// upsert (exactly-once, by key), fenced (at-least-once, epoch-fenced),
// twophase (appending). TestCrashes runs the appending ones; the
// upserting ones crashed are the conformance suite's crash subtest
// (TestConformance).
var modes = []string{"append", "twophase"}

var crashSpec = dbtest.CountJobSpec{Keys: 50, PerKey: 4000}

func sinkConfig(dsn, mode string) mysql.Config[dbtest.Count] {
	row := func(c dbtest.Count) ([]any, error) { return []any{c.Key, c.N}, nil }
	cfg := mysql.Config[dbtest.Count]{DSN: dsn, Table: mode, Columns: []string{"k", "n"}, Row: row, BatchRows: 500}
	if mode == "upsert" || mode == "fenced" {
		cfg.Key = []string{"k"}
	}
	if mode == "fenced" {
		cfg.Delivery = mysql.DeliveryAtLeastOnce
	}
	if mode == "twophase" {
		cfg.Table, cfg.Delivery = "append", mysql.DeliveryTwoPhase
	}
	cfg.Retracts = dbtest.Retracts
	return cfg
}

func createTables(t *testing.T, srv *dbtest.MariaDBServer, db string) {
	t.Helper()
	for _, q := range []string{
		"CREATE TABLE append (k VARCHAR(32) NOT NULL, n BIGINT NOT NULL) ENGINE=InnoDB",
		"CREATE TABLE upsert (k VARCHAR(32) PRIMARY KEY, n BIGINT NOT NULL) ENGINE=InnoDB",
		"CREATE TABLE fenced (k VARCHAR(32) PRIMARY KEY, n BIGINT NOT NULL, onceflow_epoch BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB",
	} {
		if err := srv.Exec(context.Background(), db, q); err != nil {
			t.Fatal(err)
		}
	}
}

type crashRun struct {
	*dbtest.CrashRun
	t    *testing.T
	db   string
	srv  *dbtest.MariaDBServer
	mode string
}

func newCrashRun(t *testing.T, mode string) *crashRun {
	dsn, srv := dbtest.MariaDB(t)
	db := dsn[strings.LastIndex(dsn, "/")+1:]
	createTables(t, srv, db)
	return &crashRun{CrashRun: dbtest.NewCrashRun(t, childDSNEnv+"="+dsn, childModeEnv+"="+mode), t: t, db: db, srv: srv, mode: mode}
}

// client asks the server through the mariadb client.
func (r *crashRun) client(q string) string {
	r.t.Helper()
	out, err := r.srv.Client(r.db, q)
	if err != nil {
		r.t.Fatal(err)
	}
	return out
}

func (r *crashRun) progress() string {
	switch r.mode {
	case "fenced":
		return r.client("SELECT COALESCE(SUM(n), 0) FROM fenced")
	case "twophase":
		return r.client("SELECT COUNT(*) FROM append")
	}
	if r.client("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'onceflow_progress'") == "0" {
		return "0"
	}
	return r.client("SELECT COALESCE((SELECT checkpoint FROM onceflow_progress WHERE job = 'my-crash-" + r.mode + "'), 0)")
}

func (r *crashRun) check() {
	r.t.Helper()
	per, records, keys := crashSpec.PerKey, crashSpec.Records(), crashSpec.Keys
	if r.mode == "append" || r.mode == "twophase" {
		got := r.client("SELECT COUNT(*), COUNT(DISTINCT k, n), COUNT(DISTINCT k), MIN(n), MAX(n) FROM append")
		if want := fmt.Sprintf("%d|%d|%d|1|%d", records, records, keys, per); got != want {
			dups := r.client("SELECT k, n, COUNT(*) FROM append GROUP BY k, n HAVING COUNT(*) > 1 ORDER BY k, n LIMIT 5")
			r.t.Fatalf("append (rows, distinct rows, keys, min, max) = %s, want %s; duplicates: %q", got, want, dups)
		}
	} else {
		got := r.client("SELECT COUNT(*), MIN(n), MAX(n) FROM " + r.mode)
		if want := fmt.Sprintf("%d|%d|%d", keys, per, per); got != want {
			r.t.Fatalf("%s (keys, min count, max count) = %s, want %s", r.mode, got, want)
		}
	}
	if xa := r.client("XA RECOVER"); xa != "" {
		r.t.Errorf("prepared XA transactions are left behind:\n%s", xa)
	}
	if open := r.client("SELECT COUNT(*) FROM information_schema.INNODB_TRX"); open != "0" {
		r.t.Errorf("%s transactions are left open", open)
	}
}

// Each appending mode, SIGKILLed 8 times (dbtest.CrashKills; 60 with
// ONCEFLOW_LONG=1) at random moments over 200k records, ends
// with every record in the table exactly once (checked with the mariadb
// client).
func TestCrashes(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			rng := dbtest.Seed(t)
			r := newCrashRun(t, mode)
			r.Kills(rng, dbtest.CrashKills(), r.progress)
			r.Finish()
			r.check()
		})
	}
}

// The commit protocol's failpoints around the transaction, as crashes of
// the whole process.
func TestFailpointCrashes(t *testing.T) {
	if !failpoint.Available() {
		t.Skip("needs failpoints: run with -tags " + failpoint.BuildTag + " (./scripts/test does)")
	}
	rng := dbtest.Seed(t)
	for _, tc := range []struct {
		fp, mode string
		first    bool // at the first checkpoint
	}{
		{failpoint.AfterSinkPrepare, "append", false}, {failpoint.BeforeDBCommit, "append", false}, {failpoint.BeforeDBCommit, "append", true},
		{failpoint.AfterCommitPoint, "append", false}, {failpoint.DuringRestore, "append", false},
		{failpoint.AfterSinkPrepare, "twophase", false}, {failpoint.MidManifestWrite, "twophase", false}, {failpoint.AfterCommitPoint, "twophase", false},
	} {
		fp := tc.fp
		name := tc.mode + "/" + fp
		if tc.first {
			name += "/first"
		}
		t.Run(name, func(t *testing.T) {
			r := newCrashRun(t, tc.mode)
			hit := 1 + rng.IntN(5)
			if tc.first {
				// The first checkpoint's commit, with its manifest pending
				// and nothing committed: the restart finds the start mark
				// and begins again from the startup modes (docs/design.md,
				// "Recovery decisions").
				hit = 1
			}
			if fp == failpoint.DuringRestore {
				hit = 1
				r.KillAfterCommit(func() bool { return r.progress() != "0" }) // something to restore
			}
			r.CrashAt(fp, hit)
			r.Finish()
			r.check()
		})
	}
}

// The server killed and started again while the job runs: the job fails,
// restarts, and nothing is lost or written twice.
func TestServerRestart(t *testing.T) {
	r := newCrashRun(t, "upsert")
	cmd, done := r.Start()
	time.Sleep(time.Second)
	if err := r.srv.Restart(); err != nil {
		t.Fatal(err)
	}
	// The child has no restart strategy: it fails, and the next one
	// recovers from the progress row.
	select {
	case <-done:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		t.Fatal("the job kept running after its server was killed")
	}
	r.Finish()
	r.check()
}
