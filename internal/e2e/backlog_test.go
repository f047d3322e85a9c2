package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/onceflow/onceflow/internal/kafkatest"
)

// TestKilledEvery3sUnderBacklogProgresses: a keyed job on Pebble (50k
// keys, 1 s checkpoints) starts with a backlog of records in Kafka and is
// SIGKILLed every 3 seconds.
// Each run must commit a checkpoint before it is killed, so every
// restore is from a newer checkpoint than the one before: a checkpoint's
// barrier waits behind the records in flight, which the sources' yielding
// and the exchanges' in-flight target bound in time, not behind the
// backlog (docs/design.md, "Checkpoints under backpressure"). The counts
// per key are exact in the end. 600k records and 4 kills; 1M records and
// 20 kills with ONCEFLOW_LONG. Before the change main's build failed it
// (restores [0 1 1 2 3]: checkpoints waited behind a poll of 10,000
// records and the channels' 8 batches of 512 per sender).
func TestKilledEvery3sUnderBacklogProgresses(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end crash test skipped in -short mode")
	}
	records, kills := 600_000, 4
	if os.Getenv("ONCEFLOW_LONG") != "" {
		records, kills = 1_000_000, 20
	}
	const keys = 50_000
	dir := t.TempDir()
	addr := startBroker(t, filepath.Join(dir, "broker"))
	createTopic(t, addr, "in", 4)
	createTopic(t, addr, "out-backlog", 4)
	produceInput(t, addr, "in", records, keys)
	file := writeJobFile(t, dir, "backlog", addr, "pipeline:\n"+
		"  - map: { value: '{\"seq\": int(raw[4:]), \"user\": key}' }\n"+
		"  - aggregate: { key: value.user, fields: { n: \"count()\" } }\n"+
		"  - map: { value: 'string(value.n)', format: raw }",
		fmt.Sprintf(`sink:
  topic: out-backlog
  delivery: exactly-once
checkpointing:
  interval: 1s
  mode: exactly-once
  timeout: 1m
state:
  dir: %s
  backend: pebble
restart:
  strategy: none
`, filepath.Join(dir, "state")))
	adm := kadm.NewClient(client(t, addr))
	restoring := regexp.MustCompile(`msg=restoring .*checkpoint=(\d+)`)
	var (
		restored       []int64 // per run: the checkpoint it restored (0: none)
		underBacklog   int     // kills while input was left
		lastRestoredID int64
		lastLog        string
	)
	run := func(i int, kill bool) {
		var stderr syncBuffer
		cmd := exec.Command(binary(t), "run", file)
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		if kill {
			select {
			case err := <-done:
				t.Fatalf("run %d exited on its own: %v\n%s", i+1, err, stderr.String())
			case <-time.After(3 * time.Second):
			}
			if !kafkatest.CaughtUp(t.Context(), adm, "backlog", "in") {
				underBacklog++
			}
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
		} else {
			deadline := time.Now().Add(3 * time.Minute)
			// SIGTERM before the job handles it would kill it: wait for
			// the line it logs once it does.
			for !strings.Contains(stderr.String(), "job started") || !kafkatest.CaughtUp(t.Context(), adm, "backlog", "in") {
				if time.Now().After(deadline) {
					t.Fatalf("the final run did not finish the input within 3 minutes\n%s", stderr.String())
				}
				time.Sleep(200 * time.Millisecond)
			}
			_ = cmd.Process.Signal(syscall.SIGTERM)
			if err := <-done; err != nil {
				t.Fatalf("graceful stop: %v\n%s", err, stderr.String())
			}
		}
		id := int64(0)
		if m := restoring.FindStringSubmatch(stderr.String()); m != nil {
			id, _ = strconv.ParseInt(m[1], 10, 64)
		}
		restored = append(restored, id)
		if i > 0 && id <= lastRestoredID {
			t.Errorf("run %d restored checkpoint %d, run %d had restored %d: run %d was killed 3 s into a backlog without committing a checkpoint (restores so far %v); its log:\n%s", i+1, id, i, lastRestoredID, i, restored, lastLog)
		}
		lastRestoredID, lastLog = id, stderr.String()
	}
	for i := range kills {
		run(i, true)
	}
	run(kills, false)
	t.Logf("%d records, killed every 3 s: restored checkpoints %v; %d of %d kills with input left", records, restored, underBacklog, kills)
	if underBacklog == 0 {
		t.Fatalf("the job read its whole input before the first kill: no kill was under a backlog, the test proved nothing")
	}
	out := readCommitted(t, addr, "out-backlog")
	if !kafkatest.CheckCounts(t, "franz-go", out, keys, records/keys) {
		t.FailNow()
	}
}

// syncBuffer is a bytes.Buffer safe for a child's stderr and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
