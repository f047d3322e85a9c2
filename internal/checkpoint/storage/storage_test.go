package storage

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	s := newStore(t)
	want := writeCheckpoint(t, s, 7)
	if want.Dir != s.Dir(7) || want.Version != ManifestVersion {
		t.Fatalf("Commit left Dir=%q Version=%d, want %q and %d", want.Dir, want.Version, s.Dir(7), ManifestVersion)
	}
	if got := filepath.Base(s.Dir(7)); got != "chk-00000000000000000007" {
		t.Errorf("Dir(7) base = %s", got)
	}

	got, err := s.Load(7)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if !got.CreatedAt.Equal(want.CreatedAt) {
		t.Errorf("CreatedAt = %v, want %v", got.CreatedAt, want.CreatedAt)
	}
	got.CreatedAt = want.CreatedAt
	if !reflect.DeepEqual(got, want) {
		t.Errorf("loaded manifest differs:\n got %+v\nwant %+v", got, want)
	}

	for _, f := range got.Operators["counter"].Keyed {
		groups, err := ReadKeyedFile(got.Dir, f, 0, testMaxParallelism-1)
		if err != nil {
			t.Fatalf("ReadKeyedFile(%s): %v", f.Path, err)
		}
		if w := payloads(7, "counter", f.FirstKeyGroup, f.LastKeyGroup, 3); !reflect.DeepEqual(groups, w) {
			t.Errorf("%s: read %d groups, want %d; contents differ", f.Path, len(groups), len(w))
		}
	}
	if ids, err := s.List(); err != nil || !slices.Equal(ids, []int64{7}) {
		t.Errorf("List = %v, %v; want [7]", ids, err)
	}
	latest, rep, err := s.Latest(LatestOptions{})
	if err != nil || rep != nil || latest == nil || latest.CheckpointID != 7 {
		t.Errorf("Latest = %v, %v, %v; want checkpoint 7 and no report", latest, rep, err)
	}
}

