// Package sinktest is the conformance suite every database sink runs
// (docs/design.md, "Database sinks" and "Where an extension goes"): one
// Conformance(t, Harness) that a connector's test calls with a harness of
// its sink, like state/statetest and the checkpoint storagetest.
//
// It is internal, not public: it drives the sink under test through
// internal/dbtest's crash runs (a child process SIGKILLed at random and at
// the commit protocol's failpoints), which a public package could not
// import. A public version for users' own sinks would need those pieces
// public first.
//
// The suite's job is dbtest.RunCountJob's keyed count: the sink writes
// dbtest.Count records as one row per key (Key → N), upserted by key, so
// every delivery ends with each key's row holding its final count.
package sinktest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/dbtest"
	"github.com/onceflow/onceflow/internal/failpoint"
)

// Config is what the suite asks of a sink under test.
type Config struct {
	// Delivery is exactly-once, two-phase or at-least-once.
	Delivery connector.Delivery
	// Refuse makes the value of every record with N divisible by 10 one
	// the table refuses (text for the count's integer column, say), so
	// that the sink rejects the record.
	Refuse bool
	// DeadLetters sends rejected records to the sink's dead-letter table
	// (keyed by dbtest.RejectsDeadLetters); DeadLetterJob names it.
	DeadLetters bool
}

// Row is a committed row: a key and its value as the system's own client
// shows it.
type Row struct{ Key, Value string }

// Harness is a sink under test and the means to look at its system.
type Harness struct {
	// Spec is the connector's; its Deliveries say which subtests run.
	Spec connector.Spec
	// Server returns the address (DSN, URL) of a fresh throw-away database
	// with the sink's table in place; twoPhase asks for a server that
	// takes prepared transactions.
	Server func(t *testing.T, twoPhase bool) string
	// NewSink returns the sink under test writing to addr.
	NewSink func(addr string, c Config) (flow.Sink[dbtest.Count], error)
	// Rows reads what is committed at addr with the system's own client
	// (not the sink's code): every row, a duplicate key as two rows.
	Rows func(t *testing.T, addr string) []Row
	// Leftovers describes the transactions (prepared or open) or staged
	// writes the job left behind at addr; "" when there are none.
	// Prepared counts the prepared transactions at addr (two-phase only).
	// Both are told the job and its sink's uid: where prepared
	// transactions are listed for the whole server, not addr's database
	// (MariaDB's XA RECOVER), they count only those whose id starts with
	// the job's and sink's (sqlsink.GIDPrefix), so that what another test
	// left on the shared server does not count.
	Leftovers func(t *testing.T, addr, job, uid string) string
	Prepared  func(t *testing.T, addr, job, uid string) int
	// DeadLetters counts the dead letters job left at addr.
	DeadLetters func(t *testing.T, addr, job string) int
	// Refused are words the error of a refused value says (the column,
	// the value).
	Refused []string
	// Unreachable is an address where no server listens, its password
	// dbtest.Secret; UnreachableSays are words its error says (what to
	// do).
	Unreachable     string
	UnreachableSays []string
	// Isolated says that Leftovers and Prepared look at addr's database
	// only, not at the whole server: the crash subtests of the
	// deliveries then run in parallel (their children mostly sleep),
	// each with a server database of its own.
	Isolated bool
}

// The crash children's environment.
const (
	addrEnv     = "ONCEFLOW_SINKTEST_ADDR"
	deliveryEnv = "ONCEFLOW_SINKTEST_DELIVERY"
)

// Spec is the crash tests' input: 200k records over 50 keys.
var Spec = dbtest.CountJobSpec{Keys: 50, PerKey: 4000}

// Child runs the crash child when this process is one (call it first in
// TestMain): ok is false when it is not, else code is the exit code.
func Child(h Harness) (code int, ok bool) {
	dir, addr := os.Getenv(dbtest.ChildEnv), os.Getenv(addrEnv)
	if dir == "" || addr == "" {
		return 0, false
	}
	d := connector.Delivery(os.Getenv(deliveryEnv))
	s, err := h.NewSink(addr, Config{Delivery: d})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1, true
	}
	return dbtest.RunCountJob(dir, jobName(d), Spec, func(st flow.Stream[dbtest.Count]) { flow.To(st, s, flow.UID(CrashUID)) }), true
}

// CrashUID is the uid of the crash child's sink.
const CrashUID = "sink"

func jobName(d connector.Delivery) string { return "conformance-" + string(d) }

