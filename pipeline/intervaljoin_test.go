package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
	"github.com/onceflow/onceflow/state"
)

// ijHarness drives an interval join's functions the way the engine does:
// one runtime, per key its timers, a watermark (fakeTime), the emitted
// pairs.
type ijHarness struct {
	*fakeTime
	fns  TwoInputs
	op   Operator
	late *atomic.Int64
}

func newIJ(t *testing.T, lower, upper string, lateTopic string) *ijHarness {
	t.Helper()
	late := &atomic.Int64{}
	c := IntervalJoinConfig{LeftKey: "value.k", RightKey: "value.k", LeftTime: "value.t", RightTime: "value.t", Lower: lower, Upper: upper, LateTopic: lateTopic}
	op, err := c.operator(late)
	if err != nil {
		t.Fatal(err)
	}
	rt := state.NewRuntime(0, 127, 128, nil, nil)
	fns := op.Two(rt.Store())
	rt.Seal()
	f := &fakeTime{rt: rt, wm: -1 << 62, timers: map[string]map[int64]bool{}, ptimers: map[string]map[int64]bool{}}
	return &ijHarness{fakeTime: f, fns: fns, op: op, late: late}
}

// feed hands the join a record of side left (else right) with key k at
// time ts; its value names it.
func (h *ijHarness) feed(t *testing.T, left bool, k string, ts int64, name string) {
	t.Helper()
	h.setKey(k)
	v := fmt.Sprintf(`{"k":%q,"t":%d,"n":%q}`, k, ts, name)
	r := &handle[krec]{acc: &kAccess, rec: krec{Key: k, Value: v}, group: k}
	prep := h.op.Prepare
	f := h.fns.OnLeft
	if !left {
		prep, f = h.op.PrepareRight, h.fns.OnRight
	}
	p, err := prep(r)
	if err != nil {
		t.Fatal(err)
	}
	r.prep = p
	if err := f(r, h, h); err != nil {
		t.Fatal(err)
	}
}

// advance moves the watermark, firing due timers (fakeTime.advance).
func (h *ijHarness) advance(t *testing.T, wm int64) {
	t.Helper()
	tm := Timed{OnTimer: h.fns.OnTimer}
	h.fakeTime.advance(t, tm, wm)
}

// pairs are the emitted pairs as "left-right" names, sorted; emitted is
// emptied.
func (h *ijHarness) pairs(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, e := range h.emitted {
		_, v, _ := strings.Cut(e, " ")
		var j struct{ Left, Right struct{ N string } }
		if err := json.Unmarshal([]byte(v), &j); err != nil {
			t.Fatalf("joined value %s: %v", v, err)
		}
		out = append(out, j.Left.N+"-"+j.Right.N)
	}
	h.emitted = nil
	sort.Strings(out)
	return out
}

// stateBytes is the size of the runtime's snapshot.
func (h *ijHarness) stateBytes(t *testing.T) int {
	t.Helper()
	groups, err := h.rt.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, b := range groups {
		n += len(b)
	}
	return n
}

