package flowtest_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
)

// quietLogger discards the job's logs, so that the examples print only
// their results.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// NewSource turns slices into a replayable source: each split is read in
// order, one source subtask per split (its parallelism hint). Split deals
// records round-robin into splits, like keyless records into partitions.
func ExampleNewSource() {
	splits := flowtest.Split([]int{1, 2, 3, 4, 5}, 2)
	fmt.Println("splits:", splits)

	src := flowtest.NewSource(splits)
	sink := flowtest.NewSink[int]()
	env := flow.New(flow.Logger(quietLogger()))
	flow.To(flow.Map(flow.From(env, src), func(n int) int { return n * 10 }), sink)
	if err := env.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("readers opened:", src.Opened())
	fmt.Println("output:", slices.Sorted(slices.Values(sink.Committed())))
	// Output:
	// splits: [[1 3 5] [2 4]]
	// readers opened: 2
	// output: [10 20 30 40 50]
}

// NewSink collects what a job writes, following the two-phase-commit
// contract: records show in Committed only once their checkpoint
// committed, so a test sees what readers of a transactional output would.
// The source and the sink keep their contents across restarts; here a
// failure makes the job restore its last checkpoint and replay what came
// after it, and the committed output still holds every record once. Err
// reports violations of the sink contract by the runtime.
func ExampleNewSink() {
	dir, _ := os.MkdirTemp("", "onceflow-example")
	defer os.RemoveAll(dir)

	records := make([]int, 100)
	for i := range records {
		records[i] = i
	}
	src := flowtest.NewSource(flowtest.Split(records, 2), flowtest.PerPoll(5))
	sink := flowtest.NewSink[int]()
	env := flow.New(
		flow.StateDir(dir),
		flow.Checkpointing(time.Millisecond),
		flow.Restart(flow.RestartConfig{Strategy: flow.FixedDelay, Attempts: 3, Delay: time.Millisecond}),
		flow.Logger(quietLogger()),
	)
	var failed atomic.Bool
	flow.To(flow.Map(flow.From(env, src), func(n int) int {
		if n == 60 && failed.CompareAndSwap(false, true) {
			panic("injected failure")
		}
		return n
	}), sink)

	job, err := env.Start(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := job.Wait(); err != nil {
		fmt.Println(err)
		return
	}
	got := slices.Sorted(slices.Values(sink.Committed()))
	fmt.Println("restarts:", job.Stats().Restarts)
	fmt.Println("committed:", len(got), "first:", got[0], "last:", got[len(got)-1], "unique:", len(slices.Compact(got)))
	fmt.Println("prepared but not committed:", sink.Prepared())
	fmt.Println("contract violations:", sink.Err())
	// Output:
	// restarts: 1
	// committed: 100 first: 0 last: 99 unique: 100
	// prepared but not committed: 0
	// contract violations: <nil>
}

// NewFileSink is a durable transactional sink for tests in which the job's
// process is killed and started again: each epoch is a synced file that
// Commit renames. ReadCommitted returns what was committed.
func ExampleNewFileSink() {
	dir, _ := os.MkdirTemp("", "onceflow-example")
	defer os.RemoveAll(dir)

	src := flowtest.NewSource([][]string{{"a", "b", "c"}})
	sink := flowtest.NewFileSink(filepath.Join(dir, "out"), func(s string) []byte { return []byte(s) })
	env := flow.New(flow.StateDir(filepath.Join(dir, "state")), flow.Logger(quietLogger()))
	flow.To(flow.From(env, src), sink)
	if err := env.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	lines, err := flowtest.ReadCommitted(filepath.Join(dir, "out"))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, l := range lines {
		fmt.Println(string(l))
	}
	// Output:
	// a
	// b
	// c
}
