// Package statetest checks a state.Backend against the state kept in the
// Go heap: the same random operations through the same handles must read
// the same, and snapshots must restore crosswise. A backend (Pebble, or
// one of your own) runs Conformance in its tests; MemoryBackend is the
// reference implementation of the contract, kept simple rather than fast.
package statetest

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/state"
)

// MemoryBackend is a state.Backend in a sorted map: the reference for the
// contract's semantics (ordering, prefixes, copies).
type MemoryBackend struct {
	tables map[string]map[string][]byte
}

// NewMemoryBackend returns an empty MemoryBackend.
func NewMemoryBackend() *MemoryBackend { return &MemoryBackend{tables: map[string]map[string][]byte{}} }

func (b *MemoryBackend) table(kg int, st string) map[string][]byte {
	id := strconv.Itoa(kg) + "/" + st
	t := b.tables[id]
	if t == nil {
		t = map[string][]byte{}
		b.tables[id] = t
	}
	return t
}

// Get implements state.Backend.
func (b *MemoryBackend) Get(kg int, st string, key []byte) ([]byte, bool, error) {
	v, ok := b.table(kg, st)[string(key)]
	return v, ok, nil
}

// Put implements state.Backend.
func (b *MemoryBackend) Put(kg int, st string, key, value []byte) error {
	b.table(kg, st)[string(key)] = slices.Clone(value)
	return nil
}

// Delete implements state.Backend.
func (b *MemoryBackend) Delete(kg int, st string, key []byte) error {
	delete(b.table(kg, st), string(key))
	return nil
}

// DeletePrefix implements state.Backend.
func (b *MemoryBackend) DeletePrefix(kg int, st string, prefix []byte) error {
	t := b.table(kg, st)
	for k := range t {
		if strings.HasPrefix(k, string(prefix)) {
			delete(t, k)
		}
	}
	return nil
}

// Range implements state.Backend.
func (b *MemoryBackend) Range(kg int, st string, prefix []byte, fn func(key, value []byte) bool) error {
	t := b.table(kg, st)
	keys := make([]string, 0, len(t))
	for k := range t {
		if strings.HasPrefix(k, string(prefix)) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !fn([]byte(k), t[k]) {
			return nil
		}
	}
	return nil
}

// handles is one operator's state: a value, a map and a list, two of them
// with a TTL.
type handles struct {
	rt *state.Runtime
	v  *state.Value[int64]
	m  *state.Map[string, string]
	l  *state.List[int]
	vt *state.Value[string]
	tm *state.Timers
}

func newHandles(first, last int, now func() time.Time, b state.Backend) *handles {
	rt := state.NewRuntime(first, last, 32, now, b)
	s := rt.Store()
	h := &handles{rt: rt,
		v:  state.NewValue[int64](s, "v"),
		m:  state.NewMap[string, string](s, "m", state.WithTTL(time.Minute)),
		l:  state.NewList[int](s, "l"),
		vt: state.NewValue[string](s, "vt", state.WithTTL(30*time.Second)),
		tm: rt.Timers(),
	}
	rt.Seal()
	return h
}

// read returns everything the handles show for key, in a comparable form.
func (h *handles) read(key string) string {
	h.rt.SetKey(key)
	v, vok := h.v.Get()
	vt, vtok := h.vt.Get()
	var m []string
	h.m.All(func(k, v string) bool { m = append(m, k+"="+v); return true })
	sort.Strings(m)
	var tms []string
	if err := h.tm.Each(func(k string, kg int, tm state.Timer) bool {
		if k == key {
			if kg != state.KeyGroup(k, 32) || !h.tm.Has(tm) {
				tms = append(tms, "inconsistent")
			}
			tms = append(tms, fmt.Sprintf("%d@%d", tm.Domain, tm.At))
		}
		return true
	}); err != nil {
		tms = append(tms, err.Error())
	}
	sort.Strings(tms)
	return fmt.Sprintf("v=%d/%v vt=%q/%v m=%v len=%d l=%v timers=%v", v, vok, vt, vtok, m, h.m.Len(), h.l.Get(), tms)
}