func TestIntervalJoinPairsAtTheBounds(t *testing.T) {
	// l - r within [-10, 5]: a left record at 100 meets right records
	// dated 95 … 110, both ends included.
	for _, rightFirst := range []bool{true, false} {
		h := newIJ(t, "-10ms", "5ms", "")
		feedRights := func() {
			for _, ts := range []int64{94, 95, 110, 111} {
				h.feed(t, false, "a", ts, fmt.Sprint("r", ts))
			}
			h.feed(t, false, "b", 100, "rb") // another key
		}
		if rightFirst {
			feedRights()
			h.feed(t, true, "a", 100, "l")
		} else {
			h.feed(t, true, "a", 100, "l")
			feedRights()
		}
		if got, want := h.pairs(t), []string{"l-r110", "l-r95"}; !slices.Equal(got, want) {
			t.Errorf("right first %v: pairs %v, want %v", rightFirst, got, want)
		}
	}
	// Exclusive bounds, as the planner writes l.t > r.t - 10 AND l.t < r.t + 5:
	// one millisecond inside.
	h := newIJ(t, "-9ms", "4ms", "")
	h.feed(t, true, "a", 100, "l")
	for _, ts := range []int64{95, 96, 109, 110} {
		h.feed(t, false, "a", ts, fmt.Sprint("r", ts))
	}
	if got, want := h.pairs(t), []string{"l-r109", "l-r96"}; !slices.Equal(got, want) {
		t.Errorf("exclusive: pairs %v, want %v", got, want)
	}
	// Positive bounds: the left record is 1 to 5 ms after its partner.
	h = newIJ(t, "1ms", "5ms", "")
	h.feed(t, true, "a", 100, "l")
	for _, ts := range []int64{94, 95, 99, 100} {
		h.feed(t, false, "a", ts, fmt.Sprint("r", ts))
	}
	if got, want := h.pairs(t), []string{"l-r95", "l-r99"}; !slices.Equal(got, want) {
		t.Errorf("positive bounds: pairs %v, want %v", got, want)
	}
}

func TestIntervalJoinFreesStateWithTheWatermark(t *testing.T) {
	h := newIJ(t, "-10ms", "5ms", "")
	h.advance(t, 0)
	empty := h.stateBytes(t)
	h.feed(t, true, "a", 100, "l")  // kept until 100 + 10
	h.feed(t, false, "a", 200, "r") // kept until 200 + 5
	if h.stateBytes(t) <= empty {
		t.Fatal("nothing kept after two records")
	}
	h.advance(t, 109)
	h.feed(t, false, "a", 110, "r110") // on time, and the left record is still there
	if got := h.pairs(t); !slices.Equal(got, []string{"l-r110"}) {
		t.Errorf("at watermark 109: pairs %v, want [l-r110]", got)
	}
	h.advance(t, 110) // the left record goes; r110 waits until 115
	h.advance(t, 204)
	withOne := h.stateBytes(t)
	h.advance(t, 205)
	if got := h.stateBytes(t); got != empty || got >= withOne {
		t.Errorf("state after the watermark passed every record: %d bytes, want %d (empty); %d before", got, empty, withOne)
	}
	for k, ts := range h.timers {
		if len(ts) > 0 {
			t.Errorf("key %s still has timers %v", k, ts)
		}
	}
	// A record whose partners can no longer come on time is not kept:
	// lower 1ms, so a left record at 300 meets right records up to 299.
	h2 := newIJ(t, "1ms", "5ms", "")
	h2.advance(t, 0)
	empty2 := h2.stateBytes(t)
	h2.advance(t, 299)
	h2.feed(t, true, "a", 300, "l")
	if got := h2.stateBytes(t); got != empty2 {
		t.Errorf("a record with no partner to come was kept: %d bytes, want %d", got, empty2)
	}
}

func TestIntervalJoinCountsLateRecords(t *testing.T) {
	h := newIJ(t, "-10ms", "10ms", "late")
	h.feed(t, false, "a", 100, "r")
	h.advance(t, 100)
	h.feed(t, true, "a", 100, "late-l") // at the watermark: late, though r is kept
	h.feed(t, true, "a", 101, "l")
	if got := h.pairs(t); !slices.Equal(got, []string{"l-r"}) {
		t.Errorf("pairs %v, want [l-r]: a late record pairs with nothing", got)
	}
	if n := h.late.Load(); n != 1 {
		t.Errorf("late records counted: %d, want 1", n)
	}
	if h.forward != 1 {
		t.Errorf("late records forwarded to late-topic: %d, want 1", h.forward)
	}
}