func TestEmptyAndNilPayloads(t *testing.T) {
	s := newStore(t)
	f, err := s.WriteKeyedFile(1, "empty.state", 5, 9, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadKeyedFile(s.Dir(1), f, 0, 100)
	if err != nil || got == nil || len(got) != 0 {
		t.Fatalf("file without groups: got %v, %v; want empty non-nil map", got, err)
	}

	f, err = s.WriteKeyedFile(1, "zero.state", 0, 3, map[int][]byte{0: nil, 2: {}, 3: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	got, err = ReadKeyedFile(s.Dir(1), f, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int][]byte{0: {}, 2: {}, 3: []byte("x")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v (empty payloads must stay present)", got, want)
	}
	if _, err := ReadKeyedFile(s.Dir(1), f, 3, 2); err == nil {
		t.Error("ReadKeyedFile with lo > hi succeeded")
	}
}

// TestRescaleRead writes state as four subtasks of 32 key groups and reads it
// back as a subtask that now owns 16..47, as a restore after rescaling does.
func TestRescaleRead(t *testing.T) {
	s := newStore(t)
	const id = 3
	all := payloads(id, "op", 0, 127, 5)
	var files []KeyedFile
	for first := 0; first < 128; first += 32 {
		part := make(map[int][]byte)
		for g, p := range all {
			if g >= first && g < first+32 {
				part[g] = p
			}
		}
		f, err := s.WriteKeyedFile(id, fmt.Sprintf("op-%d.state", first/32), first, first+31, part)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}

	tests := []struct {
		lo, hi    int
		wantFiles int // files overlapping lo..hi
	}{
		{16, 47, 2},
		{0, 127, 4},
		{32, 32, 1},
		{31, 32, 2},
		{100, 127, 1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d-%d", tt.lo, tt.hi), func(t *testing.T) {
			got := make(map[int][]byte)
			read := 0
			for _, f := range files {
				if f.LastKeyGroup < tt.lo || f.FirstKeyGroup > tt.hi {
					continue
				}
				read++
				part, err := ReadKeyedFile(s.Dir(id), f, tt.lo, tt.hi)
				if err != nil {
					t.Fatalf("ReadKeyedFile(%s): %v", f.Path, err)
				}
				for g, p := range part {
					if _, dup := got[g]; dup {
						t.Fatalf("key group %d returned by two files", g)
					}
					got[g] = p
				}
			}
			want := make(map[int][]byte)
			for g, p := range all {
				if g >= tt.lo && g <= tt.hi {
					want[g] = p
				}
			}
			if read != tt.wantFiles {
				t.Errorf("read %d files, want %d", read, tt.wantFiles)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got groups %v, want %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
			}
		})
	}
}

func TestWriteKeyedFileRejects(t *testing.T) {
	s := newStore(t)
	tests := []struct {
		name        string
		id          int64
		file        string
		first, last int
		groups      map[int][]byte
		wantMsg     string
	}{
		{"negative id", -1, "a.state", 0, 1, nil, "negative"},
		{"empty name", 1, "", 0, 1, nil, "empty"},
		{"subdirectory", 1, "x/a.state", 0, 1, nil, "plain file name"},
		{"parent", 1, "..", 0, 1, nil, "plain file name"},
		{"manifest name", 1, "_manifest", 0, 1, nil, "reserved"},
		{"tmp suffix", 1, "a.state.tmp", 0, 1, nil, "reserved"},
		{"negative first", 1, "a.state", -1, 1, nil, "negative"},
		{"reversed range", 1, "a.state", 5, 4, nil, "before"},
		{"group below range", 1, "a.state", 10, 20, map[int][]byte{9: nil}, "outside"},
		{"group above range", 1, "a.state", 10, 20, map[int][]byte{21: nil}, "outside"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.WriteKeyedFile(tt.id, tt.file, tt.first, tt.last, tt.groups)
			if err == nil || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("got error %v, want one mentioning %q", err, tt.wantMsg)
			}
		})
	}
	if ids, _, err := s.scan(); err != nil || len(ids) != 0 {
		t.Errorf("rejected writes left checkpoints %v (%v)", ids, err)
	}
}

func TestCommitRejects(t *testing.T) {
	s := newStore(t)
	f, err := s.WriteKeyedFile(1, "a.state", 0, 9, map[int][]byte{1: []byte("one")})
	if err != nil {
		t.Fatal(err)
	}
	base := func() *Manifest {
		return &Manifest{Job: "j", CheckpointID: 1, MaxParallelism: 16,
			Operators: map[string]*OperatorState{"op": {Parallelism: 1, Keyed: []KeyedFile{f}}}}
	}
	tests := []struct {
		name    string
		edit    func(m *Manifest)
		wantMsg string
	}{
		{"savepoint flag", func(m *Manifest) { m.Savepoint = true }, "savepoint"},
		{"newer version", func(m *Manifest) { m.Version = ManifestVersion + 1 }, "unsupported"},
		{"no key groups", func(m *Manifest) { m.MaxParallelism = 0 }, "max parallelism"},
		{"range beyond max parallelism", func(m *Manifest) { m.MaxParallelism = 5 }, "only 5 key groups"},
		{"zero parallelism", func(m *Manifest) { m.Operators["op"].Parallelism = 0 }, "parallelism 0"},
		{"nil operator", func(m *Manifest) { m.Operators["x"] = nil }, "no state entry"},
		{"missing file", func(m *Manifest) { m.Operators["op"].Keyed[0].Path = "b.state" }, "b.state"},
		{"wrong size", func(m *Manifest) { m.Operators["op"].Keyed[0].Size++ }, "bytes"},
		{"bad hash", func(m *Manifest) { m.Operators["op"].Keyed[0].SHA256 = "xyz" }, "SHA-256"},
		{"file listed twice", func(m *Manifest) {
			m.Operators["other"] = &OperatorState{Parallelism: 1, Keyed: []KeyedFile{f}}
		}, "twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := base()
			tt.edit(m)
			err := s.Commit(m)
			if err == nil || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("got error %v, want one mentioning %q", err, tt.wantMsg)
			}
			if ids, err := s.List(); err != nil || len(ids) != 0 {
				t.Fatalf("rejected commit left committed checkpoints %v (%v)", ids, err)
			}
		})
	}
	if err := s.Commit(base()); err != nil {
		t.Fatalf("valid manifest: %v", err)
	}
}

