package flow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
	"github.com/onceflow/onceflow/internal/restart"
)

// savepointChildEnv makes the test binary run savepointChild: a keyed
// count that takes a savepoint while it runs, commits a few more
// checkpoints and then waits to be killed.
const savepointChildEnv = "ONCEFLOW_SAVEPOINT_CHILD"

const spCrashKeys, spCrashPerKey = 40, 30

// spCrashJob is the job of TestSavepointWhileRunningThenSIGKILL, in the
// child and in the restarted run: a keyed count (uid "count") writing to a
// file sink in dir, with one retained checkpoint, so that the job's
// checkpoint directory holds as little as cleanup may leave.
func spCrashJob(dir string, src flow.Source[event], backend string) *flow.Env {
	sink := flowtest.NewFileSink(filepath.Join(dir, "out"), func(c count) []byte {
		b, _ := json.Marshal(c)
		return b
	})
	env := flow.New(flow.JobName("spcrash"), quiet(), flow.StateBackend(backend), flow.Checkpointing(5*time.Millisecond),
		flow.StateDir(filepath.Join(dir, "state")), flow.RetainedCheckpoints(1),
		flow.Restart(restart.Config{Strategy: restart.None}))
	keyed := flow.KeyBy(flow.From(env, src, flow.UID("src")), func(e event) string { return e.Key })
	flow.To(flow.Process(keyed, "count", countFn, flow.WithParallelism(2)), sink, flow.UID("sink"))
	return env
}

func savepointChild(dir string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "savepoint child:", err)
		return 1
	}
	src := flowtest.NewSource(flowtest.Split(events(spCrashKeys, spCrashPerKey), 2), flowtest.Unbounded())
	job, err := spCrashJob(dir, src, os.Getenv(backendEnv)).Start(context.Background())
	if err != nil {
		return fail(err)
	}
	until := func(cond func() bool) error {
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
			if time.Now().After(deadline) {
				return fmt.Errorf("timed out (stats %+v)", job.Stats())
			}
		}
		return nil
	}
	if err := until(func() bool { return job.Stats().RecordsCommitted == spCrashKeys*spCrashPerKey }); err != nil {
		return fail(err)
	}
	if _, err := job.TriggerSavepoint(context.Background(), filepath.Join(dir, "savepoint")); err != nil {
		return fail(err)
	}
	// Checkpoints after the savepoint, each followed by cleanup.
	n := job.Stats().CheckpointsCompleted
	if err := until(func() bool { return job.Stats().CheckpointsCompleted >= n+3 }); err != nil {
		return fail(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ready"), nil, 0o644); err != nil {
		return fail(err)
	}
	<-job.Done() // the parent SIGKILLs the process
	return fail(fmt.Errorf("the job ended before it was killed: %v", job.Wait()))
}

// A savepoint taken while the job runs, more checkpoints, then SIGKILL:
// the restarted job resumes its newest checkpoint, on either state
// backend, and every count continues exactly once. (With pebble the
// savepoint's cleanup used to delete the database files the following
// checkpoints referenced, so the restart was refused: "... .sst is
// missing".)
func TestSavepointWhileRunningThenSIGKILL(t *testing.T) {
	for _, backend := range []string{flow.MemoryBackend, flow.PebbleBackend} {
		t.Run(backend, func(t *testing.T) {
			r := newCrashRun(t, "exactly-once")
			r.child = savepointChildEnv
			cmd, done := r.start(backendEnv + "=" + backend)
			ready := filepath.Join(r.dir, "ready")
			for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				select {
				case err := <-done:
					t.Fatalf("the child ended before it was killed: %v", err)
				default:
				}
				if _, err := os.Stat(ready); err == nil {
					break
				}
				if time.Now().After(deadline) {
					_ = cmd.Process.Signal(syscall.SIGKILL)
					<-done
					t.Fatal("the child took no savepoint and three checkpoints within 60s")
				}
			}
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done

			// Every file the newest checkpoint lists is there.
			store := openStore(t, filepath.Join(r.dir, "state"), "spcrash")
			ids, err := store.List()
			if err != nil || len(ids) == 0 {
				t.Fatalf("no committed checkpoint after the kill (%v)", err)
			}
			if _, err := store.Load(ids[len(ids)-1]); err != nil {
				t.Fatalf("the newest checkpoint is damaged after a savepoint and a kill: %v", err)
			}

			// The restart resumes it: one more event per key counts
			// spCrashPerKey+1, exactly once.
			src := flowtest.NewSource(flowtest.Split(events(spCrashKeys, spCrashPerKey+1), 2))
			if err := spCrashJob(r.dir, src, backend).Run(context.Background()); err != nil {
				t.Fatalf("restart after the kill: %v", err)
			}
			checkCounts(t, r.output(), spCrashKeys, spCrashPerKey+1)
		})
	}
}
