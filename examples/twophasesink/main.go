// Command twophasesink shows a custom exactly-once sink built on the
// two-phase-commit contract of flow.Sink, and checks it across a failure.
//
// The sink writes the records of each epoch (the records between two
// checkpoint barriers) of each subtask to a file:
//
//   - Write buffers the record.
//   - Prepare(n) writes the buffer to DIR/pending/<subtask>-<n>.tmp, syncs
//     it, and returns the file's name as the handle; the runtime stores the
//     handle in checkpoint n. The file is durable but not yet output.
//   - Commit(n, handle) renames the file to DIR/out/<subtask>-<n>.txt once
//     checkpoint n has reached its commit point. Committing a handle that
//     is already committed is a success, because recovery commits the
//     handles of the restored checkpoint again.
//   - Open deletes the pending files this subtask prepared for checkpoints
//     after the restored one: they never reached a commit point, and the
//     restored job writes their records again.
//
// The job reads 2000 numbers from four splits and writes them to the sink
// with exactly-once checkpoints. A map panics once after the sink committed
// its first epoch; the job restarts from the last checkpoint and replays
// what came after it. The check: DIR/out holds every number exactly once,
// nothing is left pending, and committing every handle a second time
// changes nothing.
//
// Run it with `go run ./twophasesink` from the examples directory; it exits
// 1 if the output is wrong.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
)

const total = 2000

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "twophasesink: FAIL:", err)
		os.Exit(1)
	}
	fmt.Println("twophasesink: OK")
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	dir, err := os.MkdirTemp("", "onceflow-twophasesink-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	numbers := make([]int, total)
	for i := range numbers {
		numbers[i] = i
	}
	src := flowtest.NewSource(flowtest.Split(numbers, 4), flowtest.PerPoll(10))
	sink := &fileSink{dir: filepath.Join(dir, "output")}

	env := flow.New(
		flow.JobName("twophasesink"),
		flow.StateDir(filepath.Join(dir, "state")),
		flow.Checkpointing(20*time.Millisecond),
		flow.CheckpointMode(flow.ExactlyOnce), // the default, spelled out
		flow.Restart(flow.RestartConfig{Strategy: flow.FixedDelay, Attempts: 3, Delay: 50 * time.Millisecond}),
		flow.Logger(logger()),
	)

	// failOnce panics once, on the first record it sees after the sink
	// committed an epoch; until then it slows the input down a little so
	// that input is left when that happens.
	var failed atomic.Bool
	failOnce := func(n int) int {
		if failed.Load() {
			return n
		}
		if sink.commits.Load() > 0 && failed.CompareAndSwap(false, true) {
			panic(fmt.Sprintf("injected failure at record %d, after the sink committed %d epoch(s)", n, sink.commits.Load()))
		}
		time.Sleep(time.Millisecond)
		return n
	}
	flow.To(flow.Map(flow.From(env, src, flow.UID("numbers")), failOnce, flow.Name("fail-once")), sink, flow.UID("files"))

	job, err := env.Start(ctx)
	if err != nil {
		return err
	}
	if err := job.Wait(); err != nil {
		return fmt.Errorf("job failed: %w", err)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("the job did not finish in time: %w", ctx.Err())
	}
	st := job.Stats()
	if !failed.Load() {
		return errors.New("no failure was injected: the input ended before the sink committed an epoch")
	}
	if st.Restarts != 1 {
		return fmt.Errorf("the job restarted %d times, want 1", st.Restarts)
	}
	fmt.Printf("injected one failure; the job restarted %d time(s) from checkpoint %d and wrote %d records into the sink for %d inputs (%d replayed)\n",
		st.Restarts, st.RestoredCheckpoint, st.RecordsOut, total, st.RecordsOut-total)

	if err := checkOutput(sink.dir); err != nil {
		return err
	}
	fmt.Printf("the output holds every number exactly once, in %d committed epoch files; %d prepared epoch files were aborted on recovery\n",
		sink.commits.Load(), sink.aborted.Load())

	// Recovery commits the handles of the restored checkpoint again, so
	// committing twice must be a success that changes nothing.
	c, err := sink.Committer(ctx, "twophasesink", "files")
	if err != nil {
		return err
	}
	for _, h := range sink.committedHandles() {
		if err := c.Commit(ctx, 0, h); err != nil {
			return fmt.Errorf("committing %s again: %w", h, err)
		}
	}
	if err := c.Close(); err != nil {
		return err
	}
	if err := checkOutput(sink.dir); err != nil {
		return fmt.Errorf("after committing every handle again: %w", err)
	}
	fmt.Println("committing every handle a second time changed nothing")
	return nil
}

// checkOutput checks that dir/out holds every number below total exactly
// once and that nothing is left in dir/pending.
func checkOutput(dir string) error {
	seen := make([]int, total)
	files, err := filepath.Glob(filepath.Join(dir, "out", "*.txt"))
	if err != nil {
		return err
	}
	for _, f := range files {
		if err := readLines(f, func(line string) error {
			n, err := strconv.Atoi(line)
			if err != nil || n < 0 || n >= total {
				return fmt.Errorf("%s: unexpected line %q", f, line)
			}
			seen[n]++
			return nil
		}); err != nil {
			return err
		}
	}
	var missing, dup []int
	for n, k := range seen {
		switch {
		case k == 0:
			missing = append(missing, n)
		case k > 1:
			dup = append(dup, n)
		}
	}
	if len(missing) > 0 || len(dup) > 0 {
		return fmt.Errorf("output is not exactly once: %d missing (first %v), %d duplicated (first %v)",
			len(missing), missing[:min(5, len(missing))], len(dup), dup[:min(5, len(dup))])
	}
	left, err := filepath.Glob(filepath.Join(dir, "pending", "*"))
	if err != nil {
		return err
	}
	if len(left) > 0 {
		return fmt.Errorf("%d prepared files were neither committed nor aborted: %v", len(left), left)
	}
	return nil
}

