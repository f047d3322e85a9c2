package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/nexmark"
	"github.com/onceflow/onceflow/internal/nexmark/queries"
)

// The Nexmark queries' job files (internal/nexmark/queries), each run on
// 10,000 generated events from a topic of 8 partitions into Kafka with
// exactly-once checkpoints: the committed output equals the reference
// computation (queries.Expected) over the same events, record for record
// as a multiset. docs/benchmarks.md, "Nexmark queries".
func TestNexmarkQueriesMatchReference(t *testing.T) {
	const events, seed = 10_000, 11
	c := kafkatest.Start(t, broker.Config{})
	if code, _, stderr := runMain("nexmark", "generate", "--brokers", c.Addr, "--events", strconv.Itoa(events),
		"--seed", strconv.Itoa(seed), "--progress", "0"); code != 0 {
		t.Fatalf("nexmark generate: exit %d\n%s", code, stderr)
	}
	g, err := nexmark.New(nexmark.Config{Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	names := queries.Names()
	if len(names) < 3 {
		t.Fatalf("queries %v: want at least q0, q1, q2", names)
	}
	for _, q := range names {
		t.Run(q, func(t *testing.T) {
			kept := 0
			for k := range int64(events) {
				e := g.At(k)
				if ok, err := queries.Selects(q, &e); err != nil {
					t.Fatal(err)
				} else if ok {
					kept++
				}
			}
			if kept == 0 || kept == events {
				t.Fatalf("the reference keeps %d of %d events: a query that keeps none or all proves little here", kept, events)
			}
			out := "nexmark-" + q
			c.CreateTopic(t, out, 4)
			dir := t.TempDir()
			src, err := queries.File(q)
			if err != nil {
				t.Fatal(err)
			}
			job, err := queries.Instantiate(src, queries.Overrides{
				Brokers: []string{c.Addr}, Input: "nexmark", Output: out, StateDir: filepath.Join(dir, "state"),
				Bounded: true, Interval: 100 * time.Millisecond, // several checkpoints in the run
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
			var values [][]byte
			for _, r := range c.ReadCommittedRecords(t, out) {
				values = append(values, r.Value)
			}
			if err := queries.Verify(q, nexmark.Config{Seed: seed}, events, values); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d of %d events out, equal to the reference", q, len(values), events)
		})
	}
}

// nexmark run, in this process (--cpuprofile: the test binary cannot be
// started as onceflow), on a broker of the test's: it loads the events,
// runs q2 into Kafka and discarded, checks each output's count against
// the reference and prints the table.
func TestNexmarkRunSmall(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{})
	dir := t.TempDir()
	code, stdout, stderr := runMain("nexmark", "run", "--brokers", c.Addr, "--events", "3000", "--query", "q2",
		"--backends", "memory", "--checkpoint-interval", "200ms", "--progress", "0", "--cpuprofile", filepath.Join(dir, "prof"))
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, want := range []string{`franz-go txn loop \(ceiling\) +- +kafka +3000 `, `q2 +memory +kafka +\d+ `, `q2 +memory +discard +0 `, `1\.00×`} {
		if !regexp.MustCompile(want).MatchString(stdout) {
			t.Errorf("the table has no line matching %q:\n%s", want, stdout)
		}
	}
	for _, sink := range []string{"kafka", "discard"} {
		if st, err := os.Stat(filepath.Join(dir, "prof-q2-memory-"+sink+".pprof")); err != nil || st.Size() == 0 {
			t.Errorf("no CPU profile of the %s run: %v", sink, err)
		}
	}
	if code, _, stderr := runMain("nexmark", "run", "--brokers", c.Addr, "--events", "10", "--query", "q99"); code != 2 || !strings.Contains(stderr, `no query "q99"`) {
		t.Errorf("--query q99: exit %d\n%s", code, stderr)
	}
}
