// Command keycount counts events per key with keyed state
// (state.NewValue), at-least-once checkpoints and a fixed-delay restart
// strategy. It injects one failure after the first checkpoint committed,
// lets the job restart from that checkpoint, and checks that every key's
// final count is right.
//
// The sink is an at-least-once "upsert table": every count is written at
// once (no transaction), keyed by the event key, the way one would UPSERT
// into a database. After the failure the job restores the checkpoint and
// replays the events read after it, so some counts are written into the
// table a second time. That is what at-least-once means for the output; it
// is harmless here because each write carries the whole count, so the last
// write per key is the right one. The check is therefore on the last count
// per key, not on the number of writes.
//
// Run it with `go run ./keycount` from the examples directory; it exits 1
// if a count is wrong or the failure and restart did not happen.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
	"github.com/onceflow/onceflow/state"
)

// Event is one input record.
type Event struct {
	Key string
	Seq int
}

// Count is the running count of a key, emitted for every event.
type Count struct {
	Key string
	N   int64
}

const (
	keys   = 5
	perKey = 300
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "keycount: FAIL:", err)
		os.Exit(1)
	}
	fmt.Println("keycount: OK")
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	dir, err := os.MkdirTemp("", "onceflow-keycount-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	events := make([]Event, 0, keys*perKey)
	for i := range keys * perKey {
		events = append(events, Event{Key: fmt.Sprintf("key-%d", i%keys), Seq: i})
	}
	// One split, so one source subtask: every keyed subtask then has a
	// single input channel (see the comment on the keyed operator).
	src := flowtest.NewSource([][]Event{events}, flowtest.PerPoll(10))
	table := newUpsertTable()

	env := flow.New(
		flow.JobName("keycount"),
		flow.StateDir(dir),
		flow.Checkpointing(20*time.Millisecond),
		flow.CheckpointMode(flow.AtLeastOnce),
		flow.Restart(flow.RestartConfig{Strategy: flow.FixedDelay, Attempts: 3, Delay: 100 * time.Millisecond}),
		flow.Logger(logger()),
	)

	// failOnce panics once, on the 50th event it sees after a checkpoint
	// committed, so that some counts reach the table after that
	// checkpoint and are written again after the restart. Until the first
	// commit it slows the input down a little, so that input is left when
	// it happens. The job handle is set right after Start.
	var job atomic.Pointer[flow.Job]
	var failed atomic.Bool
	var failedAfter atomic.Int64
	since := 0 // events seen since the first commit; the source subtask's goroutine only
	failOnce := func(e Event) Event {
		if failed.Load() {
			return e
		}
		if since > 0 {
			if since++; since == 50 {
				failed.Store(true)
				panic(fmt.Sprintf("injected failure at event %d, 50 events after checkpoint %d committed", e.Seq, failedAfter.Load()))
			}
			return e
		}
		if j := job.Load(); j != nil {
			if st := j.Stats(); st.CheckpointsCompleted > 0 {
				failedAfter.Store(st.LastCheckpoint)
				since = 1
				return e
			}
		}
		time.Sleep(time.Millisecond)
		return e
	}

	in := flow.Map(flow.From(env, src, flow.UID("events")), failOnce, flow.Name("fail-once"))
	// The keyed count. In at-least-once mode barriers are not aligned: a
	// keyed subtask with several input channels keeps reading the channels
	// that already delivered a barrier, so its snapshot can hold events
	// that the restored sources replay, and a count restored from it could
	// be too high. With one input channel (one source subtask) there is
	// nothing to align and the restored state is exact; only the output
	// is repeated. Use flow.ExactlyOnce when the state itself must be
	// exact with any parallelism.
	counts := flow.Process(flow.KeyBy(in, func(e Event) string { return e.Key }), "count-per-key",
		func(s *state.Store) flow.ProcessFunc[Event, Count] {
			n := state.NewValue[int64](s, "n")
			return func(ctx flow.Context, e Event, out flow.Collector[Count]) error {
				c, _ := n.Get()
				n.Set(c + 1)
				out.Emit(Count{Key: ctx.Key(), N: c + 1})
				return nil
			}
		}, flow.WithParallelism(2))
	flow.To(counts, table, flow.UID("table"))

	j, err := env.Start(ctx)
	if err != nil {
		return err
	}
	job.Store(j)
	if err := j.Wait(); err != nil {
		return fmt.Errorf("job failed: %w", err)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("the job did not finish in time: %w", ctx.Err())
	}

	st := j.Stats()
	if !failed.Load() {
		return fmt.Errorf("no failure was injected: the input ended before the first checkpoint committed")
	}
	if st.Restarts != 1 {
		return fmt.Errorf("the job restarted %d times, want 1", st.Restarts)
	}
	fmt.Printf("injected one failure after checkpoint %d committed; the job restarted %d time(s) and restored checkpoint %d\n",
		failedAfter.Load(), st.Restarts, st.RestoredCheckpoint)

	last, writes := table.snapshot()
	names := make([]string, 0, len(last))
	for k := range last {
		names = append(names, k)
	}
	sort.Strings(names)
	if len(names) != keys {
		return fmt.Errorf("the table has %d keys, want %d: %v", len(names), keys, names)
	}
	for _, k := range names {
		fmt.Printf("  %s: %d\n", k, last[k])
		if last[k] != perKey {
			return fmt.Errorf("key %s: final count %d, want %d", k, last[k], perKey)
		}
	}
	if writes < len(events) {
		return fmt.Errorf("the table got %d writes for %d events: some counts were never written", writes, len(events))
	}
	fmt.Printf("the table got %d writes for %d events: %d counts were written again after the restart (at-least-once), and every key's last count is right\n",
		writes, len(events), writes-len(events))
	return nil
}

// upsertTable is an at-least-once sink: Write stores the count at once
// (last write wins per key), Prepare has nothing to flush and Commit
// nothing to commit.
type upsertTable struct {
	mu     sync.Mutex
	last   map[string]int64
	writes int
}

func newUpsertTable() *upsertTable { return &upsertTable{last: map[string]int64{}} }

func (t *upsertTable) snapshot() (map[string]int64, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]int64, len(t.last))
	for k, v := range t.last {
		out[k] = v
	}
	return out, t.writes
}

// Open implements flow.Sink.
func (t *upsertTable) Open(context.Context, flow.SinkContext) (flow.SinkWriter[Count], error) {
	return tableWriter{t}, nil
}

// Committer implements flow.Sink: there is nothing to commit on recovery.
func (t *upsertTable) Committer(context.Context, string, string) (flow.SinkCommitter, error) {
	return nopCommitter{}, nil
}

type tableWriter struct{ t *upsertTable }

func (w tableWriter) Write(_ context.Context, c Count) error {
	w.t.mu.Lock()
	defer w.t.mu.Unlock()
	w.t.last[c.Key] = c.N
	w.t.writes++
	return nil
}

func (tableWriter) Prepare(context.Context, int64) ([]byte, error) { return nil, nil }
func (tableWriter) Commit(context.Context, int64, []byte) error    { return nil }
func (tableWriter) Close() error                                   { return nil }
func (nopCommitter) Commit(context.Context, int64, []byte) error   { return nil }
func (nopCommitter) Close() error                                  { return nil }

type nopCommitter struct{}

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
