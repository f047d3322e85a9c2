package dbtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
	"github.com/onceflow/onceflow/internal/failpoint"
	"github.com/onceflow/onceflow/internal/restart"
	"github.com/onceflow/onceflow/state"
)

// The crash tests of the database sinks: a test re-executes its own binary
// as a child process running CountJob into the sink under test, SIGKILLs
// it at random moments, runs it to the end, and checks the table with the
// database's own client.

// ChildEnv names the child's state directory; a test binary whose
// TestMain finds it runs the child instead of the tests.
const ChildEnv = "ONCEFLOW_DB_CHILD"

// To attaches sink to a stream (for RunCountJob).
func To[T any](sink flow.Sink[T]) func(flow.Stream[T]) {
	return func(s flow.Stream[T]) { flow.To(s, sink) }
}

// Event is an input record of CountJob.
type Event struct {
	Key string
	Seq int
}

// Count is an output record of CountJob: key's count so far.
type Count struct {
	Key string
	N   int64
	// Retract makes the record a retraction of its row (the scenarios
	// of deletes; Retracts tells it).
	Retract bool
}

// CountJobSpec is the input of CountJob.
type CountJobSpec struct {
	Keys, PerKey int
}

// Records is the input's size.
func (c CountJobSpec) Records() int { return c.Keys * c.PerKey }

