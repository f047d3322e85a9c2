package scaleout_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/scaleout"
)

// A stop with a savepoint that a task cannot take part in (its job
// fails at every start) fails within the bound naming that task alone,
// and the tasks it had stopped run again: the job goes on.
func TestJobStopFailsNamingTheTaskAndResumes(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{Topics: map[string]int32{"in": 3, "out": 3}})
	c.Produce(t, "in", "k1", "a", "k2", "b", "k3", "c")
	dir := t.TempDir()
	in, err := scaleout.New(scaleout.Config{Job: "sf", Client: kafka.ClientConfig{Brokers: []string{c.Addr}}, Instance: "a",
		StateDir: filepath.Join(dir, "state"), Checkpoints: filepath.Join(dir, "shared"), SavepointTimeout: 3 * time.Second,
		Restart: flow.RestartConfig{Strategy: flow.FixedDelay, Attempts: 1000, Delay: 200 * time.Millisecond},
		Stages: []scaleout.Stage{{Topics: []string{"in"}, Build: func(tk *scaleout.Task) (*flow.Env, error) {
			if tk.Partition.Partition == 1 {
				return nil, errors.New("this task is broken on purpose")
			}
			env := flow.New(append(tk.Options(), flow.Checkpointing(100*time.Millisecond))...)
			src, err := tk.Source(kafka.SourceConfig{StartupMode: kafka.StartEarliest})
			if err != nil {
				return nil, err
			}
			sink, err := tk.Sink(kafka.SinkConfig{Topic: "out"})
			if err != nil {
				return nil, err
			}
			flow.To(flow.From(env, src, flow.UID("in")), sink, flow.UID("out"))
			return env, nil
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	running := func(why string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			n := 0
			for _, ts := range in.Tasks() {
				if ts.Running && ts.Savepointed == "" && ts.LastCheckpoint > 0 {
					n++
				}
			}
			if n == 2 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the two sound tasks do not run: %+v", why, in.Tasks())
			}
		}
	}
	running("at the start")
	_, err = in.Savepoint(t.Context(), "", true)
	if err == nil || !strings.Contains(err.Error(), "1 of 3 tasks took no savepoint") || !strings.Contains(err.Error(), "sf-in-1") ||
		strings.Contains(err.Error(), "sf-in-0") || strings.Contains(err.Error(), "sf-in-2") {
		t.Fatalf("stop with a task that cannot take its savepoint: %v; want it to fail naming sf-in-1 alone", err)
	}
	running("after the failed stop")
	select {
	case err := <-done:
		t.Fatalf("the instance stopped after a failed stop: %v", err)
	default:
	}
}
