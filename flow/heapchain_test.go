package flow_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
	"github.com/onceflow/onceflow/internal/checkpoint/storage"
)

// memoryCountJob is countJob with keyed state in the heap, whatever
// backend the test run asks for, slow enough for checkpoints to fall
// between the records of a key (so that they write deltas).
func memoryCountJob(src flow.Source[event], sink flow.Sink[count], par int, opts ...flow.Option) *flow.Env {
	env := flow.New(append([]flow.Option{flow.JobName("sp"), quiet(), flow.StateBackend(flow.MemoryBackend)}, opts...)...)
	slow := func(e event) event {
		if e.Seq%50 == 0 {
			time.Sleep(time.Millisecond)
		}
		return e
	}
	keyed := flow.KeyBy(flow.Map(flow.From(env, src, flow.UID("src")), slow), func(e event) string { return e.Key })
	flow.To(flow.Process(keyed, "count", countFn, flow.WithParallelism(par)), sink, flow.UID("sink"))
	return env
}

// With the heap, a checkpoint references a chain of files in the shared
// area: a full snapshot and deltas. While no input arrives, later
// checkpoints reference the same files and write nothing; GC leaves
// exactly the files retained checkpoints reference.
func TestMemoryCheckpointsAreIncremental(t *testing.T) {
	const keys, perKey = 300, 10
	stateDir := t.TempDir()
	sink := flowtest.NewSink[count]()
	src := flowtest.NewSource(flowtest.Split(events(keys, perKey), 2), flowtest.Unbounded(), flowtest.PerPoll(20))
	env := memoryCountJob(src, sink, 2, flow.Checkpointing(2*time.Millisecond), flow.StateDir(stateDir), flow.RetainedCheckpoints(3))
	job, err := env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "all records committed", func() bool { return len(sink.Committed()) == keys*perKey })
	first := job.Stats().CheckpointsCompleted
	waitFor(t, "idle checkpoints", func() bool { return job.Stats().CheckpointsCompleted >= first+4 })
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
	deltas := 0
	for i, id := range ids {
		m, err := store.Load(id)
		if err != nil {
			t.Fatal(err)
		}
		if m.Version != storage.ManifestVersion {
			t.Errorf("checkpoint %d has manifest version %d, want %d", id, m.Version, storage.ManifestVersion)
		}
		op := m.Operators["count"]
		if len(op.Keyed) != 0 || len(op.DB) != 2 {
			t.Fatalf("checkpoint %d: %d keyed files and %d snapshot chains, want 0 and 2 (one per subtask)", id, len(op.Keyed), len(op.DB))
		}
		for _, db := range op.DB {
			if db.Format != storage.FormatHeapChain {
				t.Fatalf("checkpoint %d: a snapshot of format %q, want %q", id, db.Format, storage.FormatHeapChain)
			}
			deltas += len(db.Files) - 1
		}
		paths := sharedPaths(m, "count")
		for _, p := range paths {
			referenced[p] = true
		}
		if i > 0 && !slices.Equal(paths, prev) {
			t.Errorf("checkpoints %d and %d, taken without new input, reference different files:\n%v\n%v", ids[i-1], id, prev, paths)
		}
		prev = paths
	}
	if deltas == 0 {
		t.Errorf("the retained checkpoints' chains hold full snapshots only, no delta")
	}
	files, err := store.SharedFiles()
	if err != nil {
		t.Fatal(err)
	}
	if want := slices.Sorted(maps.Keys(referenced)); !slices.Equal(files, want) {
		t.Errorf("shared area holds %v\nretained checkpoints reference %v", files, want)
	}
}

