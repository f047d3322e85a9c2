package dirlock

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

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
