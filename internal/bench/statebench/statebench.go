// Package statebench measures keyed state at scale, without Kafka: flow jobs
// read a synthetic in-process source and write to a discarding sink, so
// that the process's memory and time are the state backend's and the
// engine's, not a broker's.
//
// Three scenarios, each for one state backend (flow.MemoryBackend or
// flow.PebbleBackend) and one state size:
//
//   - [Dedupe]: pipeline.Dedupe (ttl 24h) over N distinct keys: records/s
//     and peak RSS (VmHWM: Pebble allocates outside the Go heap); then
//     checkpoints taken with no new input, and after a few changes
//     (duration, StateBytes, WrittenBytes from the CheckpointCompleted
//     hook).
//   - [Restore]: pipeline.Count over N distinct keys at parallelism 4,
//     stopped, then restored at the same parallelism, 4→2 and 2→8: the time
//     from the start to the first record at the sink, and correctness (a
//     sample of keys, sent again after each restore, must count on).
//   - [TTL]: dedupe with a 10 min ttl and a constant arrival of new keys,
//     under a clock that runs faster than real time; the on-disk size of the
//     databases and of the checkpoint store, sampled over simulated time.
//
// The tests in this package run a tiny smoke version of each always, and
// the real sizes when ONCEFLOW_STATEBENCH=1 (see TestStateBench).
package statebench

// Pebble plugs into the engine by import (docs/design.md, "State backends").
import _ "github.com/onceflow/onceflow/state/pebblestate"

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/pipeline"
)

// Record is what the synthetic source emits.
type Record struct {
	// Key is the record's key: 16 hex digits, a fixed bijective mix of the
	// key's ordinal, so that keys arrive in no particular order.
	Key string
	// Want is the count pipeline.Count must give the record, 0 when the
	// scenario does not check counts.
	Want int64
	// Count is set by pipeline.Count.
	Count int64
}

// Access is how the pipeline operators read and change a Record.
var Access = pipeline.RecordAccess[Record]{
	Key:       func(r Record) string { return r.Key },
	WithCount: func(r Record, n int64) Record { r.Count = n; return r },
}

// KeyOf returns the key of ordinal i.
func KeyOf(i int64) string {
	// splitmix64's finaliser: a bijection on uint64, so distinct ordinals
	// give distinct keys.
	x := uint64(i) + 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	x ^= x >> 31
	var b [16]byte
	const hex = "0123456789abcdef"
	for k := 15; k >= 0; k-- {
		b[k] = hex[x&15]
		x >>= 4
	}
	return string(b[:])
}

// Source is a synthetic, replayable, unbounded source. Record j (j from 0)
// exists once j < Avail(); it has the key of ordinal Ordinal(j) and wants
// the count Want(j). Records are dealt round-robin into Splits splits
// (record j is in split j mod Splits), read by the source subtasks as
// flowtest's source does; a split's position is how many of its records
// were emitted. The split names carry Name, so positions restored from a
// checkpoint of another scenario phase (another Name) are ignored and each
// phase starts its input from the beginning.
type Source struct {
	Name    string
	Splits  int
	Avail   func() int64
	Ordinal func(j int64) int64
	Want    func(j int64) int64
	// PerPoll bounds the records of one Poll, default 512.
	PerPoll int
}

func (s *Source) splitName(i int) string { return s.Name + "-split-" + strconv.Itoa(i) }

// Open implements flow.Source.
func (s *Source) Open(_ context.Context, sc flow.SourceContext, restored map[string][]byte) (flow.SourceReader[Record], error) {
	r := &reader{src: s, perPoll: s.PerPoll}
	if r.perPoll <= 0 {
		r.perPoll = 512
	}
	for i := range s.Splits {
		if i%sc.Parallelism != sc.Subtask {
			continue
		}
		var pos int64
		if b, ok := restored[s.splitName(i)]; ok {
			v, n := binary.Uvarint(b)
			if n <= 0 {
				return nil, fmt.Errorf("statebench: restored position of %s is invalid", s.splitName(i))
			}
			pos = int64(v)
		}
		r.owned = append(r.owned, i)
		r.pos = append(r.pos, pos)
	}
	return r, nil
}

