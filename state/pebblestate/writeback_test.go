package pebblestate

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/onceflow/onceflow/state"
	"github.com/onceflow/onceflow/state/statetest"
)

// segKey is a key in the handles' layout: a length-prefixed record key,
// then the rest (a map key, a list's sequence number).
func segKey(rk, rest string) []byte {
	return append(binary.AppendUvarint(nil, uint64(len(rk))), rk+rest...)
}

// A key updated many times between checkpoints reaches Pebble once: the
// cache holds it dirty, and a Range of other keys (or of other tables)
// does not write it.
func TestWriteBackCoalesces(t *testing.T) {
	p := newPool(t)
	d := openDB(t, p, t.TempDir(), 8)
	for i := range 10_000 {
		if err := d.Put(1, "hot", segKey("k", ""), fmt.Appendf(nil, "v%d", i)); err != nil {
			t.Fatal(err)
		}
		// Reads elsewhere do not need it in Pebble.
		if err := d.Range(1, "hot", segKey("other", ""), func(_, _ []byte) bool { return true }); err != nil {
			t.Fatal(err)
		}
		if err := d.Range(2, "cold", nil, func(_, _ []byte) bool { return true }); err != nil {
			t.Fatal(err)
		}
	}
	if d.written != 0 {
		t.Errorf("%d writes reached Pebble before the checkpoint, want 0", d.written)
	}
	if _, err := d.Checkpoint(filepath.Join(t.TempDir(), "chk")); err != nil {
		t.Fatal(err)
	}
	if d.written != 1 {
		t.Errorf("%d writes reached Pebble for one key updated 10000 times, want 1", d.written)
	}
}

