package pebblestate

import (
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
		d.cache.limit = 2 << 10
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
			d.cache.limit = 8 << 10
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
