package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/dbtest"
	"github.com/onceflow/onceflow/internal/verify"
)

// The scale-out jobs of a chaos run (TestChaos): each is a fleet of
// `onceflow run --instance` processes, at least three at all times, under
// the scale-out events of the other scale-out tests (fleet.chaosEvent:
// SIGKILL and restart, an instance added, one removed with SIGTERM, one
// paused past the session timeout and let go on as a zombie), next to the
// other jobs' faults and the broker's restarts.
//
//   - chaos-so-pg: a running count re-keyed by a value field (two stages
//     through a repartition topic) into a PostgreSQL append table, the
//     database transaction each last-stage task's commit point
//     (docs/design.md, "Scale-out", database sinks). Every input record
//     makes one row carrying its seq: psql must find each input's seq in
//     exactly one row, under its user, each user's counts 1..n once, and
//     no open or prepared transaction.
//   - chaos-so-win: event-time tumbling windows after a re-key (docs/design.md,
//     "Scale-out", event time across repartition topics) over a fast
//     input partition, 30 s of event time ahead and three times as dense,
//     and a slow one. The windows must equal a plain computation over the
//     input, which is what one instance computes: no record is late
//     within its own partition. Records dated in windows already
//     committed are written now and then on purpose: they must be
//     dropped (the windows show it), and the last few are counted on the
//     instances' /metrics.

// ChaosScaleOutReport is one scale-out job's part of a chaos run.
type ChaosScaleOutReport struct {
	Inputs int `json:"inputs"`
	// Events counts the instance changes by kind (fleetEvents).
	Events map[string]int `json:"events"`
	// InstanceStarts counts the instance processes started, MaxInstances
	// the most running at once.
	InstanceStarts int `json:"instance_starts"`
	MaxInstances   int `json:"max_instances"`
	// Rows is what the table holds (chaos-so-pg).
	Rows int `json:"rows,omitempty"`
	// Windows is the windows committed, WindowsExpected those of the plain
	// computation (chaos-so-win).
	Windows         int `json:"windows,omitempty"`
	WindowsExpected int `json:"windows_expected,omitempty"`
	// LateWritten counts the records written late on purpose in the
	// input; LateCountedAtEnd how many of the last ones, written after
	// the faults, the instances' /metrics counted (it must equal
	// LateAtEnd).
	LateWritten      int `json:"late_records_written,omitempty"`
	LateAtEnd        int `json:"late_records_at_end,omitempty"`
	LateCountedAtEnd int `json:"late_records_counted_at_end,omitempty"`
	// LiveReaderDups counts the windows the live read_committed reader saw
	// more than once (chaos-so-win; the table has no live reader).
	LiveReaderDups *int   `json:"live_reader_duplicates,omitempty"`
	Verify         string `json:"verify"`
	OK             bool   `json:"ok"`
}

// chaosFleet is a scale-out job of a chaos run.
type chaosFleet struct {
	name, input, output string
	f                   *fleet
	// perTick records every 10 ms from next (Partition set when manual).
	perTick int
	next    func(n int) *kgo.Record
	manual  bool
	// live sees each record of output a read_committed reader reads
	// while the run goes on (nil: none is read).
	live func(r *kgo.Record)
	// end runs when the faults and the input have stopped: it writes the
	// job's last input (nil: none).
	end func(t *testing.T, addr string)
	// check verifies the job once it caught up (instances still running)
	// and fills the report; it stops the instances.
	check func(t *testing.T, ctx context.Context, addr string, rep *ChaosScaleOutReport)

	events map[string]int // owned by the fleet's fault loop
}

// chaosScaleOutFleets makes the chaos run's scale-out jobs: their topics
// on the broker at addr, their tables in the PostgreSQL database pgdb of
// pg (whose DSN is in $CHAOS_PG_DSN), their job files in dir. Nothing
// runs yet.
//
// Both run in every chaos run, CI's 40 s one included. They were left
// out of CI while runs under load lost early records now and then: the
// embedded broker reloaded a repartition partition purged to its end at
// offset 0 after a restart, and the purge now keeps a partition's last
// record (docs/guarantees.md, "Scale-out").
func chaosScaleOutFleets(t *testing.T, dir, addr string, pg *dbtest.PostgresServer, pgdb string, seedVal uint64) []*chaosFleet {
	return []*chaosFleet{
		chaosScaleOutPostgres(t, dir, addr, pg, pgdb, seedVal),
		chaosScaleOutWindows(t, dir, addr, seedVal),
	}
}

