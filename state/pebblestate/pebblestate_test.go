package pebblestate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/state"
	"github.com/onceflow/onceflow/state/statetest"
)

// newPool returns a small pool closed when the test ends (after the DBs
// opened later, whose cleanups run first).
func newPool(t testing.TB) *Pool {
	t.Helper()
	p := NewPool(32 << 20)
	t.Cleanup(p.Close)
	return p
}

func openDB(t testing.TB, p *Pool, dir string, maxPar int) *DB {
	t.Helper()
	d, err := p.Open(dir, 4, maxPar)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	})
	return d
}

func openReadOnly(t testing.TB, p *Pool, dir string, maxPar int) *DB {
	t.Helper()
	d, err := p.OpenReadOnly(dir, maxPar)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	})
	return d
}

func TestConformance(t *testing.T) {
	p := newPool(t)
	statetest.Conformance(t, func() state.Backend { return openDB(t, p, t.TempDir(), 32) })
}

func put(t testing.TB, d *DB, kg int, st, key, value string) {
	t.Helper()
	if err := d.Put(kg, st, []byte(key), []byte(value)); err != nil {
		t.Fatal(err)
	}
}

func get(t testing.TB, d *DB, kg int, st, key string) (string, bool) {
	t.Helper()
	v, ok, err := d.Get(kg, st, []byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return string(v), ok
}

// dump returns "kg/state/key=value" for every key of states in key groups
// 0..maxPar-1, through Range.
func dump(t testing.TB, d *DB, states ...string) []string {
	t.Helper()
	var out []string
	for kg := 0; kg < d.maxPar; kg++ {
		for _, st := range states {
			err := d.Range(kg, st, nil, func(k, v []byte) bool {
				out = append(out, fmt.Sprintf("%d/%s/%s=%s", kg, st, k, v))
				return true
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

func TestBackendOperations(t *testing.T) {
	p := newPool(t)
	d := openDB(t, p, t.TempDir(), 128)

	put(t, d, 3, "a", "k1", "v1")
	put(t, d, 3, "a", "k2", "v2")
	put(t, d, 3, "ab", "k1", "other state") // "a" is a prefix of "ab"
	put(t, d, 4, "a", "k1", "other group")
	put(t, d, 127, "a", "\xff\xff", "last group, 0xff key")
	put(t, d, 3, "a", "k\xff", "0xff inside the prefix")

	if v, ok := get(t, d, 3, "a", "k1"); !ok || v != "v1" {
		t.Fatalf("get 3/a/k1 = %q, %v", v, ok)
	}
	if _, ok := get(t, d, 3, "a", "missing"); ok {
		t.Fatal("get of a missing key found it")
	}
	if v, _ := get(t, d, 127, "a", "\xff\xff"); v != "last group, 0xff key" {
		t.Fatalf("get of the 0xff key in the last group = %q", v)
	}

	// The value Get returns is a copy: later writes do not change it, the
	// next Get may reuse it.
	v1, _, _ := d.Get(3, "a", []byte("k1"))
	put(t, d, 3, "a", "k1", "V1")
	if string(v1) != "v1" {
		t.Fatalf("the value of an earlier Get changed to %q", v1)
	}
	// Put copies: changing the caller's slices afterwards changes nothing.
	k, v := []byte("k3"), []byte("v3")
	if err := d.Put(3, "a", k, v); err != nil {
		t.Fatal(err)
	}
	k[0], v[0] = 'x', 'x'
	if got, ok := get(t, d, 3, "a", "k3"); !ok || got != "v3" {
		t.Fatalf("get 3/a/k3 after changing the slices given to Put = %q, %v", got, ok)
	}

	var keys []string
	err := d.Range(3, "a", []byte("k"), func(k, v []byte) bool {
		keys = append(keys, string(k)+"="+string(v))
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"k1=V1", "k2=v2", "k3=v3", "k\xff=0xff inside the prefix"}; !slices.Equal(keys, want) {
		t.Fatalf("range 3/a/k = %q, want %q", keys, want)
	}
	keys = nil
	_ = d.Range(3, "a", nil, func(k, _ []byte) bool { keys = append(keys, string(k)); return len(keys) < 2 })
	if want := []string{"k1", "k2"}; !slices.Equal(keys, want) {
		t.Fatalf("range stopped after two = %q, want %q", keys, want)
	}
	keys = nil
	_ = d.Range(3, "a", []byte("k\xff"), func(k, _ []byte) bool { keys = append(keys, string(k)); return true })
	if want := []string{"k\xff"}; !slices.Equal(keys, want) {
		t.Fatalf("range with a 0xff prefix = %q, want %q", keys, want)
	}

	// A Range inside another's fn (reads only) sees the same.
	var inner []string
	_ = d.Range(3, "a", nil, func(k, _ []byte) bool {
		_ = d.Range(3, "ab", nil, func(k2, v2 []byte) bool { inner = append(inner, string(k)+"/"+string(k2)); return true })
		if _, ok, _ := d.Get(4, "a", []byte("k1")); !ok {
			t.Error("Get inside Range missed 4/a/k1")
		}
		return true
	})
	if len(inner) != 4 {
		t.Fatalf("nested ranges = %q", inner)
	}

	if err := d.Delete(3, "a", []byte("k2")); err != nil {
		t.Fatal(err)
	}
	if _, ok := get(t, d, 3, "a", "k2"); ok {
		t.Fatal("a deleted key is still there")
	}
	if err := d.DeletePrefix(3, "a", []byte("k")); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"3/ab/k1=other state",
		"4/a/k1=other group",
		"127/a/\xff\xff=last group, 0xff key",
	}
	if got := dump(t, d, "a", "ab"); !slices.Equal(got, want) {
		t.Fatalf("after DeletePrefix 3/a/k: %q, want %q", got, want)
	}
	if err := d.DeletePrefix(127, "a", nil); err != nil {
		t.Fatal(err)
	}
	if got := dump(t, d, "a", "ab"); !slices.Equal(got, want[:2]) {
		t.Fatalf("after DeletePrefix 127/a: %q, want %q", got, want[:2])
	}

	for _, kg := range []int{-1, 128} {
		_, _, err := d.Get(kg, "a", []byte("k"))
		if err == nil || !strings.Contains(err.Error(), d.Dir()) {
			t.Fatalf("get in key group %d: %v, want an error naming %s", kg, err, d.Dir())
		}
		if err := d.Put(kg, "a", nil, nil); err == nil {
			t.Fatalf("put in key group %d succeeded", kg)
		}
	}
}

// TestDeletePrefixSizes deletes prefixes of few keys (one by one) and of
// many (a range deletion), in the memtable and in sstables.
func TestDeletePrefixSizes(t *testing.T) {
	p := newPool(t)
	d := openDB(t, p, t.TempDir(), 8)
	sizes := []int{0, 1, pointDeleteMax, pointDeleteMax + 1, 1000}
	write := func() {
		for i, n := range sizes {
			for j := range n {
				put(t, d, 1, "s", fmt.Sprintf("p%d/%04d", i, j), "v")
			}
			put(t, d, 1, "s", fmt.Sprintf("p%d0", i), "next to the prefix")
			put(t, d, 2, "s", fmt.Sprintf("p%d/0000", i), "other group")
		}
	}
	for _, flushed := range []bool{false, true} {
		write()
		if flushed {
			if _, err := d.Checkpoint(filepath.Join(t.TempDir(), "chk")); err != nil {
				t.Fatal(err)
			}
		}
		for i := range sizes {
			if err := d.DeletePrefix(1, "s", fmt.Appendf(nil, "p%d/", i)); err != nil {
				t.Fatal(err)
			}
		}
		var want []string
		for i := range sizes {
			want = append(want, fmt.Sprintf("1/s/p%d0=next to the prefix", i))
		}
		for i := range sizes {
			want = append(want, fmt.Sprintf("2/s/p%d/0000=other group", i))
		}
		if got := dump(t, d, "s"); !slices.Equal(got, want) {
			t.Fatalf("flushed %v: after DeletePrefix: %q, want %q", flushed, got, want)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	p := newPool(t)
	for _, mp := range []int{0, MaxKeyGroups + 1} {
		if d, err := p.Open(t.TempDir(), 1, mp); err == nil {
			_ = d.Close()
			t.Fatalf("open with maxParallelism %d succeeded", mp)
		}
	}
	missing := filepath.Join(t.TempDir(), "missing")
	_, err := p.OpenReadOnly(missing, 128)
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("read-only open of a missing directory: %v, want an error naming it", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("read-only open created %s", missing)
	}
	notDB := t.TempDir()
	_, err = p.OpenReadOnly(notDB, 128)
	if err == nil || !strings.Contains(err.Error(), notDB) {
		t.Fatalf("read-only open of an empty directory: %v, want an error naming it", err)
	}
}

func listDir(t testing.TB, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func ssts(names []string) []string {
	var out []string
	for _, n := range names {
		if strings.HasSuffix(n, ".sst") {
			out = append(out, n)
		}
	}
	return out
}

// copyDir copies the flat directory src to dst, the way a restore brings a
// checkpoint back to local disk.
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range listDir(t, src) {
		in, err := os.Open(filepath.Join(src, n))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, n))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		in.Close()
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCheckpoint(t *testing.T) {
	p := newPool(t)
	d := openDB(t, p, t.TempDir(), 16)
	for i := range 1000 {
		put(t, d, i%16, "s", fmt.Sprintf("key-%04d", i), fmt.Sprintf("value-%d", i))
	}
	if err := d.DeletePrefix(5, "s", nil); err != nil {
		t.Fatal(err)
	}
	want := dump(t, d, "s")

	root := t.TempDir()
	chk1 := filepath.Join(root, "chk-1")
	files1, err := d.Checkpoint(chk1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(files1, listDir(t, chk1)) {
		t.Fatalf("checkpoint returned %q, the directory holds %q", files1, listDir(t, chk1))
	}
	if len(ssts(files1)) == 0 {
		t.Fatalf("checkpoint lists no sstables: %q", files1)
	}
	for _, prefix := range []string{"MANIFEST-", "OPTIONS-", "marker.manifest.", "marker.format-version."} {
		if !slices.ContainsFunc(files1, func(n string) bool { return strings.HasPrefix(n, prefix) }) {
			t.Errorf("checkpoint lists no %s file: %q", prefix, files1)
		}
	}
	for _, n := range files1 {
		if strings.HasSuffix(n, ".log") {
			t.Errorf("checkpoint holds a WAL file: %s", n)
		}
	}

	// Writes after the checkpoint are not in it.
	put(t, d, 1, "s", "after", "the checkpoint")

	r := openReadOnly(t, p, chk1, 16)
	if got := dump(t, r, "s"); !slices.Equal(got, want) {
		t.Fatalf("the checkpoint reads %d entries, want %d", len(got), len(want))
	}
	// Reopened read-write from a copy (a restore), it reads the same and
	// takes writes.
	restored := filepath.Join(root, "restored")
	copyDir(t, chk1, restored)
	rw := openDB(t, p, restored, 16)
	if got := dump(t, rw, "s"); !slices.Equal(got, want) {
		t.Fatalf("the restored copy reads %d entries, want %d", len(got), len(want))
	}
	put(t, rw, 1, "s", "new", "write")

	// Incremental: the next checkpoint keeps the earlier sstables; one with
	// no writes since lists exactly the same.
	chk2 := filepath.Join(root, "chk-2")
	files2, err := d.Checkpoint(chk2)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ssts(files1) {
		if !slices.Contains(files2, n) {
			t.Errorf("checkpoint 2 dropped sstable %s of checkpoint 1 (no compaction was due)", n)
		}
	}
	if len(ssts(files2)) <= len(ssts(files1)) {
		t.Errorf("checkpoint 2 after a write lists no new sstable: %q, then %q", ssts(files1), ssts(files2))
	}
	files3, err := d.Checkpoint(filepath.Join(root, "chk-3"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ssts(files2), ssts(files3)) {
		t.Fatalf("a checkpoint with no writes lists other sstables: %q, then %q", ssts(files2), ssts(files3))
	}
	r3 := openReadOnly(t, p, filepath.Join(root, "chk-3"), 16)
	if v, ok := get(t, r3, 1, "s", "after"); !ok || v != "the checkpoint" {
		t.Fatalf("checkpoint 3 misses the write after checkpoint 1: %q, %v", v, ok)
	}

	// The directory must not exist.
	_, err = d.Checkpoint(chk1)
	if err == nil || !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), chk1) {
		t.Fatalf("checkpoint into an existing directory: %v, want an ErrExist naming %s", err, chk1)
	}
	if !slices.Equal(listDir(t, chk1), files1) {
		t.Fatal("a failed checkpoint changed the existing directory")
	}
}

// TestCheckpointGenerations restores each checkpoint into a new DB and
// checkpoints that, with and without writes in between: a chain of
// restores, each of which must open and read everything before it.
func TestCheckpointGenerations(t *testing.T) {
	p := newPool(t)
	root := t.TempDir()
	dir := filepath.Join(root, "db-0")
	var want []string
	for g := range 5 {
		d, err := p.Open(dir, 1, 8)
		if err != nil {
			t.Fatalf("generation %d: %v", g, err)
		}
		if got := dump(t, d, "s"); !slices.Equal(got, want) {
			t.Fatalf("generation %d reads %q, want %q", g, got, want)
		}
		if g%2 == 1 { // every other generation writes nothing
			for i := range 10 {
				put(t, d, i%8, "s", fmt.Sprintf("g%d-%d", g, i), "v")
			}
			want = dump(t, d, "s")
		}
		chk := filepath.Join(root, fmt.Sprintf("chk-%d", g))
		if _, err := d.Checkpoint(chk); err != nil {
			t.Fatalf("generation %d: %v", g, err)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if got := dump(t, openReadOnly(t, p, chk, 8), "s"); !slices.Equal(got, want) {
			t.Fatalf("checkpoint of generation %d reads %q, want %q", g, got, want)
		}
		dir = filepath.Join(root, fmt.Sprintf("db-%d", g+1))
		copyDir(t, chk, dir)
	}
}

func TestOpenReadOnlyLeavesTheCheckpointAlone(t *testing.T) {
	p := newPool(t)
	d := openDB(t, p, t.TempDir(), 8)
	put(t, d, 2, "s", "k", "v")
	chk := filepath.Join(t.TempDir(), "chk")
	files, err := d.Checkpoint(chk)
	if err != nil {
		t.Fatal(err)
	}
	r, err := p.OpenReadOnly(chk, 8)
	if err != nil {
		t.Fatal(err)
	}
	// Two read-only opens of one checkpoint at once (two subtasks importing
	// from it).
	r2 := openReadOnly(t, p, chk, 8)
	if v, ok := get(t, r, 2, "s", "k"); !ok || v != "v" {
		t.Fatalf("read-only get = %q, %v", v, ok)
	}
	if v, ok := get(t, r2, 2, "s", "k"); !ok || v != "v" {
		t.Fatalf("second read-only get = %q, %v", v, ok)
	}
	if err := r.Put(2, "s", []byte("k"), []byte("w")); err == nil || !strings.Contains(err.Error(), chk) {
		t.Fatalf("put into a read-only DB: %v, want an error naming %s", err, chk)
	}
	if _, err := r.Checkpoint(filepath.Join(t.TempDir(), "x")); err == nil {
		t.Fatal("checkpoint of a read-only DB succeeded")
	}
	if _, err := r.Import(d, 0, 7); err == nil {
		t.Fatal("import into a read-only DB succeeded")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if got := listDir(t, chk); !slices.Equal(got, files) {
		t.Fatalf("read-only opens changed the checkpoint: %q, was %q", got, files)
	}
}

func TestClip(t *testing.T) {
	p := newPool(t)
	d := openDB(t, p, t.TempDir(), 16)
	for kg := range 16 {
		put(t, d, kg, "s", "k", fmt.Sprint(kg))
		put(t, d, kg, "t", "k", fmt.Sprint(kg))
	}
	if _, err := d.Checkpoint(filepath.Join(t.TempDir(), "chk")); err != nil {
		t.Fatal(err) // the keys are in sstables now, not only the memtable
	}
	if err := d.Clip(4, 7); err != nil {
		t.Fatal(err)
	}
	var want []string
	for kg := 4; kg <= 7; kg++ {
		want = append(want, fmt.Sprintf("%d/s/k=%d", kg, kg), fmt.Sprintf("%d/t/k=%d", kg, kg))
	}
	if got := dump(t, d, "s", "t"); !slices.Equal(got, want) {
		t.Fatalf("after Clip(4, 7): %q, want %q", got, want)
	}
	chk := filepath.Join(t.TempDir(), "clipped")
	if _, err := d.Checkpoint(chk); err != nil {
		t.Fatal(err)
	}
	if got := dump(t, openReadOnly(t, p, chk, 16), "s", "t"); !slices.Equal(got, want) {
		t.Fatalf("checkpoint after Clip(4, 7): %q, want %q", got, want)
	}
	// The edges: clipping to the whole range keeps everything, to the first
	// or last group keeps that one.
	if err := d.Clip(0, 15); err != nil {
		t.Fatal(err)
	}
	if got := dump(t, d, "s", "t"); !slices.Equal(got, want) {
		t.Fatalf("after Clip(0, 15): %q, want %q", got, want)
	}
	if err := d.Clip(7, 15); err != nil {
		t.Fatal(err)
	}
	if got := dump(t, d, "s", "t"); !slices.Equal(got, want[6:]) {
		t.Fatalf("after Clip(7, 15): %q, want %q", got, want[6:])
	}
	for _, r := range [][2]int{{-1, 3}, {3, 2}, {0, 16}} {
		if err := d.Clip(r[0], r[1]); err == nil || !strings.Contains(err.Error(), d.Dir()) {
			t.Fatalf("Clip(%d, %d): %v, want an error naming %s", r[0], r[1], err, d.Dir())
		}
	}
}

// rescaleUsers is how many keys rescaleFixture writes.
const rescaleUsers = 600

// rescaleFixture is the state of a job with maxPar key groups written by
// from subtasks, each checkpointed: the checkpoint directories and every
// entry, as dump formats them.
func rescaleFixture(t *testing.T, p *Pool, from, maxPar int) (chks []string, all []string) {
	t.Helper()
	root := t.TempDir()
	for i := range from {
		first, last := state.KeyGroupRange(i, from, maxPar)
		d := openDB(t, p, filepath.Join(root, fmt.Sprintf("db-%d", i)), maxPar)
		rt := state.NewRuntime(first, last, maxPar, nil, d)
		count := state.NewValue[int64](rt.Store(), "count")
		seen := state.NewMap[string, int](rt.Store(), "seen")
		rt.Seal()
		for n := range rescaleUsers {
			key := fmt.Sprintf("user-%d", n)
			kg := state.KeyGroup(key, maxPar)
			if kg < first || kg > last {
				continue
			}
			rt.SetKeyInGroup(key, kg)
			count.Set(int64(n))
			seen.Put("a", n)
			seen.Put("b", -n)
		}
		chk := filepath.Join(root, fmt.Sprintf("chk-%d", i))
		if _, err := d.Checkpoint(chk); err != nil {
			t.Fatal(err)
		}
		chks = append(chks, chk)
		all = append(all, dump(t, d, "count", "seen")...)
	}
	slices.SortFunc(all, compareEntries)
	return chks, all
}

// compareEntries orders dump lines by key group, then as dump emits them.
func compareEntries(a, b string) int {
	var ka, kb int
	fmt.Sscanf(a, "%d/", &ka)
	fmt.Sscanf(b, "%d/", &kb)
	if ka != kb {
		return ka - kb
	}
	return strings.Compare(a, b)
}

func inGroups(entries []string, first, last int) []string {
	var out []string
	for _, e := range entries {
		var kg int
		fmt.Sscanf(e, "%d/", &kg)
		if kg >= first && kg <= last {
			out = append(out, e)
		}
	}
	return out
}

// TestRescaleByImport restores 4 subtasks' checkpoints into 2 subtasks and
// 2 into 4: each new subtask imports its key groups from every old
// checkpoint that has some.
func TestRescaleByImport(t *testing.T) {
	const maxPar = 32
	for _, c := range []struct{ from, to int }{{4, 2}, {2, 4}, {3, 5}} {
		t.Run(fmt.Sprintf("%dto%d", c.from, c.to), func(t *testing.T) {
			p := newPool(t)
			chks, all := rescaleFixture(t, p, c.from, maxPar)
			srcs := make([]*DB, len(chks))
			for i, chk := range chks {
				srcs[i] = openReadOnly(t, p, chk, maxPar)
			}
			var got []string
			for j := range c.to {
				first, last := state.KeyGroupRange(j, c.to, maxPar)
				d := openDB(t, p, t.TempDir(), maxPar)
				var imported int64
				for i, src := range srcs {
					f, l := state.KeyGroupRange(i, c.from, maxPar)
					lo, hi := max(f, first), min(l, last)
					if lo > hi {
						continue
					}
					n, err := d.Import(src, lo, hi)
					if err != nil {
						t.Fatal(err)
					}
					imported += n
				}
				mine := dump(t, d, "count", "seen")
				if want := inGroups(all, first, last); !slices.Equal(mine, want) {
					t.Fatalf("subtask %d (%d..%d) reads %d entries, want %d", j, first, last, len(mine), len(want))
				}
				if imported != int64(len(mine)) {
					t.Fatalf("subtask %d: Import counted %d keys, the DB has %d", j, imported, len(mine))
				}
				// The imported state goes through the handles and into the
				// next checkpoint.
				rt := state.NewRuntime(first, last, maxPar, nil, d)
				count := state.NewValue[int64](rt.Store(), "count")
				state.NewMap[string, int](rt.Store(), "seen")
				rt.Seal()
				for n := range rescaleUsers {
					key := fmt.Sprintf("user-%d", n)
					if kg := state.KeyGroup(key, maxPar); kg >= first && kg <= last {
						rt.SetKeyInGroup(key, kg)
						if v, ok := count.Get(); !ok || v != int64(n) {
							t.Fatalf("count of %s = %d, %v after the rescale", key, v, ok)
						}
					}
				}
				chk := filepath.Join(t.TempDir(), "chk")
				if _, err := d.Checkpoint(chk); err != nil {
					t.Fatal(err)
				}
				got = append(got, dump(t, openReadOnly(t, p, chk, maxPar), "count", "seen")...)
			}
			if !slices.Equal(got, all) {
				t.Fatalf("after the rescale the subtasks hold %d entries, before %d", len(got), len(all))
			}
		})
	}
}

// TestRescaleByClip restores 2 subtasks' checkpoints into 4 the other way:
// a copy of the one old checkpoint that covers a new subtask's range,
// clipped to it.
func TestRescaleByClip(t *testing.T) {
	const maxPar = 32
	p := newPool(t)
	chks, all := rescaleFixture(t, p, 2, maxPar)
	for j := range 4 {
		first, last := state.KeyGroupRange(j, 4, maxPar)
		old := state.SubtaskForKeyGroup(first, 2, maxPar)
		dir := filepath.Join(t.TempDir(), "db")
		copyDir(t, chks[old], dir)
		d := openDB(t, p, dir, maxPar)
		if err := d.Clip(first, last); err != nil {
			t.Fatal(err)
		}
		if got, want := dump(t, d, "count", "seen"), inGroups(all, first, last); !slices.Equal(got, want) {
			t.Fatalf("subtask %d (%d..%d) reads %d entries, want %d", j, first, last, len(got), len(want))
		}
	}
}

func TestImportOverMemtable(t *testing.T) {
	p := newPool(t)
	src := openDB(t, p, t.TempDir(), 8)
	for kg := range 8 {
		put(t, src, kg, "s", "k", "from src")
	}
	dst := openDB(t, p, t.TempDir(), 8)
	put(t, dst, 3, "s", "k", "old") // in the memtable, overlapping the import
	put(t, dst, 3, "s", "mine", "kept")
	put(t, dst, 6, "s", "k", "outside")
	n, err := dst.Import(src, 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("imported %d keys, want 3", n)
	}
	want := []string{"2/s/k=from src", "3/s/k=from src", "3/s/mine=kept", "4/s/k=from src", "6/s/k=outside"}
	if got := dump(t, dst, "s"); !slices.Equal(got, want) {
		t.Fatalf("after import: %q, want %q", got, want)
	}
	chk := filepath.Join(t.TempDir(), "chk")
	if _, err := dst.Checkpoint(chk); err != nil {
		t.Fatal(err)
	}
	if got := dump(t, openReadOnly(t, p, chk, 8), "s"); !slices.Equal(got, want) {
		t.Fatalf("checkpoint after import: %q, want %q", got, want)
	}
	// No temporary files are left next to the DB.
	for _, n := range listDir(t, dst.Dir()) {
		if strings.HasPrefix(n, "import-") {
			t.Fatalf("import left %s in %s", n, dst.Dir())
		}
	}
	if n, err := dst.Import(src, 7, 7); err != nil || n != 1 {
		t.Fatalf("import of one group: %d, %v", n, err)
	}
	empty := openDB(t, p, t.TempDir(), 8)
	if n, err := dst.Import(empty, 0, 7); err != nil || n != 0 {
		t.Fatalf("import from an empty DB: %d, %v", n, err)
	}
	other := openDB(t, p, t.TempDir(), 16)
	if _, err := dst.Import(other, 0, 7); err == nil {
		t.Fatal("import across maxParallelism succeeded")
	}
	if _, err := dst.Import(src, 5, 8); err == nil {
		t.Fatal("import of key groups beyond maxParallelism succeeded")
	}
}

func TestDiskUsage(t *testing.T) {
	p := newPool(t)
	d := openDB(t, p, t.TempDir(), 8)
	if u := d.DiskUsage(); u != 0 {
		t.Fatalf("disk usage of an empty DB = %d", u)
	}
	val := bytes.Repeat([]byte{'x'}, 1000)
	for i := range 1000 {
		if err := d.Put(i%8, "s", fmt.Appendf(nil, "k%d", i), val); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Checkpoint(filepath.Join(t.TempDir(), "chk")); err != nil {
		t.Fatal(err)
	}
	if u := d.DiskUsage(); u <= 0 {
		t.Fatalf("disk usage after 1 MB flushed = %d", u)
	}
}

func TestMemTableSize(t *testing.T) {
	p := NewPool(0)
	defer p.Close()
	if p.Budget() != DefaultBudget {
		t.Fatalf("default budget = %d", p.Budget())
	}
	if got := p.memTableSize(1); got != 32<<20 {
		t.Errorf("memtable of 1 DB in 256 MiB = %d", got)
	}
	if got := p.memTableSize(100); got != minMemTable {
		t.Errorf("memtable of 100 DBs in 256 MiB = %d", got)
	}
}

func TestPoolClosedBeforeDBs(t *testing.T) {
	p := NewPool(16 << 20)
	d, err := p.Open(t.TempDir(), 1, 8)
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	p.Close() // idempotent
	put(t, d, 1, "s", "k", "v")
	if _, err := d.Checkpoint(filepath.Join(t.TempDir(), "chk")); err != nil {
		t.Fatal(err)
	}
	if v, ok := get(t, d, 1, "s", "k"); !ok || v != "v" {
		t.Fatalf("get after the pool closed = %q, %v", v, ok)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}