// kills is how many times the crash subtest SIGKILLs a job (about 2 s
// each under -race): dbtest.CrashKills, 8 in the default run (20 before
// CI had to fit in 15 minutes), 60 with ONCEFLOW_LONG=1.
func kills() int { return dbtest.CrashKills() }

// Conformance runs the suite's subtests that h's deliveries call for.
func Conformance(t *testing.T, h Harness) {
	deliveries := []connector.Delivery{}
	for _, d := range []connector.Delivery{connector.ExactlyOnce, connector.TwoPhase, connector.AtLeastOnce} {
		if h.Spec.Supports(d) {
			deliveries = append(deliveries, d)
		}
	}
	if len(deliveries) == 0 {
		t.Fatalf("%s offers none of exactly-once, two-phase, at-least-once as a sink", h.Spec.Name)
	}
	t.Run("crashes", func(t *testing.T) {
		for _, d := range deliveries {
			// Two-phase with one row per key: a writer's next epoch
			// upserts the keys its prepared transaction still locks, so
			// the sink must hold those rows until the commit comes
			// (docs/design.md, "Database sinks").
			t.Run(string(d), func(t *testing.T) {
				if h.Isolated {
					t.Parallel()
				}
				crashes(t, h, d)
			})
		}
	})
	if h.Spec.Supports(connector.AtLeastOnce) {
		t.Run("replay", func(t *testing.T) { replay(t, h) })
	}
	if h.Spec.Supports(connector.TwoPhase) {
		t.Run("two-phase", func(t *testing.T) { twoPhase(t, h) })
	}
	t.Run("bad-values", func(t *testing.T) {
		for _, d := range deliveries {
			t.Run(string(d), func(t *testing.T) { badValues(t, h, d) })
		}
	})
	t.Run("unreachable", func(t *testing.T) { unreachable(t, h) })
}

// crashes: the counting job, crashed at one of the commit protocol's
// failpoints and SIGKILLed at random moments, ends with every key's count
// exactly right and nothing left open or prepared.
func crashes(t *testing.T, h Harness, d connector.Delivery) {
	if !failpoint.Available() {
		t.Skip("needs failpoints: run with -tags " + failpoint.BuildTag + " (./scripts/test does)")
	}
	rng := dbtest.Seed(t)
	addr := h.Server(t, d == connector.TwoPhase)
	r := dbtest.NewCrashRun(t, addrEnv+"="+addr, deliveryEnv+"="+string(d))
	// The failpoint where the delivery is most fragile: after the commit
	// point with the database's commit not done (exactly-once's progress
	// row, two-phase's prepared transactions), and after the flush with
	// the checkpoint not taken (at-least-once replays).
	fp := failpoint.AfterCommitPoint
	if d == connector.AtLeastOnce {
		fp = failpoint.AfterSinkPrepare
	}
	r.CrashAt(fp, 1+rng.IntN(3))
	r.Kills(rng, kills(), func() string { return strconv.FormatInt(sum(t, h, addr), 10) })
	r.Finish()
	CheckCounts(t, h.Rows(t, addr), Spec)
	if left := h.Leftovers(t, addr, jobName(d), CrashUID); left != "" {
		t.Errorf("left behind after the job ended: %s", left)
	}
}

// sum is the sum of the committed counts: the crash runs' progress.
func sum(t *testing.T, h Harness, addr string) int64 {
	var n int64
	for _, r := range h.Rows(t, addr) {
		v, _ := strconv.ParseInt(r.Value, 10, 64)
		n += v
	}
	return n
}

