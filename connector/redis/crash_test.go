package redis_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/connector/redis"
	"github.com/onceflow/onceflow/internal/dbtest"
	"github.com/onceflow/onceflow/internal/failpoint"
	"github.com/onceflow/onceflow/internal/sinktest"
)

// The crash tests re-execute this test binary as a child process that runs
// a keyed count into Redis (dbtest.RunCountJob), and SIGKILL it at random
// moments; redis-cli checks the keys.
const (
	childURLEnv  = "ONCEFLOW_REDIS_CHILD_URL"
	childModeEnv = "ONCEFLOW_REDIS_CHILD_MODE"
)

func TestMain(m *testing.M) {
	if code, ok := sinktest.Child(conformance()); ok {
		os.Exit(code)
	}
	if dir := os.Getenv(dbtest.ChildEnv); dir != "" {
		mode := os.Getenv(childModeEnv)
		if mode == "set" {
			redis.SetStreamMerged(7) // stream into the open MULTI all the time
		}
		sink, err := redis.NewSink(sinkConfig(os.Getenv(childURLEnv), mode))
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(dbtest.RunCountJob(dir, "rd-crash-"+mode, crashSpec, dbtest.To[dbtest.Count](sink)))
	}
	os.Exit(dbtest.Main(m))
}

// The modes: incr (exactly-once INCRBY c:<key> 1 per count: a duplicate
// or a loss changes the total), set (exactly-once SET n:<key> <n>,
// streamed into an open MULTI every 7 keys), fenced (at-least-once, SET n:<key> <n> fenced per attempt).
// Exactly-once HSET counts <key> <n> crashed is the conformance suite's
// crash subtest (TestConformance).
var modes = []string{"incr", "set", "fenced"}

var crashSpec = dbtest.CountJobSpec{Keys: 50, PerKey: 4000}

func sinkConfig(url, mode string) redis.Config[dbtest.Count] {
	cfg := redis.Config[dbtest.Count]{URL: url, BatchRows: 500}
	switch mode {
	case "incr":
		cfg.Command = redis.CommandIncrBy
		cfg.Op = func(c dbtest.Count) (redis.Op, error) { return redis.Op{Key: "c:" + c.Key, By: 1}, nil }
	case "set", "fenced":
		cfg.Command = redis.CommandSet
		if mode == "fenced" {
			cfg.Delivery = redis.DeliveryAtLeastOnce
		}
		cfg.Op = func(c dbtest.Count) (redis.Op, error) {
			return redis.Op{Key: "n:" + c.Key, Value: strconv.FormatInt(c.N, 10)}, nil
		}
	}
	return cfg
}

type crashRun struct {
	*dbtest.CrashRun
	t    *testing.T
	srv  *dbtest.RedisServer
	db   int
	mode string
}

func newCrashRun(t *testing.T, mode string) *crashRun {
	url, srv, db := dbtest.Redis(t)
	return &crashRun{CrashRun: dbtest.NewCrashRun(t, childURLEnv+"="+url, childModeEnv+"="+mode), t: t, srv: srv, db: db, mode: mode}
}

// cli asks the server through redis-cli.
func (r *crashRun) cli(args ...string) string {
	r.t.Helper()
	out, err := r.srv.Client(r.db, args...)
	if err != nil {
		r.t.Fatal(err)
	}
	return out
}

// progress is the job's committed checkpoint (the sum of the written
// counts with at-least-once).
func (r *crashRun) progress() string {
	if r.mode == "fenced" {
		return strconv.Itoa(r.sum("n:"))
	}
	if out := r.cli("HGET", "onceflow:progress:rd-crash-"+r.mode, "checkpoint"); out != "" {
		return out
	}
	return "0"
}

// values returns the values of the keys of every counted key.
func (r *crashRun) values(prefix string) []string {
	args := []string{"MGET"}
	for k := range crashSpec.Keys {
		args = append(args, prefix+"k"+strconv.Itoa(k))
	}
	return strings.Split(r.cli(args...), "\n")
}

func (r *crashRun) sum(prefix string) int {
	n := 0
	for _, v := range r.values(prefix) {
		i, _ := strconv.Atoi(v)
		n += i
	}
	return n
}

// check: every key holds the number of its records, exactly.
func (r *crashRun) check() {
	r.t.Helper()
	want := strconv.Itoa(crashSpec.PerKey)
	var got []string
	switch r.mode {
	case "incr":
		got = r.values("c:")
	case "fenced", "set":
		got = r.values("n:")
	}
	if len(got) != crashSpec.Keys {
		r.t.Fatalf("%d values for %d keys: %q", len(got), crashSpec.Keys, got)
	}
	for i, v := range got {
		if v != want {
			r.t.Fatalf("%s: key k%d holds %q, want %s (all: %q)", r.mode, i, v, want, got)
		}
	}
	if stages := r.cli("KEYS", "onceflow:stage:*"); stages != "" {
		r.t.Errorf("stages left behind after the job ended: %q", stages)
	}
}

// Each mode, SIGKILLed 8 times (dbtest.CrashKills; 60 with
// ONCEFLOW_LONG=1) at random moments over 200k records, ends
// with every key holding its count exactly (checked with redis-cli); with
// INCRBY a single duplicate or loss would show.
func TestCrashes(t *testing.T) {
	t.Parallel() // next to TestFailpointCrashes: databases of their own, children that mostly sleep; TestServerRestart, which restarts the shared server, is serial and ends before
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel() // a database of its own; the children mostly sleep
			rng := dbtest.Seed(t)
			r := newCrashRun(t, mode)
			r.Kills(rng, dbtest.CrashKills(), r.progress)
			r.Finish()
			r.check()
		})
	}
}

// The commit protocol's failpoints around the script, as crashes of the
// whole process: before it runs (at the first checkpoint and later) and
// after it (the manifest still pending), then the restore itself.
func TestFailpointCrashes(t *testing.T) {
	t.Parallel() // next to TestCrashes (see there)
	if !failpoint.Available() {
		t.Skip("needs failpoints: run with -tags " + failpoint.BuildTag + " (./scripts/test does)")
	}
	rng := dbtest.Seed(t)
	for _, tc := range []struct {
		fp    string
		first bool
	}{
		{failpoint.BeforeDBCommit, true}, {failpoint.BeforeDBCommit, false}, {failpoint.AfterCommitPoint, false},
		{failpoint.AfterSinkPrepare, false}, {failpoint.DuringRestore, false},
	} {
		fp := tc.fp
		name := fp
		if tc.first {
			name += "/first"
		}
		hit := 2 + rng.IntN(4) // drawn here: the subtests run in parallel
		if tc.first {
			hit = 1
		}
		t.Run(name, func(t *testing.T) {
			// The children mostly sleep (throttled); each subtest has a
			// database of its own on the shared server.
			t.Parallel()
			r := newCrashRun(t, "incr")
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

// The server killed (SIGKILL: what its append-only file holds survives,
// with appendfsync always every commit) and started again while the job
// runs: the job fails, the next run recovers, and the counts are exact.
func TestServerRestart(t *testing.T) {
	r := newCrashRun(t, "incr")
	r.KillAfterCommit(func() bool { return r.progress() != "0" })
	cmd, done := r.Start()
	time.Sleep(500 * time.Millisecond)
	if err := r.srv.Restart(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		t.Fatal("the job kept running after its server was killed")
	}
	r.Finish()
	r.check()
}