func readLines(path string, fn func(string) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if err := fn(sc.Text()); err != nil {
			return err
		}
	}
	return sc.Err()
}

// fileSink is the two-phase-commit sink described in the package comment.
// One value serves every subtask and every restart of the job.
type fileSink struct {
	dir     string
	commits atomic.Int64 // epoch files renamed into place
	aborted atomic.Int64 // pending files deleted by Open

	mu        sync.Mutex
	committed [][]byte // handles committed, to show that committing twice is fine
}

var _ flow.Sink[int] = (*fileSink)(nil)

func (s *fileSink) pending(handle string) string {
	return filepath.Join(s.dir, "pending", handle+".tmp")
}
func (s *fileSink) final(handle string) string { return filepath.Join(s.dir, "out", handle+".txt") }

// handleOf names the epoch of checkpoint id of subtask sub.
func handleOf(sub int, id int64) string { return fmt.Sprintf("%d-%020d", sub, id) }

// parseHandle is the inverse of handleOf.
func parseHandle(h string) (sub int, id int64, err error) {
	a, b, ok := strings.Cut(h, "-")
	if !ok {
		return 0, 0, fmt.Errorf("bad handle %q", h)
	}
	if sub, err = strconv.Atoi(a); err != nil {
		return 0, 0, fmt.Errorf("bad handle %q", h)
	}
	if id, err = strconv.ParseInt(b, 10, 64); err != nil {
		return 0, 0, fmt.Errorf("bad handle %q", h)
	}
	return sub, id, nil
}

func (s *fileSink) committedHandles() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.committed)
}

// Open implements flow.Sink. It aborts what was prepared after the restored
// checkpoint by the subtasks this one now covers (the same index, or more
// when the parallelism went down).
func (s *fileSink) Open(_ context.Context, sc flow.SinkContext) (flow.SinkWriter[int], error) {
	for _, d := range []string{"pending", "out"} {
		if err := os.MkdirAll(filepath.Join(s.dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	files, err := filepath.Glob(filepath.Join(s.dir, "pending", "*.tmp"))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		sub, id, err := parseHandle(strings.TrimSuffix(filepath.Base(f), ".tmp"))
		if err != nil {
			return nil, err
		}
		if sub%sc.Parallelism == sc.Subtask && id > sc.RestoredCheckpoint {
			sc.Logger.Info("aborting an epoch that never reached a commit point", "file", f)
			if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
			s.aborted.Add(1)
		}
	}
	return &fileWriter{s: s, subtask: sc.Subtask}, nil
}

// Committer implements flow.Sink: recovery commits the handles stored in the
// restored checkpoint with it, before any writer is open.
func (s *fileSink) Committer(context.Context, string, string) (flow.SinkCommitter, error) {
	return fileCommitter{s}, nil
}

// commit moves a prepared epoch into place. It is idempotent: when the
// pending file is gone and the final one exists, the epoch was committed
// before.
func (s *fileSink) commit(handle []byte) error {
	if len(handle) == 0 {
		return nil // an empty epoch: nothing was prepared
	}
	h := string(handle)
	if _, _, err := parseHandle(h); err != nil {
		return err
	}
	err := os.Rename(s.pending(h), s.final(h))
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(s.final(h)); serr == nil {
			return nil // committed before
		}
	}
	if err != nil {
		return fmt.Errorf("commit %s: %w", h, err)
	}
	if err := syncDir(filepath.Join(s.dir, "out")); err != nil {
		return err
	}
	s.commits.Add(1)
	s.mu.Lock()
	s.committed = append(s.committed, slices.Clone(handle))
	s.mu.Unlock()
	return nil
}

type fileCommitter struct{ s *fileSink }

func (c fileCommitter) Commit(_ context.Context, _ int64, handle []byte) error {
	return c.s.commit(handle)
}
func (fileCommitter) Close() error { return nil }

// fileWriter is one subtask's writer.
type fileWriter struct {
	s       *fileSink
	subtask int
	buf     []byte
}

func (w *fileWriter) Write(_ context.Context, n int) error {
	w.buf = strconv.AppendInt(w.buf, int64(n), 10)
	w.buf = append(w.buf, '\n')
	return nil
}

// Prepare makes the epoch durable but invisible and names it.
func (w *fileWriter) Prepare(_ context.Context, id int64) ([]byte, error) {
	if len(w.buf) == 0 {
		return nil, nil
	}
	h := handleOf(w.subtask, id)
	if err := writeFileSync(w.s.pending(h), w.buf); err != nil {
		return nil, fmt.Errorf("prepare checkpoint %d: %w", id, err)
	}
	w.buf = w.buf[:0]
	return []byte(h), nil
}

func (w *fileWriter) Commit(_ context.Context, _ int64, handle []byte) error {
	return w.s.commit(handle)
}

// Close drops what was written but not prepared; prepared epochs stay for
// the runtime to commit (or for the next Open to abort).
func (w *fileWriter) Close() error { w.buf = nil; return nil }

// writeFileSync writes data to path and syncs the file and its directory.
func writeFileSync(path string, data []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// logger logs warnings and errors to stderr, without the stack traces the
// runtime attaches to panics (the injected one is expected).
func logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{
		Level: slog.LevelWarn,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == "stack" || a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}
