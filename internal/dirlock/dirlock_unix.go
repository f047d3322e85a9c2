//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package dirlock

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Lock takes an exclusive flock on the file at path (created if missing)
// and writes this process's pid into it. The kernel drops the lock when the
// process dies, so a crash never leaves a stale lock; the returned func
// releases it.
//
// The kernel drops it only once the dead process's descriptors are closed,
// though, and a process killed with SIGKILL is torn down asynchronously
// (`kill -9 $pid; onceflow run ...` races it). So when the lock is busy,
// Lock reads the holder's pid from the file and keeps trying every 20ms:
//
//   - for up to 10s while the holder is dead or dying: kill(pid, 0) fails
//     with ESRCH, or, on Linux, /proc/<pid> shows a zombie (state Z or X),
//     an exiting task (PF_EXITING) or a pending SIGKILL. Where /proc is
//     absent or unreadable only ESRCH counts;
//   - for up to 2s otherwise: the holder is alive, or the pid is missing,
//     unparsable or this process's own (a second Lock in one process).
//
// The holder is looked at again on every try, so a live process that takes
// the lock in the meantime is refused within the 2s. When the time is up
// the error wraps ErrLocked and names the holder's pid. Waiting never
// weakens the lock: the flock alone decides who gets it. A holder in
// another pid namespace (a container sharing the directory) may look dead
// and is then reported after 10s rather than 2s.
func Lock(path string) (release func(), err error) {
	return LockWait(path, deadHolderWait, liveHolderWait)
}

// LockWait is Lock with its two bounds given: dead is how long to wait
// while the holder is dead or dying, alive how long otherwise (0 refuses a
// live holder after one try).
func LockWait(path string, dead, alive time.Duration) (release func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		holder, pid := readHolder(f)
		dying := holderDying(pid)
		limit := alive
		if dying {
			limit = dead
		}
		left := limit - time.Since(start)
		if left <= 0 {
			f.Close()
			switch {
			case holder == "":
				return nil, ErrLocked
			case dying:
				return nil, fmt.Errorf("%w (pid %s, exiting, but still holding the lock after %v)", ErrLocked, holder, limit)
			default:
				return nil, fmt.Errorf("%w (pid %s)", ErrLocked, holder)
			}
		}
		time.Sleep(min(left, retryInterval))
	}
	// The pid only makes the error more helpful (and lets a successor see
	// that we are dying); failing to write it does not weaken the lock.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { f.Close() }, nil // closing the descriptor releases the flock
}

// readHolder returns what the lock file says (trimmed) and the pid in it,
// 0 if there is none.
func readHolder(f *os.File) (string, int) {
	buf := make([]byte, 64)
	n, err := f.ReadAt(buf, 0)
	if err != nil && err != io.EOF {
		return "", 0
	}
	s := strings.TrimSpace(string(buf[:n]))
	pid, err := strconv.Atoi(s)
	if err != nil || pid <= 0 {
		return s, 0
	}
	return s, pid
}

// holderDying reports whether process pid is gone or on its way out. An
// unknown pid (0) or our own counts as alive.
func holderDying(pid int) bool {
	if pid <= 0 || pid == os.Getpid() {
		return false
	}
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	return runtime.GOOS == "linux" && procExiting(pid)
}

// procExiting reads /proc/<pid> (Linux): the thread group leader is a
// zombie or dead, has started exiting (PF_EXITING), or has a SIGKILL
// pending (set by kill(2) itself, before the process first runs again).
// False when /proc cannot be read.
func procExiting(pid int) bool {
	const pfExiting = 0x4 // PF_EXITING in include/linux/sched.h
	dir := "/proc/" + strconv.Itoa(pid)
	if stat, err := os.ReadFile(dir + "/stat"); err == nil {
		// pid (comm) state ppid pgrp session tty_nr tpgid flags ...; comm
		// may hold spaces and parentheses, so split after the last ')'.
		if i := strings.LastIndexByte(string(stat), ')'); i >= 0 {
			fields := strings.Fields(string(stat[i+1:]))
			if len(fields) > 0 && (fields[0] == "Z" || fields[0] == "X") {
				return true
			}
			if len(fields) > 6 {
				if flags, err := strconv.ParseUint(fields[6], 10, 64); err == nil && flags&pfExiting != 0 {
					return true
				}
			}
		}
	}
	status, err := os.ReadFile(dir + "/status")
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(status)) {
		name, mask, ok := strings.Cut(line, ":")
		if !ok || (name != "SigPnd" && name != "ShdPnd") {
			continue
		}
		if m, err := strconv.ParseUint(strings.TrimSpace(mask), 16, 64); err == nil && m&(1<<(syscall.SIGKILL-1)) != 0 {
			return true
		}
	}
	return false
}
