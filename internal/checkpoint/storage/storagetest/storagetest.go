// Package storagetest holds the behaviour tests every implementation of
// storage.Storage passes: the local store's tests run them on a directory,
// internal/checkpoint/s3store's on a real S3 protocol server. They check
// the semantics the engine relies on (docs/design.md, "The checkpoint
// protocol", "External commit points: pending manifests", "State and
// checkpoints"): what is committed and when, what a restore accepts, what
// damage looks like, and what GC may remove.
package storagetest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/checkpoint/storage"
)

// Harness opens stores of one implementation and reaches behind them to
// damage what they hold.
type Harness struct {
	// New returns a new, empty store.
	New func(t *testing.T) storage.Storage
	// Reopen opens the store s again, as the job's next process would.
	Reopen func(t *testing.T, s storage.Storage) storage.Storage
	// Join names the file name inside the location dir (a Root or Dir).
	Join func(dir, name string) string
	// Read, Write and Delete reach the file or object a Join result (or a
	// CorruptError's Path) names.
	Read   func(t *testing.T, path string) []byte
	Write  func(t *testing.T, path string, data []byte)
	Delete func(t *testing.T, path string)
}

// Run runs every behaviour test against stores h opens.
func Run(t *testing.T, h Harness) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, h Harness)
	}{
		{"RoundTrip", roundTrip},
		{"UncommittedIsInvisible", uncommittedIsInvisible},
		{"CommitRefusesMissingState", commitRefusesMissingState},
		{"PendingAndConfirm", pendingAndConfirm},
		{"Fallback", fallback},
		{"DamageOnRestore", damageOnRestore},
		{"GC", gc},
		{"GCRemovesAbortedPending", gcRemovesAbortedPending},
		{"GCSharedFilesByReference", gcSharedByReference},
		{"GCKeepsSharedFilesWhileAManifestIsUnreadable", gcKeepsSharedWhenUnreadable},
		{"DBFiles", dbFiles},
		{"StateID", stateID},
		{"StateIDFirstWriterWins", stateIDFirstWriterWins},
		{"SavepointOfACheckpoint", savepointOfCheckpoint},
		{"RestoreFromASavepoint", restoreFromSavepoint},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, h) })
	}
}

const maxPar = 64

// groupsOf returns state for every third key group of lo..hi, naming the
// checkpoint and the group so that a mix-up shows.
func groupsOf(id int64, lo, hi int) map[int][]byte {
	out := map[int][]byte{}
	for g := lo; g <= hi; g += 3 {
		out[g] = []byte(strings.Repeat(fmt.Sprintf("%d:%d|", id, g), 1+g%4))
	}
	return out
}

// commit writes checkpoint id of a job with a keyed operator of two
// subtasks (key groups 0..31 and 32..63) and a source, and commits it.
func commit(t *testing.T, s storage.Storage, id int64) *storage.Manifest {
	t.Helper()
	m := manifest(t, s, id)
	if err := s.Commit(m); err != nil {
		t.Fatalf("Commit(%d): %v", id, err)
	}
	return m
}

func manifest(t *testing.T, s storage.Storage, id int64) *storage.Manifest {
	t.Helper()
	keyed := &storage.OperatorState{Parallelism: 2}
	for sub := range 2 {
		lo := sub * maxPar / 2
		f, err := s.WriteKeyedFile(id, fmt.Sprintf("count-%d.state", sub), lo, lo+maxPar/2-1, groupsOf(id, lo, lo+maxPar/2-1))
		if err != nil {
			t.Fatalf("WriteKeyedFile(%d): %v", id, err)
		}
		keyed.Keyed = append(keyed.Keyed, f)
	}
	return &storage.Manifest{
		Job: "orders", CheckpointID: id, MaxParallelism: maxPar,
		CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Operators: map[string]*storage.OperatorState{
			"count": keyed,
			"src":   {Parallelism: 1, Blobs: map[string][]byte{"p0": fmt.Appendf(nil, "offset %d", id*10)}},
		},
	}
}

// pendingManifest is the manifest of a checkpoint without keyed state.
func pendingManifest(id int64) *storage.Manifest {
	return &storage.Manifest{Job: "orders", CheckpointID: id, MaxParallelism: maxPar, CommitPoint: "kafka", Incarnation: "run-1",
		Operators: map[string]*storage.OperatorState{"src": {Parallelism: 1, Blobs: map[string][]byte{"p0": []byte("x")}}}}
}

