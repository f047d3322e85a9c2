package scaleout

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// A zombie's task that fails to restore because its partition moved
// meanwhile (the new owner's checkpoints collected the files it was
// reading: "checkpoint … is damaged", seen in a chaos run after a pause
// past the session timeout) stops that task, not the instance: the
// instance goes on with its other tasks. A refused restore of a
// partition the instance still owns stops it, as before.
func TestRefusedRestoreOfAMovedPartitionKeepsTheInstance(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{Topics: map[string]int32{"in": 2}})
	dir := t.TempDir()
	var lost, builds atomic.Int32
	refuse := func(tk *Task) (*flow.Env, error) {
		builds.Add(1)
		if tk.Partition.Partition == 0 && lost.Load() > 0 {
			return nil, fmt.Errorf("restore refused: checkpoint 42 is damaged: %w", flow.ErrRestoreRefused)
		}
		return nil, fmt.Errorf("the database is down")
	}
	in, err := New(Config{Job: "zj", Client: kafka.ClientConfig{Brokers: []string{c.Addr}}, Instance: "a",
		StateDir: filepath.Join(dir, "state"), Checkpoints: filepath.Join(dir, "shared"),
		Restart: flow.RestartConfig{Strategy: flow.FixedDelay, Attempts: 1000, Delay: 100 * time.Millisecond},
		Stages:  []Stage{{Topics: []string{"in"}, Build: refuse}}})
	if err != nil {
		t.Fatal(err)
	}
	in.lostWait = 2 * time.Second
	in.testOwns = func(p kafka.Partition) bool { return p.Partition != 0 || lost.Load() < 2 }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	for builds.Load() < 4 {
		time.Sleep(50 * time.Millisecond)
	}
	lost.Store(2) // the group moved in/0 away, and its restore is refused
	select {
	case err := <-done:
		t.Fatalf("the instance stopped when a moved partition's restore was refused: %v", err)
	case <-time.After(4 * time.Second):
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}

	// Owned still: the refusal stops the instance.
	lost.Store(1)
	in2, err := New(Config{Job: "zj2", Client: kafka.ClientConfig{Brokers: []string{c.Addr}}, Instance: "a",
		StateDir: filepath.Join(dir, "state"), Checkpoints: filepath.Join(dir, "shared"), Stages: []Stage{{Topics: []string{"in"}, Build: refuse}}})
	if err != nil {
		t.Fatal(err)
	}
	in2.lostWait = time.Second
	go func() { done <- in2.Run(context.Background()) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Run returned nil after a refused restore of an owned partition")
		}
	case <-time.After(time.Minute):
		t.Fatal("the instance did not stop after a refused restore of a partition it owns")
	}
}

// A partition lost (or revoked) and given back before its task ended:
// the new task waits for the old one, which still holds the task's
// state directory lock. Seen in a chaos run: the member's loss (its
// reconcile) and the new assignment came from different goroutines, the
// new task found the directory locked ("in use by another instance"), an
// invalid job, and the instance exited.
func TestTaskGivenBackWaitsForItsStoppingPredecessor(t *testing.T) {
	in := testInstance(t, 1, func(c *Config) { c.StopTimeout = time.Millisecond })
	p := kafka.Partition{Topic: "t0", Partition: 0}
	old := &Task{Partition: p, Name: TaskName("j", p), in: in, done: make(chan struct{}), quit: make(chan struct{})}
	in.tasks[p] = old
	stopped := make(chan struct{})
	go func() {
		in.stopTasks([]kafka.Partition{p}, "lost")
		close(stopped)
	}()
	for !old.stopped.Load() {
		time.Sleep(time.Millisecond)
	}
	in.assigned(context.Background(), []kafka.Partition{p})
	in.mu.Lock()
	nt := in.tasks[p]
	in.mu.Unlock()
	if nt == nil || nt.prev != old {
		t.Fatalf("the task given back does not wait for the one still stopping (prev %p, want %p)", nt.prev, old)
	}
	close(old.done)
	<-stopped
	close(in.joined)
	in.wg.Wait()
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.stopping) != 0 {
		t.Errorf("stopping tasks left: %v", in.stopping)
	}
}
