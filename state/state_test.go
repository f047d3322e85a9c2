package state_test

import (
	"github.com/onceflow/onceflow/state"
	"github.com/onceflow/onceflow/state/statetest"

	"reflect"
	"strconv"
	"testing"
	"time"
)

func TestKeyGroupRangesCoverAndInvert(t *testing.T) {
	for _, maxPar := range []int{1, 7, 128, 1000} {
		for par := 1; par <= maxPar && par <= 64; par++ {
			next := 0
			for i := 0; i < par; i++ {
				first, last := state.KeyGroupRange(i, par, maxPar)
				if first != next || last < first {
					t.Fatalf("max %d par %d subtask %d: range %d..%d, want start %d", maxPar, par, i, first, last, next)
				}
				for kg := first; kg <= last; kg++ {
					if got := state.SubtaskForKeyGroup(kg, par, maxPar); got != i {
						t.Fatalf("max %d par %d: key group %d maps to %d, range says %d", maxPar, par, kg, got, i)
					}
				}
				next = last + 1
			}
			if next != maxPar {
				t.Fatalf("max %d par %d: ranges end at %d", maxPar, par, next)
			}
		}
	}
}

func TestHashIsStable(t *testing.T) {
	// Key groups of existing checkpoints depend on these values.
	for k, want := range map[string]uint32{"": 0xab3e7c0b, "a": 0x1a80b1b3, "user-42": 0x7c2a1196} {
		if got := state.Hash(k); got != want {
			t.Fatalf("state.Hash(%q) = %#x, was %#x: changing the hash breaks every existing checkpoint", k, got, want)
		}
	}
	spread := map[int]int{}
	for i := 0; i < 12800; i++ {
		spread[state.KeyGroup("key-"+strconv.Itoa(i), 128)]++
	}
	for kg, n := range spread {
		if n < 50 || n > 150 {
			t.Fatalf("key group %d got %d of 12800 keys: poor spread", kg, n)
		}
	}
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// newKV is the reference state.Backend.
func newKV() state.Backend { return statetest.NewMemoryBackend() }

// backends runs f with state in the heap and in a state.Backend.
func backends(t *testing.T, f func(t *testing.T, newBackend func() state.Backend)) {
	t.Run("heap", func(t *testing.T) { f(t, func() state.Backend { return nil }) })
	t.Run("backend", func(t *testing.T) { f(t, newKV) })
}

func snapshot(t *testing.T, rt *state.Runtime) map[int][]byte {
	t.Helper()
	snap, err := rt.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func TestValueMapListSnapshotRestore(t *testing.T) { backends(t, testValueMapListSnapshotRestore) }

func testValueMapListSnapshotRestore(t *testing.T, newBackend func() state.Backend) {
	clk := &clock{t: time.Unix(1000, 0)}
	rt := state.NewRuntime(0, 127, 128, clk.now, newBackend())
	s := rt.Store()
	v := state.NewValue[int64](s, "v")
	m := state.NewMap[string, float64](s, "m")
	l := state.NewList[string](s, "l")
	type rec struct{ A int }
	j := state.NewValue[rec](s, "json")
	rt.Seal()
	for i := 0; i < 50; i++ {
		k := "k" + strconv.Itoa(i)
		rt.SetKey(k)
		v.Set(int64(i))
		m.Put("x", float64(i)/2)
		m.Put("y", 1)
		l.Add(k + "-1")
		l.Add(k + "-2")
		j.Set(rec{A: i})
	}
	rt.SetKey("k3")
	m.Delete("y")
	snap := snapshot(t, rt)

	// Restored into the other kind of state: the snapshot format is the
	// same for every backend.
	other := newKV()
	if newBackend() != nil {
		other = nil
	}
	rt2 := state.NewRuntime(0, 127, 128, clk.now, other)
	s2 := rt2.Store()
	v2 := state.NewValue[int64](s2, "v")
	m2 := state.NewMap[string, float64](s2, "m")
	l2 := state.NewList[string](s2, "l")
	j2 := state.NewValue[rec](s2, "json")
	if err := rt2.Restore(snap); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		k := "k" + strconv.Itoa(i)
		rt2.SetKey(k)
		if got, ok := v2.Get(); !ok || got != int64(i) {
			t.Fatalf("%s: value %d %v", k, got, ok)
		}
		if got, _ := m2.Get("x"); got != float64(i)/2 {
			t.Fatalf("%s: map x = %v", k, got)
		}
		wantLen := 2
		if i == 3 {
			wantLen = 1
		}
		if m2.Len() != wantLen {
			t.Fatalf("%s: map len %d want %d", k, m2.Len(), wantLen)
		}
		if got := l2.Get(); !reflect.DeepEqual(got, []string{k + "-1", k + "-2"}) {
			t.Fatalf("%s: list %v", k, got)
		}
		if got, _ := j2.Get(); got.A != i {
			t.Fatalf("%s: json value %v", k, got)
		}
	}
}

// Restoring into a narrower range takes only that range (rescale), and
// unknown state names survive to the next snapshot.
func TestRestoreSubsetAndUnclaimed(t *testing.T) { backends(t, testRestoreSubsetAndUnclaimed) }

func testRestoreSubsetAndUnclaimed(t *testing.T, newBackend func() state.Backend) {
	rt := state.NewRuntime(0, 127, 128, nil, newBackend())
	v := state.NewValue[string](rt.Store(), "v")
	old := state.NewValue[string](rt.Store(), "old")
	keys := map[string]int{}
	for i := 0; i < 200; i++ {
		k := strconv.Itoa(i)
		keys[k] = rt.SetKey(k)
		v.Set(k)
		old.Set("o" + k)
	}
	snap := snapshot(t, rt)
	first, last := state.KeyGroupRange(1, 4, 128)
	s2 := state.NewRuntime(first, last, 128, nil, newBackend())
	v2 := state.NewValue[string](s2.Store(), "v")
	if err := s2.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if got := s2.Unclaimed(); !reflect.DeepEqual(got, []string{"old"}) {
		t.Fatalf("unclaimed %v", got)
	}
	n := 0
	for k, kg := range keys {
		if kg < first || kg > last {
			continue
		}
		n++
		s2.SetKeyInGroup(k, kg)
		if got, ok := v2.Get(); !ok || got != k {
			t.Fatalf("key %s: %q %v", k, got, ok)
		}
	}
	if n == 0 {
		t.Fatal("no key fell in the range")
	}
	again := snapshot(t, s2)
	for kg := range again {
		if kg < first || kg > last {
			t.Fatalf("snapshot has key group %d outside %d..%d", kg, first, last)
		}
	}
	s3 := state.NewRuntime(first, last, 128, nil, newBackend())
	state.NewValue[string](s3.Store(), "v")
	old3 := state.NewValue[string](s3.Store(), "old")
	if err := s3.Restore(again); err != nil {
		t.Fatal(err)
	}
	for k, kg := range keys {
		if kg >= first && kg <= last {
			s3.SetKeyInGroup(k, kg)
			if got, _ := old3.Get(); got != "o"+k {
				t.Fatalf("unclaimed state was not carried: %q", got)
			}
			break
		}
	}
}

func TestTTL(t *testing.T) { backends(t, testTTL) }

func testTTL(t *testing.T, newBackend func() state.Backend) {
	clk := &clock{t: time.Unix(1000, 0)}
	s := state.NewRuntime(0, 127, 128, clk.now, newBackend())
	v := state.NewValue[bool](s.Store(), "seen", state.WithTTL(time.Hour))
	l := state.NewList[int](s.Store(), "l", state.WithTTL(time.Hour))
	m := state.NewMap[string, int](s.Store(), "m", state.WithTTL(time.Hour))
	s.SetKey("a")
	v.Set(true)
	l.Add(1)
	m.Put("old", 1)
	clk.t = clk.t.Add(30 * time.Minute)
	s.SetKey("a")
	l.Add(2)
	m.Put("new", 2)
	if _, ok := v.Get(); !ok {
		t.Fatal("expired too early")
	}
	clk.t = clk.t.Add(31 * time.Minute)
	s.SetKey("a")
	if _, ok := v.Get(); ok {
		t.Fatal("value visible after its TTL")
	}
	if got := l.Get(); !reflect.DeepEqual(got, []int{2}) {
		t.Fatalf("list after first element expired: %v", got)
	}
	if _, ok := m.Get("old"); ok || m.Len() != 1 {
		t.Fatalf("map after one entry expired: len %d", m.Len())
	}
	snap := snapshot(t, s)
	s2 := state.NewRuntime(0, 127, 128, clk.now, newBackend())
	v2 := state.NewValue[bool](s2.Store(), "seen", state.WithTTL(time.Hour))
	l2 := state.NewList[int](s2.Store(), "l", state.WithTTL(time.Hour))
	m2 := state.NewMap[string, int](s2.Store(), "m", state.WithTTL(time.Hour))
	if err := s2.Restore(snap); err != nil {
		t.Fatal(err)
	}
	s2.SetKey("a")
	if _, ok := v2.Get(); ok {
		t.Fatal("expired entry survived a snapshot")
	}
	if got := l2.Get(); !reflect.DeepEqual(got, []int{2}) {
		t.Fatalf("restored list %v", got)
	}
	if got, ok := m2.Get("new"); !ok || got != 2 || m2.Len() != 1 {
		t.Fatalf("restored map: new=%d %v, len %d", got, ok, m2.Len())
	}
	l2.Add(3)
	l2.Update(append(l2.Get(), 4))
	if got := l2.Get(); !reflect.DeepEqual(got, []int{2, 3, 4}) {
		t.Fatalf("list after Add and Update on restored state: %v", got)
	}
	m2.Clear()
	if m2.Len() != 0 {
		t.Fatal("map not empty after Clear")
	}
}

func TestRegistrationRules(t *testing.T) {
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Fatalf("%s: want panic", name)
			}
		}()
		f()
	}
	rt := state.NewRuntime(0, 127, 128, nil, nil)
	s := rt.Store()
	state.NewValue[int](s, "a")
	mustPanic("duplicate name", func() { state.NewValue[int](s, "a") })
	rt.Seal()
	mustPanic("after seal", func() { state.NewValue[int](s, "b") })
	mustPanic("no current key", func() { state.NewValue[int](state.NewRuntime(0, 1, 128, nil, nil).Store(), "x").Get() })
	mustPanic("wrong key group", func() {
		narrow := state.NewRuntime(0, 0, 128, nil, nil)
		for i := 0; ; i++ {
			k := strconv.Itoa(i)
			if state.KeyGroup(k, 128) != 0 {
				narrow.SetKey(k)
			}
		}
	})
}