type reader struct {
	src     *Source
	perPoll int
	owned   []int
	pos     []int64 // per owned split: records emitted
	next    int
}

func (r *reader) Poll(ctx context.Context, emit func(Record)) error {
	avail := r.src.Avail()
	splits := int64(r.src.Splits)
	for range r.owned {
		k := r.next
		r.next = (r.next + 1) % len(r.owned)
		split := int64(r.owned[k])
		emitted := 0
		for ; emitted < r.perPoll; emitted++ {
			j := r.pos[k]*splits + split
			if j >= avail {
				break
			}
			var want int64
			if r.src.Want != nil {
				want = r.src.Want(j)
			}
			emit(Record{Key: KeyOf(r.src.Ordinal(j)), Want: want})
			r.pos[k]++
		}
		if emitted > 0 {
			return nil
		}
	}
	select {
	case <-ctx.Done():
	case <-time.After(2 * time.Millisecond):
	}
	return nil
}

func (r *reader) Snapshot(int64) (map[string][]byte, error) {
	out := make(map[string][]byte, len(r.owned))
	for k, i := range r.owned {
		out[r.src.splitName(i)] = binary.AppendUvarint(nil, uint64(r.pos[k]))
	}
	return out, nil
}

func (r *reader) CheckpointCommitted(context.Context, int64) error { return nil }
func (r *reader) Close() error                                     { return nil }

// Sink discards what it is given, counting it; records with a Want are
// checked against their Count. Nothing is transactional: the scenarios
// have no failures, and the sink is not what they measure.
type Sink struct {
	written    atomic.Int64
	mismatches atomic.Int64
	first      atomic.Int64 // UnixNano of the first Write, 0 before
	mu         sync.Mutex
	example    string
}

// Written is how many records were written.
func (s *Sink) Written() int64 { return s.written.Load() }

// Mismatches is how many records had a Count other than their Want, and
// the first of them.
func (s *Sink) Mismatches() (int64, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mismatches.Load(), s.example
}

// First returns when the first record was written, zero before.
func (s *Sink) First() time.Time {
	if n := s.first.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// Open implements flow.Sink.
func (s *Sink) Open(context.Context, flow.SinkContext) (flow.SinkWriter[Record], error) {
	return sinkWriter{s}, nil
}

// Committer implements flow.Sink.
func (s *Sink) Committer(context.Context, string, string) (flow.SinkCommitter, error) {
	return nopCommitter{}, nil
}

type sinkWriter struct{ s *Sink }

func (w sinkWriter) Write(_ context.Context, r Record) error {
	s := w.s
	if s.written.Add(1) == 1 {
		s.first.CompareAndSwap(0, time.Now().UnixNano())
	}
	if r.Want != 0 && r.Count != r.Want {
		if s.mismatches.Add(1) == 1 {
			s.mu.Lock()
			s.example = fmt.Sprintf("key %s counted %d, want %d", r.Key, r.Count, r.Want)
			s.mu.Unlock()
		}
	}
	return nil
}

func (sinkWriter) Prepare(context.Context, int64) ([]byte, error) { return nil, nil }
func (sinkWriter) Commit(context.Context, int64, []byte) error    { return nil }
func (sinkWriter) Close() error                                   { return nil }

func (r *reader) Position() string { return fmt.Sprint(r.pos) }

type nopCommitter struct{}

func (nopCommitter) Commit(context.Context, int64, []byte) error { return nil }
func (nopCommitter) Close() error                                { return nil }

// Checkpoints records the CheckpointCompleted events of a job.
type Checkpoints struct {
	mu  sync.Mutex
	all []flow.CheckpointCompleted
}

// OnCheckpointCompleted implements flow.HookCheckpointCompleted.
func (c *Checkpoints) OnCheckpointCompleted(e flow.CheckpointCompleted) {
	c.mu.Lock()
	c.all = append(c.all, e)
	c.mu.Unlock()
}

// Len is how many checkpoints completed.
func (c *Checkpoints) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.all)
}