func TestLoadManifestMissing(t *testing.T) {
	s := newStore(t)
	if _, err := LoadManifest(t.TempDir()); !errors.Is(err, ErrNoManifest) {
		t.Errorf("empty dir: got %v, want ErrNoManifest", err)
	}
	if _, err := s.Load(4); !errors.Is(err, ErrNoManifest) {
		t.Errorf("Load of unknown id: got %v, want ErrNoManifest", err)
	}
}

func TestLatestIgnoresUncommitted(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, s *Store) // creates checkpoint 5 without committing it
	}{
		{"state files without manifest", func(t *testing.T, s *Store) {
			if _, err := s.WriteKeyedFile(5, "a.state", 0, 3, map[int][]byte{1: []byte("x")}); err != nil {
				t.Fatal(err)
			}
		}},
		{"only manifest tmp", func(t *testing.T, s *Store) {
			mustWrite(t, filepath.Join(s.Dir(5), "_manifest.tmp"), "onceflow-manifest sha256=12")
		}},
		{"state files and half-written manifest tmp", func(t *testing.T, s *Store) {
			if _, err := s.WriteKeyedFile(5, "a.state", 0, 3, nil); err != nil {
				t.Fatal(err)
			}
			mustWrite(t, filepath.Join(s.Dir(5), "a.state.tmp"), "OFKG")
			mustWrite(t, filepath.Join(s.Dir(5), "_manifest.tmp"), "")
		}},
		{"empty directory", func(t *testing.T, s *Store) {
			if err := os.MkdirAll(s.Dir(5), 0o755); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			tt.setup(t, s)
			for _, fallback := range []bool{false, true} {
				m, rep, err := s.Latest(LatestOptions{AllowFallback: fallback})
				if m != nil || rep != nil || err != nil {
					t.Fatalf("only uncommitted (fallback=%v): Latest = %v, %v, %v; want nil, nil, nil", fallback, m, rep, err)
				}
			}
			writeCheckpoint(t, s, 4)
			tt.setup(t, s) // again, in case writing 4 disturbed nothing
			m, rep, err := s.Latest(LatestOptions{})
			if err != nil || rep != nil || m == nil || m.CheckpointID != 4 {
				t.Fatalf("Latest = %v, %v, %v; want checkpoint 4", m, rep, err)
			}
			if ids, _ := s.List(); !slices.Equal(ids, []int64{4}) {
				t.Errorf("List = %v, want [4]", ids)
			}
		})
	}
}

func TestLatestNothing(t *testing.T) {
	s := newStore(t)
	// Entries that are not checkpoint directories are not ours.
	mustWrite(t, filepath.Join(s.Root(), "checkpoints", "README"), "x")
	mustWrite(t, filepath.Join(s.Root(), "checkpoints", "chk-7", "_manifest"), "x")
	m, rep, err := s.Latest(LatestOptions{})
	if m != nil || rep != nil || err != nil {
		t.Fatalf("Latest = %v, %v, %v; want nil, nil, nil", m, rep, err)
	}
}

