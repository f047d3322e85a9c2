package cli

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/nexmark"
)

// checkNexmarkTopic checks that topic holds exactly the first n events of
// seed's generator, event k at partition k%parts, offset k/parts.
func checkNexmarkTopic(t *testing.T, c kafkatest.Cluster, topic string, seed int64, n, parts int) {
	t.Helper()
	g, err := nexmark.New(nexmark.Config{Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	recs := c.ReadCommittedRecords(t, topic)
	if len(recs) != n {
		t.Fatalf("%s holds %d records, want %d", topic, len(recs), n)
	}
	for _, r := range recs {
		k := r.Offset*int64(parts) + int64(r.Partition)
		e := g.At(k)
		if want := e.AppendJSON(nil); !bytes.Equal(r.Value, want) {
			t.Fatalf("%s partition %d offset %d holds\n%s\nwant event %d\n%s", topic, r.Partition, r.Offset, r.Value, k, want)
		}
	}
}

// kcatCount counts the records of topic with kcat (librdkafka), an
// independent client.
func kcatCount(t *testing.T, addr, topic string) int {
	t.Helper()
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat not installed (./scripts/test installs it): skipping the cross-client count")
	}
	cmd := exec.Command("kcat", "-C", "-b", addr, "-t", topic, "-e", "-q", "-f", "%p %o\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat: %v\n%s", err, stderr.String())
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line != "" {
			seen[line] = true
		}
	}
	return len(seen)
}

// nexmark generate creates the topic, writes the generator's events in
// turn to its partitions, refuses a topic that holds records unless
// --append, and continues one with --start-event.
func TestNexmarkGenerate(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{})
	code, out, errOut := runMain("nexmark", "generate", "--brokers", c.Addr, "--topic", "nx", "--events", "5000",
		"--partitions", "3", "--seed", "7", "--progress", "0")
	if code != 0 {
		t.Fatalf("nexmark generate: %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"wrote 5000 Nexmark events to nx (3 partitions)", "100 people, 300 auctions, 4600 bids",
		"seed 7, events 0 to 4999, event time 2026-01-01 00:00:00.000 to 2026-01-01 00:00:00.499"} {
		if !strings.Contains(out, want) {
			t.Errorf("the summary lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "created topic nx (3 partitions)") {
		t.Errorf("stderr: %s", errOut)
	}
	checkNexmarkTopic(t, c, "nx", 7, 5000, 3)

	code, out, errOut = runMain("nexmark", "generate", "--brokers", c.Addr, "--topic", "nx", "--events", "10", "--seed", "7")
	if code != 1 || !strings.Contains(errOut, "nx holds 5000 records already") {
		t.Errorf("a second run without --append: %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runMain("nexmark", "generate", "--brokers", c.Addr, "--topic", "nx", "--events", "1000",
		"--seed", "7", "--append", "--start-event", "5000", "--progress", "0")
	if code != 0 || !strings.Contains(out, "events 5000 to 5999") {
		t.Fatalf("--append --start-event 5000: %d\n%s%s", code, out, errOut)
	}
	checkNexmarkTopic(t, c, "nx", 7, 6000, 3)
	if n := kcatCount(t, c.Addr, "nx"); n != 6000 {
		t.Errorf("kcat reads %d records of nx, want 6000", n)
	}
}

func TestNexmarkGenerateUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"nexmark"}, "use nexmark generate"},
		{[]string{"nexmark", "generate"}, "--events N"},
		{[]string{"nexmark", "generate", "--events", "5", "--partitions", "0"}, "--partitions 0"},
		{[]string{"nexmark", "generate", "--events", "5", "--compression", "brotli"}, "--compression"},
		{[]string{"nexmark", "generate", "--events", "5", "--base-time", "yesterday"}, "--base-time"},
		{[]string{"nexmark", "generate", "--events", "5", "--event-rate", "-3"}, "EventsPerSecond"},
	} {
		code, _, errOut := runMain(tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: %d %s", tc.args, code, errOut)
		}
	}
}

// --rate holds the writes back: 300 events at 1000/s take 0.3 s at least.
func TestNexmarkGenerateRate(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{})
	began := time.Now()
	code, out, errOut := runMain("nexmark", "generate", "--brokers", c.Addr, "--topic", "slow", "--events", "300",
		"--partitions", "1", "--rate", "1000", "--progress", "100ms")
	took := time.Since(began)
	if code != 0 {
		t.Fatalf("%d\n%s%s", code, out, errOut)
	}
	if took < 290*time.Millisecond {
		t.Errorf("300 events at --rate 1000 took %v, want at least 0.3 s", took)
	}
	if !strings.Contains(errOut, "events/s, ETA") {
		t.Errorf("no progress on stderr:\n%s", errOut)
	}
	checkNexmarkTopic(t, c, "slow", 0, 300, 1)
}

// An interrupt stops the writing: what was written is the generator's
// events, each at its place, and the command says it was cut short.
func TestNexmarkGenerateInterrupted(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	var out, errOut bytes.Buffer
	code := Main(ctx, []string{"nexmark", "generate", "--brokers", c.Addr, "--topic", "cut", "--events", "100000",
		"--partitions", "2", "--rate", "2000", "--progress", "0"}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "interrupted") || out.Len() > 0 {
		t.Fatalf("interrupted: %d\n%s%s", code, out.String(), errOut.String())
	}
	g, err := nexmark.New(nexmark.Config{})
	if err != nil {
		t.Fatal(err)
	}
	recs := c.ReadCommittedRecords(t, "cut")
	if len(recs) == 0 || len(recs) >= 100000 {
		t.Fatalf("the interrupted run wrote %d records", len(recs))
	}
	for _, r := range recs {
		e := g.At(r.Offset*2 + int64(r.Partition))
		if !bytes.Equal(r.Value, e.AppendJSON(nil)) {
			t.Fatalf("partition %d offset %d is not the generator's event", r.Partition, r.Offset)
		}
	}
}
