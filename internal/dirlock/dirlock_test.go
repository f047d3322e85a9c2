package dirlock

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMain turns the test binary into a lock holder when DIRLOCK_HOLDER is
// set (see startHolder).
func TestMain(m *testing.M) {
	if path := os.Getenv("DIRLOCK_HOLDER"); path != "" {
		mb, _ := strconv.Atoi(os.Getenv("DIRLOCK_HEAP_MB"))
		holdLock(path, mb)
	}
	os.Exit(m.Run())
}

// holdLock takes the lock, touches every page of a heap of mb MiB (which
// makes the kernel's teardown of this process after a SIGKILL slow), says
// "ready" and holds on until stdin is closed.
func holdLock(path string, mb int) {
	release, err := Lock(path)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	heap := make([]byte, mb<<20)
	for i := 0; i < len(heap); i += 4096 {
		heap[i] = 1
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	runtime.KeepAlive(heap)
	release()
	os.Exit(0)
}

// holderHeapMB is the heap of a holder that is killed. Under -race its
// flock outlives the SIGKILL by about 30-65ms with it (1-5ms without), and
// it is touched in about 0.4s.
const holderHeapMB = 256

// startHolder starts a child process that holds the lock at path with a heap
// of mb MiB, and returns once it holds it.
func startHolder(t *testing.T, path string, mb int) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "DIRLOCK_HOLDER="+path, "DIRLOCK_HEAP_MB="+strconv.Itoa(mb))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait() // an error if the test waited already
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if line != "ready\n" {
		t.Fatalf("lock holder: %q, %v", line, err)
	}
	if b, _ := os.ReadFile(path); strings.TrimSpace(string(b)) != strconv.Itoa(cmd.Process.Pid) {
		t.Fatalf("lock file says %q, want the holder's pid %d", b, cmd.Process.Pid)
	}
	return cmd
}

// A second process cannot take the lock while the first holds it; the error
// names the holder's pid. (flock locks are per open file description, so a
// second Lock in the same process would be refused as well.)
func TestLockIsExclusive(t *testing.T) {
	if os.Getenv("DIRLOCK_CHILD") != "" {
		_, err := Lock(os.Getenv("DIRLOCK_CHILD"))
		if errors.Is(err, ErrLocked) && strings.Contains(err.Error(), "pid") {
			os.Exit(3)
		}
		os.Exit(0)
	}
	path := filepath.Join(t.TempDir(), "LOCK")
	release, err := Lock(path)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=TestLockIsExclusive")
	cmd.Env = append(os.Environ(), "DIRLOCK_CHILD="+path)
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("second process took the lock (or failed otherwise): %v", err)
	}
	release()
	cmd = exec.Command(os.Args[0], "-test.run=TestLockIsExclusive")
	cmd.Env = append(os.Environ(), "DIRLOCK_CHILD="+path)
	if err := cmd.Run(); err != nil {
		t.Fatalf("lock not released: %v", err)
	}
}

// `kill -9 $pid; onceflow run ...`: the kill is asynchronous and the kernel
// closes the killed process's files (dropping its flock) only after tearing
// down its address space, which takes a while for a large heap. The
// successor must wait for that rather than be refused.
func TestLockAfterSIGKILL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "LOCK")
	holder := startHolder(t, path, holderHeapMB)
	if err := holder.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	start := time.Now() // not reaped yet: Lock runs right after kill(2)
	release, err := Lock(path)
	waited := time.Since(start)
	if err != nil {
		t.Fatalf("Lock right after the holder was killed: %v (after %v)", err, waited)
	}
	defer release()
	t.Logf("Lock waited %v for the killed holder", waited)
	if err := holder.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("holder: %v, want killed", err)
	}
	if b, _ := os.ReadFile(path); strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("lock file says %q, want our pid %d", b, os.Getpid())
	}
}

// A live holder is still refused, after the short grace (not the long wait
// for a dying one), with its pid.
func TestLockRefusesLiveHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "LOCK")
	holder := startHolder(t, path, 0)
	start := time.Now()
	_, err := Lock(path)
	waited := time.Since(start)
	if want := fmt.Sprintf("(pid %d)", holder.Process.Pid); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Lock while a live process holds it: %v, want ErrLocked naming %s", err, want)
	}
	if waited > liveHolderWait+time.Second {
		t.Fatalf("refused after %v, want about %v", waited, liveHolderWait)
	}
	t.Logf("refused after %v: %v", waited, err)
}