// CheckCounts fails t unless rows hold every key of c once, with its final
// count c.PerKey.
func CheckCounts(t testing.TB, rows []Row, c dbtest.CountJobSpec) {
	t.Helper()
	seen := map[string]int{}
	var wrong []string
	for _, r := range rows {
		seen[r.Key]++
		if r.Value != strconv.Itoa(c.PerKey) {
			wrong = append(wrong, r.Key+"="+r.Value)
		}
	}
	var dups, missing []string
	for k := range c.Keys {
		key := "k" + strconv.Itoa(k)
		switch seen[key] {
		case 0:
			missing = append(missing, key)
		case 1:
		default:
			dups = append(dups, fmt.Sprintf("%s×%d", key, seen[key]))
		}
		delete(seen, key)
	}
	for k := range seen {
		wrong = append(wrong, "unknown key "+k)
	}
	sort.Strings(wrong)
	if len(wrong)+len(dups)+len(missing) > 0 {
		t.Errorf("the committed rows are not every key's count %d exactly once: %d rows; wrong %v; duplicated %v; missing %v",
			c.PerKey, len(rows), wrong, dups, missing)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// newSink builds, binds and (exactly-once) recovers the sink for job.
func newSink(t *testing.T, h Harness, addr, job string, c Config) flow.Sink[dbtest.Count] {
	t.Helper()
	s, err := h.NewSink(addr, c)
	if err != nil {
		t.Fatal(err)
	}
	if cl, ok := s.(interface{ Close() error }); ok {
		t.Cleanup(func() { cl.Close() })
	}
	if b, ok := s.(flow.JobBinder); ok {
		if err := b.BindJob(flow.JobInfo{Name: job, Checkpointing: flow.CheckpointSettings{Mode: flow.ExactlyOnce}}); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// rowMap is rows as key → value, "key×2" for a duplicate key.
func rowMap(rows []Row) map[string]string {
	m := map[string]string{}
	for _, r := range rows {
		if _, ok := m[r.Key]; ok {
			m[r.Key+"×2"] = r.Value
			continue
		}
		m[r.Key] = r.Value
	}
	return m
}

// replay: at-least-once, a crash after an epoch was flushed and before its
// checkpoint completed makes the next attempt write the same epoch's rows
// again; each row is there once with its value (epoch-fenced upserts),
// and an older epoch's late row does not replace a newer one.
func replay(t *testing.T, h Harness) {
	ctx := ctxT(t)
	addr := h.Server(t, false)
	const job = "replay"
	open := func(first int64) flow.SinkWriter[dbtest.Count] {
		t.Helper()
		s := newSink(t, h, addr, job, Config{Delivery: connector.AtLeastOnce})
		w, err := s.Open(ctx, flow.SinkContext{Job: job, UID: "out", Parallelism: 1, FirstCheckpoint: first})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		return w
	}
	epoch := func(w flow.SinkWriter[dbtest.Count], id int64, recs ...dbtest.Count) {
		t.Helper()
		for _, r := range recs {
			if err := w.Write(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := w.Prepare(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	want := func(when string, w map[string]string) {
		t.Helper()
		if got := rowMap(h.Rows(t, addr)); !mapsEqual(got, w) {
			t.Errorf("%s: rows %v, want %v", when, got, w)
		}
	}
	a1, b1, a2, c2 := dbtest.Count{Key: "a", N: 1}, dbtest.Count{Key: "b", N: 1}, dbtest.Count{Key: "a", N: 2}, dbtest.Count{Key: "c", N: 1}
	w := open(1)
	epoch(w, 1, a1, b1)
	epoch(w, 2, a2, c2)
	want("after epochs 1 and 2", map[string]string{"a": "2", "b": "1", "c": "1"})
	// The process dies before checkpoint 2 completes: the next attempt
	// restores checkpoint 1 and replays epoch 2's records, in another
	// order, in its first checkpoint (3: ids are not reused).
	w2 := open(3)
	epoch(w2, 3, c2, a2)
	want("after the replay of epoch 2", map[string]string{"a": "2", "b": "1", "c": "1"})
	// A replay of epoch 1's row of a (its older count) in a later epoch
	// is a newer write; the rows stay one per key.
	epoch(w2, 4, a1, b1, b1)
	want("after a second replay", map[string]string{"a": "1", "b": "1", "c": "1"})
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// twoPhase: prepared rows are invisible until committed, a commit again
// is a success, and a start that restores no checkpoint settles what an
// earlier run left prepared by the commit record: commit up to it, roll
// back above (dbtest.PreparedSettledByTheRecord).
func twoPhase(t *testing.T, h Harness) {
	ctx := ctxT(t)
	addr := h.Server(t, true)
	s := newSink(t, h, addr, "visible", Config{Delivery: connector.TwoPhase})
	w, err := s.Open(ctx, flow.SinkContext{Job: "visible", UID: "out", Parallelism: 1, FirstCheckpoint: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Write(ctx, dbtest.Count{Key: "p", N: 1}); err != nil {
		t.Fatal(err)
	}
	handle, err := w.Prepare(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if rows := h.Rows(t, addr); len(rows) != 0 {
		t.Errorf("prepared, not committed, rows are visible: %v", rows)
	}
	if n := h.Prepared(t, addr, "visible", "out"); n != 1 {
		t.Errorf("%d transactions prepared, want 1", n)
	}
	for i := range 2 { // again: idempotent
		if err := w.Commit(ctx, 1, handle); err != nil {
			t.Fatalf("commit %d: %v", i+1, err)
		}
	}
	if got := rowMap(h.Rows(t, addr)); !mapsEqual(got, map[string]string{"p": "1"}) {
		t.Errorf("after the commit: rows %v, want p=1", got)
	}
	if n := h.Prepared(t, addr, "visible", "out"); n != 0 {
		t.Errorf("after the commit %d transactions are still prepared", n)
	}

	// A key the prepared, uncommitted transaction upserted is written
	// again (more rows than a batch, so the writer would send them): the
	// rows wait for the commit instead of waiting on its locks, which
	// only this goroutine's Commit releases (docs/design.md, "Database
	// sinks"). A barrier before that commit declines its checkpoint and
	// keeps the rows for the next one.
	t.Run("a prepared key written again waits for the commit", func(t *testing.T) {
		addr := h.Server(t, true)
		s := newSink(t, h, addr, "rewrite", Config{Delivery: connector.TwoPhase})
		w, err := s.Open(ctx, flow.SinkContext{Job: "rewrite", UID: "out", Parallelism: 1, FirstCheckpoint: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		write := func(key string, n int64) {
			t.Helper()
			done := make(chan error, 1)
			go func() { done <- w.Write(ctx, dbtest.Count{Key: key, N: n}) }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("writing key %s blocked: it waits on the prepared transaction's lock", key)
			}
		}
		write("p", 1)
		h1, err := w.Prepare(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		// Key p rewritten more often than a batch holds rows (1000 by
		// default): 1,200 times in the default run, 3,000 with
		// ONCEFLOW_LONG=1 (3,000 took 45 s of the PostgreSQL run under -race).
		rewrites := int64(1200)
		if os.Getenv("ONCEFLOW_LONG") != "" {
			rewrites = 3000
		}
		for i := range rewrites { // above any batch size
			write("p", 2+i)
			write("q"+strconv.FormatInt(i, 10), 1) // other keys go on
		}
		if _, err := w.Prepare(ctx, 2); err == nil || !strings.Contains(err.Error(), "declined") {
			t.Fatalf("prepare 2 before commit 1: %v, want a declined checkpoint", err)
		}
		if err := w.Commit(ctx, 1, h1); err != nil {
			t.Fatal(err)
		}
		h3, err := w.Prepare(ctx, 3)
		if err != nil {
			t.Fatalf("prepare 3 after commit 1: %v", err)
		}
		if err := w.Commit(ctx, 3, h3); err != nil {
			t.Fatal(err)
		}
		got := rowMap(h.Rows(t, addr))
		wantP, lastQ := strconv.FormatInt(rewrites+1, 10), "q"+strconv.FormatInt(rewrites-1, 10)
		if got["p"] != wantP || got[lastQ] != "1" || int64(len(got)) != rewrites+1 {
			t.Errorf("rows: p=%s %s=%s, %d keys; want p=%s, %s=1, %d keys", got["p"], lastQ, got[lastQ], len(got), wantP, lastQ, rewrites+1)
		}
	})

	t.Run("settled by the record", func(t *testing.T) {
		addr := h.Server(t, true)
		dbtest.PreparedSettledByTheRecord(t, func() flow.Sink[dbtest.Count] {
			return newSink(t, h, addr, "settle", Config{Delivery: connector.TwoPhase})
		}, func() string {
			rows := h.Rows(t, addr)
			lines := make([]string, len(rows))
			for i, r := range rows {
				lines[i] = r.Key + "|" + r.Value
			}
			slices.Sort(lines)
			return strings.Join(lines, "\n")
		}, func() string { return strconv.Itoa(h.Prepared(t, addr, "settle", "out")) })
	})
}

// badValues: a record whose value the table refuses becomes a rejected
// record under the error policy: with fail the job stops with an error
// naming the refusal; with dead-letter it lands in the dead-letter table,
// once, and every other record is written.
func badValues(t *testing.T, h Harness, d connector.Delivery) {
	addr := h.Server(t, d == connector.TwoPhase)
	bad := dbtest.RejectsRecords / 10
	t.Run("dead-letter", func(t *testing.T) {
		job := "rejects-" + string(d)
		s, err := h.NewSink(addr, Config{Delivery: d, Refuse: true, DeadLetters: true})
		if err != nil {
			t.Fatal(err)
		}
		st, err := dbtest.RunRejects(t, job, s, flow.DeadLetterOnError)
		if err != nil {
			t.Fatal(err)
		}
		if st.RecordsDeadLettered != int64(bad) {
			t.Errorf("%d records dead-lettered, want %d", st.RecordsDeadLettered, bad)
		}
		if n := h.DeadLetters(t, addr, job); n != bad {
			t.Errorf("the dead-letter table holds %d, want %d", n, bad)
		}
		got := map[string]string{}
		for _, r := range h.Rows(t, addr) {
			if _, dup := got[r.Key]; dup {
				t.Errorf("key %s written twice", r.Key)
			}
			got[r.Key] = r.Value
		}
		var lost []string
		for n := 1; n <= dbtest.RejectsRecords; n++ {
			k, v := "r"+strconv.Itoa(n), strconv.Itoa(n)
			switch {
			case n%10 == 0 && got[k] != "":
				t.Errorf("refused record %s was written: %s", k, got[k])
			case n%10 != 0 && got[k] != v:
				lost = append(lost, k+"="+got[k])
			}
		}
		if len(lost) > 0 {
			t.Errorf("%d records besides the refused ones are missing or wrong: %v", len(lost), lost[:min(len(lost), 10)])
		}
	})
	t.Run("fail", func(t *testing.T) {
		s, err := h.NewSink(addr, Config{Delivery: d, Refuse: true})
		if err != nil {
			t.Fatal(err)
		}
		job := "rejects-fail-" + string(d)
		if d == connector.TwoPhase {
			t.Cleanup(func() { settleLeftPrepared(t, h, addr, job, dbtest.RejectsUID) })
		}
		_, err = dbtest.RunRejects(t, job, s, flow.FailOnError)
		if !errors.Is(err, flow.ErrRejected) {
			t.Errorf("the job ended with %v, want the rejected record (flow.ErrRejected)", err)
		}
		dbtest.CheckError(t, err, append([]string{"error policy fail"}, h.Refused...)...)
	})
}

// settleLeftPrepared rolls back the transactions that sink uid of job,
// which failed for good, left prepared at addr. A job that fails is not
// restarted here, and its prepared transactions stay until a start of the
// same job settles them (docs/design.md, "Database sinks"): one whose
// subtask prepared its checkpoint while another subtask failed the job
// (two-phase, a refused record under the fail policy). Left on a server
// that the test binary shares (MariaDB's XA RECOVER is server-wide), it
// failed every later test that checks that nothing is prepared; on
// PostgreSQL it kept the test database from being dropped. The settling
// is a start's (flow.PreparedResolver with a record of checkpoint 0, so
// all of them roll back), scoped to the job's and sink's transaction ids.
func settleLeftPrepared(t *testing.T, h Harness, addr, job, uid string) {
	t.Helper()
	s, err := h.NewSink(addr, Config{Delivery: connector.TwoPhase})
	if err != nil {
		t.Errorf("settle what job %s left prepared: %v", job, err)
		return
	}
	if cl, ok := s.(interface{ Close() error }); ok {
		defer cl.Close()
	}
	r, ok := s.(flow.PreparedResolver)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.ResolvePrepared(ctx, job, uid, 0, true); err != nil {
		t.Errorf("roll back what job %s left prepared: %v", job, err)
		return
	}
	if n := h.Prepared(t, addr, job, uid); n != 0 {
		t.Errorf("%d transactions of job %s are still prepared after the settling", n, job)
	}
}

// unreachable: a sink pointed at no server fails fast (bounded by a
// timeout, not a hang) with an error that says what to do, and shows no
// password.
func unreachable(t *testing.T, h Harness) {
	s, err := h.NewSink(h.Unreachable, Config{Delivery: connector.ExactlyOnce})
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := s.(flow.JobBinder); ok {
		if err := b.BindJob(flow.JobInfo{Name: "unreachable", Checkpointing: flow.CheckpointSettings{Mode: flow.ExactlyOnce}}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	if cp, ok := s.(flow.CommitPointProvider); ok && cp.CommitPoint() != nil {
		_, err = cp.CommitPoint().Recover(ctx)
	} else {
		_, err = s.Open(ctx, flow.SinkContext{Job: "unreachable", UID: "out", Parallelism: 1, FirstCheckpoint: 1})
	}
	if ctx.Err() != nil {
		t.Fatalf("against no server the sink waited %v, until the test's deadline: %v", time.Since(start).Round(time.Millisecond), err)
	}
	dbtest.CheckError(t, err, h.UnreachableSays...)
}
