package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// dbCheckpoint writes checkpoint id whose operator "dedupe" has one
// database snapshot made of the given SSTs (shared, named by the
// checkpoint that first wrote them) plus a private MANIFEST file. ssts maps
// a database file name to the checkpoint that first stored it; files first
// stored by id are written now from src.
func dbCheckpoint(t *testing.T, s *Store, id int64, src string, ssts map[string]int64, commit bool) *Manifest {
	t.Helper()
	snap := DBSnapshot{FirstKeyGroup: 0, LastKeyGroup: testMaxParallelism - 1}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range ssts {
			if !yield(n) {
				return
			}
		}
	}) {
		first := ssts[name]
		f := DBFile{Name: name, Path: SharedName(first, "inst-"+name), Shared: true}
		if first == id {
			mustWrite(t, filepath.Join(src, name), "sst "+name)
			var err error
			if f, err = s.PutDBFile(id, filepath.Join(src, name), f); err != nil {
				t.Fatalf("PutDBFile(%s): %v", name, err)
			}
		} else {
			f.Size, f.SHA256 = sizeSum(t, s.sharedPath(f.Path))
		}
		snap.Files = append(snap.Files, f)
	}
	mustWrite(t, filepath.Join(src, "MANIFEST-000001"), fmt.Sprintf("manifest of %d", id))
	f, err := s.PutDBFile(id, filepath.Join(src, "MANIFEST-000001"), DBFile{Name: "MANIFEST-000001", Path: "dedupe-0.db.MANIFEST-000001"})
	if err != nil {
		t.Fatalf("PutDBFile(private): %v", err)
	}
	snap.Files = append(snap.Files, f)
	m := &Manifest{Job: "orders", CheckpointID: id, MaxParallelism: testMaxParallelism,
		Operators: map[string]*OperatorState{"dedupe": {Parallelism: 1, DB: []DBSnapshot{snap}}}}
	if !commit {
		if _, err := s.WritePending(m); err != nil {
			t.Fatalf("WritePending: %v", err)
		}
		return m
	}
	if err := s.Commit(m); err != nil {
		t.Fatalf("Commit(%d): %v", id, err)
	}
	return m
}

func sizeSum(t *testing.T, path string) (int64, string) {
	t.Helper()
	n, sum, err := sizeAndSum(path)
	if err != nil {
		t.Fatal(err)
	}
	return n, sum
}

func TestDBFilesRoundTrip(t *testing.T) {
	s := newStore(t)
	src := t.TempDir()
	dbCheckpoint(t, s, 1, src, map[string]int64{"000004.sst": 1, "000005.sst": 1}, true)
	m, err := s.Load(1)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	dst := t.TempDir()
	for _, f := range m.Operators["dedupe"].DB[0].Files {
		if err := s.GetDBFile(m, f, filepath.Join(dst, f.Name)); err != nil {
			t.Fatalf("GetDBFile(%s): %v", f.Name, err)
		}
		got, _ := os.ReadFile(filepath.Join(dst, f.Name))
		want, _ := os.ReadFile(filepath.Join(src, f.Name))
		if string(got) != string(want) {
			t.Errorf("%s: got %q, want %q", f.Name, got, want)
		}
	}
}

func TestDBFileDamageIsNamed(t *testing.T) {
	s := newStore(t)
	dbCheckpoint(t, s, 1, t.TempDir(), map[string]int64{"000004.sst": 1}, true)
	// A hard-linked shared file is the same inode as the source: write a
	// fresh copy so the damage does not reach back into src.
	path := s.sharedPath(SharedName(1, "inst-000004.sst"))
	data, _ := os.ReadFile(path)
	data[0] ^= 1
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, path, string(data))
	_, err := s.Load(1)
	wantCorrupt(t, err, path)

	m, lerr := LoadManifest(s.Dir(1))
	if lerr != nil {
		t.Fatal(lerr)
	}
	dst := filepath.Join(t.TempDir(), "000004.sst")
	wantCorrupt(t, s.GetDBFile(m, m.Operators["dedupe"].DB[0].Files[0], dst), path)
	if exists(t, dst) {
		t.Errorf("a damaged file was left at %s", dst)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	_, err = s.Load(1)
	wantCorrupt(t, err, path)
}

