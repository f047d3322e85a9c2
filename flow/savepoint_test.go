package flow_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
)

// quiet discards the job's log and selects the state backend the test run
// asks for: scripts/test runs this package's tests once per backend.
func quiet() flow.Option {
	return func(e *flow.Env) {
		flow.Logger(slog.New(slog.NewTextHandler(io.Discard, nil)))(e)
		testBackend()(e)
	}
}

// backendEnv names the state backend tests run with (default: memory).
const backendEnv = "ONCEFLOW_TEST_STATE_BACKEND"

func testBackend() flow.Option {
	if b := os.Getenv(backendEnv); b != "" {
		return flow.StateBackend(b)
	}
	return func(*flow.Env) {}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// countJob builds source -> keyBy -> count(uid "count") -> sink.
func countJob(src flow.Source[event], sink flow.Sink[count], par int, opts ...flow.Option) *flow.Env {
	env := flow.New(append([]flow.Option{flow.JobName("sp"), quiet()}, opts...)...)
	keyed := flow.KeyBy(flow.From(env, src, flow.UID("src")), func(e event) string { return e.Key })
	flow.To(flow.Process(keyed, "count", countFn, flow.WithParallelism(par)), sink, flow.UID("sink"))
	return env
}

// lastCounts returns each key's highest committed count.
func lastCounts(cs []count) map[string]int64 {
	m := map[string]int64{}
	for _, c := range cs {
		m[c.Key] = max(m[c.Key], c.N)
	}
	return m
}

// Run with parallelism 4, stop with a savepoint, resume with 2 and with 8:
// every key's state is found again (counts continue from where they were).
func TestRescaleFromSavepoint(t *testing.T) {
	const keys, perKey = 200, 20
	stateDir := t.TempDir()
	spDir := filepath.Join(t.TempDir(), "sp1")
	sink := flowtest.NewSink[count]()
	src := flowtest.NewSource(flowtest.Split(events(keys, perKey), 4), flowtest.Unbounded())
	env := countJob(src, sink, 4, flow.Checkpointing(10*time.Millisecond), flow.StateDir(stateDir))
	job, err := env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "all records committed", func() bool { return len(sink.Committed()) == keys*perKey })
	path, err := job.StopWithSavepoint(context.Background(), spDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	before := lastCounts(sink.Committed())
	// The same sink object stands for the same external system: restoring
	// re-commits the savepoint's handles, which must be idempotent.

	for _, par := range []int{2, 8} {
		t.Run("parallelism-"+string(rune('0'+par)), func(t *testing.T) {
			n0 := len(sink.Committed())
			// The input grew by one event per key (as a topic does): the
			// restored source positions skip what was read, and every
			// count must continue at perKey+1.
			src2 := flowtest.NewSource(flowtest.Split(events(keys, perKey+1), 4))
			env2 := countJob(src2, sink, par, flow.StateDir(t.TempDir()), flow.FromSavepoint(path))
			if err := env2.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			after := sink.Committed()[n0:]
			if len(after) != keys {
				t.Fatalf("got %d outputs, want %d", len(after), keys)
			}
			for _, c := range after {
				if c.N != before[c.Key]+1 {
					t.Fatalf("key %s: count %d after restore with parallelism %d, want %d", c.Key, c.N, par, before[c.Key]+1)
				}
			}
		})
	}
}

func TestSavepointWhileRunningAndUIDMapping(t *testing.T) {
	const keys, perKey = 10, 10
	sink := flowtest.NewSink[count]()
	src := flowtest.NewSource(flowtest.Split(events(keys, perKey), 2), flowtest.Unbounded())
	env := countJob(src, sink, 2, flow.StateDir(t.TempDir()))
	job, err := env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Checkpointing is off: the savepoint alone commits the sink.
	waitFor(t, "source opened", func() bool { return src.Opened() == 2 })
	var path string
	waitFor(t, "a savepoint covering all input", func() bool {
		p, err := job.TriggerSavepoint(context.Background(), filepath.Join(t.TempDir(), "sp"))
		if err != nil {
			t.Fatal(err)
		}
		path = p
		return len(sink.Committed()) == keys*perKey
	})
	job.Stop()
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}

	// A job without the keyed operator "count" must refuse the savepoint...
	other := func(opts ...flow.Option) *flow.Env {
		env := flow.New(append([]flow.Option{flow.JobName("sp"), quiet(), flow.StateDir(t.TempDir()), flow.FromSavepoint(path)}, opts...)...)
		keyed := flow.KeyBy(flow.From(env, flowtest.NewSource(flowtest.Split(events(1, 1), 1)), flow.UID("other-src")), func(e event) string { return e.Key })
		flow.To(flow.Process(keyed, "renamed", countFn), sink, flow.UID("sink"))
		return env
	}
	err = other().Run(context.Background())
	if !errors.Is(err, flow.ErrRestoreRefused) || !strings.Contains(err.Error(), "count") || !strings.Contains(err.Error(), "allow-non-restored-state") {
		t.Fatalf("want a refusal naming operator count and the flag, got %v", err)
	}
	// ...unless dropping it is allowed.
	if err := other(flow.AllowNonRestoredState()).Run(context.Background()); err != nil {
		t.Fatalf("with AllowNonRestoredState: %v", err)
	}
}