func TestCodecsRoundTrip(t *testing.T) {
	check := func(name string, f func() bool) {
		if !f() {
			t.Fatalf("%s codec round trip failed", name)
		}
	}
	check("int64", func() bool { c := state.DefaultCodec[int64](); v, _ := c.Decode(c.Append(nil, -5)); return v == -5 })
	check("uint64", func() bool {
		c := state.DefaultCodec[uint64]()
		v, _ := c.Decode(c.Append(nil, 1<<60))
		return v == 1<<60
	})
	check("float64", func() bool { c := state.DefaultCodec[float64](); v, _ := c.Decode(c.Append(nil, 2.5)); return v == 2.5 })
	check("bytes", func() bool {
		c := state.DefaultCodec[[]byte]()
		v, _ := c.Decode(c.Append(nil, []byte("x")))
		return string(v) == "x"
	})
	check("struct", func() bool {
		type p struct{ X []int }
		c := state.DefaultCodec[p]()
		v, _ := c.Decode(c.Append(nil, p{X: []int{1, 2}}))
		return reflect.DeepEqual(v.X, []int{1, 2})
	})
	if _, err := state.DefaultCodec[int64]().Decode([]byte{0x80}); err == nil {
		t.Fatal("truncated varint decoded without error")
	}
}

// Unchanged holds from a snapshot to the next write, and only while the
// heap tracks its changes.
func TestUnchanged(t *testing.T) {
	rt := state.NewRuntime(0, 7, 8, nil, nil)
	v := state.NewValue[int64](rt.Store(), "n")
	rt.Seal()
	if rt.Unchanged() {
		t.Fatal("unchanged without tracking")
	}
	rt.TrackChanges()
	if rt.Unchanged() {
		t.Fatal("unchanged right after tracking started: the first snapshot must be full")
	}
	if _, err := rt.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if !rt.Unchanged() {
		t.Fatal("changed right after a full snapshot")
	}
	rt.SetKey("a")
	v.Set(1)
	if rt.Unchanged() {
		t.Fatal("unchanged after a Set")
	}
	if _, ok, err := rt.SnapshotChanges(); !ok || err != nil {
		t.Fatalf("SnapshotChanges: %v, %v", ok, err)
	}
	if !rt.Unchanged() {
		t.Fatal("changed right after a delta")
	}
	v.Clear()
	if rt.Unchanged() {
		t.Fatal("unchanged after a Clear")
	}
}