// Shared files live while any checkpoint directory lists them, and go
// when none does — including those of an aborted checkpoint — but never
// those of a checkpoint that may still be in flight.
func TestGCSharedFilesByReference(t *testing.T) {
	s := newStore(t)
	src := t.TempDir()
	dbCheckpoint(t, s, 1, src, map[string]int64{"a.sst": 1, "b.sst": 1}, true)
	// Checkpoint 2 was aborted after storing c.sst: no manifest at all.
	mustWrite(t, filepath.Join(src, "c.sst"), "c")
	if _, err := s.PutDBFile(2, filepath.Join(src, "c.sst"), DBFile{Name: "c.sst", Path: SharedName(2, "inst-c.sst"), Shared: true}); err != nil {
		t.Fatal(err)
	}
	// Checkpoint 3 keeps b, compacted a away, adds d.
	dbCheckpoint(t, s, 3, src, map[string]int64{"b.sst": 1, "d.sst": 3}, true)
	// Checkpoint 5 is in flight: e.sst stored, no manifest yet.
	mustWrite(t, filepath.Join(src, "e.sst"), "e")
	if _, err := s.PutDBFile(5, filepath.Join(src, "e.sst"), DBFile{Name: "e.sst", Path: SharedName(5, "inst-e.sst"), Shared: true}); err != nil {
		t.Fatal(err)
	}

	removed, err := s.GC(1)
	if err != nil {
		t.Fatalf("GC: %v", err)
	}
	if !slices.Equal(removed, []int64{1}) {
		t.Errorf("GC removed checkpoints %v, want [1]", removed)
	}
	got, err := s.SharedFiles()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{SharedName(1, "inst-b.sst"), SharedName(3, "inst-d.sst"), SharedName(5, "inst-e.sst")}
	if !slices.Equal(got, want) {
		t.Errorf("shared files after GC: %v\nwant %v", got, want)
	}
	if _, err := s.Load(3); err != nil {
		t.Errorf("checkpoint 3 no longer loads after GC: %v", err)
	}

	// A pending manifest protects what it lists, like a committed one.
	dbCheckpoint(t, s, 5, src, map[string]int64{"d.sst": 3, "e.sst": 5}, false)
	if _, err := s.GC(1); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.SharedFiles(); !slices.Contains(got, SharedName(5, "inst-e.sst")) {
		t.Errorf("GC removed a file a pending manifest lists: %v", got)
	}
}

func TestGCKeepsSharedFilesWhenAManifestIsUnreadable(t *testing.T) {
	s := newStore(t)
	src := t.TempDir()
	dbCheckpoint(t, s, 1, src, map[string]int64{"a.sst": 1}, true)
	dbCheckpoint(t, s, 2, src, map[string]int64{"b.sst": 2}, true)
	flipBit(t, filepath.Join(s.Dir(2), ManifestName), 100)
	if _, err := s.GC(2); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.SharedFiles(); len(got) != 2 {
		t.Errorf("GC removed shared files while a manifest was unreadable: %v", got)
	}
}

