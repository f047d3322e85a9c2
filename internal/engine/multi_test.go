package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/barrier"
	"github.com/onceflow/onceflow/internal/checkpoint"
)

// recorder is the head of a two-input node in these tests: it logs what
// the receive loop hands it, in order.
type recorder struct {
	mu  sync.Mutex
	log []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.log = append(r.log, s)
	r.mu.Unlock()
}

func (r *recorder) entries() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

type recInt struct{ r *recorder }

func (p recInt) push(x int)    { p.r.add(fmt.Sprintf("a%d", x)) }
func (p recInt) control(c ctl) { p.r.control(c) }
func (p recStr) push(x string) { p.r.add("b" + x) }
func (p recStr) control(c ctl) { p.r.control(c) }
func (r *recorder) control(c ctl) {
	switch c.kind {
	case ctlBarrier:
		r.add(fmt.Sprintf("barrier%d", c.b.ID))
	case ctlWatermark:
		if c.idle {
			r.add("idle")
		} else {
			r.add(fmt.Sprintf("wm%d", c.wm))
		}
	case ctlEOS:
		r.add("eos")
	}
}

type recStr struct{ r *recorder }

// twoInputs runs receiveMulti over two inputs with uneven senders: input
// a (ints) has 2 senders, channels 0-1; input b (strings) has 3,
// channels 2-4.
type twoInputs struct {
	t    *testing.T
	a    *exchange[int]
	b    *exchange[string]
	rec  *recorder
	done chan struct{}
}

func newTwoInputs(t *testing.T, mode checkpoint.Mode) *twoInputs {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cfg := DefaultConfig()
	cfg.Checkpoint.Mode = mode
	att := &attempt{cfg: &cfg, ctx: ctx}
	st := &subtask{att: att, mail: newMailbox[mail](), par: 1}
	ti := &twoInputs{t: t, a: newExchange[int](att, 2, 1, nil), b: newExchange[string](att, 3, 1, nil), rec: &recorder{}, done: make(chan struct{})}
	go func() {
		defer close(ti.done)
		defer func() {
			if p := recover(); p != nil && p != errAttemptCanceled {
				t.Errorf("receive loop panicked: %v", p)
			}
		}()
		receiveMulti(st, []inPort{ti.a.port(st, input[int](recInt{ti.rec})), ti.b.port(st, input[string](recStr{ti.rec}))}, ti.rec)
	}()
	return ti
}

func (ti *twoInputs) sendA(sender int, m exMsg[int]) {
	m.sender = sender
	ti.a.chans[0][sender] <- m
}

func (ti *twoInputs) sendB(sender int, m exMsg[string]) {
	m.sender = sender
	ti.b.chans[0][sender] <- m
}

func barrierMsg[T any](id int64) exMsg[T] {
	return exMsg[T]{isCtl: true, c: ctl{kind: ctlBarrier, b: barrier.Barrier{ID: id}}}
}

func wmMsg[T any](wm int64, idle bool) exMsg[T] {
	return exMsg[T]{isCtl: true, c: ctl{kind: ctlWatermark, wm: wm, idle: idle}}
}

func eosMsg[T any]() exMsg[T] { return exMsg[T]{isCtl: true, c: ctl{kind: ctlEOS}} }

