package failpoint

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// requireFaults skips a test that needs failpoints in a build without them.
func requireFaults(t *testing.T) {
	t.Helper()
	if !Available() {
		t.Skip("needs failpoints: run with -tags " + BuildTag + " (./scripts/test does)")
	}
}

func TestSpecAndFiring(t *testing.T) {
	requireFaults(t)
	t.Cleanup(func() { _ = Enable("") })
	if err := Inject(AfterSinkPrepare); err != nil {
		t.Fatalf("disabled failpoint fired: %v", err)
	}
	if err := Enable("after-sink-prepare=error@2; during-restore=error@every"); err != nil {
		t.Fatal(err)
	}
	if err := Inject(AfterSinkPrepare); err != nil {
		t.Fatal("fired on hit 1, want hit 2")
	}
	if err := Inject(AfterSinkPrepare); !errors.Is(err, ErrInjected) {
		t.Fatalf("hit 2: %v", err)
	}
	if err := Inject(AfterSinkPrepare); err != nil {
		t.Fatal("fired again on hit 3")
	}
	for i := 0; i < 3; i++ {
		if err := Inject(DuringRestore); err == nil {
			t.Fatal("@every did not fire")
		}
	}
	if got := Fired(); got[AfterSinkPrepare] != 1 || got[DuringRestore] != 3 {
		t.Fatalf("fired %v", got)
	}
	if err := Inject(BeforeEndTxn); err != nil {
		t.Fatal("unconfigured failpoint fired")
	}
}

func TestBadSpecs(t *testing.T) {
	requireFaults(t)
	t.Cleanup(func() { _ = Enable("") })
	for spec, want := range map[string]string{
		"nope=crash":              "unknown failpoint",
		"after-alignment":         "NAME=ACTION",
		"after-alignment=explode": "unknown action",
		"after-alignment=crash@0": "hit number",
	} {
		err := Enable(spec)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", spec, err, want)
		}
	}
}

// "stop" freezes the process at the failpoint until SIGCONT, then goes on:
// a child process stops itself, the parent sees it stopped, resumes it,
// and the child finishes normally.
func TestStopFreezesUntilContinued(t *testing.T) {
	requireFaults(t)
	if os.Getenv("FAILPOINT_STOP_CHILD") != "" {
		if err := Inject(BeforeEndTxn); err != nil {
			os.Exit(3)
		}
		os.Exit(0)
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc to see the child's state")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestStopFreezesUntilContinued$")
	cmd.Env = append(os.Environ(), "FAILPOINT_STOP_CHILD=1", EnvVar+"="+BeforeEndTxn+"=stop")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
		if err != nil {
			break
		}
		if f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])); len(f) > 0 && f[0] == "T" {
			stopped = true
			break
		}
	}
	if !stopped {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal("the child did not stop itself at the failpoint")
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the child did not go on after SIGCONT: %v", err)
	}
}
