package flow_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
	"github.com/onceflow/onceflow/internal/restart"
	"github.com/onceflow/onceflow/state"
)

func TestInvalidJobsFailAtBuildTime(t *testing.T) {
	src := func() *flowtest.Source[event] { return flowtest.NewSource(flowtest.Split(events(1, 1), 1)) }
	cases := []struct {
		name  string
		build func() *flow.Env
		want  string
	}{
		{"negative interval", func() *flow.Env {
			env := flow.New(flow.Checkpointing(-time.Second), flow.StateDir("x"))
			flow.To(flow.From(env, src()), flowtest.NewSink[event]())
			return env
		}, "interval"},
		{"timeout below interval", func() *flow.Env {
			env := flow.New(flow.Checkpointing(time.Second), flow.CheckpointTimeout(500*time.Millisecond), flow.StateDir("x"))
			flow.To(flow.From(env, src()), flowtest.NewSink[event]())
			return env
		}, "timeout"},
		{"checkpointing without state dir", func() *flow.Env {
			env := flow.New(flow.Checkpointing(time.Second))
			flow.To(flow.From(env, src()), flowtest.NewSink[event]())
			return env
		}, "flow.StateDir"},
		{"duplicate uid", func() *flow.Env {
			env := flow.New()
			s := flow.From(env, src(), flow.UID("a"))
			flow.To(flow.Map(s, func(e event) event { return e }, flow.UID("a")), flowtest.NewSink[event]())
			return env
		}, `uid "a" is used by both`},
		{"empty keyed uid", func() *flow.Env {
			env := flow.New()
			k := flow.KeyBy(flow.From(env, src()), func(e event) string { return e.Key })
			flow.To(flow.Process(k, "", countFn), flowtest.NewSink[count]())
			return env
		}, "empty uid"},
		{"union of two jobs' streams", func() *flow.Env {
			env, other := flow.New(), flow.New()
			flow.To(flow.Union(flow.From(env, src()), flow.From(other, src())), flowtest.NewSink[event]())
			return env
		}, "same flow.New"},
		{"empty CoProcess uid", func() *flow.Env {
			env := flow.New()
			k := flow.KeyBy(flow.From(env, src()), func(e event) string { return e.Key })
			flow.To(flow.CoProcess(flow.Connect(k, k), "", func(*state.Store) flow.CoProcessFuncs[event, event, count] {
				return flow.CoProcessFuncs[event, event, count]{}
			}), flowtest.NewSink[count]())
			return env
		}, "empty uid"},
		{"CoProcess keyed parallelism above max", func() *flow.Env {
			env := flow.New(flow.MaxParallelism(4))
			k := flow.KeyBy(flow.From(env, src()), func(e event) string { return e.Key })
			r := flow.KeyBy(flow.From(env, flowtest.NewSource(flowtest.Split(sides(1, 1), 1))), func(s side) string { return s.Key })
			flow.To(flow.CoProcess(flow.Connect(k, r), "co", coCount, flow.WithParallelism(8)), flowtest.NewSink[count]())
			return env
		}, "above the max parallelism"},
		{"no sink", func() *flow.Env {
			env := flow.New()
			flow.From(env, src())
			return env
		}, "no sink"},
		{"keyed parallelism above max", func() *flow.Env {
			env := flow.New(flow.MaxParallelism(4))
			k := flow.KeyBy(flow.From(env, src()), func(e event) string { return e.Key })
			flow.To(flow.Process(k, "c", countFn, flow.WithParallelism(8)), flowtest.NewSink[count]())
			return env
		}, "above the max parallelism"},
		{"bad restart", func() *flow.Env {
			env := flow.New(flow.Restart(restart.Config{Strategy: "sometimes"}))
			flow.To(flow.From(env, src()), flowtest.NewSink[event]())
			return env
		}, "sometimes"},
		{"zero parallelism", func() *flow.Env {
			env := flow.New()
			flow.To(flow.From(env, src(), flow.WithParallelism(0)), flowtest.NewSink[event]())
			return env
		}, "parallelism 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.build().Start(context.Background())
			if !errors.Is(err, flow.ErrInvalidJob) {
				t.Fatalf("want ErrInvalidJob, got %v", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not mention %q", err, c.want)
			}
		})
	}
}

// State read outside record processing has no key: it fails the task with
// a sentence saying so (the setup function runs before any record).
func TestStateWithoutKeyFailsClearly(t *testing.T) {
	env := flow.New(quiet())
	k := flow.KeyBy(flow.From(env, flowtest.NewSource(flowtest.Split(events(1, 1), 1))), func(e event) string { return e.Key })
	flow.To(flow.Process(k, "c", func(s *state.Store) flow.ProcessFunc[event, count] {
		v := state.NewValue[int64](s, "n")
		v.Get() // no current key yet
		return nil
	}), flowtest.NewSink[count]())
	err := env.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "without a current key") {
		t.Fatalf("want the no-key error, got %v", err)
	}
}

// A panic in user code fails the task, goes through the restart strategy and
// names the record it was processing.
func TestPanicNamesRecordAndRestarts(t *testing.T) {
	sink := flowtest.NewSink[event]()
	env := flow.New(quiet(), flow.Restart(restart.Config{Strategy: restart.FixedDelay, Attempts: 2, Delay: time.Millisecond}))
	s := flow.Map(flow.From(env, flowtest.NewSource(flowtest.Split(events(3, 3), 1))), func(e event) event {
		if e.Key == "k1" && e.Seq == 2 {
			panic("bad record")
		}
		return e
	})
	flow.To(s, sink)
	job, err := env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	err = job.Wait()
	var te *flow.TaskError
	if !errors.As(err, &te) {
		t.Fatalf("want a TaskError, got %v", err)
	}
	if te.Panic == nil || !strings.Contains(te.Position, "split-0@7") || !strings.Contains(te.Position, "Key:k1 Seq:2") {
		t.Fatalf("task error does not name the position and record: %+v", te)
	}
	if got := job.Stats().Restarts; got != 2 {
		t.Fatalf("restarts %d, want 2 (fixed-delay, 2 attempts)", got)
	}
	if !strings.Contains(err.Error(), "fixed-delay") {
		t.Fatalf("the final error should say why it stopped restarting: %v", err)
	}
}

// Two live instances of one job on one state directory would write the same
// checkpoints; the second is refused with a sentence saying what to do.
func TestStateDirIsLocked(t *testing.T) {
	dir := t.TempDir()
	build := func() *flow.Env {
		env := flow.New(quiet(), flow.JobName("locked"), flow.StateDir(dir), flow.Checkpointing(time.Second))
		flow.To(flow.From(env, flowtest.NewSource(flowtest.Split(events(1, 1), 1), flowtest.Unbounded())), flowtest.NewSink[event]())
		return env
	}
	first, err := build().Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first instance running", func() bool { return first.Stats().Running })
	// flock is per open file description, so a second job in this process
	// is refused just like a second process would be.
	err2 := build().Run(context.Background())
	if !errors.Is(err2, flow.ErrInvalidJob) || !strings.Contains(err2.Error(), "in use by another instance") {
		t.Fatalf("second instance: %v", err2)
	}
	first.Stop()
	if err := first.Wait(); err != nil {
		t.Fatal(err)
	}
	// Released: the job starts again.
	j, err := build().Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	j.Stop()
	if err := j.Wait(); err != nil {
		t.Fatalf("after release: %v", err)
	}
}
