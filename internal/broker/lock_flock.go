//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package broker

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// lockDir takes an exclusive flock on path. The kernel drops the lock when
// the process dies, so a crashed broker never leaves a stale lock behind.
func lockDir(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			if pid := strings.TrimSpace(string(holder)); pid != "" {
				return nil, fmt.Errorf("%w (pid %s); stop it or choose another data dir", ErrDataDirInUse, pid)
			}
			return nil, fmt.Errorf("%w; stop it or choose another data dir", ErrDataDirInUse)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	// The pid only makes the "in use" error more helpful; failing to write
	// it does not weaken the lock.
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { f.Close() }, nil // closing the descriptor releases the flock
}
