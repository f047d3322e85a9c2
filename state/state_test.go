package state

import (
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
				first, last := KeyGroupRange(i, par, maxPar)
				if first != next || last < first {
					t.Fatalf("max %d par %d subtask %d: range %d..%d, want start %d", maxPar, par, i, first, last, next)
				}
				for kg := first; kg <= last; kg++ {
					if got := SubtaskForKeyGroup(kg, par, maxPar); got != i {
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
		if got := Hash(k); got != want {
			t.Fatalf("Hash(%q) = %#x, was %#x: changing the hash breaks every existing checkpoint", k, got, want)
		}
	}
	spread := map[int]int{}
	for i := 0; i < 12800; i++ {
		spread[KeyGroup("key-"+strconv.Itoa(i), 128)]++
	}
	for kg, n := range spread {
		if n < 50 || n > 150 {
			t.Fatalf("key group %d got %d of 12800 keys: poor spread", kg, n)
		}
	}
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestValueMapListSnapshotRestore(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	s := NewStore(0, 127, 128, clk.now)
	v := NewValue[int64](s, "v")
	m := NewMap[string, float64](s, "m")
	l := NewList[string](s, "l")
	type rec struct{ A int }
	j := NewValue[rec](s, "json")
	s.Seal()
	for i := 0; i < 50; i++ {
		k := "k" + strconv.Itoa(i)
		s.SetKey(k)
		v.Set(int64(i))
		m.Put("x", float64(i)/2)
		m.Put("y", 1)
		l.Add(k + "-1")
		l.Add(k + "-2")
		j.Set(rec{A: i})
	}
	s.SetKey("k3")
	m.Delete("y")
	snap := s.Snapshot()

	s2 := NewStore(0, 127, 128, clk.now)
	v2 := NewValue[int64](s2, "v")
	m2 := NewMap[string, float64](s2, "m")
	l2 := NewList[string](s2, "l")
	j2 := NewValue[rec](s2, "json")
	if err := s2.Restore(snap); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		k := "k" + strconv.Itoa(i)
		s2.SetKey(k)
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
func TestRestoreSubsetAndUnclaimed(t *testing.T) {
	s := NewStore(0, 127, 128, nil)
	v := NewValue[string](s, "v")
	old := NewValue[string](s, "old")
	keys := map[string]int{}
	for i := 0; i < 200; i++ {
		k := strconv.Itoa(i)
		keys[k] = s.SetKey(k)
		v.Set(k)
		old.Set("o" + k)
	}
	snap := s.Snapshot()
	first, last := KeyGroupRange(1, 4, 128)
	s2 := NewStore(first, last, 128, nil)
	v2 := NewValue[string](s2, "v")
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
	again := s2.Snapshot()
	for kg := range again {
		if kg < first || kg > last {
			t.Fatalf("snapshot has key group %d outside %d..%d", kg, first, last)
		}
	}
	s3 := NewStore(first, last, 128, nil)
	NewValue[string](s3, "v")
	old3 := NewValue[string](s3, "old")
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

func TestTTL(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	s := NewStore(0, 127, 128, clk.now)
	v := NewValue[bool](s, "seen", WithTTL(time.Hour))
	l := NewList[int](s, "l", WithTTL(time.Hour))
	s.SetKey("a")
	v.Set(true)
	l.Add(1)
	clk.t = clk.t.Add(30 * time.Minute)
	s.SetKey("a")
	l.Add(2)
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
	snap := s.Snapshot()
	s2 := NewStore(0, 127, 128, clk.now)
	v2 := NewValue[bool](s2, "seen", WithTTL(time.Hour))
	NewList[int](s2, "l", WithTTL(time.Hour))
	if err := s2.Restore(snap); err != nil {
		t.Fatal(err)
	}
	s2.SetKey("a")
	if _, ok := v2.Get(); ok {
		t.Fatal("expired entry survived a snapshot")
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
	s := NewStore(0, 127, 128, nil)
	NewValue[int](s, "a")
	mustPanic("duplicate name", func() { NewValue[int](s, "a") })
	s.Seal()
	mustPanic("after seal", func() { NewValue[int](s, "b") })
	mustPanic("wrong key group", func() {
		narrow := NewStore(0, 0, 128, nil)
		for i := 0; ; i++ {
			k := strconv.Itoa(i)
			if KeyGroup(k, 128) != 0 {
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
	check("int64", func() bool { c := DefaultCodec[int64](); v, _ := c.Decode(c.Append(nil, -5)); return v == -5 })
	check("uint64", func() bool { c := DefaultCodec[uint64](); v, _ := c.Decode(c.Append(nil, 1<<60)); return v == 1<<60 })
	check("float64", func() bool { c := DefaultCodec[float64](); v, _ := c.Decode(c.Append(nil, 2.5)); return v == 2.5 })
	check("bytes", func() bool {
		c := DefaultCodec[[]byte]()
		v, _ := c.Decode(c.Append(nil, []byte("x")))
		return string(v) == "x"
	})
	check("struct", func() bool {
		type p struct{ X []int }
		c := DefaultCodec[p]()
		v, _ := c.Decode(c.Append(nil, p{X: []int{1, 2}}))
		return reflect.DeepEqual(v.X, []int{1, 2})
	})
	if _, err := DefaultCodec[int64]().Decode([]byte{0x80}); err == nil {
		t.Fatal("truncated varint decoded without error")
	}
}
