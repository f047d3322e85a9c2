package flow_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow/checkpoint/s3"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
	"github.com/onceflow/onceflow/internal/checkpoint/storage"
	"github.com/onceflow/onceflow/internal/s3test"
)

// pebbleCountJob is countJob with keyed state in Pebble, whatever backend
// the test run asks for.
func pebbleCountJob(src flow.Source[event], sink flow.Sink[count], par int, opts ...flow.Option) *flow.Env {
	return countJob(src, sink, par, append([]flow.Option{flow.StateBackend(flow.PebbleBackend)}, opts...)...)
}

// runUntilCommitted runs env until the sink committed n records, then
// stops it gracefully.
func runUntilCommitted(t *testing.T, env *flow.Env, sink *flowtest.Sink[count], n int) {
	t.Helper()
	job, err := env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, fmt.Sprintf("%d records committed", n), func() bool { return len(sink.Committed()) >= n })
	job.Stop()
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
}

func openStore(t *testing.T, stateDir, job string) *storage.Store {
	t.Helper()
	s, err := storage.Open(filepath.Join(stateDir, job))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func sharedPaths(m *storage.Manifest, uid string) []string {
	var out []string
	for _, db := range m.Operators[uid].DB {
		for _, f := range db.Files {
			if f.Shared {
				out = append(out, f.Path)
			}
		}
	}
	slices.Sort(out)
	return out
}

// With Pebble, a checkpoint stores the database's files; while no input
// arrives, later checkpoints reference the same files and store nothing
// new; GC leaves exactly the files retained checkpoints reference.
func TestPebbleCheckpointsAreIncremental(t *testing.T) {
	const keys, perKey = 300, 10
	stateDir := t.TempDir()
	sink := flowtest.NewSink[count]()
	src := flowtest.NewSource(flowtest.Split(events(keys, perKey), 2), flowtest.Unbounded())
	env := pebbleCountJob(src, sink, 2, flow.Checkpointing(5*time.Millisecond), flow.StateDir(stateDir), flow.RetainedCheckpoints(3))
	job, err := env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "all records committed", func() bool { return len(sink.Committed()) == keys*perKey })
	first := job.Stats().CheckpointsCompleted
	waitFor(t, "three idle checkpoints", func() bool { return job.Stats().CheckpointsCompleted >= first+4 })
	job.Stop()
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}

	store := openStore(t, stateDir, "sp")
	ids, err := store.List()
	if err != nil || len(ids) != 3 {
		t.Fatalf("retained checkpoints %v (err %v), want 3", ids, err)
	}
	var prev []string
	referenced := map[string]bool{}
	for i, id := range ids {
		m, err := store.Load(id)
		if err != nil {
			t.Fatal(err)
		}
		op := m.Operators["count"]
		if len(op.Keyed) != 0 || len(op.DB) != 2 {
			t.Fatalf("checkpoint %d: %d keyed files and %d database snapshots, want 0 and 2 (one per subtask)", id, len(op.Keyed), len(op.DB))
		}
		paths := sharedPaths(m, "count")
		if len(paths) == 0 {
			t.Fatalf("checkpoint %d references no shared files", id)
		}
		for _, p := range paths {
			referenced[p] = true
		}
		if i > 0 && !slices.Equal(paths, prev) {
			t.Errorf("checkpoints %d and %d, taken without new input, reference different files:\n%v\n%v", ids[i-1], id, prev, paths)
		}
		prev = paths
	}
	files, err := store.SharedFiles()
	if err != nil {
		t.Fatal(err)
	}
	if want := slices.Sorted(maps.Keys(referenced)); !slices.Equal(files, want) {
		t.Errorf("shared area holds %v\nretained checkpoints reference %v", files, want)
	}
}

// Stop at parallelism 4, resume from the checkpoint at 2, then at 8: each
// subtask restores its key groups from the database snapshots that
// overlap them, and every count continues.
func TestPebbleRescaleFromCheckpoint(t *testing.T) {
	const keys, perKey = 200, 10
	stateDir := t.TempDir()
	sink := flowtest.NewSink[count]()
	src := flowtest.NewSource(flowtest.Split(events(keys, perKey), 4), flowtest.Unbounded())
	runUntilCommitted(t, pebbleCountJob(src, sink, 4, flow.Checkpointing(5*time.Millisecond), flow.StateDir(stateDir)), sink, keys*perKey)

	for i, par := range []int{2, 8, 3} {
		n0 := len(sink.Committed())
		before := lastCounts(sink.Committed())
		src := flowtest.NewSource(flowtest.Split(events(keys, perKey+i+1), 4), flowtest.Unbounded())
		runUntilCommitted(t, pebbleCountJob(src, sink, par, flow.Checkpointing(5*time.Millisecond), flow.StateDir(stateDir)), sink, n0+keys)
		after := sink.Committed()[n0:]
		if len(after) != keys {
			t.Fatalf("parallelism %d: %d outputs, want %d", par, len(after), keys)
		}
		for _, c := range after {
			if c.N != before[c.Key]+1 {
				t.Fatalf("key %s: count %d after a restore at parallelism %d, want %d", c.Key, c.N, par, before[c.Key]+1)
			}
		}
	}
}

