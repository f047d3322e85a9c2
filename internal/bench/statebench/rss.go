package statebench

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// ProcStatus reads the kB fields name (VmRSS, VmHWM, ...) of
// /proc/self/status, in bytes; 0 where there is no such file.
func ProcStatus(name string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Bytes()
		rest, ok := bytes.CutPrefix(line, []byte(name+":"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) == 0 {
			return 0
		}
		n, _ := strconv.ParseInt(string(f[0]), 10, 64)
		return n << 10
	}
	return 0
}

// ResetPeakRSS gives the memory the previous scenario left back to the
// system and resets the kernel's peak RSS (VmHWM), so the next peak is the
// next scenario's. It reports whether the kernel reset the peak.
func ResetPeakRSS() bool {
	runtime.GC()
	debug.FreeOSMemory()
	// "5" resets the peak resident set size (Linux 4.0 and later).
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return false
	}
	return ProcStatus("VmHWM") <= ProcStatus("VmRSS")+(1<<20)
}

// RSSSampler samples VmRSS and the Go heap every interval and keeps their
// peaks; with VmHWM, which the kernel keeps exactly, it tells how much of
// the process's memory is outside the Go heap (Pebble's block cache and
// memtables).
type RSSSampler struct {
	peak, cur, heapPeak atomic.Int64
	stop                chan struct{}
	done                sync.WaitGroup
}

// StartRSS starts sampling.
func StartRSS(interval time.Duration) *RSSSampler {
	s := &RSSSampler{stop: make(chan struct{})}
	s.sample()
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.sample()
			}
		}
	}()
	return s
}

func (s *RSSSampler) sample() {
	r := ProcStatus("VmRSS")
	s.cur.Store(r)
	if r > s.peak.Load() {
		s.peak.Store(r)
	}
	var ms runtime.MemStats
	// ReadMemStats stops the world briefly; at the sampling interval
	// (a second) that is noise.
	runtime.ReadMemStats(&ms)
	if h := int64(ms.HeapInuse); h > s.heapPeak.Load() {
		s.heapPeak.Store(h)
	}
}

// Stop ends sampling.
func (s *RSSSampler) Stop() {
	close(s.stop)
	s.done.Wait()
	s.sample()
}

// Current is the last sampled RSS.
func (s *RSSSampler) Current() int64 { return s.cur.Load() }

// Peak is the highest RSS seen: VmHWM when the kernel reports it (it
// catches peaks between samples), else the highest sample.
func (s *RSSSampler) Peak() int64 { return max(s.peak.Load(), ProcStatus("VmHWM")) }

// HeapPeak is the highest Go heap in use sampled.
func (s *RSSSampler) HeapPeak() int64 { return s.heapPeak.Load() }
