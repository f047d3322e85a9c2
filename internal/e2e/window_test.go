package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
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
