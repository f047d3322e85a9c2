package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/verify"
)

// The broker stops answering (SIGSTOP: connections stay open, no request
// gets an answer) while the job commits checkpoints every 100ms. SIGTERM
// must end the job within --stop-timeout although a commit is stuck on the
// broker; after the broker comes back, the next start recovers and the
// output holds every input record exactly once. (Before commits had a
// deadline, the job waited inside the stuck commit for as long as the
// broker was gone.)
func TestStopWhileBrokerUnreachable(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	const stopTimeout = 5 * time.Second
	dir := t.TempDir()
	bin := binary(t)
	addr := freeAddr(t)
	brk := runBroker(t, addr, filepath.Join(dir, "broker"))
	createTopic(t, addr, "in", 2)
	createTopic(t, addr, "out-stuck", 2)
	produceInput(t, addr, "in", 20000, 100)
	file := writeJob(t, dir, "stuck", addr, "")
	lw := &logWriter{t: t, name: "job"}
	start := func() (*exec.Cmd, chan error) {
		cmd := exec.Command(bin, "run", "--stop-timeout", stopTimeout.String(), file)
		cmd.Stderr = lw
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		return cmd, done
	}
	adm := kadm.NewClient(client(t, addr))
	cmd, done := start()
	for deadline := time.Now().Add(time.Minute); groupCheckpoint(adm, "stuck") < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint committed within a minute\n%s", lw)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The broker freezes; within a few checkpoint intervals a commit is
	// waiting for an answer that does not come.
	if err := brk.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = brk.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	time.Sleep(time.Second)
	stopAt := time.Now()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		took := time.Since(stopAt)
		t.Logf("stopped %v after SIGTERM with the broker unreachable (stop timeout %v): %v", took.Round(time.Millisecond), stopTimeout, err)
		if err == nil {
			t.Error("the job exited 0 although it stopped without its final checkpoint")
		}
		if took > stopTimeout+time.Second {
			t.Errorf("the stop took %v, more than the stop timeout %v", took, stopTimeout)
		}
	case <-time.After(3 * stopTimeout):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the job did not stop within %v of SIGTERM while the broker was unreachable\n%s", 3*stopTimeout, lw)
	}

	if err := brk.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	produceRange(t, addr, "in", 20000, 5000, 100)
	cmd, done = start()
	for deadline := time.Now().Add(2 * time.Minute); !kafkatest.CaughtUp(t.Context(), adm, "stuck", "in"); {
		select {
		case err := <-done:
			t.Fatalf("the restarted job exited: %v\n%s", err, lw)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restarted job did not catch up within 2 minutes\n%s", lw)
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := <-done; err != nil {
		t.Fatalf("graceful stop: %v\n%s", err, lw)
	}
	rep, err := verify.Run(context.Background(), verify.Config{Brokers: []string{addr}, Input: "in", Output: "out-stuck"})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("after the restart:\n%s", rep)
	}
	t.Logf("verifier: %s", rep)
	if os.Getenv("ONCEFLOW_E2E_LOG") != "" {
		t.Logf("job log tail:\n%s", lw)
	}
}
