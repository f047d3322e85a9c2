// Command customsource shows a custom flow.Source: a bounded source of
// numbers cut into splits, whose readers snapshot their position in each
// split and resume from the restored positions, with a parallelism hint,
// and which ends with io.EOF.
//
// The job squares the numbers and writes them to a transactional sink. It
// runs twice:
//
//  1. with 2 source subtasks (WithParallelism overrides the hint), until
//     every split has handed out its first 100 numbers (the source then
//     has nothing more for now, like a live topic), then
//     Job.StopWithSavepoint;
//  2. from that savepoint (flow.FromSavepoint) with 4 source subtasks, one
//     per split as the hint says, to the end of the input. Each reader
//     takes the positions of the splits it owns now from the restored map,
//     which holds every split of the previous run.
//
// The check: the output holds the square of every number exactly once, and
// the second run restored every split's position.
//
// Run it with `go run ./customsource` from the examples directory; it exits
// 1 if the output is wrong.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
)

const (
	splits   = 4
	perSplit = 250
	pauseAt  = 100 // the first run's source stops handing out records here
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "customsource: FAIL:", err)
		os.Exit(1)
	}
	fmt.Println("customsource: OK")
}

// job builds the job around src. sourceParallelism 0 takes the source's
// hint.
func job(src *numberSource, sink flow.Sink[int], stateDir string, sourceParallelism int, opts ...flow.Option) *flow.Env {
	env := flow.New(append([]flow.Option{
		flow.JobName("customsource"),
		flow.StateDir(stateDir),
		flow.Checkpointing(50 * time.Millisecond),
		flow.Logger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
	}, opts...)...)
	var srcOpts []flow.OpOption
	if sourceParallelism > 0 {
		srcOpts = append(srcOpts, flow.WithParallelism(sourceParallelism))
	}
	// The uid is how the savepoint finds the source's positions: keep it.
	numbers := flow.From(env, src, append(srcOpts, flow.UID("numbers"))...)
	flow.To(flow.Map(numbers, func(n int) int { return n * n }), sink, flow.UID("squares"))
	return env
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir, err := os.MkdirTemp("", "onceflow-customsource-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	stateDir := filepath.Join(dir, "state")
	// The test kit's sink keeps what was committed across both runs, as
	// an external system would.
	sink := flowtest.NewSink[int]()

	// Run 1: two subtasks, until every split paused.
	src1 := &numberSource{pauseAt: pauseAt}
	j, err := job(src1, sink, stateDir, 2).Start(ctx)
	if err != nil {
		return err
	}
	for src1.emitted.Load() < splits*pauseAt {
		select {
		case <-j.Done():
			return fmt.Errorf("run 1 ended early: %v", j.Wait())
		case <-ctx.Done():
			return fmt.Errorf("run 1: the source handed out %d records, want %d: %w", src1.emitted.Load(), splits*pauseAt, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	sp, err := j.StopWithSavepoint(ctx, filepath.Join(dir, "savepoints", "sp-1"))
	if err != nil {
		return fmt.Errorf("stop with savepoint: %w", err)
	}
	if err := j.Wait(); err != nil {
		return fmt.Errorf("run 1: %w", err)
	}
	fmt.Printf("run 1: %d source subtasks, stopped with a savepoint after %d records; %d committed\n",
		src1.opened.Load(), src1.emitted.Load(), len(sink.Committed()))

	// Run 2: from the savepoint, one subtask per split, to the end.
	src2 := &numberSource{}
	if err := job(src2, sink, stateDir, 0, flow.FromSavepoint(sp)).Run(ctx); err != nil {
		return fmt.Errorf("run 2: %w", err)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("run 2 did not finish in time: %w", ctx.Err())
	}
	restored := src2.lastRestored()
	fmt.Printf("run 2: %d source subtasks, restored positions %v, %d more records\n",
		src2.opened.Load(), restored, src2.emitted.Load())

	if int(src2.opened.Load()) != splits {
		return fmt.Errorf("run 2 opened %d readers, want %d (the parallelism hint)", src2.opened.Load(), splits)
	}
	if len(restored) != splits {
		return fmt.Errorf("run 2 restored %d split positions, want %d: %v", len(restored), splits, restored)
	}
	for name, pos := range restored {
		if pos != pauseAt {
			return fmt.Errorf("split %s restored at %d, want %d", name, pos, pauseAt)
		}
	}
	if err := sink.Err(); err != nil {
		return fmt.Errorf("the sink saw a contract violation: %w", err)
	}
	got := slices.Sorted(slices.Values(sink.Committed()))
	if len(got) != splits*perSplit {
		return fmt.Errorf("%d records committed, want %d", len(got), splits*perSplit)
	}
	for i, v := range got {
		if v != i*i {
			return fmt.Errorf("output is not every square exactly once: at %d got %d, want %d", i, v, i*i)
		}
	}
	fmt.Printf("the output holds the square of each of the %d numbers exactly once\n", len(got))
	return nil
}

// numberSource is a bounded source of the numbers 0..splits*perSplit-1.
// Split i ("numbers-i") holds i*perSplit..(i+1)*perSplit-1; its position is
// the index of the next number to emit, stored as decimal text.
type numberSource struct {
	// pauseAt > 0 stops every split at that position: Poll then returns
	// no records until the job stops, as a live source with nothing new
	// does.
	pauseAt int

	opened  atomic.Int64 // readers opened
	emitted atomic.Int64 // records emitted

	mu       sync.Mutex
	restored map[string]int // positions the last Open restored
}

var (
	_ flow.Source[int]       = (*numberSource)(nil)
	_ flow.ParallelismHinter = (*numberSource)(nil)
)

func splitName(i int) string { return "numbers-" + strconv.Itoa(i) }

// ParallelismHint implements flow.ParallelismHinter: one subtask per split,
// unless the job sets the source's parallelism.
func (s *numberSource) ParallelismHint(context.Context) (int, error) { return splits, nil }

// Open implements flow.Source. The subtask owns the splits i with
// i % parallelism == subtask. restored holds the positions of every split
// of the checkpoint (or savepoint) being restored, written by the subtasks
// of the previous run whatever its parallelism; nil on a fresh start,
// which starts every split at 0.
func (s *numberSource) Open(_ context.Context, sc flow.SourceContext, restored map[string][]byte) (flow.SourceReader[int], error) {
	s.opened.Add(1)
	r := &numberReader{src: s}
	seen := map[string]int{}
	for i := range splits {
		name := splitName(i)
		pos := 0
		if b, ok := restored[name]; ok {
			p, err := strconv.Atoi(string(b))
			if err != nil || p < 0 || p > perSplit {
				return nil, fmt.Errorf("restored position %q of split %s is invalid", b, name)
			}
			pos = p
			seen[name] = p
		}
		if i%sc.Parallelism == sc.Subtask {
			r.splits = append(r.splits, &split{index: i, pos: pos})
		}
	}
	if restored != nil {
		s.mu.Lock()
		s.restored = seen
		s.mu.Unlock()
	}
	return r, nil
}

func (s *numberSource) lastRestored() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.restored)
}

type split struct {
	index int
	pos   int // next number to emit is index*perSplit + pos
}

// numberReader reads one subtask's splits, round robin, 50 records a poll.
type numberReader struct {
	src    *numberSource
	splits []*split
	next   int
}

func (r *numberReader) Poll(ctx context.Context, emit func(int)) error {
	end := perSplit
	if r.src.pauseAt > 0 {
		end = r.src.pauseAt
	}
	for range r.splits {
		sp := r.splits[r.next]
		r.next = (r.next + 1) % len(r.splits)
		if sp.pos >= end {
			continue
		}
		for stop := min(sp.pos+50, end); sp.pos < stop; sp.pos++ {
			emit(sp.index*perSplit + sp.pos)
			r.src.emitted.Add(1)
		}
		return nil
	}
	if end == perSplit {
		return io.EOF // every split is read: this subtask is done
	}
	// Paused: nothing to emit now. Return soon, so that barriers and the
	// stop get through (flow.SourceReader asks for about 100ms at most).
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Millisecond):
	}
	return nil
}

// Snapshot returns the position of every split this reader owns.
func (r *numberReader) Snapshot(int64) (map[string][]byte, error) {
	out := make(map[string][]byte, len(r.splits))
	for _, sp := range r.splits {
		out[splitName(sp.index)] = []byte(strconv.Itoa(sp.pos))
	}
	return out, nil
}

func (r *numberReader) CheckpointCommitted(context.Context, int64) error { return nil }

func (r *numberReader) Close() error { return nil }
