package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/failpoint"
	"github.com/onceflow/onceflow/internal/kafkatest"
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
	// "control" is the same scenario with the real engine: it must pass.
	for _, brk := range []string{"control", testbreak.NoRewind, testbreak.OffsetsOutsideTxn, testbreak.NoFencing} {
		t.Run(brk, func(t *testing.T) {
			rng := seed(t)
			dir := t.TempDir()
			addr := startBroker(t, filepath.Join(dir, "broker"))
			createTopic(t, addr, "in", 4)
			createTopic(t, addr, "out-broken", 4)
			produceInput(t, addr, "in", 10_000, 100)
			// Keep input flowing while the job is crashed, so every crash
			// falls in the middle of an epoch with records in flight.
			genCtx, stopGen := context.WithCancel(context.Background())
			genDone := make(chan struct{})
			go func() {
				defer close(genDone)
				cl := client(t, addr, kgo.DefaultProduceTopic("in"))
				for n := 10_000; genCtx.Err() == nil; n++ {
					_ = cl.ProduceSync(genCtx, &kgo.Record{Key: []byte("k" + strconv.Itoa(n%100)), Value: []byte("seq-" + strconv.Itoa(n))})
				}
			}()
			file := writeJob(t, dir, "broken", addr, "")
			// A short transaction timeout keeps the no-fencing wait
			// below (for the broker to abort the crashed transaction)
			// short; it must exceed interval + checkpoint timeout.
			editJob(t, file, "  delivery: exactly-once\n", "  delivery: exactly-once\n  transaction-timeout: 10s\n")
			editJob(t, file, "  timeout: 1m\n", "  timeout: 5s\n")
			lw := &logWriter{t: t, name: "job"}
			start := func(extra ...string) (*exec.Cmd, chan error) {
				jobFile := file
				if len(extra) > 0 && strings.HasSuffix(extra[0], ".yaml") {
					jobFile, extra = extra[0], extra[1:]
				}
				cmd := exec.Command(binary(t), "run", jobFile)
				cmd.Env = append(os.Environ(), extra...)
				if brk != "control" {
					cmd.Env = append(cmd.Env, testbreak.EnvVar+"="+brk)
				}
				cmd.Stderr = lw
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() { done <- cmd.Wait() }()
				return cmd, done
			}
			adm := kadm.NewClient(client(t, addr))
			// progressed waits for the run to commit its second
			// checkpoint: its first may come before any record was
			// written (the source just started), and a run killed
			// after only that one committed no output, which hides a
			// break that shows in what committed runs wrote (no-rewind
			// failed to show twice that way in loaded runs once
			// checkpoints got faster).
			progressed := func(done chan error) bool {
				before := groupCheckpoint(adm, "broken") + 1
				for end := time.Now().Add(30 * time.Second); time.Now().Before(end); {
					select {
					case <-done:
						return false
					case <-time.After(20 * time.Millisecond):
					}
					if groupCheckpoint(adm, "broken") > before {
						return true
					}
				}
				t.Fatalf("no checkpoint committed within 30s\n%s", lw)
				return false
			}
			// Crash mid-epoch a few times, once a checkpoint committed.
			// Committing offsets outside the transaction loses records
			// when the crash falls between that commit and EndTxn: the
			// failpoint puts it exactly there. Without fencing, the same
			// crash leaves a transaction holding an offset commit open
			// until the broker times it out, and the next start waits
			// for that; every variant crashes there once, so that wait
			// is always exercised, not only when a SIGKILL happens to
			// land in the window.
			for i := 0; i < 4; i++ {
				var extra []string
				if i == 0 {
					extra = append(extra, failpoint.EnvVar+"="+failpoint.BeforeEndTxn+"=crash@2")
				}
				cmd, done := start(extra...)
				if len(extra) > 0 {
					select {
					case <-done: // the failpoint crashed it
					case <-time.After(30 * time.Second):
						t.Fatalf("failpoint never fired\n%s", lw)
					}
					continue
				}
				if progressed(done) {
					time.Sleep(time.Duration(20+rng.IntN(60)) * time.Millisecond)
					_ = cmd.Process.Signal(syscall.SIGKILL)
					<-done
				}
			}
			if brk == "control" || brk == testbreak.NoFencing {
				// Fencing is what stops a zombie, and SIGKILL leaves
				// none: freeze one and let it come back.
				file = zombieRound(t, brk == "control", dir, file, start, adm, progressed, lw)
			}
			stopGen()
			<-genDone
			cmd, done := start()
			for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline) && !kafkatest.CaughtUp(t.Context(), adm, "broken", "in"); {
				select {
				case <-done:
					cmd, done = start()
				case <-time.After(300 * time.Millisecond):
				}
			}
			_ = cmd.Process.Signal(syscall.SIGTERM)
			<-done
			rep, err := verify.Run(context.Background(), verify.Config{Brokers: []string{addr}, Input: "in", Output: "out-broken", Sentinels: true, SentinelTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if brk == "control" {
				if !rep.OK() {
					t.Fatalf("the real engine failed the scenario:\n%s\njob log:\n%s", rep, lw)
				}
				return
			}
			if rep.OK() {
				t.Fatalf("the checker found nothing wrong with a broken engine (%s):\n%s\njob log:\n%s", brk, rep, lw)
			}
			t.Logf("caught %s:\n%s", brk, rep)
		})
	}
}

