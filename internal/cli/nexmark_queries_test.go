package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"

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
			var want []string
			for k := range int64(events) {
				e := g.At(k)
				out, ok, err := queries.Expected(q, &e)
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					want = append(want, out)
				}
			}
			if len(want) == 0 || len(want) == events {
				t.Fatalf("the reference keeps %d of %d events: a query that keeps none or all proves little here", len(want), events)
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
				Bounded: true, Interval: 100_000_000, // 100ms: several checkpoints in the run
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
			var got []string
			for _, r := range c.ReadCommittedRecords(t, out) {
				s, err := queries.Canonical(r.Value)
				if err != nil {
					t.Fatalf("%s partition %d offset %d: %v", out, r.Partition, r.Offset, err)
				}
				got = append(got, s)
			}
			if diff := multisetDiff(got, want); diff != "" {
				t.Fatalf("%s: %d records, the reference %d:\n%s", q, len(got), len(want), diff)
			}
			t.Logf("%s: %d of %d events out, equal to the reference", q, len(got), events)
		})
	}
}

// multisetDiff describes how got and want differ as multisets (up to
// five records each way), or returns "" when they are equal.
func multisetDiff(got, want []string) string {
	n := map[string]int{}
	for _, s := range want {
		n[s]++
	}
	for _, s := range got {
		n[s]--
	}
	var extra, missing []string
	for s, k := range n {
		for ; k < 0; k++ {
			extra = append(extra, s)
		}
		for ; k > 0; k-- {
			missing = append(missing, s)
		}
	}
	if len(extra) == 0 && len(missing) == 0 {
		return ""
	}
	sort.Strings(extra)
	sort.Strings(missing)
	return fmt.Sprintf("%d not in the reference (or more often), e.g. %q\n%d missing, e.g. %q",
		len(extra), extra[:min(5, len(extra))], len(missing), missing[:min(5, len(missing))])
}
