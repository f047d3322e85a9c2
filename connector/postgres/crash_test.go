package postgres_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/connector/postgres"
	"github.com/onceflow/onceflow/internal/dbtest"
	"github.com/onceflow/onceflow/internal/failpoint"
	"github.com/onceflow/onceflow/internal/sinktest"
)

// The crash tests re-execute this test binary as a child process that runs
// a keyed count into PostgreSQL (dbtest.RunCountJob), and SIGKILL it at
// random moments.
const (
	childDSNEnv  = "ONCEFLOW_PG_CHILD_DSN"  // the database
	childModeEnv = "ONCEFLOW_PG_CHILD_MODE" // a crashMode
)

func TestMain(m *testing.M) {
	if code, ok := sinktest.Child(harness()); ok {
		os.Exit(code)
	}
	if dir := os.Getenv(dbtest.ChildEnv); dir != "" {
		mode := crashMode(os.Getenv(childModeEnv))
		to, err := childSinks(os.Getenv(childDSNEnv), mode)
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(dbtest.RunCountJob(dir, "pg-crash-"+string(mode), crashSpec, to))
	}
	os.Exit(dbtest.Main(m))
}

// crashMode is a table and a delivery.
type crashMode string

const (
	// modeAppend: exactly-once, every count appended (no key), so a
	// duplicate is a second row.
	modeAppend crashMode = "append"
	// modeUpsert: exactly-once, the count per key updated in place.
	modeUpsert crashMode = "upsert"
	// modeFenced: at-least-once, epoch-fenced upserts of the count per key.
	modeFenced crashMode = "fenced"
	// modeTwoPhase: two-phase, every count appended: the sink takes part
	// in the manifest's commit point with prepared transactions.
	modeTwoPhase crashMode = "twophase"
)

// crashSpec is the input: 200k records over 50 keys.
var crashSpec = dbtest.CountJobSpec{Keys: 50, PerKey: 4000}

type count = dbtest.Count

func createTables(t *testing.T, dsn string, srv *dbtest.PostgresServer) {
	t.Helper()
	db := dbName(dsn)
	ctx := context.Background()
	for _, sql := range []string{
		"CREATE TABLE events (key text NOT NULL, n bigint NOT NULL)",
		"CREATE TABLE counts (key text PRIMARY KEY, n bigint NOT NULL)",
		"CREATE TABLE fenced (key text PRIMARY KEY, n bigint NOT NULL, onceflow_epoch bigint NOT NULL DEFAULT 0)",
	} {
		if err := srv.Exec(ctx, db, sql); err != nil {
			t.Fatal(err)
		}
	}
}

func dbName(dsn string) string {
	i := strings.LastIndex(dsn, "/")
	return strings.SplitN(dsn[i+1:], "?", 2)[0]
}

func sinkConfig(dsn string, mode crashMode) postgres.Config[count] {
	row := func(c count) ([]any, error) { return []any{c.Key, c.N}, nil }
	cfg := sinkConfigOf(dsn, mode, row)
	cfg.Retracts = dbtest.Retracts
	return cfg
}

func sinkConfigOf(dsn string, mode crashMode, row func(count) ([]any, error)) postgres.Config[count] {
	switch mode {
	case modeAppend:
		return postgres.Config[count]{DSN: dsn, Table: "events", Columns: []string{"key", "n"}, Row: row, BatchRows: 500}
	case modeTwoPhase:
		return postgres.Config[count]{DSN: dsn, Table: "events", Columns: []string{"key", "n"}, Row: row, BatchRows: 500, Delivery: postgres.DeliveryTwoPhase}
	case modeUpsert:
		return postgres.Config[count]{DSN: dsn, Table: "counts", Columns: []string{"key", "n"}, Key: []string{"key"}, Row: row, BatchRows: 500}
	default:
		return postgres.Config[count]{DSN: dsn, Table: "fenced", Columns: []string{"key", "n"}, Key: []string{"key"}, Row: row, BatchRows: 500, Delivery: postgres.DeliveryAtLeastOnce}
	}
}

type crashRun struct {
	*dbtest.CrashRun
	t    *testing.T
	dsn  string
	srv  *dbtest.PostgresServer
	mode crashMode
}

func newCrashRun(t *testing.T, mode crashMode) *crashRun {
	var opts dbtest.PostgresOptions
	if mode == modeTwoPhase {
		opts.MaxPreparedTransactions = 64
	}
	dsn, srv := dbtest.Postgres(t, opts)
	createTables(t, dsn, srv)
	return &crashRun{CrashRun: dbtest.NewCrashRun(t, childDSNEnv+"="+dsn, childModeEnv+"="+string(mode)), t: t, dsn: dsn, srv: srv, mode: mode}
}

// psql asks the server through psql, an independent client.
func (r *crashRun) psql(sql string) string {
	r.t.Helper()
	out, err := r.srv.Psql(dbName(r.dsn), sql)
	if err != nil {
		r.t.Fatal(err)
	}
	return out
}

// progress returns the checkpoint of the job's progress row (exactly-once
// modes), or the sum of the counts (at-least-once).
func (r *crashRun) progress() string {
	switch r.mode {
	case modeFenced:
		return r.psql("SELECT coalesce(sum(n), 0) FROM fenced")
	case modeTwoPhase:
		return r.psql("SELECT count(*) FROM events")
	}
	if r.psql("SELECT to_regclass('onceflow_progress') IS NULL") == "t" {
		return "0" // killed before its first recovery created it
	}
	return r.psql("SELECT coalesce((SELECT checkpoint FROM onceflow_progress WHERE job = 'pg-crash-" + string(r.mode) + "'), 0)")
}

