package flow_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
	"github.com/onceflow/onceflow/internal/checkpoint/storage"
)

// corruptFixture runs a bounded job that commits several checkpoints and
// retains the newest three; it returns the state dir, the sink and a way to
// build the same job again.
func corruptFixture(t *testing.T) (string, *flowtest.Sink[count], func(...flow.Option) *flow.Env) {
	t.Helper()
	stateDir := t.TempDir()
	sink := flowtest.NewSink[count]()
	build := func(opts ...flow.Option) *flow.Env {
		src := flowtest.NewSource(flowtest.Split(events(10, 300), 2), flowtest.PerPoll(5))
		slow := func(e event) event {
			if e.Seq%50 == 0 {
				time.Sleep(time.Millisecond)
			}
			return e
		}
		all := append([]flow.Option{flow.JobName("c"), quiet(), flow.Checkpointing(2 * time.Millisecond), flow.StateDir(stateDir), flow.RetainedCheckpoints(3)}, opts...)
		env := flow.New(all...)
		keyed := flow.KeyBy(flow.Map(flow.From(env, src, flow.UID("src")), slow), func(e event) string { return e.Key })
		flow.To(flow.Process(keyed, "count", countFn), sink, flow.UID("sink"))
		return env
	}
	if err := build().Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkCounts(t, sink.Committed(), 10, 300)
	return stateDir, sink, build
}

func checkpointDirs(t *testing.T, stateDir string) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(stateDir, "c", "checkpoints", "chk-*"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(dirs)
	if len(dirs) < 2 {
		t.Fatalf("want at least 2 retained checkpoints, have %d", len(dirs))
	}
	return dirs
}

func flipByte(t *testing.T, path string, off int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if off < 0 {
		off += len(b)
	}
	b[off] ^= 0x10
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestDamagedManifestStopsTheJob(t *testing.T) {
	stateDir, sink, build := corruptFixture(t)
	dirs := checkpointDirs(t, stateDir)
	newest := dirs[len(dirs)-1]
	flipByte(t, filepath.Join(newest, "_manifest"), -5)

	err := build().Run(context.Background())
	var ce *storage.CorruptError
	if !errors.Is(err, flow.ErrRestoreRefused) || !errors.As(err, &ce) {
		t.Fatalf("want a refused restore with a CorruptError, got %v", err)
	}
	msg := err.Error()
	for _, want := range []string{filepath.Join(newest, "_manifest"), "savepoint", "allow-checkpoint-fallback", "duplicates"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not mention %q:\n%s", want, msg)
		}
	}
	before := len(sink.Committed())

	// The explicit fallback restores the older checkpoint, and the cost it
	// states is real: records after it are processed again.
	if err := build(flow.AllowCheckpointFallback()).Run(context.Background()); err != nil {
		t.Fatalf("with fallback: %v", err)
	}
	if replayed := len(sink.Committed()) - before; replayed == 0 {
		t.Log("the older checkpoint happened to cover all input; nothing was replayed")
	} else {
		t.Logf("fallback replayed %d records, as its warning says", replayed)
	}
}

func TestDamagedStateFileStopsTheJob(t *testing.T) {
	stateDir, _, build := corruptFixture(t)
	dirs := checkpointDirs(t, stateDir)
	newest := dirs[len(dirs)-1]
	files, _ := filepath.Glob(filepath.Join(newest, "*.state"))
	if len(files) == 0 { // pebble: the database's private files
		files, _ = filepath.Glob(filepath.Join(newest, "*.db.MANIFEST-*"))
	}
	if len(files) == 0 { // the heap's snapshot chain: its newest file
		files = heapChainFiles(t, stateDir, newest)[len(heapChainFiles(t, stateDir, newest))-1:]
	}
	if len(files) == 0 {
		t.Fatal("no state files in the newest checkpoint")
	}
	flipByte(t, files[0], -1)
	err := build().Run(context.Background())
	if !errors.Is(err, flow.ErrRestoreRefused) || !strings.Contains(err.Error(), files[0]) {
		t.Fatalf("want a refusal naming %s, got %v", files[0], err)
	}
	// Truncation is caught as well.
	if err := os.Truncate(files[0], 10); err != nil {
		t.Fatal(err)
	}
	if err := build().Run(context.Background()); !errors.Is(err, flow.ErrRestoreRefused) {
		t.Fatalf("truncated state file: want refusal, got %v", err)
	}
}

// A checkpoint whose manifest never completed was never committed: it is
// ignored and the previous one is used, silently and correctly.
func TestIncompleteManifestIsIgnored(t *testing.T) {
	stateDir, sink, build := corruptFixture(t)
	dirs := checkpointDirs(t, stateDir)
	newest := dirs[len(dirs)-1]
	m := filepath.Join(newest, "_manifest")
	data, err := os.ReadFile(m)
	if err != nil {
		t.Fatal(err)
	}
	// As if the process died after writing half the temp file.
	if err := os.WriteFile(m+".tmp", data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(m); err != nil {
		t.Fatal(err)
	}
	job, err := build().Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatalf("restart after an incomplete manifest: %v", err)
	}
	want := filepath.Base(dirs[len(dirs)-2])
	if got := job.Stats().RestoredCheckpoint; fmt.Sprintf("chk-%020d", got) != want {
		t.Fatalf("restored checkpoint %d, want the previous one (%s)", got, want)
	}
	if err := sink.Err(); err != nil {
		t.Fatal(err)
	}
}

// heapChainFiles returns the paths of the heap snapshot chain files the
// checkpoint in dir references, in order (the memory backend's
// incremental checkpoints).
func heapChainFiles(t *testing.T, stateDir, dir string) []string {
	t.Helper()
	m, err := storage.LoadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, op := range m.Operators {
		for _, db := range op.DB {
			if db.Format != storage.FormatHeapChain {
				continue
			}
			for _, f := range db.Files {
				if !f.Shared {
					t.Fatalf("heap chain file %s of a checkpoint is not shared", f.Path)
				}
				out = append(out, filepath.Join(stateDir, "c", storage.SharedDir, f.Path))
			}
		}
	}
	return out
}

// A checkpoint of the memory backend references the files of its
// snapshot chain that earlier checkpoints wrote; one missing is refused
// with its name, and cleanup never removed one a retained checkpoint
// needs.
func TestMissingHeapChainFileStopsTheJob(t *testing.T) {
	if os.Getenv(backendEnv) == flow.PebbleBackend {
		t.Skip("snapshot chains are the memory backend's; pebble's missing files: TestDamagedStateFileStopsTheJob")
	}
	stateDir, _, build := corruptFixture(t)
	dirs := checkpointDirs(t, stateDir)
	for _, d := range dirs {
		for _, f := range heapChainFiles(t, stateDir, d) {
			if _, err := os.Stat(f); err != nil {
				t.Fatalf("retained checkpoint %s: %v", d, err)
			}
		}
	}
	files := heapChainFiles(t, stateDir, dirs[len(dirs)-1])
	if len(files) == 0 {
		t.Fatal("the newest checkpoint references no heap chain file")
	}
	if err := os.Remove(files[0]); err != nil {
		t.Fatal(err)
	}
	err := build().Run(context.Background())
	if !errors.Is(err, flow.ErrRestoreRefused) || !strings.Contains(err.Error(), files[0]) {
		t.Fatalf("want a refusal naming %s, got %v", files[0], err)
	}
}