// Conformance runs random operations through the same handles on state in
// the Go heap and on backends made by newBackend, compares every read,
// snapshots both and restores each snapshot into the other kind of state,
// including into a narrower key-group range (a rescale). It prints its seed;
// set STATETEST_SEED to replay one.
func Conformance(t *testing.T, newBackend func() state.Backend) {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(getenv("STATETEST_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("statetest seed %d (replay with STATETEST_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	clock := time.Unix(1_000_000, 0)
	now := func() time.Time { return clock }
	keys := make([]string, 40)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
	}
	heap := newHandles(0, 31, now, nil)
	heap.rt.TrackChanges()
	kv := newHandles(0, 31, now, newBackend())
	// The heap's incremental snapshots: a full one, then deltas.
	var base map[int][]byte
	var deltas []map[int][]byte
	takeIncremental := func(step int) {
		d, ok, err := heap.rt.SnapshotChanges()
		if err != nil {
			t.Fatalf("step %d: incremental snapshot: %v", step, err)
		}
		if ok == (base == nil) {
			t.Fatalf("step %d: SnapshotChanges says ok=%v with %d deltas taken (want a full snapshot first, deltas after)", step, ok, len(deltas))
		}
		if !ok {
			if base, err = heap.rt.Snapshot(); err != nil {
				t.Fatal(err)
			}
			return
		}
		deltas = append(deltas, d)
		if len(deltas)%4 != 0 {
			return
		}
		// What the chain restores so far reads as the heap does now.
		r := newHandles(0, 31, now, nil)
		if err := r.rt.Restore(base); err != nil {
			t.Fatalf("step %d: restore the full snapshot: %v", step, err)
		}
		for i, d := range deltas {
			if err := r.rt.RestoreChanges(d); err != nil {
				t.Fatalf("step %d: restore delta %d: %v", step, i, err)
			}
		}
		for _, k := range keys {
			if a, b := heap.read(k), r.read(k); a != b {
				t.Fatalf("step %d, key %s: the full snapshot and %d deltas restore %s, want %s", step, k, len(deltas), b, a)
			}
		}
	}
	for step := 0; step < 5000; step++ {
		k := keys[rng.IntN(len(keys))]
		op := rng.IntN(15)
		var added []bool
		for _, h := range []*handles{heap, kv} {
			h.rt.SetKey(k)
			switch op {
			case 12:
				added = append(added, h.tm.Add(state.Timer{Domain: state.EventTime, At: int64(step%50) - 25}))
			case 13:
				added = append(added, h.tm.Remove(state.Timer{Domain: state.EventTime, At: int64(step%50) - 25}))
			case 14:
				added = append(added, h.tm.Add(state.Timer{Domain: state.ProcessingTime, At: int64(step % 9)}))
			case 0, 1:
				h.v.Set(int64(step))
			case 2:
				h.v.Clear()
			case 3, 4:
				h.m.Put("u"+strconv.Itoa(step%7), "s"+strconv.Itoa(step))
			case 5:
				h.m.Delete("u" + strconv.Itoa(step%7))
			case 6:
				h.m.Clear()
			case 7, 8:
				h.l.Add(step)
			case 9:
				if got := h.l.Get(); len(got) > 2 {
					h.l.Update(got[len(got)-2:])
				}
			case 10:
				h.vt.Set("t" + strconv.Itoa(step))
			case 11:
				h.l.Clear()
			}
		}
		if step%10 == 0 {
			clock = clock.Add(time.Duration(rng.IntN(5)) * time.Second)
		}
		if len(added) == 2 && added[0] != added[1] {
			t.Fatalf("step %d, key %s: timer op %d reports %v on the heap, %v on the backend", step, k, op, added[0], added[1])
		}
		if a, b := heap.read(k), kv.read(k); a != b {
			t.Fatalf("step %d, key %s: the heap reads %s, the backend %s", step, k, a, b)
		}
		if rng.IntN(8) == 0 {
			takeIncremental(step)
		}
	}
	takeIncremental(-1)
	if len(deltas) < 100 {
		t.Fatalf("%d deltas taken, want at least 100", len(deltas))
	}
	if d, ok, err := heap.rt.SnapshotChanges(); err != nil || !ok || len(d) != 0 {
		t.Fatalf("a delta with no change in between: %d key groups, ok %v, err %v; want none, true, nil", len(d), ok, err)
	}
	// The full snapshot and its deltas restore what the heap holds, into
	// either kind of state, rescaled too, and with a handle missing (its
	// state kept unclaimed, deltas applied to its bytes, written by the
	// next snapshot).
	for _, c := range []struct {
		name        string
		first, last int
		b           state.Backend
		drop        bool
	}{
		{"heap deltas into the heap", 0, 31, nil, false},
		{"heap deltas into the backend", 0, 31, newBackend(), false},
		{"heap deltas into a narrower heap", 8, 15, nil, false},
		{"heap deltas into a narrower backend", 8, 15, newBackend(), false},
		{"heap deltas into a heap without the map", 0, 31, nil, true},
		{"heap deltas into a backend without the map", 0, 31, newBackend(), true},
	} {
		var r *handles
		if c.drop {
			rt := state.NewRuntime(c.first, c.last, 32, now, c.b)
			s := rt.Store()
			r = &handles{rt: rt, v: state.NewValue[int64](s, "v"), l: state.NewList[int](s, "l"),
				vt: state.NewValue[string](s, "vt", state.WithTTL(30*time.Second)), tm: rt.Timers()}
			rt.Seal()
		} else {
			r = newHandles(c.first, c.last, now, c.b)
		}
		if err := r.rt.Restore(base); err != nil {
			t.Fatalf("%s: restore the full snapshot: %v", c.name, err)
		}
		for i, d := range deltas {
			if err := r.rt.RestoreChanges(d); err != nil {
				t.Fatalf("%s: restore delta %d: %v", c.name, i, err)
			}
		}
		if c.drop {
			if got := r.rt.Unclaimed(); !reflect.DeepEqual(got, []string{"m"}) {
				t.Fatalf("%s: unclaimed %v, want [m]", c.name, got)
			}
			snap, err := r.rt.Snapshot()
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			r = newHandles(c.first, c.last, now, nil)
			if err := r.rt.Restore(snap); err != nil {
				t.Fatalf("%s: restore its snapshot: %v", c.name, err)
			}
		}
		for _, k := range keys {
			if kg := state.KeyGroup(k, 32); kg < c.first || kg > c.last {
				continue
			}
			if a, b := heap.read(k), r.read(k); a != b {
				t.Fatalf("%s, key %s: %s, want %s", c.name, k, b, a)
			}
		}
	}
	snapH, err := heap.rt.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	snapK, err := kv.rt.Snapshot()
	if err != nil {
		t.Fatalf("backend snapshot: %v", err)
	}
	// Crosswise, and into a rescaled range.
	for _, c := range []struct {
		name        string
		snap        map[int][]byte
		first, last int
		b           state.Backend
	}{
		{"heap snapshot into the backend", snapH, 0, 31, newBackend()},
		{"backend snapshot into the heap", snapK, 0, 31, nil},
		{"backend snapshot into a narrower backend", snapK, 8, 15, newBackend()},
	} {
		r := newHandles(c.first, c.last, now, c.b)
		if err := r.rt.Restore(c.snap); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for _, k := range keys {
			if kg := state.KeyGroup(k, 32); kg < c.first || kg > c.last {
				continue
			}
			if a, b := heap.read(k), r.read(k); a != b {
				t.Fatalf("%s, key %s: %s, want %s", c.name, k, b, a)
			}
		}
	}
	if !reflect.DeepEqual(keysOf(snapH), keysOf(snapK)) {
		t.Errorf("the snapshots cover different key groups: heap %v, backend %v", keysOf(snapH), keysOf(snapK))
	}
}

func keysOf(m map[int][]byte) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}
