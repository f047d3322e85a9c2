package barrier

import (
	"reflect"
	"testing"
)

func ids(bs []Barrier) []int64 {
	out := []int64{}
	for _, b := range bs {
		out = append(out, b.ID)
	}
	return out
}

// Two inputs; barrier 1 arrives on input 0 first. In exactly-once mode input
// 0 is held back until input 1 delivers barrier 1 too.
func TestAlignerExactlyOnceStepByStep(t *testing.T) {
	a := NewAligner(2, true)
	if a.Blocked(0) || a.Blocked(1) {
		t.Fatal("fresh aligner blocks a channel")
	}
	if got := a.OnBarrier(0, Barrier{ID: 1}); len(got) != 0 {
		t.Fatalf("released %v after one of two inputs", ids(got))
	}
	if !a.Blocked(0) {
		t.Fatal("input 0 delivered barrier 1 and must be held back")
	}
	if a.Blocked(1) {
		t.Fatal("input 1 has not delivered barrier 1 and must keep flowing")
	}
	got := a.OnBarrier(1, Barrier{ID: 1})
	if !reflect.DeepEqual(ids(got), []int64{1}) {
		t.Fatalf("released %v, want [1]", ids(got))
	}
	if a.Blocked(0) || a.Blocked(1) {
		t.Fatal("channels still blocked after alignment")
	}
	// Next checkpoint, other order, savepoint flag travels.
	a.OnBarrier(1, Barrier{ID: 2, Savepoint: true})
	if !a.Blocked(1) || a.Blocked(0) {
		t.Fatal("want input 1 blocked, input 0 open")
	}
	got = a.OnBarrier(0, Barrier{ID: 2})
	if len(got) != 1 || got[0].ID != 2 || !got[0].Savepoint {
		t.Fatalf("released %+v, want savepoint barrier 2", got)
	}
}

func TestAlignerAtLeastOnceNeverBlocks(t *testing.T) {
	a := NewAligner(2, false)
	a.OnBarrier(0, Barrier{ID: 1})
	if a.Blocked(0) {
		t.Fatal("at-least-once must not block")
	}
	// Input 0 runs ahead to barrier 2 before input 1 delivers 1.
	if got := a.OnBarrier(0, Barrier{ID: 2}); len(got) != 0 {
		t.Fatalf("released %v early", ids(got))
	}
	if got := a.OnBarrier(1, Barrier{ID: 1}); !reflect.DeepEqual(ids(got), []int64{1}) {
		t.Fatalf("released %v, want [1]", ids(got))
	}
	if got := a.OnBarrier(1, Barrier{ID: 2}); !reflect.DeepEqual(ids(got), []int64{2}) {
		t.Fatalf("released %v, want [2]", ids(got))
	}
}

func TestAlignerEndOfStreamCountsAsDelivered(t *testing.T) {
	a := NewAligner(3, true)
	a.OnBarrier(0, Barrier{ID: 5})
	a.OnBarrier(1, Barrier{ID: 5})
	got, all := a.OnEOS(2)
	if all {
		t.Fatal("all ended after one EOS of three")
	}
	if !reflect.DeepEqual(ids(got), []int64{5}) {
		t.Fatalf("released %v, want [5] once the lagging channel ended", ids(got))
	}
	if a.Blocked(0) || a.Blocked(1) {
		t.Fatal("channels blocked after release")
	}
	if a.Open() != 2 {
		t.Fatalf("open %d, want 2", a.Open())
	}
	_, all = a.OnEOS(0)
	if all {
		t.Fatal("all ended too early")
	}
	if !a.Blocked(0) {
		t.Fatal("an ended channel must not be read")
	}
	_, all = a.OnEOS(1)
	if !all {
		t.Fatal("want all ended")
	}
}

func TestAlignerRejectsOutOfOrderBarriers(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("barrier 1 after barrier 2 on one channel must panic")
		}
	}()
	a := NewAligner(2, false)
	a.OnBarrier(0, Barrier{ID: 2})
	a.OnBarrier(0, Barrier{ID: 1})
}