func asJSON(t *testing.T, m *storage.Manifest) string {
	t.Helper()
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func flip(t *testing.T, h Harness, path string, off int) {
	t.Helper()
	data := h.Read(t, path)
	data[off%len(data)] ^= 0x10
	h.Write(t, path, data)
}

func wantCorrupt(t *testing.T, err error, path string) *storage.CorruptError {
	t.Helper()
	var ce *storage.CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v, want a *storage.CorruptError naming %s", err, path)
	}
	if ce.Path != path || !strings.Contains(err.Error(), path) {
		t.Fatalf("the CorruptError names %s, want %s (%v)", ce.Path, path, err)
	}
	return ce
}

func ids(t *testing.T, what string, got []int64, err error, want ...int64) {
	t.Helper()
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("%s = %v, %v; want %v", what, got, err, want)
	}
}

func roundTrip(t *testing.T, h Harness) {
	s := h.New(t)
	want := commit(t, s, 7)
	if want.Dir != s.Dir(7) || !strings.HasPrefix(s.Dir(7), s.Root()) || !strings.HasSuffix(s.Dir(7), "chk-00000000000000000007") {
		t.Fatalf("Dir(7) = %s, manifest Dir %s, Root %s", s.Dir(7), want.Dir, s.Root())
	}
	got, err := s.Load(7)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if g, w := asJSON(t, got), asJSON(t, want); g != w || got.Dir != want.Dir {
		t.Errorf("Load returned\n%s in %s\nwant\n%s in %s", g, got.Dir, w, want.Dir)
	}
	all := map[int][]byte{}
	for _, f := range got.Operators["count"].Keyed {
		part, err := s.ReadKeyed(got, f, 16, 47) // a subtask after rescaling
		if err != nil {
			t.Fatalf("ReadKeyed(%s): %v", f.Path, err)
		}
		for g, p := range part {
			all[g] = p
		}
	}
	wantGroups := map[int][]byte{}
	for _, part := range []map[int][]byte{groupsOf(7, 0, 31), groupsOf(7, 32, 63)} {
		for g, p := range part {
			if g >= 16 && g <= 47 {
				wantGroups[g] = p
			}
		}
	}
	if !maps.EqualFunc(all, wantGroups, slices.Equal[[]byte]) {
		t.Errorf("key groups 16..47 read back differ")
	}
	latest, rep, err := s.Latest(storage.LatestOptions{})
	if err != nil || rep != nil || latest == nil || latest.CheckpointID != 7 {
		t.Fatalf("Latest = %v, %v, %v; want checkpoint 7", latest, rep, err)
	}
	l, err := s.List()
	ids(t, "List", l, err, 7)
	if _, err := s.Load(8); !errors.Is(err, storage.ErrNoManifest) {
		t.Errorf("Load of a checkpoint never written: %v, want ErrNoManifest", err)
	}
}

func uncommittedIsInvisible(t *testing.T, h Harness) {
	s := h.New(t)
	if m, rep, err := s.Latest(storage.LatestOptions{AllowFallback: true}); m != nil || rep != nil || err != nil {
		t.Fatalf("empty store: Latest = %v, %v, %v", m, rep, err)
	}
	commit(t, s, 3)
	manifest(t, s, 5) // state written, never committed
	if m, _, err := s.Latest(storage.LatestOptions{}); err != nil || m.CheckpointID != 3 {
		t.Fatalf("Latest = %v, %v; want checkpoint 3", m, err)
	}
	l, err := s.List()
	ids(t, "List", l, err, 3)
	p, err := s.Pending()
	ids(t, "Pending", p, err)
	if high, err := s.HighestID(); err != nil || high != 5 {
		t.Errorf("HighestID = %d, %v; want 5 (uncommitted ids count)", high, err)
	}
	if _, err := s.Load(5); !errors.Is(err, storage.ErrNoManifest) {
		t.Errorf("Load(5): %v, want ErrNoManifest", err)
	}
}