// TestIntervalJoinRestoreEmitsNoPairTwice: a run cut at a snapshot and
// restored into a new runtime (with its timers, as a checkpoint carries
// them) emits, before and after, every pair of an uncut run once.
func TestIntervalJoinRestoreEmitsNoPairTwice(t *testing.T) {
	type ev struct {
		left bool
		k    string
		ts   int64
		name string
	}
	rng := rand.New(rand.NewSource(7))
	var evs []ev
	for i := range 400 {
		evs = append(evs, ev{rng.Intn(2) == 0, fmt.Sprint("k", rng.Intn(5)), int64(i*3 + rng.Intn(20)), fmt.Sprint("e", i)})
	}
	run := func(h *ijHarness, from, to int) {
		for i := from; i < to; i++ {
			e := evs[i]
			h.feed(t, e.left, e.k, e.ts, e.name)
			if i%10 == 9 {
				h.advance(t, int64(i*3)-25) // behind every later record
			}
		}
	}
	whole := newIJ(t, "-7ms", "12ms", "")
	run(whole, 0, len(evs))
	want := whole.pairs(t)
	if len(want) < 100 {
		t.Fatalf("only %d pairs: the test needs more", len(want))
	}
	if whole.late.Load() != 0 {
		t.Fatalf("%d late records in a run meant to have none", whole.late.Load())
	}

	first := newIJ(t, "-7ms", "12ms", "")
	run(first, 0, 200)
	snap, err := first.rt.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	timers := map[string]map[int64]bool{} // as a checkpoint carries them
	for k, ts := range first.timers {
		timers[k] = map[int64]bool{}
		for at := range ts {
			timers[k][at] = true
		}
	}
	snapWM := first.wm
	before := first.pairs(t)
	run(first, 200, 260) // emitted after the checkpoint: lost with the crash
	second := newIJ(t, "-7ms", "12ms", "")
	if err := second.rt.Restore(snap); err != nil {
		t.Fatal(err)
	}
	second.wm, second.timers = snapWM, timers
	run(second, 200, len(evs))
	got := append(before, second.pairs(t)...)
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("restored run: %d pairs, uncut: %d; they differ", len(got), len(want))
	}
}

func TestIntervalJoinRefusesBadBounds(t *testing.T) {
	for _, tc := range []struct{ lower, upper, want string }{
		{"5m", "-5m", "upper -5m is less than lower 5m"},
		{"ten", "5m", `lower "ten" is not a duration`},
		{"0s", "1us", "finer than a millisecond"},
	} {
		_, err := IntervalJoinConfig{LeftKey: KeyRecordKey, RightKey: KeyRecordKey, LeftTime: "timestamp", RightTime: "timestamp", Lower: tc.lower, Upper: tc.upper}.operator(nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("lower %s upper %s: %v, want %q", tc.lower, tc.upper, err, tc.want)
		}
	}
}

