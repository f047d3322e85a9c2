// Package dirlock keeps two processes from using one directory at once (a
// broker's data dir, a job's state dir).
package dirlock

import (
	"errors"
	"time"
)

// ErrLocked means another process (or another Lock in this one) still held
// the lock when Lock gave up waiting for it: a live holder after a short
// grace, a dead or dying one only after a longer bound (see Lock).
var ErrLocked = errors.New("locked by another process")

const (
	// deadHolderWait bounds how long Lock waits while the holder is dead or
	// dying: the kernel drops its flock once its descriptors are closed,
	// which after a SIGKILL of a process with a large heap can take a while
	// (the address space is torn down before the files are closed).
	deadHolderWait = 10 * time.Second
	// liveHolderWait bounds how long Lock waits while the holder looks
	// alive, or cannot be told apart from a live one: long enough for a
	// process that is just releasing the lock or exiting, short enough that
	// a real second instance is refused promptly.
	liveHolderWait = 2 * time.Second
	// retryInterval is how often a busy lock is tried again.
	retryInterval = 20 * time.Millisecond
)
