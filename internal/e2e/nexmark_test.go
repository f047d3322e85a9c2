package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/nexmark"
	"github.com/onceflow/onceflow/internal/nexmark/queries"
)

// TestNexmarkCrash: the Nexmark query q1 (internal/nexmark/queries, in
// SQL, its default language: compiled by the planner), as
// `onceflow run` SIGKILLed at random moments against `onceflow broker`,
// over events `onceflow nexmark generate` wrote: its read_committed output
// equals the reference computation over the same events, record for record
// as a multiset, as after a run without kills (internal/cli's
// TestNexmarkQueriesMatchReference). docs/benchmarks.md, "Nexmark
// queries".
func TestNexmarkCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end crash test skipped in -short mode")
	}
	events, kills := int64(100_000), 5
	if os.Getenv("ONCEFLOW_LONG") != "" {
		events, kills = 1_000_000, 30
	}
	nexmarkCrash(t, "q1", events, kills, false)
}

// TestNexmarkCrashQ5: the same for q5, hot items, a join of an updating
// result (the maximum count per window) whose output is a changelog:
// the folded output equals the reference after SIGKILLs.
func TestNexmarkCrashQ5(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end crash test skipped in -short mode")
	}
	events, kills := int64(50_000), 3
	if os.Getenv("ONCEFLOW_LONG") != "" {
		events, kills = 400_000, 15
	}
	nexmarkCrash(t, "q5", events, kills, true)
}

// nexmarkCrash runs query q over events with kills SIGKILLs and checks
// its output; windowed: the query's windows close at the end of its
// input, so the last run reads the input bounded and runs to its end.
func nexmarkCrash(t *testing.T, q string, events int64, kills int, windowed bool) {
	const genSeed = 5
	rng := seed(t)
	dir := t.TempDir()
	addr := startBroker(t, filepath.Join(dir, "broker"))
	bin := binary(t)
	gen := exec.Command(bin, "nexmark", "generate", "--brokers", addr, "--topic", "in", "--partitions", "8",
		"--events", strconv.FormatInt(events, 10), "--seed", strconv.Itoa(genSeed), "--progress", "0")
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("nexmark generate: %v\n%s", err, out)
	}
	out := "out-nexmark-" + q
	createTopic(t, addr, out, 4)
	file := filepath.Join(dir, q+".yaml")
	write := func(bounded bool) {
		job, err := queries.Job(q, queries.Overrides{
			Brokers: []string{addr}, Input: "in", Group: "nexmark-" + q, Output: out,
			StateDir: filepath.Join(dir, "state"), Backend: os.Getenv("ONCEFLOW_TEST_STATE_BACKEND"),
			Interval: 100 * time.Millisecond, Bounded: bounded,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, job, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(false)
	r := &jobRunner{t: t, bin: bin, file: file, log: &logWriter{t: t, name: q}}
	start := time.Now()
	if windowed {
		r.killAtRandom(rng, kills, 300, 900)
		write(true)
		r.runToEnd()
	} else {
		r.crashAndFinish(rng, kills, addr, "nexmark-"+q)
	}
	t.Logf("%s over %d events: %d kills and the final run took %v", q, events, kills, time.Since(start).Round(time.Millisecond))
	recs := readCommitted(t, addr, out)
	values := make([]queries.Output, len(recs))
	for i, rec := range recs {
		values[i] = queries.Output{Key: []byte(rec.Key), Value: []byte(rec.Value)}
		if rec.Value == "" {
			values[i].Value = nil // a tombstone
		}
	}
	if err := queries.Verify(q, nexmark.Config{Seed: genSeed}, events, values); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d output records, their result equal to the reference", q, len(values))
}
