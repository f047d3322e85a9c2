package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// offsets reset moves a stopped job back to the earliest offsets together
// with its state: refused while the job runs; afterwards the job reads its
// input again with empty dedupe state, so every key passes once more (the
// state agrees with the positions), the old state is kept aside, and the
// reset is forgotten once the first checkpoint from the new position
// committed.
func TestOffsetsResetToEarliest(t *testing.T) {
	dir := t.TempDir()
	addr := startBroker(t, filepath.Join(dir, "broker"))
	createTopic(t, addr, "in", 2)
	createTopic(t, addr, "out-reset", 1)
	produceInput(t, addr, "in", 200, 50)
	bin := binary(t)
	file := writeJob(t, dir, "reset", addr, "pipeline:\n  - dedupe: {key: record.key, ttl: 1h}")
	log := &logWriter{t: t, name: "job"}
	r := &jobRunner{t: t, bin: bin, file: file, log: log}
	cli := func(args ...string) (string, error) {
		var out bytes.Buffer
		c := exec.Command(bin, args...)
		c.Stdout, c.Stderr = &out, &out
		err := c.Run()
		return out.String(), err
	}
	// runUntil runs the job until the output holds want records, then
	// stops it with SIGTERM; reset is tried while it runs.
	runUntil := func(want int, whileRunning func()) {
		t.Helper()
		cmd, done := r.start()
		deadline := time.Now().Add(60 * time.Second)
		for len(readCommitted(t, addr, "out-reset")) < want {
			if time.Now().After(deadline) {
				t.Fatalf("output did not reach %d records\n%s", want, log)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if whileRunning != nil {
			whileRunning()
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := <-done; err != nil {
			t.Fatalf("job: %v\n%s", err, log)
		}
	}
	runUntil(50, func() {
		out, err := cli("offsets", "reset", "--job", file, "--to", "earliest")
		if err == nil || !strings.Contains(out, "is running") {
			t.Errorf("reset while the job runs: %v\n%s", err, out)
		}
	})
	out, err := cli("offsets", "reset", "--job", file, "--to", "earliest")
	if err != nil || !strings.Contains(out, "starts from earliest with empty state") {
		t.Fatalf("reset: %v\n%s", err, out)
	}
	archived, _ := filepath.Glob(filepath.Join(dir, "state", "reset.before-reset-*"))
	if len(archived) != 1 {
		t.Fatalf("the old state was not kept aside: %v", archived)
	}
	intent := filepath.Join(dir, "state", "reset.reset.json")
	if _, err := os.Stat(intent); err != nil {
		t.Fatal(err)
	}
	runUntil(100, nil)
	if got := readCommitted(t, addr, "out-reset"); len(got) != 100 {
		t.Errorf("after the reset the output holds %d records, want 100: each of the 50 keys once per run", len(got))
	}
	if _, err := os.Stat(intent); !os.IsNotExist(err) {
		t.Errorf("the reset intent is still there after a committed checkpoint: %v", err)
	}
	// Without a new reset the job resumes its own checkpoints: new input
	// only.
	produceRange(t, addr, "in", 250, 10, 1000) // keys k250..k259: new
	runUntil(110, nil)
	time.Sleep(500 * time.Millisecond)
	if got := readCommitted(t, addr, "out-reset"); len(got) != 110 {
		t.Errorf("the run after the reset: %d records, want 110 (the new keys once)", len(got))
	}
}