func commitRefusesMissingState(t *testing.T, h Harness) {
	s := h.New(t)
	for name, breakIt := range map[string]func(m *storage.Manifest){
		"missing": func(m *storage.Manifest) { m.Operators["count"].Keyed[1].Path = "never-written.state" },
		"size":    func(m *storage.Manifest) { m.Operators["count"].Keyed[0].Size++ },
		"savepoint": func(m *storage.Manifest) {
			m.Savepoint = true
		},
	} {
		m := manifest(t, s, 2)
		breakIt(m)
		if err := s.Commit(m); err == nil {
			t.Errorf("%s: Commit succeeded", name)
		}
		if _, err := s.WritePending(m); err == nil {
			t.Errorf("%s: WritePending succeeded", name)
		}
	}
	l, err := s.List()
	ids(t, "List after refused commits", l, err)
	p, err := s.Pending()
	ids(t, "Pending after refused commits", p, err)
}

func pendingAndConfirm(t *testing.T, h Harness) {
	s := h.New(t)
	commit(t, s, 1)
	sum, err := s.WritePending(pendingManifest(2))
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.List()
	ids(t, "List with a pending checkpoint", l, err, 1)
	p, err := s.Pending()
	ids(t, "Pending", p, err, 2)
	if high, _ := s.HighestID(); high != 2 {
		t.Errorf("HighestID = %d, want 2", high)
	}
	if m, _, err := s.Latest(storage.LatestOptions{}); err != nil || m.CheckpointID != 1 {
		t.Errorf("Latest = %v, %v; a pending checkpoint is not committed", m, err)
	}
	if _, err := s.Load(2); !errors.Is(err, storage.ErrNoManifest) {
		t.Errorf("Load of a pending checkpoint: %v, want ErrNoManifest", err)
	}
	other := strings.Repeat("0", 64)
	if err := s.Confirm(2, other); !errors.Is(err, storage.ErrManifestMismatch) {
		t.Errorf("Confirm with another checksum: %v, want ErrManifestMismatch", err)
	}
	m, err := s.LoadCommitted(2, sum)
	if err != nil || m.CheckpointID != 2 || m.Incarnation != "run-1" || m.Dir != s.Dir(2) {
		t.Fatalf("LoadCommitted = %+v, %v", m, err)
	}
	for range 2 { // repeatable, as recovery repeats it
		if err := s.Confirm(2, sum); err != nil {
			t.Fatalf("Confirm again: %v", err)
		}
	}
	l, err = s.List()
	ids(t, "List after Confirm", l, err, 1, 2)
	p, err = s.Pending()
	ids(t, "Pending after Confirm", p, err)
	if err := s.Confirm(2, other); !errors.Is(err, storage.ErrManifestMismatch) {
		t.Errorf("Confirm of a committed checkpoint with another checksum: %v, want ErrManifestMismatch", err)
	}
	if err := s.Confirm(9, sum); !errors.Is(err, storage.ErrNoManifest) {
		t.Errorf("Confirm of a checkpoint never written: %v, want ErrNoManifest", err)
	}
	// A crash between the copy and the removal of the pending manifest
	// leaves both; that is still committed, not pending.
	sum3, err := s.WritePending(pendingManifest(3))
	if err != nil {
		t.Fatal(err)
	}
	pendingPath := h.Join(s.Dir(3), storage.PendingName)
	h.Write(t, h.Join(s.Dir(3), storage.ManifestName), h.Read(t, pendingPath))
	if err := s.Confirm(3, sum3); err != nil {
		t.Fatalf("Confirm after an interrupted Confirm: %v", err)
	}
	p, err = s.Pending()
	ids(t, "Pending after an interrupted Confirm", p, err)
}

func fallback(t *testing.T, h Harness) {
	s := h.New(t)
	commit(t, s, 1)
	m2 := commit(t, s, 2)
	commit(t, s, 3)
	manifest(t, s, 4) // in flight
	badState := h.Join(s.Dir(2), m2.Operators["count"].Keyed[1].Path)
	badManifest := h.Join(s.Dir(3), storage.ManifestName)
	flip(t, h, badState, 100)
	flip(t, h, badManifest, 200)

	_, rep, err := s.Latest(storage.LatestOptions{})
	if ce := wantCorrupt(t, err, badManifest); ce.CheckpointID != 3 || rep != nil {
		t.Errorf("Latest: CheckpointID %d, report %v", ce.CheckpointID, rep)
	}
	m, rep, err := s.Latest(storage.LatestOptions{AllowFallback: true})
	if err != nil || m == nil || m.CheckpointID != 1 {
		t.Fatalf("Latest with fallback = %v, %v; want checkpoint 1", m, err)
	}
	if rep == nil || len(rep.Skipped) != 2 || rep.Skipped[0].Path != badManifest || rep.Skipped[1].Path != badState {
		t.Fatalf("fallback report %+v, want [%s %s]", rep, badManifest, badState)
	}
	flip(t, h, h.Join(s.Dir(1), storage.ManifestName), 30)
	m, rep, err = s.Latest(storage.LatestOptions{AllowFallback: true})
	if m != nil || !errors.Is(err, storage.ErrAllCheckpointsCorrupt) || rep == nil || len(rep.Skipped) != 3 {
		t.Fatalf("all damaged: Latest = %v, %v, %v; want ErrAllCheckpointsCorrupt and 3 skipped", m, rep, err)
	}
}