// TestManifestBitFlip flips one bit at every byte of a manifest in turn:
// every flip must be caught and name the manifest, never skipped as
// uncommitted and never accepted.
func TestManifestBitFlip(t *testing.T) {
	s := newStore(t)
	writeCheckpoint(t, s, 2)
	path := filepath.Join(s.Dir(2), "_manifest")
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for off := range int64(len(orig)) {
		flipBit(t, path, off)
		_, _, err := s.Latest(LatestOptions{})
		if err == nil {
			t.Fatalf("bit flip at offset %d (%q) went unnoticed", off, orig[max(0, off-10):off+1])
		}
		ce := wantCorrupt(t, err, path)
		if ce.CheckpointID != 2 || ce.Savepoint {
			t.Fatalf("offset %d: CorruptError has CheckpointID=%d Savepoint=%v, want 2, false", off, ce.CheckpointID, ce.Savepoint)
		}
		if err := os.WriteFile(path, orig, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Load(2); err != nil {
		t.Fatalf("restored manifest: %v", err)
	}
}

func TestManifestDamage(t *testing.T) {
	s := newStore(t)
	writeCheckpoint(t, s, 2)
	path := filepath.Join(s.Dir(2), "_manifest")
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	reseal := func(body string) string { // a valid checksum over body
		sum := sha256.Sum256([]byte(body))
		return manifestHeader + hex.EncodeToString(sum[:]) + "\n" + body
	}
	tests := []struct {
		name, content, wantReason string
	}{
		{"empty", "", "header"},
		{"truncated", string(orig[:len(orig)/2]), "mismatch"},
		{"header only", string(orig[:len(manifestHeader)+64]), "header"},
		{"appended", string(orig) + " ", "mismatch"},
		{"sealed garbage", reseal("{not json"), "JSON"},
		{"sealed invalid", reseal(`{"version":1,"checkpoint_id":2,"max_parallelism":0}`), "max parallelism"},
		{"sealed path escape", reseal(`{"version":1,"checkpoint_id":2,"max_parallelism":4,"operators":{"o":{"parallelism":1,` +
			`"keyed":[{"path":"../../etc/passwd","first_key_group":0,"last_key_group":0,"size":30,"sha256":"` + strings.Repeat("0", 64) + `"}]}}}`), "plain file name"},
		{"sealed wrong id", reseal(`{"version":1,"checkpoint_id":3,"max_parallelism":4}`), "not checkpoint 2"},
		{"sealed savepoint", reseal(`{"version":1,"checkpoint_id":2,"savepoint":true,"max_parallelism":4}`), "not checkpoint 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mustWrite(t, path, tt.content)
			_, err := s.Load(2)
			ce := wantCorrupt(t, err, path)
			if !strings.Contains(ce.Reason, tt.wantReason) {
				t.Errorf("reason %q does not mention %q", ce.Reason, tt.wantReason)
			}
		})
	}

	t.Run("newer version is not damage", func(t *testing.T) {
		mustWrite(t, path, reseal(`{"version":3,"checkpoint_id":2}`))
		_, err := s.Load(2)
		var ce *CorruptError
		if !errors.Is(err, ErrUnsupportedVersion) || errors.As(err, &ce) {
			t.Fatalf("got %v, want ErrUnsupportedVersion and no CorruptError", err)
		}
		if _, _, err := s.Latest(LatestOptions{AllowFallback: true}); !errors.Is(err, ErrUnsupportedVersion) {
			t.Fatalf("Latest with fallback: got %v, want ErrUnsupportedVersion (not skipped)", err)
		}
	})
}

func TestStateFileDamage(t *testing.T) {
	tests := []struct {
		name       string
		damage     func(t *testing.T, path string)
		wantReason string
	}{
		{"bit flip in payload", func(t *testing.T, path string) { flipBit(t, path, size(t, path)-3) }, "SHA-256 mismatch"},
		{"bit flip in index", func(t *testing.T, path string) { flipBit(t, path, keyedHeaderLen+5) }, "SHA-256 mismatch"},
		{"bit flip in magic", func(t *testing.T, path string) { flipBit(t, path, 0) }, "SHA-256 mismatch"},
		{"truncated", func(t *testing.T, path string) {
			if err := os.Truncate(path, size(t, path)-1); err != nil {
				t.Fatal(err)
			}
		}, "truncated"},
		{"truncated to nothing", func(t *testing.T, path string) {
			if err := os.Truncate(path, 0); err != nil {
				t.Fatal(err)
			}
		}, "truncated"},
		{"appended", func(t *testing.T, path string) {
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.Write([]byte{0}); err != nil {
				t.Fatal(err)
			}
		}, "appended"},
		{"missing", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}, "missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			m := writeCheckpoint(t, s, 9)
			f := m.Operators["counter"].Keyed[1]
			path := filepath.Join(s.Dir(9), f.Path)
			tt.damage(t, path)

			_, _, err := s.Latest(LatestOptions{})
			ce := wantCorrupt(t, err, path)
			if ce.CheckpointID != 9 || !strings.Contains(ce.Reason, tt.wantReason) {
				t.Errorf("Latest: CorruptError{CheckpointID: %d, Reason: %q}, want 9 and a reason mentioning %q", ce.CheckpointID, ce.Reason, tt.wantReason)
			}
			_, err = s.Load(9)
			wantCorrupt(t, err, path)
			wantCorrupt(t, Verify(m), path)
			// Even a read of a range the damaged bytes do not hold must fail:
			// the file is verified as a whole.
			_, err = ReadKeyedFile(s.Dir(9), f, f.FirstKeyGroup, f.FirstKeyGroup)
			ce = wantCorrupt(t, err, path)
			if ce.CheckpointID != 9 {
				t.Errorf("ReadKeyedFile: CheckpointID = %d, want 9 (from the directory name)", ce.CheckpointID)
			}
			// The undamaged file of the same checkpoint still reads.
			if _, err := ReadKeyedFile(s.Dir(9), m.Operators["counter"].Keyed[0], 0, 127); err != nil {
				t.Errorf("undamaged file: %v", err)
			}
		})
	}
}