// Checkpoints restore into the backend that took them, except that the
// heap's portable files restore into Pebble (migration); Pebble files go
// back to the heap through a savepoint.
func TestBackendMigration(t *testing.T) {
	const keys, perKey = 50, 4
	stateDir := t.TempDir()
	sink := flowtest.NewSink[count]()
	step := 0
	run := func(backend string, opts ...flow.Option) error {
		step++
		n0 := len(sink.Committed())
		before := lastCounts(sink.Committed())
		src := flowtest.NewSource(flowtest.Split(events(keys, perKey+step), 2), flowtest.Unbounded())
		env := countJob(src, sink, 2, append([]flow.Option{flow.StateBackend(backend), flow.Checkpointing(5 * time.Millisecond), flow.StateDir(stateDir)}, opts...)...)
		job, err := env.Start(context.Background())
		if err != nil {
			return err
		}
		want := keys * (perKey + step)
		if n0 > 0 {
			want = n0 + keys
		}
		deadline := time.Now().Add(20 * time.Second)
		for len(sink.Committed()) < want && time.Now().Before(deadline) {
			select {
			case <-job.Done():
				return job.Wait()
			case <-time.After(2 * time.Millisecond):
			}
		}
		job.Stop()
		if err := job.Wait(); err != nil {
			return err
		}
		for _, c := range sink.Committed()[n0:] {
			if n0 > 0 && c.N != before[c.Key]+1 {
				t.Fatalf("step %d (%s): key %s count %d, want %d", step, backend, c.Key, c.N, before[c.Key]+1)
			}
		}
		return nil
	}
	if err := run(flow.MemoryBackend); err != nil {
		t.Fatal(err)
	}
	if err := run(flow.PebbleBackend); err != nil {
		t.Fatalf("a heap checkpoint did not restore into pebble: %v", err)
	}
	err := run(flow.MemoryBackend)
	if !errors.Is(err, flow.ErrRestoreRefused) || !strings.Contains(err.Error(), "savepoint") {
		t.Fatalf("restoring pebble files into the heap: got %v, want a refusal that points to savepoints", err)
	}
	step--

	// Through a savepoint: take one with pebble, start the heap job from it.
	sp := filepath.Join(t.TempDir(), "sp")
	src := flowtest.NewSource(flowtest.Split(events(keys, perKey+step), 2), flowtest.Unbounded())
	job, err := pebbleCountJob(src, sink, 2, flow.StateDir(stateDir)).Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := job.StopWithSavepoint(context.Background(), sp); err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	stateDir = t.TempDir()
	if err := run(flow.MemoryBackend, flow.FromSavepoint(sp)); err != nil {
		t.Fatalf("the heap job did not start from a pebble savepoint: %v", err)
	}
}

// Checkpoints on S3: a job fails over once, stops, and its machine is lost
// (a new, empty state directory); started again it restores from the
// bucket, and every count continues.
func TestCheckpointsOnS3SurviveTheMachine(t *testing.T) {
	for _, backend := range []string{flow.PebbleBackend, flow.MemoryBackend} {
		t.Run(backend, func(t *testing.T) { checkpointsOnS3SurviveTheMachine(t, backend) })
	}
}

func checkpointsOnS3SurviveTheMachine(t *testing.T, backend string) {
	srv := s3test.Start(t, true)
	onS3 := s3.Checkpoints("s3://"+s3test.Bucket+"/jobs", s3.Options{Endpoint: srv.URL, Transport: srv.Transport})
	const keys, perKey = 100, 10
	sink := flowtest.NewSink[count]()
	var failed atomic.Bool
	build := func(perKey int, stateDir string, fail bool) *flow.Env {
		src := flowtest.NewSource(flowtest.Split(events(keys, perKey), 2), flowtest.Unbounded())
		env := flow.New(quiet(), flow.JobName("s3"), flow.StateBackend(backend), flow.StateDir(stateDir), onS3,
			flow.Checkpointing(5*time.Millisecond), flow.Restart(flow.RestartConfig{Strategy: flow.FixedDelay, Attempts: 1, Delay: time.Millisecond}))
		var seen atomic.Int64
		in := flow.Map(flow.From(env, src, flow.UID("src")), func(e event) event {
			if fail && seen.Add(1) == int64(keys*perKey/2) && failed.CompareAndSwap(false, true) {
				panic("injected failure")
			}
			return e
		})
		keyed := flow.KeyBy(in, func(e event) string { return e.Key })
		flow.To(flow.Process(keyed, "count", countFn), sink, flow.UID("sink"))
		return env
	}
	runUntilCommitted(t, build(perKey, t.TempDir(), true), sink, keys*perKey)
	if !failed.Load() {
		t.Fatal("the injected failure did not happen")
	}
	checkCounts(t, sink.Committed(), keys, perKey)

	before := lastCounts(sink.Committed())
	n0 := len(sink.Committed())
	runUntilCommitted(t, build(perKey+1, t.TempDir(), false), sink, n0+keys)
	for _, c := range sink.Committed()[n0:] {
		if c.N != before[c.Key]+1 {
			t.Fatalf("key %s: count %d on a new machine, want %d", c.Key, c.N, before[c.Key]+1)
		}
	}
}

