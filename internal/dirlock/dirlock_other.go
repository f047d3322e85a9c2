//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package dirlock

import "time"

// Lock is a no-op where flock is not available.
func Lock(path string) (func(), error) { return func() {}, nil }

// LockWait is a no-op where flock is not available.
func LockWait(path string, dead, alive time.Duration) (func(), error) { return Lock(path) }