// TestIntervalJoinInAJob runs interval-join and window-join (tumbling,
// sliding and cumulate windows) in the engine at parallelism 1 and 3: two
// sources with event time, every pair within the bounds once (once per
// window holding both).
func TestIntervalJoinInAJob(t *testing.T) {
	var left, right []krec
	for i := range 60 {
		left = append(left, krec{Key: "x", Value: fmt.Sprintf(`{"k":%d,"t":%d,"n":"l%d"}`, i%4, 1000+i*10, i)})
		right = append(right, krec{Key: "x", Value: fmt.Sprintf(`{"k":%d,"t":%d,"n":"r%d"}`, i%4, 1000+i*10+5, i)})
	}
	// Brute force: l - r within [-20, 0]; or in one window of 40 ms.
	wants := map[string][]string{}
	for i := range left {
		for j := range right {
			lt, rt := 1000+i*10, 1000+j*10+5
			if i%4 == j%4 && lt-rt >= -20 && lt-rt <= 0 {
				wants["interval-join"] = append(wants["interval-join"], fmt.Sprintf("l%d-r%d", i, j))
			}
			if i%4 == j%4 && lt/40 == rt/40 {
				wants["window-join"] = append(wants["window-join"], fmt.Sprintf("l%d-r%d", i, j))
			}
			// Sliding windows of 40 every 20: a pair once per window
			// [s, s+40) (s a multiple of 20) holding both.
			for s := (max(lt, rt)/20)*20 - 20; s <= min(lt, rt); s += 20 {
				if i%4 == j%4 && s+40 > max(lt, rt) {
					wants["window-join-hop"] = append(wants["window-join-hop"], fmt.Sprintf("l%d-r%d", i, j))
				}
			}
			// Cumulate windows of 40 by 20: [s, s+20) and [s, s+40).
			if s := (lt / 40) * 40; i%4 == j%4 && s == (rt/40)*40 {
				for _, end := range []int{s + 20, s + 40} {
					if lt < end && rt < end {
						wants["window-join-cumulate"] = append(wants["window-join-cumulate"], fmt.Sprintf("l%d-r%d", i, j))
					}
				}
			}
		}
	}
	acc := kAccess
	acc.New = func(k, v []byte, ts int64) krec { return krec{Key: string(k), Value: string(v), TS: ts} }
	steps := map[string]Step{
		"interval-join": {Op: "interval-join", Params: Params{"left-key": "value.k", "right-key": "value.k", "lower": "-20ms", "upper": "0s", "left-time": "value.t", "right-time": "value.t"}},
		"window-join":   {Op: "window-join", Params: Params{"left-key": "value.k", "right-key": "value.k", "size": 40 * time.Millisecond, "left-time": "value.t", "right-time": "value.t"}},
		"window-join-hop": {Op: "window-join", Params: Params{"left-key": "value.k", "right-key": "value.k", "size": 40 * time.Millisecond, "slide": 20 * time.Millisecond,
			"left-time": "value.t", "right-time": "value.t"}},
		"window-join-cumulate": {Op: "window-join", Params: Params{"left-key": "value.k", "right-key": "value.k", "size": 40 * time.Millisecond, "step": 20 * time.Millisecond,
			"left-time": "value.t", "right-time": "value.t"}},
	}
	for _, op := range []string{"interval-join", "window-join", "window-join-hop", "window-join-cumulate"} {
		want := wants[op]
		sort.Strings(want)
		if len(want) < 30 {
			t.Fatalf("%s: %d pairs expected: too few to prove anything", op, len(want))
		}
		for _, p := range []int{1, 3} {
			env := flow.New(flow.JobName("ij"), flow.Parallelism(p), flow.Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			tsOf, err := Timestamps(acc, "value.t")
			if err != nil {
				t.Fatal(err)
			}
			wm := flow.Watermarks[krec]{Timestamp: tsOf, MaxOutOfOrderness: 0}
			var ins []flow.Stream[krec]
			for i, in := range [][]krec{left, right} {
				ins = append(ins, flow.From(env, flowtest.NewSource([][]krec{in}), flow.UID(fmt.Sprint("src-", i)), flow.WithWatermarks(wm)))
			}
			s, _, err := BuildFrom(ins, acc, []Step{steps[op]}, Env{})
			if err != nil {
				t.Fatal(err)
			}
			sink := flowtest.NewSink[krec]()
			flow.To(s, sink, flow.UID("sink"))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			job, err := env.Start(ctx)
			if err != nil {
				cancel()
				t.Fatal(err)
			}
			if err := job.Wait(); err != nil {
				cancel()
				t.Fatal(err)
			}
			cancel()
			var got []string
			for _, r := range sink.Committed() {
				var j struct{ Left, Right struct{ N string } }
				if err := json.Unmarshal([]byte(r.Value), &j); err != nil {
					t.Fatal(err)
				}
				got = append(got, j.Left.N+"-"+j.Right.N)
			}
			sort.Strings(got)
			if !slices.Equal(got, want) {
				t.Errorf("%s at parallelism %d: %d pairs, want %d:\n%v\nwant\n%v", op, p, len(got), len(want), got, want)
			}
		}
	}
}
