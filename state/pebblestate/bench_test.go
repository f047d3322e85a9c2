package pebblestate

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/onceflow/onceflow/state"
	"github.com/onceflow/onceflow/state/statetest"
)

const benchKeys = 1 << 14

// BenchmarkValue reads and writes a state.Value[int64] through the handles,
// as an operator does per record: in the heap (no backend), in the
// reference MemoryBackend and in a Pebble DB.
//
//	go test ./state/pebblestate -run x -bench Value -benchtime 200000x
func BenchmarkValue(b *testing.B) {
	keys := make([]string, benchKeys)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	backends := []struct {
		name string
		open func(b *testing.B) state.Backend
	}{
		{"heap", func(*testing.B) state.Backend { return nil }},
		{"memory", func(*testing.B) state.Backend { return statetest.NewMemoryBackend() }},
		{"pebble", func(b *testing.B) state.Backend { return openDB(b, newPool(b), b.TempDir(), 128) }},
	}
	for _, be := range backends {
		setup := func(b *testing.B) (*state.Runtime, *state.Value[int64]) {
			rt := state.NewRuntime(0, 127, 128, nil, be.open(b))
			v := state.NewValue[int64](rt.Store(), "count")
			rt.Seal()
			for i, k := range keys {
				rt.SetKey(k)
				v.Set(int64(i))
			}
			return rt, v
		}
		b.Run(be.name+"/Get", func(b *testing.B) {
			rt, v := setup(b)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				rt.SetKey(keys[i&(benchKeys-1)])
				if _, ok := v.Get(); !ok {
					b.Fatal("missing")
				}
			}
		})
		b.Run(be.name+"/Set", func(b *testing.B) {
			rt, v := setup(b)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				rt.SetKey(keys[i&(benchKeys-1)])
				v.Set(int64(i))
			}
		})
		b.Run(be.name+"/GetSet", func(b *testing.B) {
			rt, v := setup(b)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				rt.SetKey(keys[i&(benchKeys-1)])
				n, _ := v.Get()
				v.Set(n + 1)
			}
		})
	}
}

// fill writes n keys of about 24 bytes with 8-byte values, spread over the
// key groups of d.
func fill(b *testing.B, d *DB, n int) {
	b.Helper()
	var k, v [8]byte
	for i := range n {
		binary.BigEndian.PutUint64(k[:], uint64(i))
		binary.BigEndian.PutUint64(v[:], uint64(i))
		if err := d.Put(i%d.maxPar, "count", k[:], v[:]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckpointNoWrites measures the synchronous part of a checkpoint
// of a DB of 1M keys when nothing was written since the last one: no
// flush, hard links and a MANIFEST copy.
//
//	go test ./state/pebblestate -run x -bench CheckpointNoWrites -benchtime 20x
func BenchmarkCheckpointNoWrites(b *testing.B) {
	p := newPool(b)
	d := openDB(b, p, b.TempDir(), 128)
	fill(b, d, 1_000_000)
	root := b.TempDir()
	files, err := d.Checkpoint(filepath.Join(root, "first"))
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d files, %d MB live", len(files), d.DiskUsage()>>20)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dir := filepath.Join(root, strconv.Itoa(i))
		if _, err := d.Checkpoint(dir); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := os.RemoveAll(dir); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
}

// BenchmarkCheckpointAfterWrites is a checkpoint after 10k new writes into
// a DB of 1M keys: one flush, then the same as with no writes.
func BenchmarkCheckpointAfterWrites(b *testing.B) {
	p := newPool(b)
	d := openDB(b, p, b.TempDir(), 128)
	fill(b, d, 1_000_000)
	root := b.TempDir()
	if _, err := d.Checkpoint(filepath.Join(root, "first")); err != nil {
		b.Fatal(err)
	}
	var k [8]byte
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for j := range 10_000 {
			binary.BigEndian.PutUint64(k[:], uint64(i*10_000+j))
			if err := d.Put(j%128, "count", k[:], k[:]); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		dir := filepath.Join(root, strconv.Itoa(i))
		if _, err := d.Checkpoint(dir); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := os.RemoveAll(dir); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
}

// importByBatch is the alternative to Import's sstables that Import was
// measured against: the keys copied through write batches.
func importByBatch(d, src *DB, lo, hi int) (int64, error) {
	it, err := src.db.NewIter(&pebble.IterOptions{LowerBound: groupStart(lo), UpperBound: groupStart(hi + 1)})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	var keys int64
	batch := d.db.NewBatch()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return 0, err
		}
		if err := batch.Set(it.Key(), v, nil); err != nil {
			return 0, err
		}
		keys++
		if batch.Len() >= 4<<20 {
			if err := batch.Commit(pebble.NoSync); err != nil {
				return 0, err
			}
			batch = d.db.NewBatch()
		}
	}
	if err := batch.Commit(pebble.NoSync); err != nil {
		return 0, err
	}
	d.dirty = true
	return keys, it.Error()
}

// BenchmarkImport copies half the key groups of a checkpoint of n keys into
// a fresh DB (a rescale), by ingested sstables and by batches, including
// the checkpoint of the new DB that makes the copy durable.
func BenchmarkImport(b *testing.B) {
	for _, n := range []int{10_000, 1_000_000} {
		p := newPool(b)
		src := openDB(b, p, b.TempDir(), 128)
		fill(b, src, n)
		chk := filepath.Join(b.TempDir(), "chk")
		if _, err := src.Checkpoint(chk); err != nil {
			b.Fatal(err)
		}
		ro := openReadOnly(b, p, chk, 128)
		for _, m := range []struct {
			name string
			imp  func(d, src *DB, lo, hi int) (int64, error)
		}{
			{"sstables", func(d, src *DB, lo, hi int) (int64, error) { return d.Import(src, lo, hi) }},
			{"batches", importByBatch},
		} {
			b.Run(fmt.Sprintf("%s/%d", m.name, n), func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					d, err := p.Open(b.TempDir(), 1, 128)
					if err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					keys, err := m.imp(d, ro, 0, 63)
					if err != nil {
						b.Fatal(err)
					}
					if want := int64(n/128*64 + min(n%128, 64)); keys != want {
						b.Fatalf("imported %d keys, want %d", keys, want)
					}
					if _, err := d.Checkpoint(filepath.Join(b.TempDir(), "chk")); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					if err := d.Close(); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			})
		}
	}
}

// BenchmarkMapClear is a Map per key cleared at every record (a window
// that fires), with reads in between: every Clear is a range deletion.
func BenchmarkMapClear(b *testing.B) {
	keys := make([]string, benchKeys)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	for _, be := range []string{"heap", "pebble"} {
		b.Run(be, func(b *testing.B) {
			var backend state.Backend
			if be == "pebble" {
				backend = openDB(b, newPool(b), b.TempDir(), 128)
			}
			rt := state.NewRuntime(0, 127, 128, nil, backend)
			m := state.NewMap[string, int64](rt.Store(), "window")
			rt.Seal()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				rt.SetKey(keys[i&(benchKeys-1)])
				m.Put("a", int64(i))
				if _, ok := m.Get("a"); !ok {
					b.Fatal("missing")
				}
				if i%4 == 3 {
					m.Clear()
				}
			}
		})
	}
}