func size(t testing.TB, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// TestStateFileStructure seals malformed files with a matching checksum, as
// a buggy writer would produce them: the reader must reject them cleanly.
func TestStateFileStructure(t *testing.T) {
	good := func() []byte {
		s := newStore(t)
		f, err := s.WriteKeyedFile(1, "a.state", 2, 5, map[int][]byte{2: []byte("ab"), 4: []byte("cde")})
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(s.Dir(1), f.Path))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	put := func(data []byte, off int, v uint64, n int) []byte {
		for i := range n {
			data[off+i] = byte(v >> (8 * i))
		}
		return data
	}
	tests := []struct {
		name       string
		data       []byte
		wantReason string
	}{
		{"bad magic", put(good(), 0, 'X', 1), "magic"},
		{"future version", put(good(), 4, 2, 4), "version 2"},
		{"other range", put(good(), 8, 1, 4), "covers key groups 1..5"},
		{"huge count", put(good(), 16, 1<<31, 4), "more than the file can hold"},
		{"group outside range", put(good(), keyedHeaderLen, 9, 4), "outside"},
		{"groups out of order", put(good(), keyedHeaderLen+keyedEntryLen, 2, 4), "not after"},
		{"gap", put(good(), keyedHeaderLen+4, 61, 8), "starts at offset"},
		{"huge length", put(good(), keyedHeaderLen+12, 1<<62, 8), "beyond the end"},
		{"short length", put(good(), keyedHeaderLen+keyedEntryLen+12, 2, 8), "accounts for"},
		{"header only", good()[:10], "shorter than its header"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			mustWrite(t, filepath.Join(dir, "a.state"), string(tt.data))
			sum := sha256.Sum256(tt.data)
			f := KeyedFile{Path: "a.state", FirstKeyGroup: 2, LastKeyGroup: 5, Size: int64(len(tt.data)), SHA256: hex.EncodeToString(sum[:])}
			_, err := ReadKeyedFile(dir, f, 0, 10)
			ce := wantCorrupt(t, err, filepath.Join(dir, "a.state"))
			if !strings.Contains(ce.Reason, tt.wantReason) {
				t.Errorf("reason %q does not mention %q", ce.Reason, tt.wantReason)
			}
			if !ce.Savepoint || ce.CheckpointID != -1 {
				t.Errorf("outside a chk- directory: Savepoint=%v CheckpointID=%d, want true, -1", ce.Savepoint, ce.CheckpointID)
			}
		})
	}
}