func damageOnRestore(t *testing.T, h Harness) {
	for name, damage := range map[string]func(t *testing.T, path string){
		"missing":   func(t *testing.T, path string) { h.Delete(t, path) },
		"bit flip":  func(t *testing.T, path string) { flip(t, h, path, 50) },
		"truncated": func(t *testing.T, path string) { h.Write(t, path, h.Read(t, path)[:40]) },
	} {
		t.Run(name, func(t *testing.T) {
			s := h.New(t)
			m := commit(t, s, 4)
			f := m.Operators["count"].Keyed[0]
			path := h.Join(s.Dir(4), f.Path)
			damage(t, path)
			_, err := s.Load(4)
			if ce := wantCorrupt(t, err, path); ce.CheckpointID != 4 || ce.Savepoint {
				t.Errorf("CheckpointID %d Savepoint %v, want 4 false", ce.CheckpointID, ce.Savepoint)
			}
			_, err = s.ReadKeyed(m, f, 0, 0) // even a group the damage does not touch
			wantCorrupt(t, err, path)
			if _, err := s.ReadKeyed(m, m.Operators["count"].Keyed[1], 0, maxPar-1); err != nil {
				t.Errorf("the undamaged file: %v", err)
			}
		})
	}
}

func gc(t *testing.T, h Harness) {
	for _, tc := range []struct {
		name                   string
		committed, uncommitted []int64
		retain                 int
		keep                   []int64
		removed                []int64
	}{
		{"retain two", []int64{1, 2, 4, 5}, []int64{3, 6}, 2, nil, []int64{1, 2, 3}},
		{"keep an old one", []int64{1, 2, 4}, []int64{3}, 1, []int64{1}, []int64{2, 3}},
		{"nothing committed", nil, []int64{1, 2}, 1, nil, nil},
		{"newer attempts stay", []int64{10}, []int64{11, 12}, 1, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := h.New(t)
			for _, id := range slices.Sorted(slices.Values(slices.Concat(tc.committed, tc.uncommitted))) {
				m := manifest(t, s, id)
				if slices.Contains(tc.committed, id) {
					if err := s.Commit(m); err != nil {
						t.Fatal(err)
					}
				}
			}
			removed, err := s.GC(tc.retain, tc.keep...)
			ids(t, "GC", removed, err, tc.removed...)
			var left []int64
			for _, id := range tc.committed {
				if !slices.Contains(tc.removed, id) {
					left = append(left, id)
				}
			}
			l, err := s.List()
			ids(t, "List after GC", l, err, left...)
			for _, id := range left {
				if _, err := s.Load(id); err != nil {
					t.Errorf("checkpoint %d no longer loads after GC: %v", id, err)
				}
			}
			want := slices.Concat(tc.committed, tc.uncommitted)
			if high, _ := s.HighestID(); len(want) > 0 && high != slices.Max(want) {
				t.Errorf("HighestID after GC = %d, want %d", high, slices.Max(want))
			}
			again, err := s.GC(tc.retain, tc.keep...)
			ids(t, "second GC", again, err)
		})
	}
	if _, err := h.New(t).GC(0); err == nil {
		t.Error("GC(0) succeeded")
	}
}

func gcRemovesAbortedPending(t *testing.T, h Harness) {
	s := h.New(t)
	commit(t, s, 1)
	for _, id := range []int64{2, 4} {
		if _, err := s.WritePending(pendingManifest(id)); err != nil {
			t.Fatal(err)
		}
		if id == 2 {
			commit(t, s, 3)
		}
	}
	removed, err := s.GC(1)
	ids(t, "GC", removed, err, 1, 2)
	p, err := s.Pending()
	ids(t, "Pending after GC", p, err, 4)
}

