// Package flowtest is a test kit for onceflow jobs: a replayable in-memory
// source and a transactional collecting sink that keep their contents across
// job restarts, so a job, its failures and its recovery can be unit-tested
// in milliseconds without Kafka.
//
//	src := flowtest.NewSource(flowtest.Split([]Event{...}, 2)...)
//	sink := flowtest.NewSink[Out]()
//	env := flow.New(flow.Checkpointing(10*time.Millisecond), flow.StateDir(t.TempDir()))
//	flow.To(myPipeline(flow.From(env, src)), sink)
//	err := env.Run(ctx)
//	got := sink.Committed() // only what reached a commit point
package flowtest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/onceflow/onceflow/flow"
)

// Source is a replayable in-memory source: a fixed list of splits (think
// partitions), each a slice of records, read in order. Its position per split
// is the index of the next record, so a restored job replays exactly the
// records after its checkpoint. Safe to reuse across restarts of a job.
type Source[T any] struct {
	splits    [][]T
	unbounded bool
	perPoll   int
	noYield   bool
	// Opened counts Open calls (restarts show up as more than parallelism).
	mu     sync.Mutex
	opened int
}

// SourceOption configures a Source.
type SourceOption func(*sourceOpts)

type sourceOpts struct {
	unbounded bool
	perPoll   int
	noYield   bool
}

// Unbounded keeps the source open after its records are read (Poll returns
// nothing until the job is stopped), like a live topic. Default: bounded,
// the job ends when every split is read.
func Unbounded() SourceOption { return func(o *sourceOpts) { o.unbounded = true } }

// PerPoll sets how many records one Poll emits at most. Default 256.
func PerPoll(n int) SourceOption { return func(o *sourceOpts) { o.perPoll = n } }

// NoYield makes a Poll emit all its records even when a barrier waits,
// as a reader without flow.Yielder does. Default: a Poll stops early then,
// and the barrier goes in ahead of the rest.
func NoYield() SourceOption { return func(o *sourceOpts) { o.noYield = true } }

// NewSource returns a source over the given splits.
func NewSource[T any](splits [][]T, opts ...SourceOption) *Source[T] {
	o := sourceOpts{perPoll: 256}
	for _, f := range opts {
		f(&o)
	}
	return &Source[T]{splits: splits, unbounded: o.unbounded, perPoll: o.perPoll, noYield: o.noYield}
}

// Split deals records round-robin into n splits.
func Split[T any](records []T, n int) [][]T {
	out := make([][]T, n)
	for i, r := range records {
		out[i%n] = append(out[i%n], r)
	}
	return out
}

// Opened returns how many readers were opened so far.
func (s *Source[T]) Opened() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opened
}

// ParallelismHint returns the number of splits.
func (s *Source[T]) ParallelismHint(context.Context) (int, error) { return len(s.splits), nil }

func splitName(i int) string { return "split-" + strconv.Itoa(i) }

// Open implements flow.Source.
func (s *Source[T]) Open(_ context.Context, sc flow.SourceContext, restored map[string][]byte) (flow.SourceReader[T], error) {
	s.mu.Lock()
	s.opened++
	s.mu.Unlock()
	r := &reader[T]{src: s}
	for i := range s.splits {
		if i%sc.Parallelism != sc.Subtask {
			continue
		}
		pos := 0
		if b, ok := restored[splitName(i)]; ok {
			v, n := binary.Uvarint(b)
			if n <= 0 || v > uint64(len(s.splits[i])) {
				return nil, fmt.Errorf("flowtest: restored position of %s is invalid", splitName(i))
			}
			pos = int(v)
		}
		r.owned = append(r.owned, i)
		r.pos = append(r.pos, pos)
	}
	return r, nil
}

type reader[T any] struct {
	src   *Source[T]
	owned []int
	pos   []int
	next  int
	last  string
	yield func() bool
}

// SetYield implements flow.Yielder (unless the source is NoYield).
func (r *reader[T]) SetYield(yield func() bool) {
	if !r.src.noYield {
		r.yield = yield
	}
}

func (r *reader[T]) Poll(ctx context.Context, emit func(T)) error {
	for tries := 0; tries < len(r.owned); tries++ {
		k := r.next
		r.next = (r.next + 1) % len(r.owned)
		split := r.src.splits[r.owned[k]]
		if r.pos[k] >= len(split) {
			continue
		}
		end := min(r.pos[k]+r.src.perPoll, len(split))
		start := r.pos[k]
		for i := start; i < end; i++ {
			if r.yield != nil && i > start && r.yield() {
				break
			}
			r.pos[k] = i + 1
			r.last = splitName(r.owned[k]) + "@" + strconv.Itoa(i)
			emit(split[i])
		}
		return nil
	}
	if !r.src.unbounded {
		return io.EOF
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Millisecond):
	}
	return nil
}

func (r *reader[T]) Position() string { return r.last }

