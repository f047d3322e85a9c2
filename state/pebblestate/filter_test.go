package pebblestate

import (
	"fmt"
	"hash/maphash"
	"path/filepath"
	"testing"
	"time"
)

// The filter never says "absent" of a key added, and says it of most
// keys never added while it holds up to its capacity.
func TestKeyFilter(t *testing.T) {
	seed := maphash.MakeSeed()
	sum := func(i int) uint64 { return maphash.String(seed, fmt.Sprintf("key-%d", i)) }
	f := newKeyFilter(minFilterBytes)
	if !f.useful() {
		t.Fatal("a new filter of the minimum size is not used")
	}
	n := f.capacity
	for i := range n {
		f.add(sum(i))
	}
	for i := range n {
		if !f.mayContain(sum(i)) {
			t.Fatalf("key %d was added, the filter says it is absent", i)
		}
	}
	fp := 0
	for i := n; i < 2*n; i++ {
		if f.mayContain(sum(i)) {
			fp++
		}
	}
	if rate := float64(fp) / float64(n); rate > 0.03 {
		t.Fatalf("%.1f%% false positives at capacity, want about 1%%", 100*rate)
	}
	// Past four times its capacity it stops answering.
	for i := 2 * n; i < 6*n; i++ {
		f.add(sum(i))
	}
	if f.useful() || !f.mayContain(sum(7*n)) {
		t.Fatal("a filter four times over capacity still answers")
	}
	f.lose()
	if f.useful() || !f.mayContain(sum(0)) {
		t.Fatal("a lost filter still answers")
	}
	if small := newKeyFilter(minFilterBytes - 1); small.useful() || !small.mayContain(sum(0)) {
		t.Fatal("a filter below the minimum size answers")
	}
}

// A DB that starts empty has a complete filter at once; one opened on
// existing files (a restore) gets one once a scan of its keys has ended,
// and reads its keys, the restored ones and those written meanwhile,
// through it.
func TestKeyFilterOfEmptyAndRestoredDBs(t *testing.T) {
	p := newPool(t)
	dir := t.TempDir()
	d, err := p.Open(dir, 4, 8)
	if err != nil {
		t.Fatal(err)
	}
	if !d.filter.useful() {
		t.Fatal("a DB opened on an empty directory has no key filter")
	}
	for i := range 1000 {
		put(t, d, i%8, "s", fmt.Sprint("k", i), "v")
	}
	if v, ok := get(t, d, 1, "s", "k1"); !ok || v != "v" {
		t.Fatalf("get k1 = %q, %v", v, ok)
	}
	if _, ok := get(t, d, 1, "s", "b"); ok {
		t.Fatal("b was never written and is found")
	}
	chk := t.TempDir() + "/chk"
	if _, err := d.Checkpoint(chk); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	r := openDB(t, p, chk, 8)
	put(t, r, 2, "s", "new", "w") // while the scan may run
	deadline := time.Now().Add(10 * time.Second)
	for !r.filter.useful() {
		if time.Now().After(deadline) {
			t.Fatal("the restored DB's key filter is not complete after 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	if r.filter.keys < 1001 {
		t.Fatalf("the restored DB's filter holds %d keys, want the 1000 restored and the one written", r.filter.keys)
	}
	for i := range 1000 {
		if v, ok := get(t, r, i%8, "s", fmt.Sprint("k", i)); !ok || v != "v" {
			t.Fatalf("restored: get k%d = %q, %v", i, v, ok)
		}
	}
	if v, ok := get(t, r, 2, "s", "new"); !ok || v != "w" {
		t.Fatalf("restored: get new = %q, %v", v, ok)
	}
	// Closing while a scan may run stops it (the DB's Close fails if
	// the scan's iterator is still open).
	cp := filepath.Join(t.TempDir(), "copy")
	copyDir(t, chk, cp)
	r2, err := p.Open(cp, 4, 8)
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.Close(); err != nil {
		t.Fatal(err)
	}
}

// The filter's record-key segments: a Range of a record key never
// written answers from the filter, and one written before a restore (the
// scan adds it), by Import, or by Put is found.
func TestKeyFilterSegments(t *testing.T) {
	p := newPool(t)
	d := openDB(t, p, t.TempDir(), 8)
	for i := range 20 {
		if err := d.Put(i%8, "l", segKey(fmt.Sprint("rk", i), "/elem"), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	count := func(db *DB, kg int, rk string) int {
		n := 0
		if err := db.Range(kg, "l", segKey(rk, ""), func(_, _ []byte) bool { n++; return true }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(d, 3, "rk3"); n != 1 {
		t.Fatalf("range of a written record key found %d keys", n)
	}
	if d.noSegment(append(appendPrefix(nil, 3, "l"), segKey("rk3", "")...), len(appendPrefix(nil, 3, "l"))) {
		t.Fatal("the filter says a written record key was never written")
	}
	if !d.noSegment(append(appendPrefix(nil, 3, "l"), segKey("never", "")...), len(appendPrefix(nil, 3, "l"))) {
		t.Fatal("the filter does not answer for a record key never written")
	}
	chk := filepath.Join(t.TempDir(), "chk")
	if _, err := d.Checkpoint(chk); err != nil {
		t.Fatal(err)
	}

	// Restored: the scan adds the segments.
	restored := filepath.Join(t.TempDir(), "restored")
	copyDir(t, chk, restored)
	r := openDB(t, p, restored, 8)
	deadline := time.Now().Add(10 * time.Second)
	for !r.filter.useful() {
		if time.Now().After(deadline) {
			t.Fatal("the restored DB's key filter is not complete after 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	// Imported: Import adds them.
	im := openDB(t, p, t.TempDir(), 8)
	src := openReadOnly(t, p, chk, 8)
	if _, err := im.Import(src, 0, 7); err != nil {
		t.Fatal(err)
	}
	for _, db := range []*DB{r, im} {
		for i := range 20 {
			if n := count(db, i%8, fmt.Sprint("rk", i)); n != 1 {
				t.Fatalf("%s: range of record key rk%d found %d keys, want 1", db.dir, i, n)
			}
		}
	}
}
