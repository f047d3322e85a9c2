package state_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/onceflow/onceflow/state"
	"github.com/onceflow/onceflow/state/statetest"
)

// entries counts the entries of table in every key group of b.
func entries(t *testing.T, b state.Backend, table string) int {
	t.Helper()
	n := 0
	for kg := range 128 {
		if err := b.Range(kg, table, nil, func(_, _ []byte) bool { n++; return true }); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// With a Backend, Sweep removes expired entries physically, through the
// TTL index, and keeps those whose TTL a later write restarted.
func TestSweepRemovesExpiredEntriesFromTheBackend(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	b := statetest.NewMemoryBackend()
	s := state.NewRuntime(0, 127, 128, clk.now, b)
	v := state.NewValue[bool](s.Store(), "seen", state.WithTTL(10*time.Minute))
	m := state.NewMap[string, int](s.Store(), "m", state.WithTTL(10*time.Minute))
	forever := state.NewValue[int](s.Store(), "forever")
	for i := range 1000 {
		s.SetKey(fmt.Sprint(i))
		v.Set(true)
		m.Put("x", i)
		forever.Set(i)
	}
	clk.t = clk.t.Add(5 * time.Minute)
	for i := range 100 { // these are written again: their TTL restarts
		s.SetKey(fmt.Sprint(i))
		v.Set(true)
	}
	s.ClearKey()
	if n, err := s.Sweep(1 << 20); err != nil || n != 0 {
		t.Fatalf("Sweep before anything expired removed %d (err %v)", n, err)
	}
	clk.t = clk.t.Add(6 * time.Minute)

	// A small limit sweeps part of the due entries; repeated calls finish.
	n, err := s.Sweep(300)
	if err != nil || n == 0 || n > 300 {
		t.Fatalf("Sweep(300) removed %d (err %v)", n, err)
	}
	total := n
	for {
		n, err := s.Sweep(300)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		total += n
	}
	if want := 900 + 1000; total != want {
		t.Errorf("swept %d entries, want %d (900 values, 1000 map entries)", total, want)
	}
	if got := entries(t, b, "seen"); got != 100 {
		t.Errorf("%d values left in the backend, want the 100 written again", got)
	}
	if got := entries(t, b, "m"); got != 0 {
		t.Errorf("%d map entries left in the backend, want 0", got)
	}
	if got := entries(t, b, "forever"); got != 1000 {
		t.Errorf("state without TTL lost entries: %d left", got)
	}
	if got := entries(t, b, "\x00ttl"); got != 100 {
		t.Errorf("%d TTL index entries left, want 100 (the rewritten values)", got)
	}
	s.SetKey("5")
	if _, ok := v.Get(); !ok {
		t.Error("a value whose TTL restarted was swept")
	}
	s.SetKey("500")
	if _, ok := v.Get(); ok {
		t.Error("an expired value is still visible")
	}

	// Entries restored from a snapshot are indexed as well.
	snap := snapshot(t, s)
	b2 := statetest.NewMemoryBackend()
	s2 := state.NewRuntime(0, 127, 128, clk.now, b2)
	state.NewValue[bool](s2.Store(), "seen", state.WithTTL(10*time.Minute))
	state.NewValue[int](s2.Store(), "forever")
	state.NewMap[string, int](s2.Store(), "m", state.WithTTL(10*time.Minute))
	if err := s2.Restore(snap); err != nil {
		t.Fatal(err)
	}
	clk.t = clk.t.Add(time.Hour)
	if n, err := s2.Sweep(1 << 20); err != nil || n != 100 {
		t.Errorf("Sweep after restore removed %d (err %v), want 100", n, err)
	}
}

func TestSweepWithoutBackendDoesNothing(t *testing.T) {
	s := state.NewRuntime(0, 127, 128, nil, nil)
	if n, err := s.Sweep(10); n != 0 || err != nil {
		t.Fatalf("Sweep on the heap: %d, %v", n, err)
	}
}

func TestStateNamesStartingWithNULAreRefused(t *testing.T) {
	s := state.NewRuntime(0, 127, 128, nil, nil)
	defer func() {
		if recover() == nil {
			t.Fatal("a state name starting with NUL was accepted")
		}
	}()
	state.NewValue[int](s.Store(), "\x00ttl")
}