func newChaosFleet(t *testing.T, name, file string, args func(string) []string) *fleet {
	return &fleet{t: t, file: file, log: &logWriter{t: t, name: name}, run: map[string]*instanceProc{}, args: args, minRun: 3, maxRun: 6}
}

// chaosScaleOutPostgres is chaos-so-pg (above).
func chaosScaleOutPostgres(t *testing.T, dir, addr string, pg *dbtest.PostgresServer, pgdb string, seedVal uint64) *chaosFleet {
	t.Helper()
	const name, users = "chaos-so-pg", 40
	createTopic(t, addr, "in-so", 4)
	if err := pg.Exec(context.Background(), pgdb, "CREATE TABLE so_counts (u text NOT NULL, n bigint NOT NULL, seq bigint NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	sink := `  postgres:
    dsn: ${CHAOS_PG_DSN}
    table: so_counts
    columns: { u: value.key, n: value.n, seq: value.seq }`
	file := writeScaleOutJobFile(t, dir, name, addr, "in-so",
		"pipeline:\n  - aggregate: { key: value.user, fields: { n: \"count()\", seq: \"last(value.seq)\" } }", sink, "")
	query := func(q string) (string, error) { return pg.Psql(pgdb, q) }
	rng := rand.New(rand.NewPCG(seedVal, 101))
	c := &chaosFleet{name: name, input: "in-so", f: newChaosFleet(t, name, file, nil), perTick: 5}
	c.next = func(n int) *kgo.Record {
		return &kgo.Record{Key: []byte("o-" + strconv.Itoa(n)), Value: []byte(fmt.Sprintf(`{"user":"u%d","seq":%d}`, rng.IntN(users), n))}
	}
	c.check = func(t *testing.T, ctx context.Context, addr string, rep *ChaosScaleOutReport) {
		c.f.stopAll()
		inputs, err := verify.ReadTopic(ctx, []string{addr}, c.input, true)
		if err != nil {
			t.Fatal(err)
		}
		rep.Inputs = len(inputs)
		perUser := map[string]int{}
		userOf := map[string]string{}  // seq → user
		inputAt := map[string]string{} // seq → where the input record is
		for _, r := range inputs {
			var v struct {
				User string `json:"user"`
				Seq  int64  `json:"seq"`
			}
			if err := json.Unmarshal([]byte(r.Value), &v); err != nil {
				t.Fatalf("%s input %q: %v", name, r.Value, err)
			}
			perUser[v.User]++
			userOf[strconv.FormatInt(v.Seq, 10)] = v.User
			inputAt[strconv.FormatInt(v.Seq, 10)] = fmt.Sprintf("%s/%d@%d", c.input, r.Partition, r.Offset)
		}
		var problems []string
		ok := t.Run(name, func(t *testing.T) {
			// Each input's own row (checked first: the count check below
			// stops at a wrong row count, and a failure must say which
			// inputs and where they were): its seq once, under its user.
			out, err := query("SELECT seq, u FROM so_counts")
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]int{}
			for _, line := range strings.Split(out, "\n") {
				seq, u, _ := strings.Cut(line, "|")
				if line == "" {
					continue
				}
				rep.Rows++
				seen[seq]++
				if userOf[seq] != u {
					problems = append(problems, fmt.Sprintf("seq %s under user %s, input's user %q", seq, u, userOf[seq]))
				}
			}
			for seq := range userOf {
				if seen[seq] != 1 {
					problems = append(problems, fmt.Sprintf("seq %s (input %s, user %s) in %d rows", seq, inputAt[seq], userOf[seq], seen[seq]))
				}
			}
			if len(problems) > 0 {
				slices.Sort(problems)
				t.Errorf("%d inputs not in exactly one row of their own: %s; %s", len(problems), strings.Join(problems[:min(5, len(problems))], "; "),
					whereInRepartition(ctx, addr, name+"-repartition-1", problems))
			}
			// Each user's counts 1..n once, a row per input, a progress row
			// per last-stage task (TestScaleOutPostgres's check).
			sqlScaleOutCase(name, sink, query).check(t, perUser, len(inputs), c.f.log)
			for _, left := range postgresLeftOpen(query) {
				t.Error(left)
			}
		})
		rep.OK = ok
		rep.Verify = fmt.Sprintf("%d rows for %d inputs, %d inputs not in exactly one row of their own (seq and user)", rep.Rows, rep.Inputs, len(problems))
		if ok {
			rep.Verify += "; per user the counts 1..n once; a progress row per last-stage task; no connection, open or prepared transaction left"
		} else {
			rep.Verify += "; FAILED (see the test's errors)"
		}
	}
	return c
}

// whereInRepartition says where the records of the seqs named in problems
// ("seq N (...") are in the repartition topic: partition and offset,
// whether read_committed sees them, and each partition's start (the purge
// deletes below what its reader committed).
func whereInRepartition(ctx context.Context, addr, topic string, problems []string) string {
	want := map[string]bool{}
	for _, p := range problems {
		if f := strings.Fields(p); len(f) > 1 {
			want[f[1]] = true
		}
	}
	all, err := verify.ReadTopic(ctx, []string{addr}, topic, false)
	if err != nil {
		return fmt.Sprintf("reading %s: %v", topic, err)
	}
	committed, err := verify.ReadTopic(ctx, []string{addr}, topic, true)
	if err != nil {
		return fmt.Sprintf("reading %s read_committed: %v", topic, err)
	}
	visible := map[string]bool{}
	for _, r := range committed {
		visible[fmt.Sprint(r.Partition, "@", r.Offset)] = true
	}
	var b strings.Builder
	fmt.Fprintf(&b, "in %s:", topic)
	start := map[int32]int64{}
	for _, r := range all {
		if o, ok := start[r.Partition]; !ok || r.Offset < o {
			start[r.Partition] = r.Offset
		}
		var v struct {
			Seq int64 `json:"seq"`
		}
		if json.Unmarshal([]byte(r.Value), &v) != nil || !want[strconv.FormatInt(v.Seq, 10)] {
			continue
		}
		fmt.Fprintf(&b, " seq %d at %d@%d (committed: %v);", v.Seq, r.Partition, r.Offset, visible[fmt.Sprint(r.Partition, "@", r.Offset)])
	}
	fmt.Fprintf(&b, " first offsets retained per partition %v", start)
	return b.String()
}

// postgresLeftOpen returns what the stopped instances of a job left open
// in the database query reads: connections of onceflow, prepared
// transactions.
func postgresLeftOpen(query func(string) (string, error)) []string {
	var left []string
	for _, q := range []string{
		"SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'onceflow%' AND datname = current_database()",
		"SELECT count(*) FROM pg_prepared_xacts WHERE database = current_database()",
	} {
		if got, err := query(q); err != nil || got != "0" {
			left = append(left, fmt.Sprintf("%s = %s (%v), want 0: the stopped instances left work open", q, got, err))
		}
	}
	return left
}

// chaosScaleOutWindows is chaos-so-win (above).
func chaosScaleOutWindows(t *testing.T, dir, addr string, seedVal uint64) *chaosFleet {
	t.Helper()
	const name, users = "chaos-so-win", 10
	const size, lead = int64(10_000), int64(30_000)
	createTopic(t, addr, "in-win", 2) // 0 fast, 1 slow
	createTopic(t, addr, "out-win", 4)
	file := writeScaleOutJobFile(t, dir, name, addr, "in-win", "event-time:\n  max-out-of-orderness: 2s\n  idle-timeout: 10m\npipeline:\n"+
		"  - window: { key: value.user, size: 10s, fields: { n: \"count()\" } }", "  topic: out-win", "  repartition-partitions: 4\n")
	var httpMu sync.Mutex
	httpOf := map[string]string{}
	args := func(inst string) []string {
		httpMu.Lock()
		defer httpMu.Unlock()
		if httpOf[inst] == "" {
			httpOf[inst] = freeAddr(t)
		}
		return []string{"--http", httpOf[inst]}
	}
	c := &chaosFleet{name: name, input: "in-win", output: "out-win", f: newChaosFleet(t, name, file, args), perTick: 4, manual: true}
	type window struct {
		Key         string `json:"key"`
		WindowStart int64  `json:"window_start"`
		N           int64  `json:"n"`
	}
	// The live reader's view: how often each window came, and each user's
	// newest window committed (so a record dated two windows before it
	// is late for sure: its task's watermark passed that window, and a
	// restore never takes a watermark back).
	var liveMu sync.Mutex
	liveSeen := map[string]int{}
	newest := map[string]int64{}
	c.live = func(r *kgo.Record) {
		var w window
		if json.Unmarshal(r.Value, &w) != nil {
			return
		}
		liveMu.Lock()
		defer liveMu.Unlock()
		liveSeen[w.Key+"@"+strconv.FormatInt(w.WindowStart, 10)]++
		newest[w.Key] = max(newest[w.Key], w.WindowStart)
	}
	base := int64(1_700_000_000_000)
	clock := base // the slow partition's event time; the generator's
	rng := rand.New(rand.NewPCG(seedVal, 102))
	record := func(p int32, u string, ts int64, late bool) *kgo.Record {
		v := fmt.Sprintf(`{"user":%q,"ts":%d}`, u, ts)
		if late {
			v = fmt.Sprintf(`{"user":%q,"ts":%d,"late":true}`, u, ts)
		}
		return &kgo.Record{Topic: c.input, Partition: p, Key: []byte(fmt.Sprint(u, "-", ts)), Value: []byte(v), Timestamp: time.UnixMilli(ts)}
	}
	// late returns a record of a random user dated two or more windows
	// before the user's newest committed one, or nil while there is none.
	late := func() *kgo.Record {
		u := "u" + strconv.Itoa(rng.IntN(users))
		liveMu.Lock()
		w := newest[u]
		liveMu.Unlock()
		if w < base+3*size {
			return nil
		}
		start := w - (2+rng.Int64N(3))*size
		return record(rng.Int32N(2), u, start+rng.Int64N(size), true)
	}
	c.next = func(n int) *kgo.Record {
		if n%500 == 499 {
			if r := late(); r != nil {
				return r
			}
		}
		clock += 10 // 10 ms of event time a record: 4× the wall clock
		u := "u" + strconv.Itoa(rng.IntN(users))
		if n%4 == 3 {
			return record(1, u, clock-rng.Int64N(1000), false)
		}
		return record(0, u, clock+lead-rng.Int64N(1000), false)
	}
	// Event time past every window in both partitions: all fire.
	c.end = func(t *testing.T, addr string) {
		cl := client(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		end := clock + lead + 60_000
		if err := cl.ProduceSync(context.Background(), record(0, "end", end, false), record(1, "end", end, false)).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	c.check = func(t *testing.T, ctx context.Context, addr string, rep *ChaosScaleOutReport) {
		// The last late records, with no fault going on: each counted
		// once on the instances' /metrics.
		running := func() map[string]string {
			m := map[string]string{}
			for _, inst := range c.f.names() {
				m[inst] = args(inst)[1]
			}
			return m
		}
		before := lateRecords(t, running())
		cl := client(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		for rep.LateAtEnd < 3 {
			if r := late(); r != nil {
				if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
					t.Fatal(err)
				}
				rep.LateAtEnd++
			}
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			if n := lateRecords(t, running()) - before; n >= int64(rep.LateAtEnd) || time.Now().After(deadline) {
				time.Sleep(time.Second) // a count past them would show
				rep.LateCountedAtEnd = int(lateRecords(t, running()) - before)
				break
			}
		}
		c.f.stopAll()

		inputs, err := verify.ReadTopic(ctx, []string{addr}, c.input, true)
		if err != nil {
			t.Fatal(err)
		}
		rep.Inputs = len(inputs)
		want := map[string]int64{}
		for _, r := range inputs {
			var v struct {
				User string `json:"user"`
				TS   int64  `json:"ts"`
				Late bool   `json:"late"`
			}
			if err := json.Unmarshal([]byte(r.Value), &v); err != nil {
				t.Fatalf("%s input %q: %v", name, r.Value, err)
			}
			switch {
			case v.User == "end": // its window never fires
			case v.Late:
				rep.LateWritten++
			default:
				want[v.User+"@"+strconv.FormatInt(v.TS-v.TS%size, 10)]++
			}
		}
		got := map[string]int64{}
		var dups, missing, wrong, extra []string
		for _, r := range readCommitted(t, addr, c.output) {
			var w window
			if err := json.Unmarshal([]byte(r.Value), &w); err != nil {
				t.Fatalf("%s output %q is not a window result: %v", name, r.Value, err)
			}
			if w.Key == "end" {
				continue
			}
			id := w.Key + "@" + strconv.FormatInt(w.WindowStart, 10)
			if _, dup := got[id]; dup {
				dups = append(dups, id)
			}
			got[id] = w.N
		}
		for id, n := range want {
			if g, ok := got[id]; !ok {
				missing = append(missing, id)
			} else if g != n {
				wrong = append(wrong, fmt.Sprintf("%s: %d want %d", id, g, n))
			}
		}
		for id := range got {
			if _, ok := want[id]; !ok {
				extra = append(extra, id)
			}
		}
		liveMu.Lock()
		liveDups := 0
		for _, n := range liveSeen {
			liveDups += max(0, n-1)
		}
		liveMu.Unlock()
		rep.LiveReaderDups = &liveDups
		rep.Windows, rep.WindowsExpected = len(got), len(want)
		first := func(s []string) string { slices.Sort(s); return strings.Join(s[:min(3, len(s))], ", ") }
		rep.Verify = fmt.Sprintf("%d windows of %d expected: missing %d, wrong count %d, twice %d, not expected %d; %d late records dropped, the last %d counted %d times on /metrics",
			len(got), len(want), len(missing), len(wrong), len(dups), len(extra), rep.LateWritten, rep.LateAtEnd, rep.LateCountedAtEnd)
		rep.OK = len(missing)+len(wrong)+len(dups)+len(extra)+liveDups == 0 && rep.LateCountedAtEnd == rep.LateAtEnd
		if !rep.OK {
			t.Errorf("%s: the windows differ from one instance's: %s (missing: %s; wrong: %s; twice: %s; not expected: %s); the live reader saw %d windows again\n%s",
				name, rep.Verify, first(missing), first(wrong), first(dups), first(extra), liveDups, c.f.log)
		}
	}
	return c
}

// runChaosFleet starts c's three first instances, then goes through its
// instance changes until deadline (one kind only when only names one of
// fleetEvents), a pause of 1 to 3 s after each.
func runChaosFleet(t *testing.T, c *chaosFleet, rng *rand.Rand, deadline time.Time, only string) {
	for _, n := range []string{"a", "b", "c"} {
		c.f.start(n)
	}
	fixed := slices.Index(fleetEvents, only)
	for i := 0; time.Now().Before(deadline) && !t.Failed(); i++ {
		ev := i
		if fixed >= 0 {
			ev = fixed
		}
		if kind, did := c.f.chaosEvent(rng, ev); kind != "" {
			c.events[kind]++
			t.Logf("%s %s: %s", time.Now().UTC().Format("15:04:05.000"), c.name, did)
		}
		time.Sleep(time.Duration(1000+rng.IntN(2000)) * time.Millisecond)
		c.restartExited()
	}
}

// restartExited starts again the instances of c that ended on their own
// while starting, before they joined the group: the broker restarts of
// the chaos run make a start fail now and then (a refused or closed
// connection while an instance lists its topics), and `onceflow run`
// gives up then, as the single-instance jobs of the run do, which are
// started again too. An instance that ends once started fails the test.
func (c *chaosFleet) restartExited() {
	t := c.f.t
	for n, out := range c.f.exited() {
		if out.started {
			t.Errorf("%s: instance %s ended on its own: %s", c.name, n, out)
			continue
		}
		c.events["exit-while-starting"]++
		last := strings.TrimSpace(out.tail)
		last = last[strings.LastIndexByte(last, '\n')+1:]
		t.Logf("%s %s: instance %s ended while starting (%s): started again", time.Now().UTC().Format("15:04:05.000"), c.name, n, last)
		c.f.start(n)
	}
}

// finishChaosFleet lets c catch up on its input and repartition topic
// after the faults and the input stopped, checks it and stops it.
func finishChaosFleet(t *testing.T, ctx context.Context, adm *kadm.Client, addr string, c *chaosFleet) *ChaosScaleOutReport {
	c.restartExited()
	if c.end != nil {
		c.end(t, addr)
	}
	waitCaughtUp(t, adm, c.name, c.input, c.f)
	waitCaughtUp(t, adm, c.name, c.name+"-repartition-1", c.f)
	rep := &ChaosScaleOutReport{Events: c.events}
	c.check(t, ctx, addr, rep)
	c.f.mu.Lock()
	rep.InstanceStarts, rep.MaxInstances = c.f.starts, c.f.most
	c.f.mu.Unlock()
	return rep
}
