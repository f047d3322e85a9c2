package flow_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
	"github.com/onceflow/onceflow/internal/restart"
)

// recorder is a hook implementing every Hook interface.
type recorder struct {
	mu                          sync.Mutex
	started, completed, failed  int
	restored, restarting, ended int
	stateBytes, records         int64
	lastEnded                   error
}

func (r *recorder) OnCheckpointStarted(flow.CheckpointStarted) {
	r.mu.Lock()
	r.started++
	r.mu.Unlock()
}
func (r *recorder) OnCheckpointCompleted(e flow.CheckpointCompleted) {
	r.mu.Lock()
	r.completed++
	r.stateBytes = max(r.stateBytes, e.StateBytes)
	r.records += e.Records
	r.mu.Unlock()
}
func (r *recorder) OnCheckpointFailed(flow.CheckpointFailed) { r.mu.Lock(); r.failed++; r.mu.Unlock() }
func (r *recorder) OnRestored(flow.Restored)                 { r.mu.Lock(); r.restored++; r.mu.Unlock() }
func (r *recorder) OnRestarting(flow.Restarting)             { r.mu.Lock(); r.restarting++; r.mu.Unlock() }
func (r *recorder) OnJobEnded(e flow.JobEnded) {
	r.mu.Lock()
	r.ended++
	r.lastEnded = e.Err
	r.mu.Unlock()
}

// Hooks see every checkpoint, the failover and its restore, and the end;
// a hook implementing only some of the interfaces gets only those; the
// per-task counters of Stats add up.
func TestHooksAndTaskStats(t *testing.T) {
	const keys, perKey = 10, 40
	rec, partial := &recorder{}, &onlyEnded{}
	sink := flowtest.NewSink[count]()
	src := flowtest.NewSource(flowtest.Split(events(keys, perKey), 2), flowtest.PerPoll(5))
	env := flow.New(flow.JobName("hooks"), quiet(), flow.StateDir(t.TempDir()), flow.Checkpointing(5*time.Millisecond),
		flow.Restart(restart.Config{Strategy: restart.FixedDelay, Attempts: 1, Delay: time.Millisecond}), flow.WithHooks(rec, partial))
	var seen atomic.Int64
	var job atomic.Pointer[flow.Job]
	var failed atomic.Bool
	in := flow.Map(flow.From(env, src, flow.UID("src")), func(e event) event {
		time.Sleep(100 * time.Microsecond)
		if seen.Add(1) > 100 && !failed.Load() {
			if j := job.Load(); j != nil && j.Stats().LastCheckpoint > 0 && failed.CompareAndSwap(false, true) {
				panic("injected failure")
			}
		}
		return e
	})
	flow.To(flow.Process(flow.KeyBy(in, func(e event) string { return e.Key }), "count", countFn), sink, flow.UID("sink"))
	j, err := env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	job.Store(j)
	var tasks []flow.TaskStats
	for tasks == nil {
		if s := j.Stats(); s.Running && s.RecordsIn > 0 {
			tasks = s.Tasks
		}
		time.Sleep(time.Millisecond)
	}
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	t.Logf("hooks: %d started, %d completed, %d failed, %d restored, %d restarting, %d ended; max state %d bytes, %d records committed",
		rec.started, rec.completed, rec.failed, rec.restored, rec.restarting, rec.ended, rec.stateBytes, rec.records)
	switch {
	case rec.completed == 0 || rec.started < rec.completed:
		t.Errorf("checkpoint hooks: %d started, %d completed", rec.started, rec.completed)
	case rec.restarting != 1 || rec.restored != 1:
		t.Errorf("failover hooks: %d restarting, %d restored; want 1 and 1", rec.restarting, rec.restored)
	case rec.ended != 1 || rec.lastEnded != nil || partial.ended.Load() != 1:
		t.Errorf("end hooks: %d and %d, err %v", rec.ended, partial.ended.Load(), rec.lastEnded)
	case rec.stateBytes == 0:
		t.Error("no checkpoint reported state bytes")
	case rec.records != keys*perKey:
		t.Errorf("completed checkpoints committed %d records in all, want %d", rec.records, keys*perKey)
	}
	if len(tasks) != 2 || tasks[0].UID != "src" || tasks[0].Parallelism != 2 || tasks[1].UID != "count" {
		t.Errorf("task stats %+v: want the source task (2 subtasks) and the keyed task", tasks)
	}
}

type onlyEnded struct{ ended atomic.Int64 }

func (o *onlyEnded) OnJobEnded(flow.JobEnded) { o.ended.Add(1) }