// dbCheckpoint stores checkpoint id of an operator whose state is an
// embedded database: the shared files names (stored now when first is id,
// referenced otherwise) and a private MANIFEST file.
func dbCheckpoint(t *testing.T, s storage.Storage, id int64, first map[string]int64, how string) *storage.Manifest {
	t.Helper()
	src := t.TempDir()
	snap := storage.DBSnapshot{FirstKeyGroup: 0, LastKeyGroup: maxPar - 1}
	for _, name := range slices.Sorted(maps.Keys(first)) {
		f := storage.DBFile{Name: name, Path: storage.SharedName(first[name], "db1-"+name), Shared: true}
		f = putDB(t, s, id, src, f, first[name] == id)
		snap.Files = append(snap.Files, f)
	}
	snap.Files = append(snap.Files, putDB(t, s, id, src, storage.DBFile{Name: "MANIFEST-000001", Path: "db-0.MANIFEST-000001"}, true))
	m := &storage.Manifest{Job: "orders", CheckpointID: id, MaxParallelism: maxPar,
		Operators: map[string]*storage.OperatorState{"dedupe": {Parallelism: 1, DB: []storage.DBSnapshot{snap}}}}
	var err error
	switch how {
	case "commit":
		err = s.Commit(m)
	case "pending":
		_, err = s.WritePending(m)
	}
	if err != nil {
		t.Fatalf("%s checkpoint %d: %v", how, id, err)
	}
	return m
}

// dbContent is what database file f holds: the same bytes whichever
// checkpoint stores or references it.
func dbContent(f storage.DBFile) string {
	return strings.Repeat("sst "+f.Path+";", 20)
}

