package statebench

import (
	"fmt"
	"strings"
	"time"
)

func ms(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d >= 100*time.Millisecond:
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
}

// span formats the smallest and largest of xs with f, "a" when equal,
// "a–b" otherwise.
func span[T int64 | time.Duration](xs []T, f func(T) string) string {
	if len(xs) == 0 {
		return "-"
	}
	lo, hi := xs[0], xs[0]
	for _, x := range xs[1:] {
		lo, hi = min(lo, x), max(hi, x)
	}
	if f(lo) == f(hi) {
		return f(lo)
	}
	return f(lo) + "–" + f(hi)
}

func fields(cs []CheckpointFigures) (dur []time.Duration, written, state []int64) {
	for _, c := range cs {
		dur = append(dur, c.Duration)
		written = append(written, c.WrittenBytes)
		state = append(state, c.StateBytes)
	}
	return dur, written, state
}

// DedupeHeader is the markdown table header of DedupeResult.Row.
const DedupeHeader = "| backend | keys | records/s | peak RSS (Go heap) | checkpoints during load: max duration | idle checkpoints: duration / written / state | after N new keys: duration / written |\n" +
	"|---|---|---|---|---|---|---|"

// Row is the result as a markdown table row.
func (r DedupeResult) Row(backend string, changes int64) string {
	ld, _, _ := fields(r.LoadCheckpoints)
	var maxLoad time.Duration
	for _, d := range ld {
		maxLoad = max(maxLoad, d)
	}
	id, iw, is := fields(r.Idle)
	cd, cw, _ := fields(r.Changed)
	return fmt.Sprintf("| %s | %s | %s | %s (%s) | %s (%d checkpoints) | %s / %s / %s | %d: %s / %s |",
		backend, count(r.Keys), count(int64(r.RecordsPerSec)), MiB(r.PeakRSS), MiB(r.HeapPeak), ms(maxLoad), len(r.LoadCheckpoints),
		span(id, ms), span(iw, KiB), span(is, KiB), changes, span(cd, ms), span(cw, KiB))
}

// RestoreHeader is the markdown table header of RestoreResult.Rows.
const RestoreHeader = "| backend | keys | load records/s | state (final checkpoint) | restore | time to first record | sample counts checked (wrong) |\n" +
	"|---|---|---|---|---|---|---|"

// Rows are the result as markdown table rows, one per restore.
func (r RestoreResult) Rows(backend string) string {
	var sb strings.Builder
	for i, s := range r.Steps {
		if i > 0 {
			sb.WriteByte('\n')
		}
		kind := "same parallelism"
		if s.From != s.To {
			kind = "rescale"
		}
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %d→%d (%s) | %s | %s (%d) |", backend, count(r.Keys), count(int64(r.RecordsPerSec)),
			MiB(r.Final.StateBytes), s.From, s.To, kind, ms(s.FirstRecord), count(s.Checked), s.Mismatches)
	}
	return sb.String()
}

// TTLHeader is the markdown table header of TTLResult.Rows.
const TTLHeader = "| simulated time | keys arrived | live keys | db on disk | checkpoint store | both (hard links once) | RSS |\n" +
	"|---|---|---|---|---|---|---|"

// Rows are the samples as markdown table rows, every step-th (and the
// last).
func (r TTLResult) Rows(step int) string {
	var sb strings.Builder
	for i, s := range r.Samples {
		if i%step != step-1 && i != len(r.Samples)-1 {
			continue
		}
		if sb.Len() > 0 {
			sb.WriteByte('\n')
		}
		fmt.Fprintf(&sb, "| %v | %s | %s | %s | %s | %s | %s |", s.Simulated, count(s.Keys), count(s.Live), MiB(s.Disk.DB), MiB(s.Disk.Store), MiB(s.Disk.Unique), MiB(s.RSS))
	}
	return sb.String()
}

// count formats n as 5M when it is whole millions, else with thousands
// separators: 1,631,700.
func count(n int64) string {
	if n >= 1_000_000 && n%1_000_000 == 0 {
		return fmt.Sprintf("%dM", n/1_000_000)
	}
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