// ChangedKeys counts the record keys a delta wrote, each once however
// often it was written; LiveKeys the keys the state holds, counted alike.
func TestChangedAndLiveKeys(t *testing.T) {
	rt := state.NewRuntime(0, 7, 8, nil, nil)
	v := state.NewValue[int64](rt.Store(), "n")
	m := state.NewMap[string, int64](rt.Store(), "m")
	rt.Seal()
	rt.TrackChanges()
	if _, err := rt.Snapshot(); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "a", "c", "a"} {
		rt.SetKey(k)
		v.Set(1)
	}
	rt.SetKey("a")
	m.Put("x", 1)
	if _, ok, err := rt.SnapshotChanges(); !ok || err != nil {
		t.Fatalf("SnapshotChanges: %v, %v", ok, err)
	}
	if got := rt.ChangedKeys(); got != 4 {
		t.Errorf("ChangedKeys = %d, want 4 (a, b, c in n; a in m)", got)
	}
	if got := rt.LiveKeys(); got != 4 {
		t.Errorf("LiveKeys = %d, want 4", got)
	}
	rt.SetKey("b")
	v.Clear()
	if _, ok, err := rt.SnapshotChanges(); !ok || err != nil {
		t.Fatalf("SnapshotChanges: %v, %v", ok, err)
	}
	if got, live := rt.ChangedKeys(), rt.LiveKeys(); got != 1 || live != 3 {
		t.Errorf("after clearing b: ChangedKeys = %d, LiveKeys = %d, want 1 and 3", got, live)
	}
}