func putDB(t *testing.T, s storage.Storage, id int64, src string, f storage.DBFile, store bool) storage.DBFile {
	t.Helper()
	content := dbContent(f)
	if !store { // a file an earlier checkpoint stored: what PutDBFile returned then
		sum := sha256.Sum256([]byte(content))
		f.Size, f.SHA256 = int64(len(content)), hex.EncodeToString(sum[:])
		return f
	}
	path := filepath.Join(src, f.Name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := s.PutDBFile(id, path, f)
	if err != nil {
		t.Fatalf("PutDBFile(%s): %v", f.Name, err)
	}
	return f
}

func shared(t *testing.T, s storage.Storage) []string {
	t.Helper()
	lister, ok := s.(interface{ SharedFiles() ([]string, error) })
	if !ok {
		t.Fatalf("%T has no SharedFiles method", s)
	}
	names, err := lister.SharedFiles()
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func gcSharedByReference(t *testing.T, h Harness) {
	s := h.New(t)
	dbCheckpoint(t, s, 1, map[string]int64{"a.sst": 1, "b.sst": 1}, "commit")
	dbCheckpoint(t, s, 2, map[string]int64{"c.sst": 2}, "abort") // stored c, never committed
	dbCheckpoint(t, s, 3, map[string]int64{"b.sst": 1, "d.sst": 3}, "commit")
	dbCheckpoint(t, s, 5, map[string]int64{"e.sst": 5}, "abort") // in flight: id above the newest

	removed, err := s.GC(1)
	ids(t, "GC", removed, err, 1, 2)
	want := []string{storage.SharedName(1, "db1-b.sst"), storage.SharedName(3, "db1-d.sst"), storage.SharedName(5, "db1-e.sst")}
	if got := shared(t, s); !slices.Equal(got, want) {
		t.Fatalf("shared files after GC: %v\nwant %v", got, want)
	}
	if _, err := s.Load(3); err != nil {
		t.Fatalf("checkpoint 3 no longer loads after GC: %v", err)
	}
	// A pending manifest above the newest committed one protects what it
	// lists, like a committed one.
	dbCheckpoint(t, s, 7, map[string]int64{"f.sst": 7}, "commit")
	dbCheckpoint(t, s, 8, map[string]int64{"d.sst": 3}, "pending")
	removed, err = s.GC(1)
	ids(t, "second GC", removed, err, 3, 5)
	want = []string{storage.SharedName(3, "db1-d.sst"), storage.SharedName(7, "db1-f.sst")}
	if got := shared(t, s); !slices.Equal(got, want) {
		t.Fatalf("shared files after the second GC: %v\nwant %v", got, want)
	}
}

func gcKeepsSharedWhenUnreadable(t *testing.T, h Harness) {
	s := h.New(t)
	dbCheckpoint(t, s, 1, map[string]int64{"a.sst": 1}, "commit")
	dbCheckpoint(t, s, 2, map[string]int64{"b.sst": 2}, "commit")
	flip(t, h, h.Join(s.Dir(2), storage.ManifestName), 90)
	if _, err := s.GC(2); err != nil {
		t.Fatal(err)
	}
	if got := shared(t, s); len(got) != 2 {
		t.Errorf("GC removed shared files while a manifest was unreadable: %v", got)
	}
}

func dbFiles(t *testing.T, h Harness) {
	s := h.New(t)
	dbCheckpoint(t, s, 1, map[string]int64{"a.sst": 1, "b.sst": 1}, "commit")
	m, err := s.Load(1)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	dst := t.TempDir()
	files := m.Operators["dedupe"].DB[0].Files
	for _, f := range files {
		if err := s.GetDBFile(m, f, filepath.Join(dst, f.Name)); err != nil {
			t.Fatalf("GetDBFile(%s): %v", f.Name, err)
		}
		if got, _ := os.ReadFile(filepath.Join(dst, f.Name)); string(got) != dbContent(f) {
			t.Errorf("%s: restored %q", f.Name, got)
		}
	}
	// A database appends to its restored MANIFEST: that must not reach
	// back into the checkpoint.
	appendTo(t, filepath.Join(dst, files[2].Name))
	if _, err := s.Load(1); err != nil {
		t.Fatalf("writing to a restored private file damaged the checkpoint: %v", err)
	}
	sharedPath := h.Join(h.Join(s.Root(), storage.SharedDir), files[0].Path)
	privatePath := h.Join(s.Dir(1), files[2].Path)
	for _, tc := range []struct {
		what, path string
		f          storage.DBFile
		damage     func(t *testing.T, path string)
	}{
		{"bit flip in a shared file", sharedPath, files[0], func(t *testing.T, p string) { flip(t, h, p, 3) }},
		{"a shared file appended to", sharedPath, files[0], func(t *testing.T, p string) { h.Write(t, p, append(h.Read(t, p), '!')) }},
		{"a private file missing", privatePath, files[2], func(t *testing.T, p string) { h.Delete(t, p) }},
	} {
		orig := h.Read(t, tc.path)
		tc.damage(t, tc.path)
		_, err := s.Load(1)
		wantCorrupt(t, err, tc.path)
		out := filepath.Join(t.TempDir(), tc.f.Name)
		wantCorrupt(t, s.GetDBFile(m, tc.f, out), tc.path)
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: GetDBFile left %s behind", tc.what, out)
		}
		h.Write(t, tc.path, orig)
	}
	if _, err := s.PutDBFile(1, filepath.Join(dst, "a.sst"), storage.DBFile{Name: "a", Path: storage.SharedName(2, "a"), Shared: true}); err == nil {
		t.Error("PutDBFile accepted a shared name of a later checkpoint")
	}
}

func appendTo(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("more"); err != nil {
		t.Fatal(err)
	}
}

func stateID(t *testing.T, h Harness) {
	s := h.New(t)
	id, err := s.StateID()
	if err != nil || len(id) != 32 {
		t.Fatalf("StateID = %q, %v", id, err)
	}
	if again, err := h.Reopen(t, s).StateID(); err != nil || again != id {
		t.Errorf("StateID after reopening = %q, %v; want %q", again, err, id)
	}
	if other, _ := h.New(t).StateID(); other == id {
		t.Error("two stores got the same state id")
	}
	path := h.Join(s.Root(), storage.StateIDName)
	h.Write(t, path, []byte("not an id\n"))
	if _, err := s.StateID(); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("a damaged state id: %v, want an error naming %s", err, path)
	}
}