// Since returns the checkpoints from the i-th on.
func (c *Checkpoints) Since(i int) []flow.CheckpointCompleted {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i >= len(c.all) {
		return nil
	}
	return append([]flow.CheckpointCompleted(nil), c.all[i:]...)
}

// waitFor polls cond until it holds, the job ends or ctx is done.
func waitFor(ctx context.Context, job *flow.Job, cond func() bool) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-job.Done():
			if cond() {
				return nil
			}
			if err := job.Wait(); err != nil {
				return err
			}
			return fmt.Errorf("the job ended")
		case <-t.C:
		}
	}
	return nil
}

// stop stops job gracefully and waits for it.
func stop(job *flow.Job) error {
	job.Stop()
	return job.Wait()
}

// Common configures every scenario.
type Common struct {
	// Backend is flow.MemoryBackend or flow.PebbleBackend.
	Backend string
	// Keys is the number of distinct keys loaded.
	Keys int64
	// Dir is a directory of the scenario's own, the job's StateDir.
	Dir string
	// StateMemory is the Pebble budget, 0 for the default (256 MiB).
	StateMemory int64
	// Progress receives a line now and then, default silent.
	Progress func(string)
}

func (c *Common) logf(format string, args ...any) {
	if c.Progress != nil {
		c.Progress(fmt.Sprintf(format, args...))
	}
}

func (c *Common) options(job string, par int, extra ...flow.Option) []flow.Option {
	opts := []flow.Option{
		flow.JobName(job),
		flow.StateDir(c.Dir),
		flow.StateBackend(c.Backend),
		flow.Parallelism(par),
		flow.Logger(slog.New(slog.DiscardHandler)),
	}
	if c.StateMemory > 0 {
		opts = append(opts, flow.StateMemory(c.StateMemory))
	}
	return append(opts, extra...)
}

// loadProgress logs the load's progress every 10 s until done is closed.
func (c *Common) loadProgress(done <-chan struct{}, what string, start time.Time, n int64, written func() int64, rss *RSSSampler) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			w := written()
			el := time.Since(start)
			c.logf("%s: %d/%d records (%.1f%%) in %v, %.0f records/s, RSS %s, peak %s", what, w, n, 100*float64(w)/float64(n), el.Round(time.Second), float64(w)/el.Seconds(), MiB(rss.Current()), MiB(rss.Peak()))
		}
	}
}

// DiskUsage is the on-disk size of a job's state directory.
type DiskUsage struct {
	// DB is the size of StateDir/<job>/db: the Pebble databases, with the
	// staging directories of checkpoints in flight.
	DB int64
	// Store is the size of the checkpoint store: StateDir/<job> without
	// db.
	Store int64
	// Unique is the size of both with every file counted once: the
	// store hard-links the databases' SSTs.
	Unique int64
}

// Usage measures the job's directory (allocated blocks, so sparse or
// preallocated files count as the disk sees them).
func Usage(stateDir, job string) DiskUsage {
	var u DiskUsage
	seen := map[[2]uint64]bool{}
	root := filepath.Join(stateDir, job)
	db := filepath.Join(root, "db")
	_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil // files come and go under a running job
		}
		size, dev, ino, ok := fileBlocks(path)
		if !ok {
			return nil
		}
		if rel, _ := filepath.Rel(db, path); rel != "" && !startsWithDotDot(rel) {
			u.DB += size
		} else {
			u.Store += size
		}
		if k := [2]uint64{dev, ino}; !seen[k] {
			seen[k] = true
			u.Unique += size
		}
		return nil
	})
	return u
}

func startsWithDotDot(rel string) bool {
	return rel == ".." || len(rel) > 2 && rel[:3] == ".."+string(filepath.Separator)
}

// MiB formats bytes in MiB.
func MiB(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// KiB formats bytes in KiB, or MiB when large.
func KiB(b int64) string {
	if b >= 10<<20 {
		return MiB(b)
	}
	return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
}
