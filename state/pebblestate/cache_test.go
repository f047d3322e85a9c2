package pebblestate

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/onceflow/onceflow/state"
	"github.com/onceflow/onceflow/state/statetest"
)

// The handles' conformance with a cache so small that it forgets entries
// all the time, and batches committed in the middle of everything.
func TestConformanceWithATinyCache(t *testing.T) {
	p := newPool(t)
	statetest.Conformance(t, func() state.Backend {
		d := openDB(t, p, t.TempDir(), 32)
		d.setCacheLimit(2 << 10)
		return d
	})
}

// Random writes, deletes, prefix deletes, ranges and checkpoints on a DB
// with a small cache, against the reference backend: every read agrees,
// and a DB opened from a checkpoint holds what the reference held then.
func TestCacheAndBatchAgreeWithTheReference(t *testing.T) {
	p := newPool(t)
	for seed := range uint64(2) {
		t.Run(fmt.Sprint("seed-", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			d := openDB(t, p, t.TempDir(), 8)
			d.setCacheLimit(8 << 10)
			ref := statetest.NewMemoryBackend()
			key := func() []byte { return fmt.Appendf(nil, "r%d/%d", rng.IntN(20), rng.IntN(40)) }
			dump := func(b state.Backend) []string {
				var out []string
				for kg := range 8 {
					for _, st := range []string{"a", "b"} {
						_ = b.Range(kg, st, nil, func(k, v []byte) bool {
							out = append(out, fmt.Sprintf("%d/%s/%s=%s", kg, st, k, v))
							return true
						})
					}
				}
				return out
			}
			for i := range 8000 {
				kg, st := rng.IntN(8), []string{"a", "b"}[rng.IntN(2)]
				switch op := rng.IntN(100); {
				case op < 45:
					k, v := key(), fmt.Appendf(nil, "v%d", i)
					if err := errorsJoin(d.Put(kg, st, k, v), ref.Put(kg, st, k, v)); err != nil {
						t.Fatal(err)
					}
				case op < 60:
					k := key()
					if err := errorsJoin(d.Delete(kg, st, k), ref.Delete(kg, st, k)); err != nil {
						t.Fatal(err)
					}
				case op < 63:
					pre := fmt.Appendf(nil, "r%d/", rng.IntN(20))
					if err := errorsJoin(d.DeletePrefix(kg, st, pre), ref.DeletePrefix(kg, st, pre)); err != nil {
						t.Fatal(err)
					}
				case op < 98:
					k := key()
					got, gok, err := d.Get(kg, st, k)
					if err != nil {
						t.Fatal(err)
					}
					want, wok, _ := ref.Get(kg, st, k)
					if gok != wok || string(got) != string(want) {
						t.Fatalf("op %d: get %d/%s/%s = %q %v, want %q %v", i, kg, st, k, got, gok, want, wok)
					}
				case op < 99 || rng.IntN(4) > 0:
					if got, want := dump(d), dump(ref); !slices.Equal(got, want) {
						t.Fatalf("op %d: range differs:\n%v\n%v", i, got, want)
					}
				default:
					dir := t.TempDir() + "/chk"
					if _, err := d.Checkpoint(dir); err != nil {
						t.Fatal(err)
					}
					ro := openReadOnly(t, p, dir, 8)
					if got, want := dump(ro), dump(ref); !slices.Equal(got, want) {
						t.Fatalf("op %d: checkpoint holds\n%v\nwant\n%v", i, got, want)
					}
				}
			}
		})
	}
}

func errorsJoin(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// setCacheLimit gives d an empty read cache of limit bytes, hashing as
// the one before (the key filter holds those hashes).
func (d *DB) setCacheLimit(limit int64) {
	seed := d.cache.seed
	d.cache = newReadCache(limit)
	d.cache.seed = seed
	d.cache.beforeShrink = d.flushDirty
}

// The cache on its own, against a map: it may forget, never lie; the entry
// just set is always found; it forgets only after beforeShrink; its
// arena stays within the limit.
func TestReadCacheNeverLies(t *testing.T) {
	for _, limit := range []int64{2 << 10, 64 << 10, 1 << 20} {
		t.Run(fmt.Sprint("limit-", limit), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(limit), 3))
			c := newReadCache(limit)
			shrinks := 0
			c.beforeShrink = func() error { shrinks++; return nil }
			type want struct {
				val    string
				absent bool
			}
			ref := map[string]want{}
			keys := 3000
			for i := range 200_000 {
				k := fmt.Appendf(nil, "key-%d", rng.IntN(keys))
				switch op := rng.IntN(10); {
				case op < 5:
					v := make([]byte, rng.IntN(24))
					for j := range v {
						v[j] = byte('a' + rng.IntN(26))
					}
					absent := rng.IntN(8) == 0
					if absent {
						v = nil
					}
					if err := c.set(k, v, absent); err != nil {
						t.Fatal(err)
					}
					ref[string(k)] = want{string(v), absent}
					if got, a, ok := c.get(k); !ok || string(got) != string(v) || a != absent {
						t.Fatalf("op %d: %s just set to %q (absent %v), got %q %v %v", i, k, v, absent, got, a, ok)
					}
				case op < 6:
					c.drop(k)
					delete(ref, string(k))
					if _, _, ok := c.get(k); ok {
						t.Fatalf("op %d: %s found after drop", i, k)
					}
				case op < 10:
					got, a, ok := c.get(k)
					if !ok {
						continue
					}
					w, known := ref[string(k)]
					if !known || string(got) != w.val || a != w.absent {
						t.Fatalf("op %d: %s = %q absent %v; the last set was %+v (known %v)", i, k, got, a, w, known)
					}
				}
				if int64(len(c.arena)+8*len(c.slots)) > limit {
					t.Fatalf("op %d: arena %d + index %d bytes over the limit %d", i, len(c.arena), 8*len(c.slots), limit)
				}
			}
			if limit < 64<<10 && shrinks == 0 {
				t.Error("a cache far smaller than its keys never shrank")
			}
			if limit == 1<<20 && shrinks != 0 {
				t.Errorf("a cache larger than its keys shrank %d times", shrinks)
			}
		})
	}
}

// A value too large for the cache is not cached, yet a read right after
// the write finds it: the cache commits the batch before it lets Pebble
// answer for the key (it used to forget the old entry with the write
// still in the batch, and cache what Pebble said then).
func TestTooLargeForTheCache(t *testing.T) {
	p := newPool(t)
	d := openDB(t, p, t.TempDir(), 8)
	d.setCacheLimit(64 << 10)
	big := make([]byte, 200<<10)
	for i := range big {
		big[i] = byte(i)
	}
	for _, k := range []string{"old", "new"} {
		if k == "old" {
			if err := d.Put(1, "s", []byte(k), []byte("v1")); err != nil {
				t.Fatal(err)
			}
			if v, ok, err := d.Get(1, "s", []byte(k)); err != nil || !ok || string(v) != "v1" {
				t.Fatalf("get %s: %q %v %v", k, v, ok, err)
			}
		}
		if err := d.Put(1, "s", []byte(k), big); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			v, ok, err := d.Get(1, "s", []byte(k))
			if err != nil || !ok || !bytes.Equal(v, big) {
				t.Fatalf("key %s written with %d bytes reads back %d bytes, found %v, %v", k, len(big), len(v), ok, err)
			}
		}
	}
}
