package statebench

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
)

// lookupKeys is one keyed subtask's share of 5M keys at parallelism 4.
const lookupKeys = 1_250_000

// lookupKey is key ordinal i in state/pebblestate's layout: key group,
// uvarint length of the state name, state name, key.
func lookupKey(dst []byte, i int64) []byte {
	dst = append(dst[:0], 0, byte(i%32))
	dst = binary.AppendUvarint(dst, 1)
	dst = append(dst, 'n')
	return append(dst, KeyOf(i)...)
}

// BenchmarkPebbleLookup tells where a keyed count's read goes on Pebble: it
// builds one subtask's database the way the engine does (pebblestate's
// options: no WAL, 8 MiB memtables from a 256 MiB budget over 4 DBs,
// compaction of L0 at 4 sublevels, 10-bit bloom filters on every level;
// a flush every 28k writes, a 1 s checkpoint at the end-to-end rate), then
// times a point read of a present and of an absent key with DB.Get (what
// pebblestate.DB.Get does: a new iterator stack per call) and with
// SeekPrefixGE on one long-lived iterator (the per-level iterators are
// reused from read to read). Not run by go test without -bench:
//
//	go test -run '^$' -bench PebbleLookup -benchtime 1000000x ./internal/bench/statebench/
func BenchmarkPebbleLookup(b *testing.B) {
	cache := pebble.NewCache(256 << 20)
	defer cache.Unref()
	opts := &pebble.Options{
		Cache:                       cache,
		DisableWAL:                  true,
		MemTableSize:                8 << 20,
		MemTableStopWritesThreshold: 4,
		L0CompactionThreshold:       8,
		L0CompactionFileThreshold:   200,
		L0StopWritesThreshold:       32,
		FormatMajorVersion:          pebble.FormatNewest,
	}
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		opts.Levels[i].FilterType = pebble.TableFilter
	}
	opts.EnsureDefaults()
	db, err := pebble.Open(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var k []byte
	val := binary.AppendVarint(nil, 1)
	for i := range int64(lookupKeys) {
		k = lookupKey(k, i)
		if err := db.Set(k, val, pebble.NoSync); err != nil {
			b.Fatal(err)
		}
		if i%28_000 == 27_999 {
			if err := db.Flush(); err != nil {
				b.Fatal(err)
			}
		}
	}
	m := db.Metrics()
	shape := fmt.Sprintf("L0 sublevels %d", m.Levels[0].Sublevels)
	for l := range m.Levels {
		if m.Levels[l].TablesCount > 0 {
			shape += fmt.Sprintf(", L%d %d files", l, m.Levels[l].TablesCount)
		}
	}
	b.Logf("%d keys: %s", lookupKeys, shape)

	key := func(i int, present bool) []byte {
		n := int64(i*7919) % lookupKeys
		if !present {
			n += lookupKeys
		}
		k = lookupKey(k, n)
		return k
	}
	for _, present := range []bool{true, false} {
		name := map[bool]string{true: "present", false: "absent"}[present]
		b.Run("Get/"+name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				v, closer, err := db.Get(key(i, present))
				if err == nil {
					_ = v
					closer.Close()
				}
				if (err == nil) != present {
					b.Fatalf("key %d: present %v, err %v", i, present, err)
				}
			}
		})
		b.Run("Iterator/"+name, func(b *testing.B) {
			it, err := db.NewIter(nil)
			if err != nil {
				b.Fatal(err)
			}
			defer it.Close()
			for i := 0; i < b.N; i++ {
				kk := key(i, present)
				found := it.SeekPrefixGE(kk) && string(it.Key()) == string(kk)
				if found != present {
					b.Fatalf("key %d: present %v, found %v", i, present, found)
				}
			}
		})
	}
}