// A savepoint copies every database file: it outlives the checkpoints and
// shared files it was made from.
func TestSavepointOfDBSnapshotIsSelfContained(t *testing.T) {
	s := newStore(t)
	src := t.TempDir()
	dbCheckpoint(t, s, 1, src, map[string]int64{"a.sst": 1}, true)
	m := dbCheckpoint(t, s, 2, src, map[string]int64{"a.sst": 1, "b.sst": 2}, true)
	m.Dir = s.Dir(2)
	spDir := filepath.Join(t.TempDir(), "sp")
	sp, err := CopyTo(m, spDir)
	if err != nil {
		t.Fatalf("CopyTo: %v", err)
	}
	for _, f := range sp.Operators["dedupe"].DB[0].Files {
		if f.Shared {
			t.Errorf("savepoint file %s is still shared", f.Name)
		}
	}
	dbCheckpoint(t, s, 3, src, map[string]int64{"c.sst": 3}, true)
	if _, err := s.GC(1); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.SharedFiles(); !slices.Equal(got, []string{SharedName(3, "inst-c.sst")}) {
		t.Fatalf("shared files: %v", got)
	}
	loaded, err := LoadManifest(spDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(loaded); err != nil {
		t.Fatalf("the savepoint no longer verifies after its checkpoint's shared files were removed: %v", err)
	}
	dst := t.TempDir()
	for _, f := range loaded.Operators["dedupe"].DB[0].Files {
		if err := s.GetDBFile(loaded, f, filepath.Join(dst, f.Name)); err != nil {
			t.Fatalf("restore %s from the savepoint: %v", f.Name, err)
		}
	}
}

func TestDBSnapshotValidation(t *testing.T) {
	good := func() *Manifest {
		return &Manifest{CheckpointID: 1, MaxParallelism: 8, Operators: map[string]*OperatorState{"op": {Parallelism: 1, DB: []DBSnapshot{{
			FirstKeyGroup: 0, LastKeyGroup: 7,
			Files: []DBFile{{Name: "1.sst", Path: SharedName(1, "x-1.sst"), Shared: true, SHA256: fmt.Sprintf("%064x", 1)}},
		}}}}}
	}
	if err := good().validate(); err != nil {
		t.Fatalf("valid manifest refused: %v", err)
	}
	for name, breakIt := range map[string]func(m *Manifest){
		"range beyond max parallelism": func(m *Manifest) { m.Operators["op"].DB[0].LastKeyGroup = 8 },
		"shared name without an id":    func(m *Manifest) { m.Operators["op"].DB[0].Files[0].Path = "x-1.sst" },
		"path with a directory":        func(m *Manifest) { m.Operators["op"].DB[0].Files[0].Path = "../x" },
		"bad checksum":                 func(m *Manifest) { m.Operators["op"].DB[0].Files[0].SHA256 = "zz" },
		"shared file in a savepoint":   func(m *Manifest) { m.Savepoint = true },
		"same name twice": func(m *Manifest) {
			db := &m.Operators["op"].DB[0]
			db.Files = append(db.Files, db.Files[0])
		},
	} {
		m := good()
		breakIt(m)
		if err := m.validate(); err == nil {
			t.Errorf("%s: validate accepted it", name)
		}
	}
	if _, err := (&Store{}).PutDBFile(1, "x", DBFile{Name: "a", Path: SharedName(2, "a"), Shared: true}); err == nil || errors.Is(err, os.ErrNotExist) {
		t.Errorf("PutDBFile accepted a shared name of a later checkpoint: %v", err)
	}
}

// A shared file that cleanup (or anything else) removed while checkpoints
// still reference it: no new checkpoint may commit a reference to it, and
// GC removes nothing, so that the older checkpoints stay for a fallback.
func TestMissingSharedFileRefusesCommitAndGC(t *testing.T) {
	s := newStore(t)
	src := t.TempDir()
	dbCheckpoint(t, s, 1, src, map[string]int64{"000004.sst": 1}, true)
	m2 := dbCheckpoint(t, s, 2, src, map[string]int64{"000004.sst": 1}, true)
	sst := m2.Operators["dedupe"].DB[0].Files[0]
	if !sst.Shared {
		t.Fatalf("want the shared SST first, got %+v", sst)
	}
	if err := os.Remove(s.sharedPath(sst.Path)); err != nil {
		t.Fatal(err)
	}

	mustWrite(t, filepath.Join(src, "MANIFEST-000001"), "manifest of 3")
	priv, err := s.PutDBFile(3, filepath.Join(src, "MANIFEST-000001"), DBFile{Name: "MANIFEST-000001", Path: "dedupe-0.db.MANIFEST-000001"})
	if err != nil {
		t.Fatal(err)
	}
	m3 := &Manifest{Job: "orders", CheckpointID: 3, MaxParallelism: testMaxParallelism,
		Operators: map[string]*OperatorState{"dedupe": {Parallelism: 1, DB: []DBSnapshot{{FirstKeyGroup: 0, LastKeyGroup: testMaxParallelism - 1, Files: []DBFile{sst, priv}}}}}}
	err = s.Commit(m3)
	if err == nil || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), sst.Path) {
		t.Fatalf("Commit of a checkpoint referencing the removed %s: got %v, want a refusal naming it", sst.Path, err)
	}
	if _, err := s.WritePending(m3); err == nil {
		t.Fatalf("WritePending of a checkpoint referencing the removed %s succeeded", sst.Path)
	}

	removed, err := s.GC(1)
	if err == nil || !strings.Contains(err.Error(), "000004.sst is missing") {
		t.Fatalf("GC with the newest checkpoint's %s missing: removed %v, err %v; want a refusal naming it", sst.Path, removed, err)
	}
	if ids, _ := s.List(); !slices.Equal(ids, []int64{1, 2}) || len(removed) != 0 {
		t.Fatalf("after the refused GC: committed %v, removed %v; want [1 2] and nothing removed", ids, removed)
	}
}

// A manifest that lists shared files is written after the shared area's
// directory is synced: the files were linked or renamed into it, and
// syncing the store's root does not make a subdirectory's entries
// durable.
func TestCommitSyncsTheSharedArea(t *testing.T) {
	s := newStore(t)
	var synced []string
	dirSynced = func(dir string) { synced = append(synced, filepath.Clean(dir)) }
	defer func() { dirSynced = nil }()
	dbCheckpoint(t, s, 1, t.TempDir(), map[string]int64{"000004.sst": 1}, true)
	shared := filepath.Clean(filepath.Join(s.root, SharedDir))
	if !slices.Contains(synced, shared) {
		t.Fatalf("directories synced: %q; want %s among them", synced, shared)
	}
}
