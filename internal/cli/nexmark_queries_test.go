package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/nexmark"
	"github.com/onceflow/onceflow/internal/nexmark/queries"
)

// The Nexmark queries (internal/nexmark/queries), in each language they
// are written in (Flink SQL compiled by the planner; the hand-written job
// files of q0 to q2), each run on 10,000 generated events from a topic of
// 8 partitions into Kafka with exactly-once checkpoints: the committed
// output equals the reference computation (queries.Reference) over the
// same events, record for record as a multiset, or for an updating
// query (q15 to q17) the last row of each group. The joins (q3, q7, q8,
// q20, q23) keep their rows longer than the run, so their output is the
// batch join's whatever order the sides meet in; q5's changelog (a join
// of an updating result) is folded first. The events are dated 100
// a second from 50 s before midnight, so they span 100 s of event time
// and two days: q11's sessions close and reopen, q15 to q17 have a group
// per day. q12 windows by processing time, so its windows depend on when
// the job handles each bid: its check is the invariants (queries.Verify)
// that each row is one 10 s window of a bidder, no window comes twice,
// and each bidder's counts over all windows sum to its bids. With
// ONCEFLOW_LONG=1, 200,000 events (2,000 s of event time).
// docs/benchmarks.md, "Nexmark queries".
func TestNexmarkQueriesMatchReference(t *testing.T) {
	const seed, rate = 11, 100
	events := 10_000
	if os.Getenv("ONCEFLOW_LONG") != "" {
		events = 200_000
	}
	base := time.Date(2026, 1, 1, 23, 59, 10, 0, time.UTC)
	cfg := nexmark.Config{Seed: seed, EventsPerSecond: rate, BaseTime: nexmark.TimestampOf(base)}
	c := kafkatest.Start(t, broker.Config{})
	if code, _, stderr := runMain("nexmark", "generate", "--brokers", c.Addr, "--events", strconv.Itoa(events),
		"--seed", strconv.Itoa(seed), "--event-rate", strconv.Itoa(rate), "--base-time", base.Format(time.RFC3339),
		"--progress", "0"); code != 0 {
		t.Fatalf("nexmark generate: exit %d\n%s", code, stderr)
	}
	names := queries.Names()
	for _, want := range []string{"q0", "q1", "q2", "q3", "q4", "q5", "q7", "q8", "q9", "q11", "q12", "q15", "q16", "q17", "q18", "q19", "q20", "q21", "q22", "q23"} {
		if !slices.Contains(names, want) {
			t.Errorf("queries %v: no %s", names, want)
		}
	}
	for _, q := range names {
		ref, err := queries.Reference(q, cfg, int64(events))
		if err != nil {
			t.Fatal(err)
		}
		rows := 0
		for _, k := range ref {
			rows += k
		}
		// A query that keeps no event or every one proves little here; a
		// per-day query over two days has at least two groups. A join
		// (q23) may make more rows than there are events.
		if rows < 2 || rows == events {
			t.Fatalf("%s: the reference makes %d rows of %d events", q, rows, events)
		}
		for _, lang := range queries.Langs(q) {
			t.Run(q+"."+lang, func(t *testing.T) {
				out := "nexmark-" + q + "-" + lang
				c.CreateTopic(t, out, 4)
				dir := t.TempDir()
				job, err := queries.Job(q+"."+lang, queries.Overrides{
					Job: out, Brokers: []string{c.Addr}, Input: "nexmark", Group: out, Output: out,
					StateDir: filepath.Join(dir, "state"),
					Bounded:  true, Interval: 100 * time.Millisecond, // several checkpoints in the run
				})
				if err != nil {
					t.Fatal(err)
				}
				file := filepath.Join(dir, q+".yaml")
				if err := os.WriteFile(file, job, 0o600); err != nil {
					t.Fatal(err)
				}
				if code, _, stderr := runMain("run", "--status-interval", "0", file); code != 0 {
					t.Fatalf("run %s: exit %d\n%s", q, code, stderr)
				}
				var values []queries.Output
				for _, r := range c.ReadCommittedRecords(t, out) {
					values = append(values, queries.Output{Key: r.Key, Value: r.Value})
				}
				if err := queries.Verify(q, cfg, int64(events), values); err != nil {
					t.Fatal(err)
				}
				if queries.ProcessingTime(q) {
					t.Logf("%s.%s: %d windows out, their counts add up to the reference's %d bids of %d events", q, lang, len(values), rows, events)
					return
				}
				t.Logf("%s.%s: %d records out (%d rows in the reference) of %d events, equal to the reference", q, lang, len(values), rows, events)
			})
		}
	}
}

// nexmark run, in this process (--cpuprofile: the test binary cannot be
// started as onceflow), on a broker of the test's: it loads the events,
// runs q2 in SQL and as a job file, q15 (an updating result) and q3 (a
// join, compiled to the named form) into Kafka and discarded, checks
// each output's count against the reference and prints the table.
func TestNexmarkRunSmall(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{})
	dir := t.TempDir()
	code, _, stderr := runMain("nexmark", "run", "--brokers", c.Addr, "--events", "3000", "--query", "q2,q15",
		"--lang", "sql,yaml", "--backends", "memory", "--checkpoint-interval", "200ms", "--progress", "0",
		"--cpuprofile", filepath.Join(dir, "prof"))
	if code == 0 || !strings.Contains(stderr, "query q15 has no yaml file") {
		t.Errorf("--query q15 --lang yaml: exit %d\n%s", code, stderr)
	}
	code, stdout, stderr := runMain("nexmark", "run", "--brokers", c.Addr, "--events", "3000", "--query", "q2.sql,q2.yaml,q15,q3",
		"--backends", "memory", "--checkpoint-interval", "200ms", "--progress", "0", "--cpuprofile", filepath.Join(dir, "prof"))
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	t.Logf("\n%s", stdout)
	for _, want := range []string{`franz-go txn loop \(ceiling\) +- +kafka +3000 `, `q2\.sql +memory +kafka +\d+ `,
		`q2\.sql +memory +discard +0 `, `q2\.yaml +memory +kafka +\d+ `, `q15\.sql +memory +kafka +\d+ `,
		`q3\.sql +memory +kafka +[1-9]\d* `, `q3\.sql +memory +discard +0 `, `1\.00×`} {
		if !regexp.MustCompile(want).MatchString(stdout) {
			t.Errorf("the table has no line matching %q:\n%s", want, stdout)
		}
	}
	for _, run := range []string{"q2-sql-memory-kafka", "q2-sql-memory-discard", "q2-yaml-memory-kafka", "q15-sql-memory-kafka", "q3-sql-memory-kafka"} {
		if st, err := os.Stat(filepath.Join(dir, "prof-"+run+".pprof")); err != nil || st.Size() == 0 {
			t.Errorf("no CPU profile of the %s run: %v", run, err)
		}
	}
	if code, _, stderr := runMain("nexmark", "run", "--brokers", c.Addr, "--events", "10", "--query", "q99"); code != 2 || !strings.Contains(stderr, `no query "q99"`) {
		t.Errorf("--query q99: exit %d\n%s", code, stderr)
	}
}
