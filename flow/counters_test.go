package flow_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
	"github.com/onceflow/onceflow/internal/restart"
)

// The job's counters continue across processes: restarts (failovers, and a
// process that follows one that did not stop gracefully) and the records
// committed, which count output once even when an aborted epoch was
// written again.
func TestCountersCarryAcrossProcesses(t *testing.T) {
	const keys = 10
	state := t.TempDir()
	sink := flowtest.NewSink[count]()
	// run runs the count job over perKey events per key; failAt > 0 makes
	// the failAt-th record seen panic once (after a checkpoint committed).
	run := func(perKey int, failAt int64, opts ...flow.Option) (flow.Stats, error) {
		t.Helper()
		src := flowtest.NewSource(flowtest.Split(events(keys, perKey), 2), flowtest.PerPoll(5))
		env := flow.New(append([]flow.Option{flow.JobName("counters"), quiet(), flow.StateDir(state), flow.Checkpointing(5 * time.Millisecond)}, opts...)...)
		var seen atomic.Int64
		var job atomic.Pointer[flow.Job]
		var failed atomic.Bool
		in := flow.Map(flow.From(env, src, flow.UID("src")), func(e event) event {
			time.Sleep(100 * time.Microsecond)
			if n := seen.Add(1); failAt > 0 && !failed.Load() && n >= failAt {
				// Fail once a checkpoint committed; until then slow the
				// input down, so that it does not end first (barriers pass
				// between records).
				j := job.Load()
				if j == nil || j.Stats().LastCheckpoint == 0 {
					// 10 ms a record: 1.5 s for the first checkpoint to
					// commit on a loaded machine (1 ms was too short once).
					time.Sleep(10 * time.Millisecond)
				} else if failed.CompareAndSwap(false, true) {
					panic("injected failure")
				}
			}
			return e
		})
		keyed := flow.KeyBy(in, func(e event) string { return e.Key })
		flow.To(flow.Process(keyed, "count", countFn), sink, flow.UID("sink"))
		j, err := env.Start(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		job.Store(j)
		err = j.Wait()
		return j.Stats(), err
	}
	oneRestart := flow.Restart(restart.Config{Strategy: restart.FixedDelay, Attempts: 1, Delay: time.Millisecond})

	// Process 1 fails over once, then ends its bounded input gracefully.
	s, err := run(20, 50, oneRestart)
	if err != nil {
		t.Fatal(err)
	}
	if s.Restarts != 1 || s.RecordsCommitted != keys*20 {
		t.Fatalf("process 1: restarts %d, committed %d; want 1 and %d", s.Restarts, s.RecordsCommitted, keys*20)
	}
	if s.RecordsOut < s.RecordsCommitted {
		t.Errorf("process 1 wrote %d records and committed %d: written counts every record written, replays included", s.RecordsOut, s.RecordsCommitted)
	}
	t.Logf("process 1: written %d (replays included), committed %d", s.RecordsOut, s.RecordsCommitted)
	// Process 2 follows a graceful stop: no restart to count.
	if s, err = run(30, 0); err != nil {
		t.Fatal(err)
	}
	if s.Restarts != 1 || s.RecordsCommitted != keys*30 || s.RecordsOut != keys*10 {
		t.Fatalf("process 2: restarts %d, committed %d, written %d; want 1, %d, %d", s.Restarts, s.RecordsCommitted, s.RecordsOut, keys*30, keys*10)
	}
	// Process 3 dies (no restart allowed) after committing checkpoints.
	var te *flow.TaskError
	if _, err = run(60, 150, flow.Restart(restart.Config{Strategy: restart.None})); !errors.As(err, &te) {
		t.Fatalf("process 3: %v, want the injected failure", err)
	}
	// Process 4 follows one that failed: that is a restart.
	if s, err = run(60, 0); err != nil {
		t.Fatal(err)
	}
	if s.Restarts != 2 || s.RecordsCommitted != keys*60 {
		t.Fatalf("process 4: restarts %d, committed %d; want 2 and %d", s.Restarts, s.RecordsCommitted, keys*60)
	}
	if got := len(sink.Committed()); got != keys*60 {
		t.Fatalf("the sink holds %d committed records, want %d", got, keys*60)
	}
}

// A process that crashes before its first checkpoint restored the same
// checkpoint as the one before it. Its restart still counts: the counter
// must not live only in the manifests, which such a process never writes
// (docs/design.md, "Metrics and the REST API": restarts_total counts
// unclean process starts over the job's life).
func TestRestartsCountCrashesThatRestoreTheSameCheckpoint(t *testing.T) {
	const keys = 10
	state := t.TempDir()
	sink := flowtest.NewSink[count]()
	noRestart := flow.Restart(restart.Config{Strategy: restart.None})
	var restored []flow.Restored
	// run runs the count job; crash makes the first record of the
	// process panic, before any checkpoint can commit.
	run := func(perKey int, crash bool) (flow.Stats, error) {
		t.Helper()
		src := flowtest.NewSource(flowtest.Split(events(keys, perKey), 2), flowtest.PerPoll(5))
		interval := 5 * time.Millisecond
		if crash {
			interval = 5 * time.Minute
		}
		env := flow.New(flow.JobName("crashes"), quiet(), flow.StateDir(state), flow.Checkpointing(interval), noRestart,
			flow.WithHooks(restoredHook(func(e flow.Restored) { restored = append(restored, e) })))
		in := flow.Map(flow.From(env, src, flow.UID("src")), func(e event) event {
			if crash {
				panic("injected crash before the first checkpoint")
			}
			return e
		})
		keyed := flow.KeyBy(in, func(e event) string { return e.Key })
		flow.To(flow.Process(keyed, "count", countFn), sink, flow.UID("sink"))
		j, err := env.Start(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		err = j.Wait()
		return j.Stats(), err
	}
	// Process 1 ends gracefully: checkpoints, no restart.
	s, err := run(30, false)
	if err != nil {
		t.Fatal(err)
	}
	if s.Restarts != 0 {
		t.Fatalf("process 1: restarts %d, want 0", s.Restarts)
	}
	last := s.LastCheckpoint
	// A graceful end leaves a final checkpoint: force unclean ends with
	// three processes that crash at once. The first follows a clean stop
	// (no restart); each of the next two follows a crash.
	for i := 0; i < 3; i++ {
		var te *flow.TaskError
		if s, err = run(60, true); !errors.As(err, &te) {
			t.Fatalf("crashing process %d: %v, want the injected crash", i+2, err)
		}
		if s.RestoredCheckpoint != last {
			t.Fatalf("crashing process %d restored checkpoint %d, want %d", i+2, s.RestoredCheckpoint, last)
		}
		if want := int64(i); s.Restarts != want {
			t.Errorf("crashing process %d: restarts %d, want %d (every process that followed a crash counts)", i+2, s.Restarts, want)
		}
	}
	// Process 5 follows a crash too, and commits.
	if s, err = run(60, false); err != nil {
		t.Fatal(err)
	}
	if s.Restarts != 3 {
		t.Fatalf("process 5: restarts %d, want 3: processes 3, 4 and 5 each followed a crash", s.Restarts)
	}
	// The restore of a process that followed a crash says so.
	var crashes int
	for _, e := range restored {
		if e.AfterCrash {
			crashes++
		}
	}
	if crashes != 3 {
		t.Fatalf("%d restores said they followed a crash, want 3: %+v", crashes, restored)
	}
}

type restoredHook func(flow.Restored)

func (h restoredHook) OnRestored(e flow.Restored) { h(e) }

// A counter registered with JobLifeCounter continues across processes, as
// the engine's own job-life counters do: the checkpoints carry it (the job
// file's onceflow_window_late_records_total is one).
func TestJobLifeCounterCarriesAcrossProcesses(t *testing.T) {
	const keys = 10
	state := t.TempDir()
	sink := flowtest.NewSink[count]()
	run := func(perKey int) int64 {
		t.Helper()
		var seen atomic.Int64 // a fresh counter per process, as a new process has
		src := flowtest.NewSource(flowtest.Split(events(keys, perKey), 2), flowtest.PerPoll(5))
		env := flow.New(flow.JobName("jobcounter"), quiet(), flow.StateDir(state), flow.Checkpointing(5*time.Millisecond),
			flow.JobLifeCounter("seen", &seen))
		in := flow.Map(flow.From(env, src, flow.UID("src")), func(e event) event { seen.Add(1); return e })
		keyed := flow.KeyBy(in, func(e event) string { return e.Key })
		flow.To(flow.Process(keyed, "count", countFn), sink, flow.UID("sink"))
		j, err := env.Start(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Wait(); err != nil {
			t.Fatal(err)
		}
		return seen.Load()
	}
	if got := run(20); got != keys*20 {
		t.Fatalf("process 1 counted %d, want %d", got, keys*20)
	}
	// Process 2 reads 10 more per key after a graceful stop: no replay,
	// so the job-life count is exact.
	if got := run(30); got != keys*30 {
		t.Fatalf("process 2 counted %d, want %d: it continues process 1's count", got, keys*30)
	}
}
