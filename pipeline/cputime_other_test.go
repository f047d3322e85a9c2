//go:build !unix

package pipeline

// cpuNanos is not measured here: the benchmarks report 0 CPU time.
func cpuNanos() int64 { return 0 }