// Barrier ids may jump by billions (fenced checkpoint ids): release does
// not walk the ids between.
func TestAlignerIDJump(t *testing.T) {
	a := NewAligner(2, true)
	const big = int64(7) << 32
	if got := a.OnBarrier(0, Barrier{ID: big + 1}); len(got) != 0 {
		t.Fatalf("released %v before the second channel", got)
	}
	if got := a.OnBarrier(1, Barrier{ID: big + 1}); len(got) != 1 || got[0].ID != big+1 {
		t.Fatalf("released %v, want barrier %d", got, big+1)
	}
}

// A node with two inputs numbers their channels globally: input 0's two
// senders are channels 0-1, input 1's three are 2-4. Barrier n is
// released once, when every channel of both inputs delivered it; input
// 1's senders lag and then end one by one, and an ended channel stops
// holding barriers back.
func TestAlignerTwoInputsUnevenSendersOneEnds(t *testing.T) {
	for _, exactlyOnce := range []bool{true, false} {
		a := NewAligner(5, exactlyOnce)
		for ch := range 2 { // input 0 runs ahead: barriers 1 and 2
			for _, id := range []int64{1, 2} {
				if got := a.OnBarrier(ch, Barrier{ID: id}); len(got) != 0 {
					t.Fatalf("exactly-once %v: released %v before input 1 delivered anything", exactlyOnce, ids(got))
				}
			}
			if a.Blocked(ch) != exactlyOnce {
				t.Fatalf("exactly-once %v: input 0 channel %d blocked %v", exactlyOnce, ch, a.Blocked(ch))
			}
		}
		a.OnBarrier(2, Barrier{ID: 1})
		if got := a.OnBarrier(3, Barrier{ID: 1}); len(got) != 0 {
			t.Fatalf("exactly-once %v: released %v with channel 4 missing", exactlyOnce, ids(got))
		}
		if got := a.OnBarrier(4, Barrier{ID: 1}); !reflect.DeepEqual(ids(got), []int64{1}) {
			t.Fatalf("exactly-once %v: released %v, want [1]", exactlyOnce, ids(got))
		}
		// Input 0 delivered barrier 2 already: still blocked in
		// exactly-once; input 1's channels flow.
		if a.Blocked(0) != exactlyOnce || a.Blocked(2) || a.Blocked(3) || a.Blocked(4) {
			t.Fatalf("exactly-once %v: after barrier 1, blocked %v %v %v %v %v", exactlyOnce, a.Blocked(0), a.Blocked(1), a.Blocked(2), a.Blocked(3), a.Blocked(4))
		}
		// Input 1 ends: two senders at once, the last after barrier 2.
		if got, all := a.OnEOS(2); len(got) != 0 || all {
			t.Fatalf("exactly-once %v: EOS of channel 2 released %v (all %v)", exactlyOnce, ids(got), all)
		}
		if got, _ := a.OnEOS(3); len(got) != 0 {
			t.Fatalf("exactly-once %v: released %v while channel 4 lacks barrier 2", exactlyOnce, ids(got))
		}
		if got := a.OnBarrier(4, Barrier{ID: 2}); !reflect.DeepEqual(ids(got), []int64{2}) {
			t.Fatalf("exactly-once %v: released %v, want [2]", exactlyOnce, ids(got))
		}
		if got, all := a.OnEOS(4); len(got) != 0 || all {
			t.Fatalf("exactly-once %v: EOS of channel 4 released %v (all %v)", exactlyOnce, ids(got), all)
		}
		// Input 0 alone now releases barrier 3.
		a.OnBarrier(0, Barrier{ID: 3})
		if got := a.OnBarrier(1, Barrier{ID: 3}); !reflect.DeepEqual(ids(got), []int64{3}) {
			t.Fatalf("exactly-once %v: with input 1 ended, released %v, want [3]", exactlyOnce, ids(got))
		}
		a.OnEOS(0)
		if _, all := a.OnEOS(1); !all {
			t.Fatalf("exactly-once %v: every channel ended but the aligner says not", exactlyOnce)
		}
	}
}
