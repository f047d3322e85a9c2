package state

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// The table against a Go map, over random gets, sets and deletes of keys
// from a small set (so that sets replace, deletes hit, and probe runs
// wrap around the end of the slots and are shifted by deletions), also
// with the Get-then-Set pattern the table remembers lookups for.
func TestValueTableAgreesWithMap(t *testing.T) {
	for _, nkeys := range []int{1, 7, 100, 5000} {
		rng := rand.New(rand.NewPCG(uint64(nkeys), 1))
		var tab valueTable[int64]
		model := map[string]int64{}
		keys := make([]string, nkeys)
		for i := range keys {
			keys[i] = "k" + strconv.Itoa(i)
		}
		for op := range 200_000 {
			k := keys[rng.IntN(nkeys)]
			switch rng.IntN(4) {
			case 0:
				e, ok := tab.get(k)
				want, wok := model[k]
				if ok != wok || ok && e.v != want {
					t.Fatalf("%d keys, op %d: get(%s) = %d, %v; want %d, %v", nkeys, op, k, e.v, ok, want, wok)
				}
			case 1: // read-modify-write, as a keyed count does
				e, _ := tab.get(k)
				tab.set(k, entry[int64]{v: e.v + 1})
				model[k]++
			case 2:
				x := rng.Int64()
				tab.set(k, entry[int64]{v: x, exp: x})
				model[k] = x
			case 3:
				_, wok := model[k]
				if got := tab.del(k); got != wok {
					t.Fatalf("%d keys, op %d: del(%s) = %v, want %v", nkeys, op, k, got, wok)
				}
				delete(model, k)
			}
			if tab.len() != len(model) {
				t.Fatalf("%d keys, op %d: len %d, want %d", nkeys, op, tab.len(), len(model))
			}
		}
		seen := map[string]bool{}
		tab.each(func(k string, e entry[int64]) {
			if want, ok := model[k]; !ok || want != e.v || seen[k] {
				t.Fatalf("%d keys: each gave %s = %d (model %d, %v; seen %v)", nkeys, k, e.v, want, ok, seen[k])
			}
			seen[k] = true
		})
		if len(seen) != len(model) {
			t.Fatalf("%d keys: each gave %d keys, want %d", nkeys, len(seen), len(model))
		}
	}
}

// A remembered lookup is not used after the table changed under it: a
// key looked up then deleted is gone; a key whose lookup ended at an
// empty slot, then another key of its cluster deleted (which may shift
// slots into that one), goes where a new probe puts it.
func TestValueTableLookupAfterChange(t *testing.T) {
	var tab valueTable[int64]
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = strconv.Itoa(i)
		tab.set(keys[i], entry[int64]{v: int64(i)})
	}
	for i, k := range keys {
		if i%2 == 0 {
			if _, ok := tab.get(k); !ok {
				t.Fatalf("%s missing", k)
			}
			if !tab.del(k) {
				t.Fatalf("del(%s) found nothing", k)
			}
			if e, ok := tab.get(k); ok {
				t.Fatalf("%s = %d after its delete", k, e.v)
			}
			tab.set(k, entry[int64]{v: -1})
			continue
		}
		tab.get(k)         // remembered
		tab.del(keys[i-1]) // may move k back one slot
		tab.set(k, entry[int64]{v: -1})
		if e, ok := tab.get(k); !ok || e.v != -1 {
			t.Fatalf("%s: %d, %v after the set", k, e.v, ok)
		}
	}
	if tab.len() != 500 {
		t.Fatalf("len %d, want 500", tab.len())
	}
	tab.each(func(k string, e entry[int64]) {
		if e.v != -1 {
			t.Fatalf("%s = %d left", k, e.v)
		}
	})
	// Absent keys whose lookups end at an empty slot, then a delete in
	// their clusters, then their sets: each must be found once.
	var tab2 valueTable[int64]
	for i := range 900 {
		tab2.set(strconv.Itoa(i), entry[int64]{v: 1})
	}
	for i := 900; i < 1200; i++ {
		k := strconv.Itoa(i)
		if _, ok := tab2.get(k); ok {
			t.Fatalf("%s present", k)
		}
		tab2.del(strconv.Itoa(i - 900))
		tab2.set(k, entry[int64]{v: 2})
	}
	n := 0
	tab2.each(func(k string, e entry[int64]) {
		n++
		if got, ok := tab2.get(k); !ok || got != e {
			t.Fatalf("%s: each gave %v, get %v %v", k, e, got, ok)
		}
	})
	if n != 900 || tab2.len() != 900 {
		t.Fatalf("%d keys by each, len %d; want 900", n, tab2.len())
	}
}

// BenchmarkValueGetSet is a keyed count's state access over 1M new keys
// in 128 key groups, against a Go map per group.
func BenchmarkValueGetSet(b *testing.B) {
	keys := make([]string, 1<<20)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i*7919%len(keys))
	}
	b.Run("table", func(b *testing.B) {
		for b.Loop() {
			groups := make([]valueTable[int64], 128)
			for i, k := range keys {
				t := &groups[i&127]
				e, _ := t.get(k)
				t.set(k, entry[int64]{v: e.v + 1})
			}
		}
	})
	b.Run("map", func(b *testing.B) {
		for b.Loop() {
			groups := make([]map[string]entry[int64], 128)
			for i := range groups {
				groups[i] = map[string]entry[int64]{}
			}
			for i, k := range keys {
				m := groups[i&127]
				e := m[k]
				m[k] = entry[int64]{v: e.v + 1}
			}
		}
	})
}
