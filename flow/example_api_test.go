package flow_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
	"github.com/onceflow/onceflow/state"
)

// exOrder and exTotal are the records of the examples in this file.
type exOrder struct {
	User  string
	Cents int64
}

type exTotal struct {
	User  string
	Cents int64
}

// exLogger discards the job's logs, so that the examples print only their
// results.
func exLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// exLast returns the last (highest) total of each user, sorted by user.
func exLast(ts []exTotal) []string {
	last := map[string]int64{}
	for _, t := range ts {
		last[t.User] = max(last[t.User], t.Cents)
	}
	var out []string
	for u, c := range last {
		out = append(out, fmt.Sprintf("%s %d", u, c))
	}
	slices.Sort(out)
	return out
}

// The main entry points: a source (From), a stateless transformation (Map),
// a keyed stateful operator (KeyBy, Process), a sink (To), and Run. Without
// checkpointing a bounded job commits its sinks once, at the end of its
// input.
func ExampleEnv_Run() {
	lines := []string{"ann 250", "bob 100", "ann 50", "cid 75", "bob 20"}
	src := flowtest.NewSource(flowtest.Split(lines, 2)) // any flow.Source[string]
	sink := flowtest.NewSink[exTotal]()                 // any flow.Sink[exTotal]

	env := flow.New(flow.JobName("totals"), flow.Logger(exLogger()))
	orders := flow.Map(flow.From(env, src, flow.UID("lines")), func(line string) exOrder {
		user, cents, _ := strings.Cut(line, " ")
		n, _ := strconv.ParseInt(cents, 10, 64)
		return exOrder{User: user, Cents: n}
	})
	totals := flow.Process(flow.KeyBy(orders, func(o exOrder) string { return o.User }), "total-per-user",
		func(s *state.Store) flow.ProcessFunc[exOrder, exTotal] {
			sum := state.NewValue[int64](s, "cents") // one value per user
			return func(ctx flow.Context, o exOrder, out flow.Collector[exTotal]) error {
				t, _ := sum.Get()
				sum.Set(t + o.Cents)
				out.Emit(exTotal{User: ctx.Key(), Cents: t + o.Cents})
				return nil
			}
		})
	flow.To(totals, sink, flow.UID("totals"))

	if err := env.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range exLast(sink.Committed()) {
		fmt.Println(t)
	}
	// Output:
	// ann 300
	// bob 120
	// cid 75
}

// TryMap with DeadLetterOnError sends the records its function rejects to a
// second stream, here a sink of its own (for Kafka: Sink.DeadLetters, a
// dead-letter topic written in the same transaction as the output).
func ExampleTryMap() {
	src := flowtest.NewSource([][]string{{"1", "2", "x", "4", "5y"}})
	numbers := flowtest.NewSink[int]()
	dead := flowtest.NewSink[flow.Failure[string]]()

	env := flow.New(flow.JobName("parse"), flow.Logger(exLogger()))
	parsed, failed := flow.TryMap(flow.From(env, src), strconv.Atoi, flow.DeadLetterOnError)
	flow.To(parsed, numbers, flow.UID("numbers"))
	flow.To(failed, dead, flow.UID("dead-letters"))

	if err := env.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(numbers.Committed())
	for _, f := range dead.Committed() {
		fmt.Printf("%q: %v\n", f.Record, f.Err)
	}
	// Output:
	// [1 2 4]
	// "x": strconv.Atoi: parsing "x": invalid syntax
	// "5y": strconv.Atoi: parsing "5y": invalid syntax
}