// zombieRound freezes an instance of the job after its sinks prepared an
// epoch (records in the open transaction, no offsets yet), starts its
// successor on a copy of its state directory — a job rescheduled on
// another machine while the first one is paused, not dead — waits until
// the successor committed a checkpoint (it replayed the frozen epoch's
// input), then lets the zombie go on. With fencing the zombie's commit is
// refused; without it the zombie commits its epoch and the output holds
// those records twice; control says the engine is the real one, whose
// zombie must end fenced. It returns the successor's job file, which the test
// goes on with.
func zombieRound(t *testing.T, control bool, dir, file string, start func(...string) (*exec.Cmd, chan error), adm *kadm.Client, progressed func(chan error) bool, lw *logWriter) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// The zombie's transaction must outlive its pause (the broker would
	// abort it, and it could commit nothing), and so must its checkpoint.
	zombieFile := filepath.Join(dir, "zombie.yaml")
	zs := strings.Replace(string(b), "  transaction-timeout: 10s\n", "  transaction-timeout: 2m\n", 1)
	zs = strings.Replace(zs, "  timeout: 5s\n", "  timeout: 1m\n", 1)
	if err := os.WriteFile(zombieFile, []byte(zs), 0o644); err != nil {
		t.Fatal(err)
	}
	zombie, zdone := start(zombieFile, failpoint.EnvVar+"="+failpoint.AfterSinkPrepare+"=stop@3")
	defer func() {
		_ = zombie.Process.Signal(syscall.SIGCONT)
		_ = zombie.Process.Kill()
	}()
	for deadline := time.Now().Add(30 * time.Second); !processStopped(zombie.Process.Pid); {
		select {
		case err := <-zdone:
			t.Fatalf("the instance to freeze ended (%v) before its failpoint\n%s", err, lw)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the instance never froze at %s\n%s", failpoint.AfterSinkPrepare, lw)
		}
	}
	// The successor: the same job on a copy of the state directory.
	if out, err := exec.Command("cp", "-a", filepath.Join(dir, "state"), filepath.Join(dir, "state-next")).CombinedOutput(); err != nil {
		t.Fatalf("copy the state directory: %v: %s", err, out)
	}
	next := filepath.Join(dir, "next.yaml")
	ns := strings.Replace(string(b), "  dir: "+filepath.Join(dir, "state")+"\n", "  dir: "+filepath.Join(dir, "state-next")+"\n", 1)
	if ns == string(b) {
		t.Fatalf("%s has no state dir line", file)
	}
	if err := os.WriteFile(next, []byte(ns), 0o644); err != nil {
		t.Fatal(err)
	}
	succ, sdone := start(next)
	if !progressed(sdone) {
		t.Fatalf("the successor ended before it committed a checkpoint\n%s", lw)
	}
	if err := zombie.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Fenced, the zombie fails its commit and ends (restart: none);
	// unfenced, it commits and runs on beside the successor.
	fencedOff := false
	select {
	case err := <-zdone:
		fencedOff = err != nil
	case <-time.After(5 * time.Second):
		_ = zombie.Process.Kill()
		<-zdone
	}
	if control && (!fencedOff || !strings.Contains(lw.String(), "fenced")) {
		t.Fatalf("the zombie was not fenced off: it should fail its commit and end\n%s", lw)
	}
	_ = succ.Process.Signal(syscall.SIGTERM)
	<-sdone
	return next
}

// groupCheckpoint returns the newest checkpoint id in the group's offset
// metadata ("onceflow:<job>:<id>"), or -1.
func groupCheckpoint(adm *kadm.Client, group string) int64 {
	offs, err := adm.FetchOffsets(context.Background(), group)
	if err != nil {
		return -1
	}
	var id int64 = -1
	offs.Each(func(o kadm.OffsetResponse) {
		if i := strings.LastIndexByte(o.Metadata, ':'); i >= 0 {
			if v, err := strconv.ParseInt(o.Metadata[i+1:], 10, 64); err == nil && v > id {
				id = v
			}
		}
	})
	return id
}

// editJob replaces the line old of the job file with new.
func editJob(t *testing.T, file, old, new string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s has no line %q", file, old)
	}
	if err := os.WriteFile(file, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}
