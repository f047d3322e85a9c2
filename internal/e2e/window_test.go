package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/failpoint"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// TestCrashKafkaWindows: an event-time window job (`onceflow run`) against
// `onceflow broker`, crashed before EndTxn (windows fired, their results
// in the open transaction) and SIGKILLed at random moments while windows
// open and fire; then run to the end of its input as a bounded job, whose
// end fires the last windows. Every window of the input must be in the
// read_committed output once, with its count computed from the input,
// as franz-go and kcat read it.
func TestCrashKafkaWindows(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end crash test skipped in -short mode")
	}
	records, kills := e2eSize()
	records /= 4
	kills /= 2
	const keys, size = 200, int64(10_000)
	rng := seed(t)
	dir := t.TempDir()
	addr := startBroker(t, filepath.Join(dir, "broker"))
	createTopic(t, addr, "in", 4)
	createTopic(t, addr, "out-win", 4)

	// Event times 5 ms apart, each up to 1.5 s early: out of order within
	// the job's 3 s bound, so no record is late, in any partition.
	base := int64(1_700_000_000_000)
	want := map[string]int64{}
	cl := client(t, addr, kgo.DefaultProduceTopic("in"), kgo.ProducerLinger(5*time.Millisecond))
	recs := make([]*kgo.Record, 0, records)
	for i := 0; i < records; i++ {
		ts := base + int64(i)*5 - rng.Int64N(1500)
		k := "k" + strconv.Itoa(rng.IntN(keys))
		want[k+"@"+strconv.FormatInt(ts-ts%size, 10)]++
		recs = append(recs, &kgo.Record{Key: []byte(k), Value: []byte("seq-" + strconv.Itoa(i)), Timestamp: time.UnixMilli(ts)})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	t.Logf("produced %d records, %d windows; %d kills", records, len(want), kills)

	file := writeJob(t, dir, "win", addr, "event-time:\n  max-out-of-orderness: 3s\npipeline:\n"+
		"  - window: { key: record.key, size: 10s, fields: { n: \"count()\" } }")
	lw := &logWriter{t: t, name: "win"}
	start := func(file string, env ...string) (*exec.Cmd, chan error) {
		cmd := exec.Command(binary(t), "run", file)
		cmd.Env = append(os.Environ(), env...)
		cmd.Stderr = lw
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		return cmd, done
	}
	// A crash between the windows firing and the commit point.
	_, done := start(file, failpoint.EnvVar+"="+failpoint.BeforeEndTxn+"=crash@"+strconv.Itoa(2+rng.IntN(4)))
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("the job with failpoint %s ended with %v, want killed by its failpoint\n%s", failpoint.BeforeEndTxn, err, lw)
		}
	case <-time.After(time.Minute):
		t.Fatalf("failpoint %s never fired\n%s", failpoint.BeforeEndTxn, lw)
	}
	for i := 0; i < kills; i++ {
		cmd, done := start(file)
		select {
		case err := <-done:
			t.Fatalf("job exited on its own before kill %d: %v\n%s", i+1, err, lw)
		case <-time.After(time.Duration(150+rng.IntN(500)) * time.Millisecond):
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
		}
	}
	// The last run reads to the end offsets and ends: the end of a
	// bounded input fires every window left open.
	editJob(t, file, "  startup: earliest\n", "  startup: earliest\n  bounded: true\n")
	_, done = start(file)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("bounded final run: %v\n%s", err, lw)
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("the bounded final run did not end within 3 minutes\n%s", lw)
	}
	check := func(client string, out []kafkatest.Record) {
		t.Helper()
		got := map[string]int64{}
		for _, r := range out {
			var w struct {
				Key         string `json:"key"`
				WindowStart int64  `json:"window_start"`
				WindowEnd   int64  `json:"window_end"`
				N           int64  `json:"n"`
			}
			if err := json.Unmarshal([]byte(r.Value), &w); err != nil {
				t.Fatalf("%s: output %q is not a window result: %v", client, r.Value, err)
			}
			if w.Key != r.Key || w.WindowEnd-w.WindowStart != size {
				t.Fatalf("%s: output %q under key %q: wrong key or window", client, r.Value, r.Key)
			}
			id := w.Key + "@" + strconv.FormatInt(w.WindowStart, 10)
			if _, dup := got[id]; dup {
				t.Fatalf("%s: window %s emitted twice", client, id)
			}
			got[id] = w.N
		}
		var missing, wrong []string
		for id, n := range want {
			if g, ok := got[id]; !ok {
				missing = append(missing, id)
			} else if g != n {
				wrong = append(wrong, id+": "+strconv.FormatInt(g, 10)+" want "+strconv.FormatInt(n, 10))
			}
		}
		if len(missing) > 0 || len(wrong) > 0 || len(got) != len(want) {
			t.Fatalf("%s: %d windows, want %d; missing %d (%s), wrong %d (%s)", client, len(got), len(want),
				len(missing), strings.Join(missing[:min(3, len(missing))], ", "), len(wrong), strings.Join(wrong[:min(3, len(wrong))], ", "))
		}
		t.Logf("%s: %d windows, each once with its count", client, len(got))
	}
	check("franz-go", readCommitted(t, addr, "out-win"))
	check("kcat", kcatRead(t, addr, "out-win"))
}

// TestRevenueExample runs the README's worked example as a user would:
// examples/revenue/revenue.yaml (pointed at this test's broker and
// directory, and bounded so the end of the input closes the last minute)
// over examples/revenue/orders.jsonl, produced with kcat. The committed
// output must be examples/revenue/expected.txt, as franz-go and kcat read
// it.
func TestRevenueExample(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat not installed (./scripts/test installs it)")
	}
	example := filepath.Join("..", "..", "examples", "revenue")
	dir := t.TempDir()
	addr := startBroker(t, filepath.Join(dir, "broker"))
	job, err := os.ReadFile(filepath.Join(example, "revenue.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "revenue.yaml")
	if err := os.WriteFile(file, job, 0o644); err != nil {
		t.Fatal(err)
	}
	editJob(t, file, "  brokers: [127.0.0.1:9092]\n", "  brokers: ["+addr+"]\n")
	editJob(t, file, "  startup: earliest\n", "  startup: earliest\n  bounded: true\n")
	if out, err := exec.Command(binary(t), "topic", "create", "--job", file, "--partitions", "2").CombinedOutput(); err != nil {
		t.Fatalf("topic create: %v\n%s", err, out)
	}
	if out, err := exec.Command("kcat", "-P", "-b", addr, "-t", "orders", "-l", filepath.Join(example, "orders.jsonl")).CombinedOutput(); err != nil {
		t.Fatalf("kcat -P: %v\n%s", err, out)
	}
	lw := &logWriter{t: t, name: "revenue"}
	cmd := exec.Command(binary(t), "run", file)
	cmd.Stderr = lw
	if err := cmd.Run(); err != nil {
		t.Fatalf("onceflow run: %v\n%s", err, lw)
	}
	want, err := os.ReadFile(filepath.Join(example, "expected.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for client, out := range map[string][]kafkatest.Record{
		"franz-go": readCommitted(t, addr, "revenue-per-minute"),
		"kcat":     kcatRead(t, addr, "revenue-per-minute"),
	} {
		lines := make([]string, len(out))
		for i, r := range out {
			lines[i] = r.Key + " " + r.Value
		}
		slices.Sort(lines)
		if got := strings.Join(lines, "\n") + "\n"; got != string(want) {
			t.Errorf("%s: the output\n%s\nis not examples/revenue/expected.txt:\n%s", client, got, want)
		}
	}
}