// With SkipOnError the rejected records are dropped, logged with their
// position and counted in Stats.RecordsSkipped. With FailOnError (the
// default policy) the first one would fail the job.
func ExampleTryMap_skip() {
	src := flowtest.NewSource([][]string{{"1", "2", "x", "4", "5y"}})
	numbers := flowtest.NewSink[int]()

	env := flow.New(flow.JobName("parse"), flow.Logger(exLogger()))
	parsed, _ := flow.TryMap(flow.From(env, src), strconv.Atoi, flow.SkipOnError)
	flow.To(parsed, numbers)

	job, err := env.Start(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := job.Wait(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(numbers.Committed(), "skipped:", job.Stats().RecordsSkipped)
	// Output:
	// [1 2 4] skipped: 2
}

// Stop a job with a savepoint, then start a new version of it from the
// savepoint: the keyed state (the counts) and the source positions continue
// where the savepoint left them. Operators find their state by uid, so keep
// the uids of stateful operators (sources, Process, sinks) across versions.
func ExampleJob_StopWithSavepoint() {
	dir, _ := os.MkdirTemp("", "onceflow-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	sink := flowtest.NewSink[exTotal]() // stands for an external system: it outlives both runs

	build := func(src flow.Source[string], opts ...flow.Option) *flow.Env {
		env := flow.New(append([]flow.Option{
			flow.JobName("clicks"),
			flow.StateDir(filepath.Join(dir, "state")),
			flow.Checkpointing(10 * time.Millisecond),
			flow.Logger(exLogger()),
		}, opts...)...)
		users := flow.From(env, src, flow.UID("clicks"))
		counts := flow.Process(flow.KeyBy(users, func(u string) string { return u }), "clicks-per-user",
			func(s *state.Store) flow.ProcessFunc[string, exTotal] {
				n := state.NewValue[int64](s, "n")
				return func(ctx flow.Context, _ string, out flow.Collector[exTotal]) error {
					c, _ := n.Get()
					n.Set(c + 1)
					out.Emit(exTotal{User: ctx.Key(), Cents: c + 1})
					return nil
				}
			})
		flow.To(counts, sink, flow.UID("counts"))
		return env
	}

	// Version 1 reads a live (unbounded) source until its three clicks
	// are committed, then stops with a savepoint.
	v1 := flowtest.NewSource([][]string{{"ann", "bob", "ann"}}, flowtest.Unbounded())
	job, err := build(v1).Start(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	for len(sink.Committed()) < 3 {
		select {
		case <-job.Done():
			fmt.Println("the job ended early:", job.Wait())
			return
		case <-time.After(time.Millisecond):
		}
	}
	savepoint, err := job.StopWithSavepoint(ctx, filepath.Join(dir, "savepoints"))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := job.Wait(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("version 1:", sink.Committed())

	// Version 2 starts from the savepoint. The input has grown by two
	// clicks; the restored source position skips the three already read.
	v2 := flowtest.NewSource([][]string{{"ann", "bob", "ann", "bob", "cid"}})
	if err := build(v2, flow.FromSavepoint(savepoint)).Run(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("version 2:", sink.Committed()[3:])
	// Output:
	// version 1: [{ann 1} {bob 1} {ann 2}]
	// version 2: [{bob 2} {cid 1}]
}

// A restart strategy restarts the job from its last committed checkpoint
// when a task fails. With exactly-once checkpoints (the default mode,
// spelled out here) the state and the transactional sink's output are as
// if the failure had not happened: nothing is lost or repeated.
func ExampleRestart() {
	dir, _ := os.MkdirTemp("", "onceflow-example")
	defer os.RemoveAll(dir)

	src := flowtest.NewSource([][]string{{"ann", "bob", "ann", "ann", "bob"}})
	sink := flowtest.NewSink[exTotal]()
	env := flow.New(
		flow.JobName("restart"),
		flow.StateDir(dir),
		flow.Checkpointing(5*time.Millisecond),
		flow.CheckpointMode(flow.ExactlyOnce),
		flow.Restart(flow.RestartConfig{Strategy: flow.FixedDelay, Attempts: 3, Delay: 10 * time.Millisecond}),
		flow.Logger(exLogger()),
	)
	var failed atomic.Bool
	counts := flow.Process(flow.KeyBy(flow.From(env, src), func(u string) string { return u }), "count",
		func(s *state.Store) flow.ProcessFunc[string, exTotal] {
			n := state.NewValue[int64](s, "n")
			return func(ctx flow.Context, _ string, out flow.Collector[exTotal]) error {
				c, _ := n.Get()
				if c == 2 && failed.CompareAndSwap(false, true) {
					// An error fails the task; the strategy restarts it.
					// Return flow.Unrecoverable(err) for errors that
					// come back after every restart.
					return errors.New("the database did not answer")
				}
				n.Set(c + 1)
				out.Emit(exTotal{User: ctx.Key(), Cents: c + 1})
				return nil
			}
		})
	flow.To(counts, sink)

	job, err := env.Start(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := job.Wait(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("restarts:", job.Stats().Restarts)
	fmt.Println(sink.Committed())
	// Output:
	// restarts: 1
	// [{ann 1} {bob 1} {ann 2} {ann 3} {bob 2}]
}

// At-least-once checkpoints do not align barriers, which lowers latency
// under backpressure; after a failure the records read since the last
// checkpoint are processed again, so a sink that is not transactional
// receives some outputs twice. Design the output to tolerate that (here:
// each output carries the whole count, so the last one per key is right).
//
// A keyed operator with several input channels may even snapshot records
// that are replayed after a restore; here the source has one subtask, so
// the restored counts are exact.
func ExampleCheckpointMode() {
	dir, _ := os.MkdirTemp("", "onceflow-example")
	defer os.RemoveAll(dir)

	src := flowtest.NewSource([][]string{{"ann", "bob", "ann", "ann", "bob", "cid"}})
	sink := flowtest.NewSink[exTotal]()
	env := flow.New(
		flow.JobName("at-least-once"),
		flow.StateDir(dir),
		flow.Checkpointing(5*time.Millisecond),
		flow.CheckpointMode(flow.AtLeastOnce),
		flow.Restart(flow.RestartConfig{Strategy: flow.FixedDelay, Attempts: 3, Delay: 10 * time.Millisecond}),
		flow.Logger(exLogger()),
	)
	var failed atomic.Bool
	counts := flow.Process(flow.KeyBy(flow.From(env, src), func(u string) string { return u }), "count",
		func(s *state.Store) flow.ProcessFunc[string, exTotal] {
			n := state.NewValue[int64](s, "n")
			return func(ctx flow.Context, _ string, out flow.Collector[exTotal]) error {
				c, _ := n.Get()
				if ctx.Key() == "cid" && failed.CompareAndSwap(false, true) {
					return errors.New("injected failure")
				}
				n.Set(c + 1)
				out.Emit(exTotal{User: ctx.Key(), Cents: c + 1})
				return nil
			}
		})
	flow.To(counts, sink)

	if err := env.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range exLast(sink.Committed()) {
		fmt.Println(t)
	}
	// Output:
	// ann 3
	// bob 2
	// cid 1
}