// Every read that goes to Pebble itself sees the writes still in the
// cache: a Range of the record key just written, of its whole table, a
// DeletePrefix of it, and a checkpoint restored into a fresh DB.
func TestWriteBackReadsSeeDirtyEntries(t *testing.T) {
	p := newPool(t)
	d := openDB(t, p, t.TempDir(), 8)
	for i := range 5 {
		if err := d.Put(3, "l", segKey("auction", fmt.Sprint(i)), fmt.Appendf(nil, "v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Delete(3, "l", segKey("auction", "2")); err != nil {
		t.Fatal(err)
	}
	rangeOf := func(db *DB, prefix []byte) []string {
		var out []string
		if err := db.Range(3, "l", prefix, func(k, v []byte) bool {
			out = append(out, fmt.Sprintf("%q=%s", k, v))
			return true
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	want := []string{`"\aauction0"=v0`, `"\aauction1"=v1`, `"\aauction3"=v3`, `"\aauction4"=v4`}
	if got := rangeOf(d, segKey("auction", "")); !slices.Equal(got, want) {
		t.Fatalf("range of the record key after buffered writes: %q, want %q", got, want)
	}
	if err := d.Put(3, "l", segKey("auction", "5"), []byte("v5")); err != nil {
		t.Fatal(err)
	}
	want = append(want, `"\aauction5"=v5`)
	if got := rangeOf(d, nil); !slices.Equal(got, want) {
		t.Fatalf("range of the table after a buffered write: %q, want %q", got, want)
	}

	// A checkpoint of buffered updates, restored into a fresh DB.
	for i := range 100 {
		if err := d.Put(4, "v", segKey("seller", ""), fmt.Appendf(nil, "n%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	chk := filepath.Join(t.TempDir(), "chk")
	if _, err := d.Checkpoint(chk); err != nil {
		t.Fatal(err)
	}
	restored := filepath.Join(t.TempDir(), "restored")
	copyDir(t, chk, restored)
	r := openDB(t, p, restored, 8)
	if v, ok, err := r.Get(4, "v", segKey("seller", "")); err != nil || !ok || string(v) != "n99" {
		t.Fatalf("restored checkpoint reads %q %v %v, want n99", v, ok, err)
	}
	if got := rangeOf(r, nil); !slices.Equal(got, want) {
		t.Fatalf("restored checkpoint ranges %q, want %q", got, want)
	}

	// DeletePrefix of keys written since the checkpoint.
	if err := d.Put(3, "l", segKey("auction", "6"), []byte("v6")); err != nil {
		t.Fatal(err)
	}
	if err := d.DeletePrefix(3, "l", segKey("auction", "")); err != nil {
		t.Fatal(err)
	}
	if got := rangeOf(d, nil); len(got) != 0 {
		t.Fatalf("after DeletePrefix the table holds %q", got)
	}
	if v, ok, err := d.Get(3, "l", segKey("auction", "6")); err != nil || ok {
		t.Fatalf("after DeletePrefix a key written before it reads %q %v %v", v, ok, err)
	}
}

// Dirty entries evicted from a tiny cache are written to Pebble first:
// every key reads back, from Pebble once the cache forgot it.
func TestWriteBackEvictsDirtyEntries(t *testing.T) {
	p := newPool(t)
	d := openDB(t, p, t.TempDir(), 8)
	d.setCacheLimit(4 << 10)
	const n = 2000
	for round := range 3 {
		for i := range n {
			if err := d.Put(i%8, "s", segKey(fmt.Sprint("k", i), ""), fmt.Appendf(nil, "r%d-%d", round, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if d.written == 0 {
		t.Fatal("a cache of 4 KiB held 2000 keys without writing any to Pebble")
	}
	for i := range n {
		k := segKey(fmt.Sprint("k", i), "")
		want := fmt.Sprintf("r2-%d", i)
		if v, ok, err := d.Get(i%8, "s", k); err != nil || !ok || string(v) != want {
			t.Fatalf("key %d reads %q %v %v, want %s", i, v, ok, err, want)
		}
	}
}

// A Range whose fn reads keys that make the cache evict (and so write the
// dirty entries to Pebble) goes on reading what it started with.
func TestWriteBackFlushDuringRange(t *testing.T) {
	p := newPool(t)
	d := openDB(t, p, t.TempDir(), 8)
	d.setCacheLimit(4 << 10)
	for i := range 50 {
		if err := d.Put(1, "a", segKey("r", fmt.Sprintf("%03d", i)), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Checkpoint(filepath.Join(t.TempDir(), "chk")); err != nil {
		t.Fatal(err)
	}
	seen, i := 0, 0
	err := d.Range(1, "a", segKey("r", ""), func(_, _ []byte) bool {
		seen++
		// Writes to another table and reads of new keys: the cache
		// fills, evicts and writes the dirty entries.
		for range 40 {
			i++
			_ = d.Put(2, "b", segKey(fmt.Sprint("w", i), ""), []byte("0123456789abcdef"))
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen != 50 {
		t.Fatalf("the range saw %d keys, want 50", seen)
	}
	if d.written <= 50 {
		t.Fatal("no dirty entry was written during the range: the test did not test")
	}
}

// Random writes, deletes and reads in the handles' key layout (record
// keys that are length-prefixed segments, ranged by their segment, the
// span filter's fine case) against the reference backend, with a cache
// small enough to evict and flush all the time.
func TestWriteBackAgreesWithTheReferenceBySegment(t *testing.T) {
	p := newPool(t)
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed-", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 11))
			d := openDB(t, p, t.TempDir(), 4)
			d.setCacheLimit(6 << 10)
			ref := statetest.NewMemoryBackend()
			rk := func() string { return fmt.Sprint("rk", rng.IntN(30)) }
			key := func() []byte { return segKey(rk(), fmt.Sprint("/", rng.IntN(20))) }
			rangeOf := func(b state.Backend, kg int, st string, prefix []byte) []string {
				var out []string
				if err := b.Range(kg, st, prefix, func(k, v []byte) bool {
					out = append(out, fmt.Sprintf("%q=%s", k, v))
					return true
				}); err != nil {
					t.Fatal(err)
				}
				return out
			}
			for i := range 20_000 {
				kg, st := rng.IntN(4), []string{"a", "b"}[rng.IntN(2)]
				switch op := rng.IntN(100); {
				case op < 50:
					k, v := key(), fmt.Appendf(nil, "v%d", i)
					if err := errorsJoin(d.Put(kg, st, k, v), ref.Put(kg, st, k, v)); err != nil {
						t.Fatal(err)
					}
				case op < 60:
					k := key()
					if err := errorsJoin(d.Delete(kg, st, k), ref.Delete(kg, st, k)); err != nil {
						t.Fatal(err)
					}
				case op < 62:
					pre := segKey(rk(), "")
					if err := errorsJoin(d.DeletePrefix(kg, st, pre), ref.DeletePrefix(kg, st, pre)); err != nil {
						t.Fatal(err)
					}
				case op < 80:
					k := key()
					got, gok, err := d.Get(kg, st, k)
					if err != nil {
						t.Fatal(err)
					}
					want, wok, _ := ref.Get(kg, st, k)
					if gok != wok || string(got) != string(want) {
						t.Fatalf("op %d: get %d/%s/%q = %q %v, want %q %v", i, kg, st, k, got, gok, want, wok)
					}
				case op < 99:
					pre := segKey(rk(), "")
					if rng.IntN(4) == 0 {
						pre = append(pre, '/') // longer than the segment
					}
					if got, want := rangeOf(d, kg, st, pre), rangeOf(ref, kg, st, pre); !slices.Equal(got, want) {
						t.Fatalf("op %d: range %d/%s/%q = %q, want %q", i, kg, st, pre, got, want)
					}
				default:
					if got, want := rangeOf(d, kg, st, nil), rangeOf(ref, kg, st, nil); !slices.Equal(got, want) {
						t.Fatalf("op %d: range %d/%s = %q, want %q", i, kg, st, got, want)
					}
				}
			}
		})
	}
}