func FuzzReadKeyedFile(f *testing.F) {
	s := newStore(f)
	kf, err := s.WriteKeyedFile(1, "a.state", 0, 7, map[int][]byte{0: []byte("zero"), 3: nil, 7: []byte("seven")})
	if err != nil {
		f.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(s.Dir(1), kf.Path))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data, 0, 7)
	f.Add(data[:30], 2, 3)
	f.Fuzz(func(t *testing.T, data []byte, lo, hi int) {
		dir := t.TempDir()
		mustWrite(t, filepath.Join(dir, "a.state"), string(data))
		sum := sha256.Sum256(data)
		kf := KeyedFile{Path: "a.state", FirstKeyGroup: 0, LastKeyGroup: 7, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
		groups, err := ReadKeyedFile(dir, kf, lo, hi)
		var ce *CorruptError
		if err != nil && lo <= hi && !errors.As(err, &ce) {
			t.Fatalf("error is neither success nor CorruptError: %v", err)
		}
		for g := range groups {
			if g < lo || g > hi || g < 0 || g > 7 {
				t.Fatalf("returned key group %d outside %d..%d and 0..7", g, lo, hi)
			}
		}
	})
}

func TestAllowFallback(t *testing.T) {
	s := newStore(t)
	writeCheckpoint(t, s, 1)
	m2 := writeCheckpoint(t, s, 2)
	writeCheckpoint(t, s, 3)
	if _, err := s.WriteKeyedFile(4, "a.state", 0, 1, nil); err != nil { // in progress
		t.Fatal(err)
	}
	badState := filepath.Join(s.Dir(2), m2.Operators["counter"].Keyed[0].Path)
	badManifest := filepath.Join(s.Dir(3), "_manifest")
	flipBit(t, badState, 40)
	flipBit(t, badManifest, 100)

	_, rep, err := s.Latest(LatestOptions{})
	wantCorrupt(t, err, badManifest)
	if rep != nil {
		t.Errorf("report without fallback: %+v", rep)
	}
	msg := err.Error()
	for _, want := range []string{"checkpoint 3", "--from-savepoint DIR", "--allow-checkpoint-fallback", "duplicates"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}

	m, rep, err := s.Latest(LatestOptions{AllowFallback: true})
	if err != nil || m == nil || m.CheckpointID != 1 {
		t.Fatalf("Latest with fallback = %v, %v; want checkpoint 1", m, err)
	}
	if rep == nil || len(rep.Skipped) != 2 {
		t.Fatalf("report = %+v, want two skipped checkpoints", rep)
	}
	if got := []string{rep.Skipped[0].Path, rep.Skipped[1].Path}; !slices.Equal(got, []string{badManifest, badState}) {
		t.Errorf("skipped %v, want newest first [%s %s]", got, badManifest, badState)
	}
	if rep.Skipped[0].CheckpointID != 3 || rep.Skipped[1].CheckpointID != 2 {
		t.Errorf("skipped ids %d, %d; want 3, 2", rep.Skipped[0].CheckpointID, rep.Skipped[1].CheckpointID)
	}

	// With every committed checkpoint damaged, fallback has nothing to offer.
	flipBit(t, filepath.Join(s.Dir(1), "_manifest"), 10)
	m, rep, err = s.Latest(LatestOptions{AllowFallback: true})
	if m != nil || !errors.Is(err, ErrAllCheckpointsCorrupt) {
		t.Fatalf("all damaged: Latest = %v, %v; want ErrAllCheckpointsCorrupt", m, err)
	}
	if rep == nil || len(rep.Skipped) != 3 {
		t.Errorf("all damaged: report = %+v, want three skipped", rep)
	}
	var ce *CorruptError
	if errors.As(err, &ce) {
		t.Errorf("all damaged: error is a CorruptError, whose advice (use the fallback) is already spent: %v", err)
	}
}