// slowGets delays every read of a shared state file.
type slowGets struct {
	next  http.RoundTripper
	delay time.Duration
	gets  atomic.Int64
}

func (s *slowGets) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/shared/") {
		s.gets.Add(1)
		time.Sleep(s.delay)
	}
	return s.next.RoundTrip(r)
}

// A restore that takes long while checkpoints are due every millisecond
// and GC keeps one: no checkpoint can commit (and no GC remove the files
// being read) before every subtask has restored, because each must
// acknowledge it. The restore, at another parallelism, completes and every
// count continues.
func TestGCDoesNotRaceARestore(t *testing.T) {
	srv := s3test.Start(t, true)
	slow := &slowGets{next: srv.Transport}
	const keys, perKey = 200, 5
	sink := flowtest.NewSink[count]()
	run := func(par, perKey int, tr http.RoundTripper) {
		src := flowtest.NewSource(flowtest.Split(events(keys, perKey), 2), flowtest.Unbounded())
		env := pebbleCountJob(src, sink, par, flow.StateDir(t.TempDir()), flow.Checkpointing(time.Millisecond), flow.RetainedCheckpoints(1),
			s3.Checkpoints("s3://"+s3test.Bucket+"/gc", s3.Options{Endpoint: srv.URL, Transport: tr}))
		n := len(sink.Committed())
		if n == 0 {
			n = keys * perKey
		} else {
			n += keys
		}
		runUntilCommitted(t, env, sink, n)
	}
	run(4, perKey, srv.Transport)
	before := lastCounts(sink.Committed())
	n0 := len(sink.Committed())
	slow.delay = 20 * time.Millisecond
	run(3, perKey+1, slow)
	if slow.gets.Load() == 0 {
		t.Fatal("the restore read no shared file")
	}
	for _, c := range sink.Committed()[n0:] {
		if c.N != before[c.Key]+1 {
			t.Fatalf("key %s: count %d after a slow restore, want %d", c.Key, c.N, before[c.Key]+1)
		}
	}
}

// A retained pebble checkpoint of another state directory, given as the
// savepoint to start from: the new job stores its own copies of the files,
// so it keeps working once the other directory is gone.
func TestStartFromAnotherDirectorysPebbleCheckpoint(t *testing.T) {
	const keys, perKey = 50, 4
	sink := flowtest.NewSink[count]()
	dirA, dirB := t.TempDir(), t.TempDir()
	src := func(perKey int) flow.Source[event] {
		return flowtest.NewSource(flowtest.Split(events(keys, perKey), 2), flowtest.Unbounded())
	}
	runUntilCommitted(t, pebbleCountJob(src(perKey), sink, 2, flow.Checkpointing(5*time.Millisecond), flow.StateDir(dirA)), sink, keys*perKey)
	ids, err := openStore(t, dirA, "sp").List()
	if err != nil || len(ids) == 0 {
		t.Fatalf("no checkpoint in %s: %v", dirA, err)
	}
	chk := openStore(t, dirA, "sp").Dir(ids[len(ids)-1])

	for i, opts := range [][]flow.Option{{flow.FromSavepoint(chk)}, nil} {
		before, n0 := lastCounts(sink.Committed()), len(sink.Committed())
		runUntilCommitted(t, pebbleCountJob(src(perKey+i+1), sink, 2, append(opts, flow.Checkpointing(5*time.Millisecond), flow.StateDir(dirB))...), sink, n0+keys)
		for _, c := range sink.Committed()[n0:] {
			if c.N != before[c.Key]+1 {
				t.Fatalf("run %d: key %s count %d, want %d", i, c.Key, c.N, before[c.Key]+1)
			}
		}
		if i == 0 {
			if err := os.RemoveAll(dirA); err != nil {
				t.Fatal(err)
			}
		}
	}
}
