package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/testbreak"
	"github.com/onceflow/onceflow/internal/verify"
)

// TestCheckerCatchesBrokenEngine shows that the checker can fail: the same
// crash scenario that passes with the real engine is run with a test-only
// switch that breaks one rule of the protocol, and the verifier must report
// anomalies.
func TestCheckerCatchesBrokenEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	for _, brk := range []string{testbreak.NoRewind, testbreak.OffsetsOutsideTxn, testbreak.NoFencing} {
		t.Run(brk, func(t *testing.T) {
			rng := seed(t)
			dir := t.TempDir()
			addr, _ := startBroker(t, filepath.Join(dir, "broker"))
			createTopic(t, addr, "in", 4)
			createTopic(t, addr, "out-broken", 4)
			const records = 30_000
			produceInput(t, addr, "in", records, 100)
			file := writeJob(t, dir, "broken", addr, "")
			lw := &logWriter{t: t, name: "job"}
			start := func() (*exec.Cmd, chan error) {
				cmd := exec.Command(binary(t), "run", file)
				cmd.Env = append(os.Environ(), testbreak.EnvVar+"="+brk)
				cmd.Stderr = lw
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() { done <- cmd.Wait() }()
				return cmd, done
			}
			// A few kills at random moments after the job got going.
			for i := 0; i < 4; i++ {
				cmd, done := start()
				select {
				case <-done:
				case <-time.After(time.Duration(400+rng.IntN(400)) * time.Millisecond):
					if brk == testbreak.NoFencing && i%2 == 0 {
						// A paused zombie: with fencing off its open
						// transaction is never aborted by the next one.
						_ = cmd.Process.Signal(syscall.SIGSTOP)
						next, nextDone := start()
						time.Sleep(500 * time.Millisecond)
						_ = cmd.Process.Signal(syscall.SIGCONT)
						time.Sleep(500 * time.Millisecond)
						_ = next.Process.Signal(syscall.SIGKILL)
						<-nextDone
					}
					_ = cmd.Process.Signal(syscall.SIGKILL)
					<-done
				}
			}
			cmd, done := start()
			deadline := time.Now().Add(2 * time.Minute)
			for time.Now().Before(deadline) {
				select {
				case <-done:
					cmd, done = start()
				case <-time.After(300 * time.Millisecond):
				}
				if caughtUp(t, nil, "broken", "in", addr) {
					break
				}
			}
			_ = cmd.Process.Signal(syscall.SIGTERM)
			<-done
			rep, err := verify.Run(context.Background(), verify.Config{Brokers: []string{addr}, Input: "in", Output: "out-broken", SentinelTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK() {
				t.Fatalf("the checker found nothing wrong with a broken engine (%s):\n%s\njob log:\n%s", brk, rep, lw)
			}
			t.Logf("caught %s:\n%s", brk, rep)
		})
	}
}
