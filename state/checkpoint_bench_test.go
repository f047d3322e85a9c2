package state_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/onceflow/onceflow/internal/checkpoint/storage"
	"github.com/onceflow/onceflow/state"
)

// BenchmarkHeapCheckpoint times what a memory-backend keyed subtask owning
// all 128 key groups does for one checkpoint, synchronous snapshot and
// file written and synced together, with a Value[int64] per key:
//
//	full: a full snapshot written as a keyed state file (what every
//	      checkpoint did before incremental checkpoints);
//	idle: a delta with no new input (nothing to write);
//	1pct: a delta after 1% of the keys were set (the Sets are not timed).
//
// Run: go test -run '^$' -bench BenchmarkHeapCheckpoint -benchtime 5x ./state/
func BenchmarkHeapCheckpoint(b *testing.B) {
	for _, n := range []int{1_000_000, 5_000_000} {
		rt := state.NewRuntime(0, 127, 128, nil, nil)
		v := state.NewValue[int64](rt.Store(), "n")
		rt.Seal()
		rt.TrackChanges()
		keys := make([]string, n)
		for i := range keys {
			keys[i] = "user-" + strconv.Itoa(i)
			rt.SetKey(keys[i])
			v.Set(int64(i))
		}
		store, err := storage.Open(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		id := int64(0)
		write := func(b *testing.B, groups map[int][]byte) {
			id++
			if _, err := store.WriteKeyedFile(id, "s", 0, 127, groups); err != nil {
				b.Fatal(err)
			}
		}
		rng := rand.New(rand.NewPCG(1, 2))
		b.Run(fmt.Sprintf("keys=%dM/full", n/1_000_000), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				snap, err := rt.Snapshot()
				if err != nil {
					b.Fatal(err)
				}
				write(b, snap)
			}
		})
		for _, pct := range []int{0, 1} {
			name := "idle"
			if pct > 0 {
				name = strconv.Itoa(pct) + "pct"
			}
			b.Run(fmt.Sprintf("keys=%dM/%s", n/1_000_000, name), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					for j := 0; j < n*pct/100; j++ {
						rt.SetKey(keys[rng.IntN(n)])
						v.Set(int64(j))
					}
					b.StartTimer()
					d, ok, err := rt.SnapshotChanges()
					if err != nil || !ok {
						b.Fatalf("SnapshotChanges: ok %v, err %v", ok, err)
					}
					if len(d) > 0 {
						write(b, d)
					}
				}
			})
		}
	}
}