// Processes opening the same fresh store at once (two instances started
// by mistake, a service restarted while the old one still runs) all get
// the id the first writer stored: the id tells installations apart, so
// two for one directory would make the directory refuse its own commit
// record. Every round is a fresh store and the openers are released
// together.
func stateIDFirstWriterWins(t *testing.T, h Harness) {
	const rounds, openers = 25, 8
	for round := range rounds {
		first := h.New(t)
		stores := []storage.Storage{first}
		for range openers - 1 {
			stores = append(stores, h.Reopen(t, first))
		}
		ids := make([]string, openers)
		errs := make([]error, openers)
		var ready, wg sync.WaitGroup
		start := make(chan struct{})
		ready.Add(openers)
		for i, s := range stores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ready.Done()
				<-start
				ids[i], errs[i] = s.StateID()
			}()
		}
		ready.Wait()
		close(start)
		wg.Wait()
		for i := range openers {
			if errs[i] != nil {
				t.Fatalf("round %d: opener %d: StateID: %v", round, i, errs[i])
			}
			if ids[i] != ids[0] {
				t.Fatalf("round %d: openers racing on a fresh store got different state ids: %v", round, ids)
			}
		}
		if again, err := h.Reopen(t, first).StateID(); err != nil || again != ids[0] {
			t.Fatalf("round %d: StateID after the race = %q, %v; the racers got %q", round, again, err, ids[0])
		}
	}
}

// The engine restores a savepoint (a local directory) through the job's
// Storage, whatever kind it is.
func restoreFromSavepoint(t *testing.T, h Harness) {
	local, err := storage.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m := commit(t, local, 6)
	dbm := dbCheckpoint(t, local, 7, map[string]int64{"a.sst": 7}, "commit")
	s := h.New(t)
	for _, src := range []*storage.Manifest{m, dbm} {
		sp, err := storage.CopyTo(src, filepath.Join(t.TempDir(), "sp"))
		if err != nil {
			t.Fatal(err)
		}
		if op := sp.Operators["count"]; op != nil {
			got, err := s.ReadKeyed(sp, op.Keyed[1], 0, maxPar-1)
			if err != nil || !maps.EqualFunc(got, groupsOf(6, 32, 63), slices.Equal[[]byte]) {
				t.Errorf("ReadKeyed of a savepoint: %d groups, %v", len(got), err)
			}
		}
		if op := sp.Operators["dedupe"]; op != nil {
			f := op.DB[0].Files[0]
			dst := filepath.Join(t.TempDir(), f.Name)
			if err := s.GetDBFile(sp, f, dst); err != nil {
				t.Errorf("GetDBFile of a savepoint: %v", err)
			}
		}
	}
}

// A savepoint is a local, self-contained copy of a checkpoint, wherever
// the store keeps it.
func savepointOfCheckpoint(t *testing.T, h Harness) {
	s := h.New(t)
	m := commit(t, s, 2)
	dbm := dbCheckpoint(t, s, 3, map[string]int64{"a.sst": 3}, "commit")
	dir := filepath.Join(t.TempDir(), "sp")
	sp, err := s.CopyTo(m, dir)
	if err != nil {
		t.Fatalf("CopyTo: %v", err)
	}
	loaded, err := storage.LoadManifest(dir)
	if err != nil || !loaded.Savepoint || loaded.CheckpointID != 2 || sp.Dir != dir {
		t.Fatalf("LoadManifest of the savepoint = %+v, %v", loaded, err)
	}
	if err := storage.Verify(loaded); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	got, err := storage.ReadKeyedFile(dir, loaded.Operators["count"].Keyed[0], 0, maxPar-1)
	if err != nil || !maps.EqualFunc(got, groupsOf(2, 0, 31), slices.Equal[[]byte]) {
		t.Errorf("the savepoint's state: %d groups, %v", len(got), err)
	}
	dbDir := filepath.Join(t.TempDir(), "sp-db")
	if _, err := s.CopyTo(dbm, dbDir); err != nil {
		t.Fatalf("CopyTo of a database snapshot: %v", err)
	}
	if loaded, err := storage.LoadManifest(dbDir); err != nil || storage.Verify(loaded) != nil {
		t.Fatalf("the savepoint of a database snapshot: %v", err)
	}

	shared := h.Join(h.Join(s.Root(), storage.SharedDir), dbm.Operators["dedupe"].DB[0].Files[0].Path)
	flip(t, h, shared, 7)
	bad := filepath.Join(t.TempDir(), "bad")
	_, err = s.CopyTo(dbm, bad)
	wantCorrupt(t, err, shared)
	if _, err := os.Stat(bad); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed CopyTo left %s", bad)
	}
}