// --from-savepoint left in place after the job started from the savepoint
// once: the next start must not go back to the savepoint (that would count
// everything since a second time); it resumes the job's newest checkpoint,
// which descends from the savepoint. With a new state directory the same
// flag still restores the savepoint.
func TestSavepointFlagLeftInPlace(t *testing.T) {
	const keys, perKey = 20, 10
	spDir := filepath.Join(t.TempDir(), "sp")
	sink := flowtest.NewSink[count]()
	src := flowtest.NewSource(flowtest.Split(events(keys, perKey), 2), flowtest.Unbounded())
	job, err := countJob(src, sink, 2, flow.Checkpointing(10*time.Millisecond), flow.StateDir(t.TempDir())).Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "all records committed", func() bool { return len(sink.Committed()) == keys*perKey })
	path, err := job.StopWithSavepoint(context.Background(), spDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}

	state := t.TempDir()
	run := func(perKey int, opts ...flow.Option) []count {
		t.Helper()
		n0 := len(sink.Committed())
		src := flowtest.NewSource(flowtest.Split(events(keys, perKey), 2))
		if err := countJob(src, sink, 2, append([]flow.Option{flow.Checkpointing(10 * time.Millisecond), flow.FromSavepoint(path)}, opts...)...).Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		return sink.Committed()[n0:]
	}
	// Started from the savepoint: one more event per key, counts 11.
	for _, c := range run(perKey+1, flow.StateDir(state)) {
		if c.N != perKey+1 {
			t.Fatalf("first start from the savepoint: key %s count %d, want %d", c.Key, c.N, perKey+1)
		}
	}
	// The flag is still there and the input grew again: counts continue
	// at 12; going back to the savepoint would count 11 and 12 again.
	got := run(perKey+2, flow.StateDir(state))
	if len(got) != keys {
		t.Fatalf("second start: %d outputs, want %d (one per key)", len(got), keys)
	}
	for _, c := range got {
		if c.N != perKey+2 {
			t.Fatalf("second start with the flag left in place: key %s count %d, want %d", c.Key, c.N, perKey+2)
		}
	}
	// A new state directory restores the savepoint itself.
	for _, c := range run(perKey+1, flow.StateDir(t.TempDir())) {
		if c.N != perKey+1 {
			t.Fatalf("start from the savepoint with a new state directory: key %s count %d, want %d", c.Key, c.N, perKey+1)
		}
	}
}

// --from-savepoint naming one of the job's own retained checkpoints (the
// README allows it), left in place: the job's cleanup removes that
// checkpoint once newer ones exist, and a later start with the same flag
// must resume the job's newest checkpoint, which descends from it, instead
// of refusing because the directory is gone.
func TestSavepointFlagNamingARemovedRetainedCheckpoint(t *testing.T) {
	const keys, perKey = 20, 10
	state := t.TempDir()
	sink := flowtest.NewSink[count]()
	run := func(perKey int, opts ...flow.Option) []count {
		t.Helper()
		n0 := len(sink.Committed())
		src := flowtest.NewSource(flowtest.Split(events(keys, perKey), 2))
		opts = append([]flow.Option{flow.Checkpointing(10 * time.Millisecond), flow.StateDir(state), flow.RetainedCheckpoints(1)}, opts...)
		if err := countJob(src, sink, 2, opts...).Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		return sink.Committed()[n0:]
	}
	run(perKey)
	ids, err := openStore(t, state, "sp").List()
	if err != nil || len(ids) == 0 {
		t.Fatalf("no retained checkpoint after the first run (%v)", err)
	}
	chk := openStore(t, state, "sp").Dir(ids[len(ids)-1])

	// Started from the retained checkpoint: counts continue at perKey+1,
	// and cleanup removes the checkpoint the flag names.
	for _, c := range run(perKey+1, flow.FromSavepoint(chk)) {
		if c.N != perKey+1 {
			t.Fatalf("start from retained checkpoint %s: key %s count %d, want %d", chk, c.Key, c.N, perKey+1)
		}
	}
	if _, err := os.Stat(filepath.Join(chk, "_manifest")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the checkpoint the flag names is still there (%v): the test needs cleanup to have removed it", err)
	}

	// The flag is still there: the job resumes its newest checkpoint.
	got := run(perKey+2, flow.FromSavepoint(chk))
	if len(got) != keys {
		t.Fatalf("start with the flag naming a removed checkpoint: %d outputs, want %d (one per key)", len(got), keys)
	}
	for _, c := range got {
		if c.N != perKey+2 {
			t.Fatalf("start with the flag naming a removed checkpoint: key %s count %d, want %d", c.Key, c.N, perKey+2)
		}
	}
	// Another state directory has nothing that descends from it: refused,
	// naming the path.
	src := flowtest.NewSource(flowtest.Split(events(keys, perKey), 2))
	err = countJob(src, sink, 2, flow.StateDir(t.TempDir()), flow.FromSavepoint(chk)).Run(context.Background())
	if !errors.Is(err, flow.ErrRestoreRefused) || !strings.Contains(err.Error(), chk) {
		t.Fatalf("a new state directory with the flag naming a removed checkpoint: got %v, want a refusal naming %s", err, chk)
	}
}
