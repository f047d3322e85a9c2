//go:build unix

package eval

import "syscall"

// cpuNanos is the CPU time the process has used (user and system), which
// a benchmark reports beside the wall time: on a loaded machine the wall
// time per op counts the time other processes held the CPU.
func cpuNanos() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