func TestGC(t *testing.T) {
	tests := []struct {
		name        string
		committed   []int64
		uncommitted []int64
		retain      int
		keep        []int64
		wantRemoved []int64
	}{
		{
			name:      "retain two",
			committed: []int64{1, 2, 4, 5}, uncommitted: []int64{3, 6, 7},
			retain: 2, wantRemoved: []int64{1, 2, 3},
		},
		{
			name:      "keep protects an old one and an uncommitted one",
			committed: []int64{1, 2, 4, 5}, uncommitted: []int64{3, 6},
			retain: 1, keep: []int64{1, 3}, wantRemoved: []int64{2, 4},
		},
		{
			name:      "retain more than exist",
			committed: []int64{2, 5}, uncommitted: []int64{1, 3, 9},
			retain: 10, wantRemoved: []int64{1, 3},
		},
		{
			name:        "nothing committed: everything may be in progress",
			uncommitted: []int64{1, 2, 3},
			retain:      1,
		},
		{
			name:      "in-progress newer directories are never removed",
			committed: []int64{10}, uncommitted: []int64{11, 12},
			retain: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			for _, id := range tt.committed {
				writeCheckpoint(t, s, id)
			}
			for _, id := range tt.uncommitted {
				if _, err := s.WriteKeyedFile(id, "a.state", 0, 1, map[int][]byte{0: []byte("x")}); err != nil {
					t.Fatal(err)
				}
			}
			foreign := filepath.Join(s.Root(), "checkpoints", "notes.txt")
			mustWrite(t, foreign, "mine")

			removed, err := s.GC(tt.retain, tt.keep...)
			if err != nil {
				t.Fatalf("GC: %v", err)
			}
			if !slices.Equal(removed, tt.wantRemoved) {
				t.Errorf("removed %v, want %v", removed, tt.wantRemoved)
			}
			for _, id := range slices.Concat(tt.committed, tt.uncommitted) {
				if gone := slices.Contains(tt.wantRemoved, id); exists(t, s.Dir(id)) == gone {
					t.Errorf("checkpoint %d: directory exists=%v, want %v", id, !gone, !gone)
				}
			}
			if !exists(t, foreign) {
				t.Error("GC removed a file that is not a checkpoint directory")
			}
			if again, err := s.GC(tt.retain, tt.keep...); err != nil || len(again) != 0 {
				t.Errorf("second GC removed %v, %v; want nothing", again, err)
			}
		})
	}

	if _, err := newStore(t).GC(0); err == nil {
		t.Error("GC(0) succeeded; retaining nothing must be refused")
	}
}

