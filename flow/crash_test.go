package flow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/onceflow/onceflow/internal/checkpoint"
	"github.com/onceflow/onceflow/internal/failpoint"
	"github.com/onceflow/onceflow/internal/restart"
)

// The crash test re-executes this test binary as a child process that runs
// a keyed count job with a durable sink, and SIGKILLs it at random moments.
const childEnv = "ONCEFLOW_CRASH_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		os.Exit(crashChild(dir))
	}
	if dir := os.Getenv(windowChildEnv); dir != "" {
		os.Exit(windowChild(dir))
	}
	if dir := os.Getenv(savepointChildEnv); dir != "" {
		os.Exit(savepointChild(dir))
	}
	if dir := os.Getenv(unionChildEnv); dir != "" {
		os.Exit(unionChild(dir))
	}
	if dir := os.Getenv(coChildEnv); dir != "" {
		os.Exit(coChild(dir))
	}
	os.Exit(m.Run())
}

const crashKeys, crashPerKey = 16, 3000

func crashChild(dir string) int {
	mode := checkpoint.ExactlyOnce
	if os.Getenv("ONCEFLOW_CRASH_MODE") == "at-least-once" {
		mode = checkpoint.AtLeastOnce
	}
	src := flowtest.NewSource(flowtest.Split(events(crashKeys, crashPerKey), 3), flowtest.PerPoll(20))
	sink := flowtest.NewFileSink(filepath.Join(dir, "out"), func(c count) []byte {
		b, _ := json.Marshal(c)
		return b
	})
	env := flow.New(flow.JobName("crash"), flow.Checkpointing(15*time.Millisecond), flow.CheckpointMode(mode),
		flow.StateDir(filepath.Join(dir, "state")), flow.RetainedCheckpoints(2),
		flow.Restart(restart.Config{Strategy: restart.None}), quiet())
	// Throttle so that an undisturbed run lasts a couple of seconds.
	var n atomic.Int64
	throttled := flow.Map(flow.From(env, src), func(e event) event {
		if n.Add(1)%10 == 0 {
			time.Sleep(time.Millisecond)
		}
		return e
	})
	keyed := flow.KeyBy(throttled, func(e event) string { return e.Key })
	flow.To(flow.Process(keyed, "count", countFn, flow.WithParallelism(2)), sink)
	if err := env.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

// crashRun drives child processes sharing one state and output directory.
type crashRun struct {
	t    *testing.T
	dir  string
	mode string
	exe  string
	// child is the environment variable choosing the child's job
	// (childEnv: the keyed count; windowChildEnv: event-time windows).
	child string
	// killed counts the children killAfter killed.
	killed int
}

func newCrashRun(t *testing.T, mode string) *crashRun {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return &crashRun{t: t, dir: t.TempDir(), mode: mode, exe: exe, child: childEnv}
}

func (r *crashRun) start(env ...string) (*exec.Cmd, chan error) {
	cmd := exec.Command(r.exe, "-test.run=^$")
	cmd.Env = append(append(os.Environ(), r.child+"="+r.dir, "ONCEFLOW_CRASH_MODE="+r.mode), env...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return cmd, done
}

// killAfter runs a child and SIGKILLs it after d. It fails the test if
// the first child ended on its own first (the job is too short to be
// crashed); a later one that finishes what the killed ones left (a
// machine faster than the delays assume, such as without -race) ends the
// kills, and finish checks the output as always.
func (r *crashRun) killAfter(d time.Duration) {
	cmd, done := r.start()
	select {
	case err := <-done:
		if err != nil || r.killed == 0 {
			r.t.Fatalf("the child ended before it was killed (err %v): make the job longer", err)
		}
	case <-time.After(d):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
		r.killed++
	}
}

// killAfterCheckpoint runs a child and SIGKILLs it once it has committed a
// checkpoint, so that the next child has something to restore whatever the
// machine's speed.
func (r *crashRun) killAfterCheckpoint() {
	cmd, done := r.start()
	pattern := filepath.Join(r.dir, "state", "crash", "checkpoints", "chk-*", "_manifest")
	for deadline := time.Now().Add(30 * time.Second); ; {
		select {
		case err := <-done:
			r.t.Fatalf("the child ended before it was killed (err %v): make the job longer", err)
		default:
		}
		if m, _ := filepath.Glob(pattern); len(m) > 0 {
			break
		}
		if time.Now().After(deadline) {
			r.t.Fatal("the child committed no checkpoint within 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// finish runs a child to the end of its input.
func (r *crashRun) finish() {
	_, done := r.start()
	if err := <-done; err != nil {
		r.t.Fatalf("final run: %v", err)
	}
}

func (r *crashRun) output() []count {
	lines, err := flowtest.ReadCommitted(filepath.Join(r.dir, "out"))
	if err != nil {
		r.t.Fatal(err)
	}
	var got []count
	for _, l := range lines {
		var c count
		if err := json.Unmarshal(l, &c); err != nil {
			r.t.Fatalf("bad output line %q: %v", l, err)
		}
		got = append(got, c)
	}
	return got
}

func crashSeed(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("ONCEFLOW_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (replay with ONCEFLOW_SEED=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, 0))
}

func runCrashTest(t *testing.T, mode string, kills int) {
	rng := crashSeed(t)
	r := newCrashRun(t, mode)
	for i := 0; i < kills; i++ {
		r.killAfter(time.Duration(20+rng.IntN(150)) * time.Millisecond)
	}
	r.finish()
	got := r.output()
	if mode == "exactly-once" {
		checkCounts(t, got, crashKeys, crashPerKey)
		return
	}
	// At-least-once: every count 1..n appears at least once per key.
	seen := map[string]map[int64]bool{}
	for _, c := range got {
		if seen[c.Key] == nil {
			seen[c.Key] = map[int64]bool{}
		}
		seen[c.Key][c.N] = true
	}
	for k := 0; k < crashKeys; k++ {
		key := "k" + strconv.Itoa(k)
		for n := int64(1); n <= crashPerKey; n++ {
			if !seen[key][n] {
				t.Fatalf("at-least-once lost count %d of key %s", n, key)
			}
		}
	}
	t.Logf("at-least-once: %d outputs for %d inputs", len(got), crashKeys*crashPerKey)
}

// requireFailpoints skips a test in a build without failpoints.
func requireFailpoints(t *testing.T) {
	t.Helper()
	if !failpoint.Available() {
		t.Skip("needs failpoints: run with -tags " + failpoint.BuildTag + " (./scripts/test does)")
	}
}

// Every failpoint of the engine's commit protocol, as a crash of the whole
// process: the restarted job's output is still exactly once.
func TestFailpointCrashes(t *testing.T) {
	runFailpointCrashes(t, childEnv, func(t *testing.T, r *crashRun) { checkCounts(t, r.output(), crashKeys, crashPerKey) })
}

// runFailpointCrashes crashes the job of child at each protocol failpoint
// (a seeded hit), runs it to its end and checks its output with check.
func runFailpointCrashes(t *testing.T, child string, check func(*testing.T, *crashRun)) {
	requireFailpoints(t)
	rng := crashSeed(t)
	for _, fp := range protocolFailpoints() {
		hit := 1 + rng.IntN(5)
		if fp == failpoint.DuringRestore {
			hit = 1 // a process restores once, at its start
		}
		t.Run(fp, func(t *testing.T) {
			t.Parallel() // the children mostly sleep (throttled)
			r := newCrashRun(t, "exactly-once")
			r.child = child
			if fp == failpoint.DuringRestore {
				r.killAfterCheckpoint() // something to restore
			}
			_, done := r.start(failpoint.EnvVar + "=" + fp + "=crash@" + strconv.Itoa(hit))
			select {
			case err := <-done:
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
					t.Fatalf("child with failpoint %s=crash@%d ended with %v, want killed by its failpoint", fp, hit, err)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("failpoint %s@%d never fired", fp, hit)
			}
			r.finish()
			check(t, r)
		})
	}
}

// protocolFailpoints are the failpoints a keyed job with a durable sink
// passes through, the upload of incremental state included (both
// backends' checkpoints are incremental).
func protocolFailpoints() []string {
	return []string{failpoint.AfterAlignment, failpoint.AfterSnapshotWritten, failpoint.MidManifestWrite,
		failpoint.AfterSinkPrepare, failpoint.AfterCommitPoint, failpoint.DuringRestore, failpoint.MidStateUpload}
}

func crashKills() int {
	if os.Getenv("ONCEFLOW_LONG") != "" {
		return 100
	}
	return 12
}

func TestSIGKILLExactlyOnce(t *testing.T) { runCrashTest(t, "exactly-once", crashKills()) }

func TestSIGKILLAtLeastOnce(t *testing.T) { runCrashTest(t, "at-least-once", crashKills()/2) }

// The same failpoints returning errors inside one process: the failure goes
// through the restart strategy (or declines the checkpoint) and the output
// is still exactly once.
func TestFailpointErrors(t *testing.T) {
	requireFailpoints(t)
	for _, fp := range protocolFailpoints() {
		t.Run(fp, func(t *testing.T) {
			enableErrorOnce(t, fp)
			sink := flowtest.NewSink[count]()
			src := flowtest.NewSource(flowtest.Split(events(8, 300), 3), flowtest.PerPoll(10))
			env := flow.New(quiet(), flow.JobName("fp"), flow.Checkpointing(time.Millisecond), flow.StateDir(t.TempDir()),
				flow.Restart(restart.Config{Strategy: restart.FixedDelay, Attempts: 3, Delay: time.Millisecond}))
			slow := flow.Map(flow.From(env, src), func(e event) event {
				if e.Seq%10 == 0 {
					time.Sleep(100 * time.Microsecond)
				}
				return e
			})
			keyed := flow.KeyBy(slow, func(e event) string { return e.Key })
			flow.To(flow.Process(keyed, "count", countFn, flow.WithParallelism(2)), sink)
			runFiredOnce(t, env, fp, sink)
			checkCounts(t, sink.Committed(), 8, 300)
		})
	}
}

// runFiredOnce runs env to its end, restarting after the failure fp
// injects, and checks fp fired exactly once and the sink saw no error.
func runFiredOnce(t *testing.T, env *flow.Env, fp string, sink interface{ Err() error }) {
	t.Helper()
	job, err := env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	if failpoint.Fired()[fp] != 1 {
		t.Fatalf("failpoint fired %d times, want 1 (stats %+v)", failpoint.Fired()[fp], job.Stats())
	}
	if err := sink.Err(); err != nil {
		t.Fatal(err)
	}
}

// enableErrorOnce makes failpoint fp return an error once, for this test.
func enableErrorOnce(t *testing.T, fp string) {
	t.Helper()
	spec := fp + "=error@2"
	if fp == failpoint.DuringRestore {
		// A restore needs a failure first; the restore then fails once too.
		spec = failpoint.AfterSinkPrepare + "=error@3;" + fp + "=error@1"
	}
	if err := failpoint.Enable(spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = failpoint.Enable("") })
}