// waitLog waits until the log holds want (as its last entries).
func (ti *twoInputs) waitLog(want ...string) {
	ti.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := ti.rec.entries()
		if len(got) >= len(want) && slices.Equal(got[len(got)-len(want):], want) {
			return
		}
		if time.Now().After(deadline) {
			ti.t.Fatalf("log %v, want it to end with %v", got, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// settle gives the loop time to take what it may take, then checks the
// log still ends with want.
func (ti *twoInputs) settle(want ...string) {
	ti.t.Helper()
	time.Sleep(30 * time.Millisecond)
	got := ti.rec.entries()
	if len(got) < len(want) || !slices.Equal(got[len(got)-len(want):], want) {
		ti.t.Fatalf("log %v, want it to end with %v", got, want)
	}
}

// Exactly-once over two inputs with uneven senders: barrier 1 goes on
// once, after all five channels delivered it; a channel that delivered
// it is not read until then; once input b's senders have all ended,
// input a alone releases barrier 2; the end of stream goes on when every
// channel ended.
func TestMultiInputAlignerExactlyOnce(t *testing.T) {
	ti := newTwoInputs(t, checkpoint.ExactlyOnce)
	ti.sendA(0, barrierMsg[int](1))
	ti.sendA(0, exMsg[int]{recs: []int{7}}) // after barrier 1: held back
	ti.sendA(1, exMsg[int]{recs: []int{1}})
	ti.sendB(0, exMsg[string]{recs: []string{"x"}})
	ti.waitLog("a1", "bx")
	for s := range 3 {
		ti.sendB(s, barrierMsg[string](1))
	}
	ti.settle("a1", "bx") // a's channel 1 has not delivered barrier 1
	ti.sendA(1, barrierMsg[int](1))
	ti.waitLog("barrier1", "a7")
	if n := slices.Index(ti.rec.entries(), "barrier1"); n != 2 {
		t.Fatalf("barrier 1 went on at %d of %v: want once, after a1 and bx and before a7", n, ti.rec.entries())
	}
	// Input b ends on all its senders, one of them after barrier 2.
	ti.sendB(0, eosMsg[string]())
	ti.sendB(1, barrierMsg[string](2))
	ti.sendB(1, eosMsg[string]())
	ti.sendB(2, eosMsg[string]())
	ti.sendA(0, barrierMsg[int](2))
	ti.sendA(0, exMsg[int]{recs: []int{8}})
	ti.settle("barrier1", "a7")
	ti.sendA(1, barrierMsg[int](2))
	ti.waitLog("barrier2", "a8")
	ti.sendA(0, eosMsg[int]())
	ti.settle("barrier2", "a8")
	ti.sendA(1, eosMsg[int]())
	ti.waitLog("eos")
	<-ti.done
	n := map[string]int{}
	for _, e := range ti.rec.entries() {
		n[e]++
	}
	if n["barrier1"] != 1 || n["barrier2"] != 1 {
		t.Fatalf("barriers went on %d and %d times, want once each: %v", n["barrier1"], n["barrier2"], ti.rec.entries())
	}
}

// At-least-once never blocks: records after barrier 1 on a channel are
// taken while the other input has not delivered it.
func TestMultiInputAtLeastOnceNeverBlocks(t *testing.T) {
	ti := newTwoInputs(t, checkpoint.AtLeastOnce)
	ti.sendA(0, barrierMsg[int](1))
	ti.sendA(1, barrierMsg[int](1))
	ti.sendA(0, exMsg[int]{recs: []int{7}})
	ti.sendA(1, exMsg[int]{recs: []int{8}})
	ti.sendA(0, exMsg[int]{recs: []int{9}})
	deadline := time.Now().Add(5 * time.Second)
	for len(ti.rec.entries()) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("at-least-once held records back while input b had no barrier: %v", ti.rec.entries())
		}
		time.Sleep(time.Millisecond)
	}
	if slices.Contains(ti.rec.entries(), "barrier1") {
		t.Fatalf("barrier 1 went on before input b delivered it: %v", ti.rec.entries())
	}
	for s := range 3 {
		ti.sendB(s, barrierMsg[string](1))
	}
	ti.waitLog("barrier1")
	for s := range 2 {
		ti.sendA(s, eosMsg[int]())
	}
	for s := range 3 {
		ti.sendB(s, eosMsg[string]())
	}
	ti.waitLog("eos")
	<-ti.done
}

// One watermark combiner over both inputs: the minimum over channels
// neither idle nor ended; an idle input does not hold event time back,
// all idle is forwarded as idle, an ended input stops counting.
func TestMultiInputWatermarksWithIdleInput(t *testing.T) {
	ti := newTwoInputs(t, checkpoint.ExactlyOnce)
	ti.sendA(0, wmMsg[int](10, false))
	ti.sendA(1, wmMsg[int](20, false))
	ti.sendB(0, wmMsg[string](5, false))
	ti.settle() // input b's senders 1 and 2 have no watermark: nothing goes on
	if got := ti.rec.entries(); len(got) != 0 {
		t.Fatalf("a watermark went on before every channel had one: %v", got)
	}
	for s := range 3 {
		ti.sendB(s, wmMsg[string](0, true)) // input b goes idle
	}
	ti.waitLog("wm10") // min over a's channels only
	ti.sendA(0, wmMsg[int](30, false))
	ti.waitLog("wm20")                    // min over a's channels only
	ti.sendB(1, wmMsg[string](25, false)) // b's sender 1 wakes up at 25
	ti.sendA(1, wmMsg[int](40, false))
	ti.waitLog("wm25")
	ti.sendA(0, wmMsg[int](0, true))
	ti.sendA(1, wmMsg[int](0, true))
	ti.sendB(1, wmMsg[string](0, true))
	ti.waitLog("idle")
	ti.sendB(1, wmMsg[string](50, false))
	ti.waitLog("idle", "wm50")
	for s := range 2 {
		ti.sendA(s, eosMsg[int]())
	}
	for s := range 3 {
		ti.sendB(s, eosMsg[string]())
	}
	ti.waitLog("eos")
	<-ti.done
}