// Stop at parallelism 4, resume from the checkpoint (chains of deltas) at
// 2, 8 and 3: each subtask restores its key groups from the chains that
// overlap them, and every count continues.
func TestMemoryRescaleFromCheckpoint(t *testing.T) {
	const keys, perKey = 200, 10
	stateDir := t.TempDir()
	sink := flowtest.NewSink[count]()
	src := flowtest.NewSource(flowtest.Split(events(keys, perKey), 4), flowtest.Unbounded(), flowtest.PerPoll(10))
	runUntilCommitted(t, memoryCountJob(src, sink, 4, flow.Checkpointing(2*time.Millisecond), flow.StateDir(stateDir)), sink, keys*perKey)
	if m, _, err := openStore(t, stateDir, "sp").Latest(storage.LatestOptions{}); err != nil || chainFiles(m) <= len(m.Operators["count"].DB) {
		t.Fatalf("the checkpoint restored first holds no delta (err %v)", err)
	}

	for i, par := range []int{2, 8, 3} {
		n0 := len(sink.Committed())
		before := lastCounts(sink.Committed())
		src := flowtest.NewSource(flowtest.Split(events(keys, perKey+i+1), 4), flowtest.Unbounded())
		runUntilCommitted(t, memoryCountJob(src, sink, par, flow.Checkpointing(2*time.Millisecond), flow.StateDir(stateDir)), sink, n0+keys)
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

func chainFiles(m *storage.Manifest) int {
	n := 0
	for _, db := range m.Operators["count"].DB {
		n += len(db.Files)
	}
	return n
}

// Restored at the same parallelism from its own checkpoint, a subtask
// goes on with the restored chain (no full snapshot after a restore);
// at another parallelism it starts a new one. Counts continue either way.
func TestMemoryRestoreGoesOnWithTheChain(t *testing.T) {
	const keys, perKey = 100, 10
	stateDir := t.TempDir()
	sink := flowtest.NewSink[count]()
	latest := func() *storage.Manifest {
		m, _, err := openStore(t, stateDir, "sp").Latest(storage.LatestOptions{})
		if err != nil || m == nil {
			t.Fatalf("latest checkpoint: %v", err)
		}
		return m
	}
	chains := func(m *storage.Manifest) [][]string {
		var out [][]string
		dbs := slices.Clone(m.Operators["count"].DB)
		slices.SortFunc(dbs, func(a, b storage.DBSnapshot) int { return a.FirstKeyGroup - b.FirstKeyGroup })
		for _, db := range dbs {
			var paths []string
			for _, f := range db.Files {
				paths = append(paths, f.Path)
			}
			out = append(out, paths)
		}
		return out
	}
	src := flowtest.NewSource(flowtest.Split(events(keys, perKey), 2), flowtest.Unbounded(), flowtest.PerPoll(10))
	runUntilCommitted(t, memoryCountJob(src, sink, 2, flow.Checkpointing(10*time.Millisecond), flow.StateDir(stateDir)), sink, keys*perKey)
	for i, par := range []int{2, 3} {
		before := chains(latest())
		n0 := len(sink.Committed())
		counts := lastCounts(sink.Committed())
		src := flowtest.NewSource(flowtest.Split(events(keys, perKey+i+1), 2), flowtest.Unbounded())
		runUntilCommitted(t, memoryCountJob(src, sink, par, flow.Checkpointing(10*time.Millisecond), flow.StateDir(stateDir)), sink, n0+keys)
		for _, c := range sink.Committed()[n0:] {
			if c.N != counts[c.Key]+1 {
				t.Fatalf("parallelism %d: key %s: count %d, want %d", par, c.Key, c.N, counts[c.Key]+1)
			}
		}
		after := chains(latest())
		for j, ch := range after {
			if par == 2 {
				if len(ch) <= len(before[j]) || !slices.Equal(ch[:len(before[j])], before[j]) {
					t.Errorf("subtask %d's chain after a restore at the same parallelism:\n%v\ndoes not go on from the restored one:\n%v", j, ch, before[j])
				}
			} else if slices.Contains(before[0], ch[0]) || slices.Contains(before[1], ch[0]) {
				t.Errorf("subtask %d's chain after a rescale starts with the restored file %s, want a new full snapshot", j, ch[0])
			}
		}
	}
}

// A checkpoint of manifest version 1 (before heap chains: a full state
// file per subtask) still restores.
func TestVersion1CheckpointStillRestores(t *testing.T) {
	const keys, perKey = 50, 4
	sink := flowtest.NewSink[count]()
	sp := filepath.Join(t.TempDir(), "sp")
	src := flowtest.NewSource(flowtest.Split(events(keys, perKey), 2), flowtest.Unbounded())
	job, err := memoryCountJob(src, sink, 2, flow.StateDir(t.TempDir())).Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Checkpointing is off: the savepoint alone commits the sink.
	waitFor(t, "source opened", func() bool { return src.Opened() == 2 })
	waitFor(t, "a savepoint covering all input", func() bool {
		sp = filepath.Join(t.TempDir(), "sp")
		if _, err := job.TriggerSavepoint(context.Background(), sp); err != nil {
			t.Fatal(err)
		}
		return len(sink.Committed()) == keys*perKey
	})
	job.Stop()
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	// Rewrite its manifest as version 1, sealed again.
	path := filepath.Join(sp, storage.ManifestName)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := bytes.Cut(data, []byte("\n"))
	v2 := fmt.Sprintf(`"version": %d,`, storage.ManifestVersion)
	if !bytes.Contains(body, []byte(v2)) || bytes.Contains(body, []byte(storage.FormatHeapChain)) {
		t.Fatalf("the savepoint's manifest is not a version-%d manifest of full state files:\n%s", storage.ManifestVersion, body)
	}
	body = bytes.Replace(body, []byte(v2), []byte(`"version": 1,`), 1)
	sum := sha256.Sum256(body)
	if err := os.WriteFile(path, append([]byte("onceflow-manifest sha256="+hex.EncodeToString(sum[:])+"\n"), body...), 0o644); err != nil {
		t.Fatal(err)
	}
	if m, err := storage.LoadManifest(sp); err != nil || m.Version != 1 {
		t.Fatalf("the rewritten manifest: %v", err)
	}
	before := lastCounts(sink.Committed())
	n0 := len(sink.Committed())
	src = flowtest.NewSource(flowtest.Split(events(keys, perKey+1), 2), flowtest.Unbounded())
	runUntilCommitted(t, memoryCountJob(src, sink, 3, flow.StateDir(t.TempDir()), flow.FromSavepoint(sp), flow.Checkpointing(5*time.Millisecond)), sink, n0+keys)
	for _, c := range sink.Committed()[n0:] {
		if c.N != before[c.Key]+1 {
			t.Fatalf("key %s: count %d after restoring a version-1 checkpoint, want %d", c.Key, c.N, before[c.Key]+1)
		}
	}
}
