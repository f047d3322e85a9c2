//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package dirlock

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// With no grace for a live holder, Lock still waits for a killed one: the
// holder is seen as dying right after kill(2), not merely waited out.
func TestLockWaitSeesKilledHolderDying(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("a killed but unreaped process is told from a live one through /proc")
	}
	path := filepath.Join(t.TempDir(), "LOCK")
	holder := startHolder(t, path, holderHeapMB)
	if err := holder.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	release, err := LockWait(path, deadHolderWait, 0)
	if err != nil {
		t.Fatalf("LockWait right after the holder was killed: %v (after %v)", err, time.Since(start))
	}
	release()
	t.Logf("LockWait waited %v for the killed holder", time.Since(start))
}

// With no grace for a live holder, it is refused at once; a second Lock in
// this process counts as a live holder too.
func TestLockWaitRefusesLiveHolderAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "LOCK")
	release, err := Lock(path)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	start := time.Now()
	_, err = LockWait(path, time.Minute, 0)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "pid") {
		t.Fatalf("second LockWait: %v, want ErrLocked with a pid", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("refused after %v, want at once", d)
	}
}

func TestHolderDying(t *testing.T) {
	if holderDying(0) || holderDying(os.Getpid()) {
		t.Fatal("an unknown pid or our own counts as dying")
	}
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Skip(err)
	}
	defer sleep.Process.Kill()
	pid := sleep.Process.Pid
	if holderDying(pid) {
		t.Fatal("a sleeping process counts as dying")
	}
	if err := sleep.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS == "linux" && !holderDying(pid) {
		t.Fatal("a process just sent SIGKILL does not count as dying")
	}
	_ = sleep.Wait()
	if !holderDying(pid) {
		t.Fatal("a reaped process does not count as dying")
	}
	if runtime.GOOS != "linux" {
		return
	}
	// A process that exited on its own stays a zombie until reaped.
	exited := exec.Command("true")
	if err := exited.Start(); err != nil {
		t.Fatal(err)
	}
	defer exited.Wait()
	pid = exited.Process.Pid
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			t.Fatal(err)
		}
		if s := string(b); strings.HasPrefix(s[strings.LastIndexByte(s, ')'):], ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no zombie: %s", b)
		}
	}
	if !holderDying(pid) {
		t.Fatal("a zombie does not count as dying")
	}
}