// AssignedSplits names the splits the reader reads ("split-0", ...), so
// that with event time (flow.WithWatermarks, Split naming records' splits
// the same way) a split that has not delivered yet holds event time back.
func (r *reader[T]) AssignedSplits() []string {
	out := make([]string, len(r.owned))
	for k, i := range r.owned {
		out[k] = splitName(i)
	}
	return out
}

// SplitName names split i as AssignedSplits does.
func SplitName(i int) string { return splitName(i) }

func (r *reader[T]) Snapshot(int64) (map[string][]byte, error) {
	out := make(map[string][]byte, len(r.owned))
	for k, i := range r.owned {
		out[splitName(i)] = binary.AppendUvarint(nil, uint64(r.pos[k]))
	}
	return out, nil
}

func (r *reader[T]) CheckpointCommitted(context.Context, int64) error { return nil }
func (r *reader[T]) Close() error                                     { return nil }

// Sink is a transactional collecting sink following the two-phase-commit
// contract: records become visible in Committed only when the checkpoint
// that covers them is committed. It checks the contract as it goes and
// reports violations from Err (a commit of something never prepared, a
// prepare that reuses an id). Safe to reuse across restarts.
type Sink[T any] struct {
	mu        sync.Mutex
	prepared  map[string][]T // by handle
	ids       map[string]int64
	committed []T
	done      map[string]bool
	errs      []error
	commits   int
	opens     int
}

// NewSink returns an empty transactional sink.
func NewSink[T any]() *Sink[T] {
	return &Sink[T]{prepared: map[string][]T{}, ids: map[string]int64{}, done: map[string]bool{}}
}

// Committed returns the committed records in commit order.
func (s *Sink[T]) Committed() []T {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]T(nil), s.committed...)
}

// Prepared returns how many records are prepared but not committed.
func (s *Sink[T]) Prepared() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.prepared {
		n += len(v)
	}
	return n
}

// Commits returns how many epochs were committed.
func (s *Sink[T]) Commits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commits
}

// Err returns the contract violations seen, if any.
func (s *Sink[T]) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.errs...)
}

// handleOf names a prepared epoch. The incarnation number makes handles of
// two runs restored from the same savepoint (a fork) distinct.
func handleOf(subtask int, id int64, incarnation int) string {
	return fmt.Sprintf("%d/%d/%d", subtask, id, incarnation)
}

// Open implements flow.Sink: it aborts what this subtask prepared after
// the restored checkpoint (it never reached a commit point).
func (s *Sink[T]) Open(_ context.Context, sc flow.SinkContext) (flow.SinkWriter[T], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for h, id := range s.ids {
		var sub int
		fmt.Sscanf(h, "%d/", &sub)
		if id > sc.RestoredCheckpoint && sub%sc.Parallelism == sc.Subtask {
			delete(s.prepared, h)
			delete(s.ids, h)
		}
	}
	s.opens++
	return &writer[T]{s: s, subtask: sc.Subtask, incarnation: s.opens}, nil
}

// Committer implements flow.Sink.
func (s *Sink[T]) Committer(context.Context, string, string) (flow.SinkCommitter, error) {
	return committer[T]{s}, nil
}

func (s *Sink[T]) commit(id int64, handle []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := string(handle)
	if s.done[h] {
		return nil // idempotent
	}
	recs, ok := s.prepared[h]
	if !ok {
		err := fmt.Errorf("flowtest: commit of checkpoint %d handle %q that was never prepared (or was aborted)", id, h)
		s.errs = append(s.errs, err)
		return err
	}
	s.committed = append(s.committed, recs...)
	s.done[h] = true
	s.commits++
	delete(s.prepared, h)
	delete(s.ids, h)
	return nil
}

type committer[T any] struct{ s *Sink[T] }

func (c committer[T]) Commit(_ context.Context, id int64, h []byte) error { return c.s.commit(id, h) }
func (c committer[T]) Close() error                                       { return nil }

type writer[T any] struct {
	s           *Sink[T]
	subtask     int
	incarnation int
	buf         []T
}

func (w *writer[T]) Write(_ context.Context, rec T) error {
	w.buf = append(w.buf, rec)
	return nil
}

func (w *writer[T]) Prepare(_ context.Context, id int64) ([]byte, error) {
	h := handleOf(w.subtask, id, w.incarnation)
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if _, dup := w.s.prepared[h]; dup || w.s.done[h] {
		err := fmt.Errorf("flowtest: checkpoint %d prepared twice by subtask %d", id, w.subtask)
		w.s.errs = append(w.s.errs, err)
		return nil, err
	}
	w.s.prepared[h] = w.buf
	w.s.ids[h] = id
	w.buf = nil
	return []byte(h), nil
}

func (w *writer[T]) Commit(_ context.Context, id int64, h []byte) error { return w.s.commit(id, h) }

// Close drops what was written but not prepared.
func (w *writer[T]) Close() error { w.buf = nil; return nil }

// SortedBy returns recs sorted by less, for order-insensitive comparisons.
func SortedBy[T any](recs []T, less func(a, b T) bool) []T {
	out := append([]T(nil), recs...)
	sort.SliceStable(out, func(i, j int) bool { return less(out[i], out[j]) })
	return out
}
