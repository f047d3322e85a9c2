package flow_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
	"github.com/onceflow/onceflow/state"
)

// blockingSink blocks its first Write until release is closed, like a
// database sink waiting on a table lock.
type blockingSink struct {
	*flowtest.Sink[int]
	entered, release chan struct{}
}

func (b *blockingSink) Open(ctx context.Context, sc flow.SinkContext) (flow.SinkWriter[int], error) {
	w, err := b.Sink.Open(ctx, sc)
	return &blockingWriter{SinkWriter: w, b: b}, err
}

type blockingWriter struct {
	flow.SinkWriter[int]
	b       *blockingSink
	blocked bool
}

func (w *blockingWriter) Write(ctx context.Context, x int) error {
	if !w.blocked {
		w.blocked = true
		close(w.b.entered)
		<-w.b.release
	}
	return w.SinkWriter.Write(ctx, x)
}

// A sink blocked in Write shows in the task's stats as the operator that
// takes the task's time, the source chained before it not, and is logged
// at WARN naming it while it lasts (docs/design.md, "Metrics and the REST
// API"): the operator of issue 21 saw a chained source task 5 % busy and
// nothing in the log.
func TestBlockedSinkShowsInOperatorSharesAndIsLogged(t *testing.T) {
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	sink := &blockingSink{Sink: flowtest.NewSink[int](), entered: make(chan struct{}), release: make(chan struct{})}
	src := flowtest.NewSource(flowtest.Split(make([]int, 10), 1), flowtest.PerPoll(1))
	env := flow.New(flow.JobName("locked"), flow.Logger(log), flow.SlowOperatorWarning(300*time.Millisecond))
	// Source and sink chain into one task (same parallelism, forward).
	flow.To(flow.From(env, src, flow.UID("src")), sink, flow.UID("pg-sink"))
	j, err := env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	<-sink.entered
	time.Sleep(1200 * time.Millisecond)
	st := j.Stats()
	close(sink.release)
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}

	if len(st.Tasks) != 1 {
		t.Fatalf("want one chained task (source and sink), got %d: %+v", len(st.Tasks), st.Tasks)
	}
	task := st.Tasks[0]
	share := map[string]float64{}
	for _, op := range task.Operators {
		share[op.UID] = op.Share
	}
	if len(task.Operators) != 2 || share["pg-sink"] < 0.8 || share["src"] > 0.2 {
		t.Errorf("with the sink blocked in Write, want the sink's share of the task's time > 0.8 and the source's < 0.2; got operators %+v", task.Operators)
	}
	var warned string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, "operator=pg-sink") {
			warned = l
			break
		}
	}
	if warned == "" {
		t.Fatalf("no WARN naming the blocked sink:\n%s", logs.String())
	}
	t.Log(warned)
	for _, want := range []string{"job=locked", "task=src", "doing=write", "pg_locks"} {
		if !strings.Contains(warned, want) {
			t.Errorf("the WARN about the blocked sink lacks %q: %s", want, warned)
		}
	}
}

// A keyed operator whose function blocks is logged as such, with what to
// check for user code; a source without input and the tasks waiting on
// it are not (an empty input is not stuck).
func TestBlockedKeyedOperatorIsLoggedAndIdleTasksAreNot(t *testing.T) {
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	env := flow.New(flow.JobName("slowfn"), flow.Logger(log), flow.SlowOperatorWarning(200*time.Millisecond))
	// One record, then an input that stays empty.
	src := flowtest.NewSource(flowtest.Split([]int{1}, 1), flowtest.PerPoll(1), flowtest.Unbounded())
	keyed := flow.KeyBy(flow.From(env, src, flow.UID("src")), func(int) string { return "k" })
	release := make(chan struct{})
	out := flow.Process(keyed, "enrich", func(*state.Store) flow.ProcessFunc[int, int] {
		return func(_ flow.Context, x int, out flow.Collector[int]) error {
			<-release // a call to a service that does not answer
			out.Emit(x)
			return nil
		}
	})
	flow.To(out, flowtest.NewSink[int](), flow.UID("sink"))
	ctx, cancel := context.WithCancel(context.Background())
	j, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(800 * time.Millisecond)
	close(release)
	// Then nothing comes in: neither the idle source nor the idle keyed
	// task may be reported as stuck.
	time.Sleep(800 * time.Millisecond)
	cancel()
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	var slow []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, "running for a long time") {
			slow = append(slow, l)
		}
	}
	if len(slow) == 0 {
		t.Fatalf("no WARN about the blocked keyed operator:\n%s", logs.String())
	}
	for _, l := range slow {
		if !strings.Contains(l, "operator=enrich") || !strings.Contains(l, "doing=process") || !strings.Contains(l, "goroutine dump") {
			t.Errorf("a slow-call WARN that is not about the blocked keyed operator (or lacks what to check): %s", l)
		}
	}
	// 800 ms blocked with a 200 ms threshold: at 200 ms, then every 600 ms.
	if len(slow) > 2 {
		t.Errorf("%d slow-call WARNs in 800 ms, want at most 2 (the threshold, then every 3× it):\n%s", len(slow), strings.Join(slow, "\n"))
	}
}
