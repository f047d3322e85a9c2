package cli

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
	"github.com/onceflow/onceflow/internal/compile"
	"github.com/onceflow/onceflow/internal/jobfile"
)

// onceflow_window_late_records_total and the dedupe counter are job-life
// counters: a new process continues them from the checkpoint it restores
// instead of starting at 0.
func TestPipelineCountersContinueAcrossProcesses(t *testing.T) {
	jf := &jobfile.JobFile{Job: "late", Path: "late.yaml"}
	jf.State.Dir = t.TempDir()
	jf.Checkpointing = flow.CheckpointSettings{Interval: 5 * time.Millisecond}
	e := &env{stdout: io.Discard, stderr: io.Discard, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	sink := flowtest.NewSink[int]() // the same external system for both processes
	run := func(n int) *compile.PipelineMetrics {
		t.Helper()
		env, _, m := compile.NewEnv(jf, e.log)
		in := make([]int, n)
		src := flowtest.NewSource(flowtest.Split(in, 1), flowtest.PerPoll(5))
		s := flow.Map(flow.From(env, src, flow.UID("src")), func(x int) int { m.LateRecords.Add(1); m.DuplicatesDropped.Add(2); return x })
		flow.To(s, sink, flow.UID("sink"))
		j, err := env.Start(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Wait(); err != nil {
			t.Fatal(err)
		}
		return m
	}
	run(10)
	m := run(25) // 15 more records after a graceful stop: no replay
	if got := m.LateRecords.Load(); got != 25 {
		t.Errorf("late records after the second process: %d, want 25 (10 + 15)", got)
	}
	if got := m.DuplicatesDropped.Load(); got != 50 {
		t.Errorf("duplicates dropped after the second process: %d, want 50", got)
	}
}
