package engine

import (
	"context"
	"testing"
	"time"
)

// The limit follows the receiver's rate over its busy time: what it
// takes in the target, divided among its channels, within [minInflight,
// max].
func TestInflightLimitFollowsRate(t *testing.T) {
	f := newInflight(2, 100*time.Millisecond, 4096)
	if got := f.limit.Load(); got != minInflight {
		t.Fatalf("limit before any measurement %d, want the floor %d", got, minInflight)
	}
	t0 := time.Unix(1000, 0)
	// 10,000 records a second: 1,000 in 100ms, so 500 a channel.
	f.taken(0, 500, t0)
	f.taken(1, 500, t0.Add(100*time.Millisecond))
	if got := f.limit.Load(); got != 500 {
		t.Fatalf("limit at 10k records/s over 2 channels %d, want 500", got)
	}
	// 100 records a second: below the floor.
	f.taken(0, 10, t0.Add(200*time.Millisecond))
	if got := f.limit.Load(); got != minInflight {
		t.Fatalf("limit at 100 records/s %d, want the floor %d", got, minInflight)
	}
	// 1M records a second: the channels' capacity caps it.
	f.taken(0, 100_000, t0.Add(300*time.Millisecond))
	if got := f.limit.Load(); got != 4096 {
		t.Fatalf("limit at 1M records/s %d, want the capacity 4096", got)
	}
	off := newInflight(2, 0, 4096)
	off.taken(0, 1, t0)
	off.taken(0, 1, t0.Add(time.Second))
	if got := off.limit.Load(); got != 4096 {
		t.Fatalf("limit with the target off %d, want the capacity 4096", got)
	}
	// A receiver idle for 90 of 100ms, taking 100 records: 1,000 a
	// second of wall clock, 10,000 a second of its busy time.
	idle := newInflight(1, 100*time.Millisecond, 4096)
	idle.taken(0, 50, t0)
	idle.idle.Add(int64(90 * time.Millisecond))
	idle.taken(0, 50, t0.Add(100*time.Millisecond))
	if got := idle.limit.Load(); got != 1000 {
		t.Fatalf("limit of a receiver busy 10ms of 100 taking 100 records %d, want 1000 (its busy rate)", got)
	}
}

// A sender over the limit waits until the receiver takes records, and
// one holding nothing may always send (a batch larger than the limit).
func TestInflightReserveWaitsForTakes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := &subtask{att: &attempt{ctx: ctx}}
	f := newInflight(1, 100*time.Millisecond, 800)
	f.limit.Store(100)
	if lim := f.reserve(st, 0, 300); lim != 100 {
		t.Fatalf("reserve on an empty channel returned limit %d, want 100", lim)
	}
	done := make(chan struct{})
	go func() {
		f.reserve(st, 0, 50)
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("a sender 200 records over the limit did not wait")
	case <-time.After(50 * time.Millisecond):
	}
	f.taken(0, 300, time.Now())
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the sender still waits after the receiver took every record")
	}
	if got := f.queued[0].Load(); got != 50 {
		t.Fatalf("queued %d after the take and the second send, want 50", got)
	}
	if st.backpressured.Load() <= 0 {
		t.Fatal("the wait was not counted as backpressure")
	}
}