func TestCopyTo(t *testing.T) {
	s := newStore(t)
	m := writeCheckpoint(t, s, 12)
	spDir := filepath.Join(t.TempDir(), "savepoints", "before-upgrade")

	sp, err := CopyTo(m, spDir)
	if err != nil {
		t.Fatalf("CopyTo: %v", err)
	}
	if !sp.Savepoint || sp.Dir != spDir || sp.CheckpointID != 12 {
		t.Errorf("savepoint manifest: Savepoint=%v Dir=%q CheckpointID=%d", sp.Savepoint, sp.Dir, sp.CheckpointID)
	}
	if m.Savepoint || m.Dir != s.Dir(12) {
		t.Errorf("CopyTo modified the source manifest: Savepoint=%v Dir=%q", m.Savepoint, m.Dir)
	}
	sp.Operators["source"].Blobs["orders-0"][0] = '!'
	if m.Operators["source"].Blobs["orders-0"][0] == '!' {
		t.Error("savepoint manifest shares blob memory with the source")
	}

	// The savepoint must not depend on anything of the job's store.
	if err := os.RemoveAll(s.Root()); err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadManifest(spDir)
	if err != nil {
		t.Fatalf("LoadManifest: %v", err)
	}
	if !loaded.Savepoint || loaded.Job != "orders" || !loaded.CreatedAt.Equal(m.CreatedAt) {
		t.Errorf("loaded savepoint: Savepoint=%v Job=%q CreatedAt=%v", loaded.Savepoint, loaded.Job, loaded.CreatedAt)
	}
	if !reflect.DeepEqual(loaded.Operators["source"].Blobs, m.Operators["source"].Blobs) {
		t.Error("savepoint blobs differ from the checkpoint's")
	}
	if err := Verify(loaded); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	for _, f := range loaded.Operators["counter"].Keyed {
		groups, err := ReadKeyedFile(spDir, f, 0, testMaxParallelism-1)
		if err != nil {
			t.Fatal(err)
		}
		if want := payloads(12, "counter", f.FirstKeyGroup, f.LastKeyGroup, 3); !reflect.DeepEqual(groups, want) {
			t.Errorf("%s: savepoint content differs", f.Path)
		}
	}

	// A damaged savepoint file gets savepoint advice, not checkpoint advice.
	path := filepath.Join(spDir, loaded.Operators["counter"].Keyed[0].Path)
	flipBit(t, path, 50)
	err = Verify(loaded)
	ce := wantCorrupt(t, err, path)
	if !ce.Savepoint || strings.Contains(err.Error(), "--allow-checkpoint-fallback") {
		t.Errorf("savepoint damage: Savepoint=%v, message %q", ce.Savepoint, err)
	}

	if _, err := CopyTo(loaded, t.TempDir()); err == nil {
		t.Error("copying a damaged savepoint succeeded")
	}
}

func TestCopyToRefuses(t *testing.T) {
	s := newStore(t)
	m := writeCheckpoint(t, s, 1)

	occupied := t.TempDir()
	if _, err := CopyTo(m, occupied); err != nil {
		t.Fatal(err)
	}
	if _, err := CopyTo(m, occupied); err == nil || !strings.Contains(err.Error(), "already holds") {
		t.Errorf("copy over an existing savepoint: %v", err)
	}
	if _, err := CopyTo(m, s.Dir(1)); err == nil {
		t.Error("copy onto the checkpoint itself succeeded")
	}

	// A damaged source yields a CorruptError and no savepoint.
	src := filepath.Join(s.Dir(1), m.Operators["counter"].Keyed[1].Path)
	flipBit(t, src, 60)
	dst := filepath.Join(t.TempDir(), "sp")
	_, err := CopyTo(m, dst)
	ce := wantCorrupt(t, err, src)
	if ce.CheckpointID != 1 || ce.Savepoint {
		t.Errorf("CorruptError: CheckpointID=%d Savepoint=%v, want 1, false", ce.CheckpointID, ce.Savepoint)
	}
	if exists(t, dst) {
		t.Error("failed CopyTo left the directory it created")
	}
	kept := t.TempDir()
	if _, err := CopyTo(m, kept); err == nil {
		t.Fatal("CopyTo of damaged source succeeded")
	}
	if _, err := LoadManifest(kept); !errors.Is(err, ErrNoManifest) {
		t.Errorf("failed CopyTo into an existing directory left a manifest: %v", err)
	}
}

func TestOpen(t *testing.T) {
	if _, err := Open(""); err == nil {
		t.Error("Open(\"\") succeeded")
	}
	root := filepath.Join(t.TempDir(), "a", "..", "job")
	s, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	if s.Root() != filepath.Clean(root) || !exists(t, filepath.Join(s.Root(), "checkpoints")) {
		t.Errorf("Root() = %s; checkpoints directory created: %v", s.Root(), exists(t, filepath.Join(s.Root(), "checkpoints")))
	}
}
