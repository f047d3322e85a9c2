// Package dirlock keeps two processes from using one directory at once (a
// broker's data dir, a job's state dir).
package dirlock

import "errors"

// ErrLocked means another live process holds the lock.
var ErrLocked = errors.New("locked by another process")