// check verifies the table against the input: every count of every key
// exactly once (append), or the final count of every key (upsert, fenced).
func (r *crashRun) check() {
	r.t.Helper()
	per, records, keys := crashSpec.PerKey, crashSpec.Records(), crashSpec.Keys
	switch r.mode {
	case modeAppend, modeTwoPhase:
		got := r.psql("SELECT count(*), count(DISTINCT (key, n)), count(DISTINCT key), min(n), max(n) FROM events")
		want := fmt.Sprintf("%d|%d|%d|1|%d", records, records, keys, per)
		if got != want {
			dups := r.psql("SELECT key, n, count(*) FROM events GROUP BY key, n HAVING count(*) > 1 ORDER BY key, n LIMIT 5")
			r.t.Fatalf("events (rows, distinct rows, keys, min, max) = %s, want %s; duplicates: %q", got, want, dups)
		}
	default:
		table := "counts"
		if r.mode == modeFenced {
			table = "fenced"
		}
		got := r.psql(fmt.Sprintf("SELECT count(*), min(n), max(n) FROM %s", table))
		if want := fmt.Sprintf("%d|%d|%d", keys, per, per); got != want {
			r.t.Fatalf("%s (keys, min count, max count) = %s, want %s", table, got, want)
		}
	}
	// A prepared transaction left behind holds its locks and blocks
	// VACUUM until someone rolls it back.
	// Only this run's database: the crash tests run in parallel, each
	// with a database of its own on the shared server.
	if orphans := r.psql("SELECT count(*) FROM pg_prepared_xacts WHERE database = current_database()"); orphans != "0" {
		r.t.Errorf("%s prepared transactions are left behind: %s", orphans, r.psql("SELECT string_agg(gid, ', ') FROM pg_prepared_xacts WHERE database = current_database()"))
	}
	if r.mode != modeFenced {
		if open := r.psql("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'onceflow%' AND state LIKE 'idle in transaction%'"); open != "0" {
			r.t.Errorf("%s transactions of the job are left open", open)
		}
	}
}

// kills is how many times each crash test SIGKILLs the job:
// dbtest.CrashKills, 8 in the default run, 60 with ONCEFLOW_LONG=1.
var kills = dbtest.CrashKills()

// Each appending mode, SIGKILLed 8 times (60 with ONCEFLOW_LONG=1) at random moments over 200k
// records, ends with every record in the table exactly once (checked with
// psql): a duplicate is a second row. The upserting modes (upsert,
// fenced) are the conformance suite's crash subtest (TestConformance).
func TestCrashes(t *testing.T) {
	for _, mode := range []crashMode{modeAppend, modeTwoPhase} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel() // a database of its own; the children mostly sleep
			rng := dbtest.Seed(t)
			r := newCrashRun(t, mode)
			r.Kills(rng, kills, r.progress)
			r.Finish()
			r.check()
		})
	}
}

// The commit protocol's failpoints around the database transaction, as a
// crash of the whole process: just before COMMIT (the transaction rolls
// back) and right after it (the manifest is still pending; the progress
// row says it committed), then the restore itself.
func TestFailpointCrashes(t *testing.T) {
	if !failpoint.Available() {
		t.Skip("needs failpoints: run with -tags " + failpoint.BuildTag + " (./scripts/test does)")
	}
	rng := dbtest.Seed(t)
	for _, tc := range []struct {
		fp    string
		mode  crashMode
		first bool // at the first checkpoint
	}{
		{failpoint.AfterSinkPrepare, modeAppend, false}, {failpoint.BeforeDBCommit, modeAppend, false}, {failpoint.BeforeDBCommit, modeAppend, true},
		{failpoint.AfterCommitPoint, modeAppend, false}, {failpoint.DuringRestore, modeAppend, false},
		// Two-phase: crashed with transactions prepared and not committed,
		// and after the commit point with them not committed yet.
		{failpoint.AfterSinkPrepare, modeTwoPhase, false}, {failpoint.MidManifestWrite, modeTwoPhase, false}, {failpoint.AfterCommitPoint, modeTwoPhase, false},
	} {
		fp := tc.fp
		name := string(tc.mode) + "/" + fp
		if tc.first {
			name += "/first"
		}
		hit := 1 + rng.IntN(5) // drawn here: the subtests run in parallel
		t.Run(name, func(t *testing.T) {
			// The children mostly sleep (throttled); each subtest has a
			// database of its own, and check looks at that one only. Not
			// two-phase: the names of prepared transactions are the
			// server's, and these jobs share theirs (same job name).
			if tc.mode != modeTwoPhase {
				t.Parallel()
			}
			r := newCrashRun(t, tc.mode)
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

// The server stopped (immediate shutdown, like a crash) and started again
// while the job runs: the job fails, the next run recovers, and nothing is
// lost or written twice.
func TestServerRestart(t *testing.T) {
	r := newCrashRun(t, modeUpsert)
	cmd, done := r.Start()
	time.Sleep(time.Second)
	if err := r.srv.Restart(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		t.Fatal("the job kept running after its server went away")
	}
	r.Finish()
	r.check()
}