// RunCountJob runs, in a child process, a job named job counting
// c.Records() records over c.Keys keys (2 source splits, keyed count at
// parallelism 2, 20 ms checkpoints, throttled to last about five seconds)
// into the sinks to attaches to the counts, with its state under dir. It
// returns the exit code.
func RunCountJob(dir, job string, c CountJobSpec, to func(flow.Stream[Count])) int {
	events := make([]Event, 0, c.Records())
	for i := range c.PerKey {
		for k := range c.Keys {
			events = append(events, Event{Key: "k" + strconv.Itoa(k), Seq: i})
		}
	}
	src := flowtest.NewSource(flowtest.Split(events, 2), flowtest.PerPoll(100))
	env := flow.New(flow.JobName(job), flow.Checkpointing(20*time.Millisecond),
		flow.StateDir(filepath.Join(dir, "state")), flow.RetainedCheckpoints(2),
		flow.Restart(restart.Config{Strategy: restart.None}), flow.Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	var seen atomic.Int64
	throttled := flow.Map(flow.From(env, src), func(e Event) Event {
		if seen.Add(1)%40 == 0 {
			time.Sleep(time.Millisecond)
		}
		return e
	})
	keyed := flow.KeyBy(throttled, func(e Event) string { return e.Key })
	counts := flow.Process(keyed, "count", func(s *state.Store) flow.ProcessFunc[Event, Count] {
		n := state.NewValue[int64](s, "n")
		return func(ctx flow.Context, e Event, out flow.Collector[Count]) error {
			c, _ := n.Get()
			c++
			n.Set(c)
			out.Emit(Count{Key: ctx.Key(), N: c})
			return nil
		}
	}, flow.WithParallelism(2))
	to(counts)
	if err := env.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

// CrashRun drives child processes that share one state directory.
type CrashRun struct {
	t   *testing.T
	dir string
	env []string
	exe string
}

// NewCrashRun returns a run whose children get env besides ChildEnv.
func NewCrashRun(t *testing.T, env ...string) *CrashRun {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return &CrashRun{t: t, dir: t.TempDir(), env: env, exe: exe}
}

// Start starts a child with extra environment.
func (r *CrashRun) Start(extra ...string) (*exec.Cmd, chan error) {
	cmd := exec.Command(r.exe, "-test.run=^$")
	cmd.Env = append(append(append(os.Environ(), ChildEnv+"="+r.dir), r.env...), extra...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return cmd, done
}

// KillAfter runs a child and SIGKILLs it after d; false if it ended on
// its own first (it finished the input).
func (r *CrashRun) KillAfter(d time.Duration) bool {
	cmd, done := r.Start()
	select {
	case err := <-done:
		if err != nil {
			r.t.Fatalf("child failed: %v", err)
		}
		return false
	case <-time.After(d):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
		return true
	}
}

// Finish runs a child to the end of its input.
func (r *CrashRun) Finish() {
	_, done := r.Start()
	if err := <-done; err != nil {
		r.t.Fatalf("final run: %v", err)
	}
}

// Kills SIGKILLs the job kills times at random moments, calling progress
// after each ("0" until the first commit). The first child is killed once
// it committed a checkpoint, which also measures how long a child takes to
// get going on this machine; the others die at random within 400 ms
// around that time, so that kills land before, during and after commits
// however slow the machine is. After three kills in a row without
// progress the next child is killed only once it committed, and the delay
// grows by half: a machine that slowed down (a loaded CI runner) still
// sees recovery tested. It fails the test when progress never changed.
func (r *CrashRun) Kills(rng *rand.Rand, kills int, progress func() string) {
	start := time.Now()
	r.KillAfterCommit(func() bool { return progress() != "0" })
	warm := time.Since(start)
	seen := []string{progress()}
	stuck := 0
	for i := 1; i < kills; i++ {
		if stuck >= 3 {
			// Three kills in a row before any commit: the machine is
			// slower now than at the first start (a loaded CI runner).
			// Let this child commit once more, and wait longer from now on.
			last := seen[len(seen)-1]
			warm += warm / 2
			stuck = 0
			if !r.killOnce(func() bool { return progress() != last }) {
				r.t.Logf("the job finished its input after %d kills", i)
				seen = append(seen, progress())
				break
			}
			seen = append(seen, progress())
			continue
		}
		d := warm/2 + time.Duration(rng.IntN(400))*time.Millisecond
		if !r.KillAfter(d) {
			r.t.Logf("the job finished its input after %d kills", i)
			break
		}
		p := progress()
		if p == seen[len(seen)-1] {
			stuck++
		} else {
			stuck = 0
		}
		seen = append(seen, p)
	}
	if seen[0] == seen[len(seen)-1] {
		r.t.Fatalf("no progress between the kills (%v): the kills came too early to test recovery", seen)
	}
	r.t.Logf("first commit after %v; progress after each kill: %v", warm.Round(time.Millisecond), seen)
}

// CrashKills is how many times a database sink's crash test SIGKILLs its
// job (Kills): 8 in the default run, what CI runs (each kill is a restore
// and a replay, about 1-2 s under -race on a loaded 2-core runner), 60
// with ONCEFLOW_LONG=1. Eight kills over the 200k records still land
// before, during and after commits (Kills spreads them around the first
// commit's time) and the final run counts every record.
func CrashKills() int {
	if os.Getenv("ONCEFLOW_LONG") != "" {
		return 60
	}
	return 8
}

// Seed returns a seeded generator, its seed logged for a replay with
// ONCEFLOW_SEED.
func Seed(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("ONCEFLOW_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (replay with ONCEFLOW_SEED=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, 0))
}

// killOnce runs a child and SIGKILLs it once committed() reports a new
// commit; false if the child finished its input first.
func (r *CrashRun) killOnce(committed func() bool) bool {
	cmd, done := r.Start()
	for deadline := time.Now().Add(time.Minute); !committed(); {
		select {
		case err := <-done:
			if err != nil {
				r.t.Fatalf("child failed: %v", err)
			}
			return false
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			r.t.Fatal("the child committed no checkpoint within a minute")
		}
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
	return true
}

// KillAfterCommit runs a child and SIGKILLs it once committed() reports a
// committed checkpoint, so that the next child has one to restore however
// slow the machine is.
func (r *CrashRun) KillAfterCommit(committed func() bool) {
	cmd, done := r.Start()
	for deadline := time.Now().Add(time.Minute); !committed(); {
		select {
		case err := <-done:
			r.t.Fatalf("the child ended before it committed a checkpoint: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			r.t.Fatal("the child committed no checkpoint within a minute")
		}
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// RejectsRecords is how many records RunRejects sends; every tenth (N
// divisible by 10) is one the tests' Row functions make unwritable.
const RejectsRecords = 1000

// RejectsUID is the uid of RunRejects's sink.
const RejectsUID = "sink"

// RunRejects runs, in this process, a job sending RejectsRecords records
// Count{Key: "r<N>", N: N} (N from 1) through two subtasks into sink,
// added with flow.OnRejected(policy), with 20 ms checkpoints, and returns
// its statistics.
func RunRejects(t *testing.T, job string, sink flow.Sink[Count], policy flow.ErrorPolicy) (flow.Stats, error) {
	t.Helper()
	recs := make([]Count, RejectsRecords)
	for i := range recs {
		recs[i] = Count{Key: "r" + strconv.Itoa(i+1), N: int64(i + 1)}
	}
	env := flow.New(flow.JobName(job), flow.Checkpointing(20*time.Millisecond), flow.StateDir(t.TempDir()),
		flow.Restart(restart.Config{Strategy: restart.None}), flow.Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	flow.To(flow.From(env, flowtest.NewSource(flowtest.Split(recs, 2), flowtest.PerPoll(50))), sink, flow.UID(RejectsUID), flow.OnRejected(policy))
	j, err := env.Start(context.Background())
	if err != nil {
		return flow.Stats{}, err
	}
	err = j.Wait()
	return j.Stats(), err
}

// RejectsDeadLetters is the DeadLetters.Of of RunRejects's records: id N,
// key the record's key.
func RejectsDeadLetters(c Count) (string, []byte, []byte) {
	return strconv.FormatInt(c.N, 10), []byte(c.Key), nil
}

// CrashAt runs a child whose failpoint fp crashes it (SIGKILL of itself)
// at its hit-th pass, and waits for that crash; it fails the test when the
// child ends otherwise or the failpoint never fires.
func (r *CrashRun) CrashAt(fp string, hit int) {
	r.t.Helper()
	_, done := r.Start(failpoint.EnvVar + "=" + fp + "=crash@" + strconv.Itoa(hit))
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			r.t.Fatalf("child with failpoint %s=crash@%d ended with %v, want killed by its failpoint", fp, hit, err)
		}
	case <-time.After(time.Minute):
		r.t.Fatalf("failpoint %s@%d never fired", fp, hit)
	}
}
