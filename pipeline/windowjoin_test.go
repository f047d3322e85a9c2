package pipeline

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow/state"
)

func newWJ(t *testing.T, size time.Duration) *ijHarness {
	t.Helper()
	late := &atomic.Int64{}
	c := WindowJoinConfig{LeftKey: "value.k", RightKey: "value.k", LeftTime: "value.t", RightTime: "value.t", Size: size}
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

func TestWindowJoinPairsWithinAWindowWhenItCloses(t *testing.T) {
	h := newWJ(t, 10*time.Millisecond)
	h.advance(t, -1)
	empty := h.stateBytes(t)
	h.feed(t, true, "a", 10, "l10")
	h.feed(t, true, "a", 19, "l19")
	h.feed(t, false, "a", 19, "r19")
	h.feed(t, false, "a", 20, "r20") // the next window
	h.feed(t, false, "b", 15, "rb")  // another key
	h.feed(t, true, "a", 9, "l9")    // the window before
	if len(h.emitted) != 0 {
		t.Fatalf("emitted before the window closed: %v", h.emitted)
	}
	h.advance(t, 18)
	if len(h.emitted) != 0 {
		t.Fatalf("emitted before the watermark passed the window's last millisecond: %v", h.emitted)
	}
	var v struct{ WindowStart, WindowEnd, WindowTime int64 }
	h.advance(t, 19)
	if len(h.emitted) > 0 {
		_, val, _ := strings.Cut(h.emitted[0], " ")
		if err := json.Unmarshal([]byte(val), &struct {
			WS *int64 `json:"window_start"`
			WE *int64 `json:"window_end"`
			WT *int64 `json:"window_time"`
		}{&v.WindowStart, &v.WindowEnd, &v.WindowTime}); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := h.pairs(t), []string{"l10-r19", "l19-r19"}; !slices.Equal(got, want) {
		t.Errorf("window [10, 20): pairs %v, want %v", got, want)
	}
	if v.WindowStart != 10 || v.WindowEnd != 20 || v.WindowTime != 19 {
		t.Errorf("window members %+v, want start 10, end 20, time 19", v)
	}
	h.feed(t, true, "a", 15, "late") // its window closed
	if n := h.late.Load(); n != 1 {
		t.Errorf("late records %d, want 1", n)
	}
	h.feed(t, true, "a", 25, "l25")
	h.advance(t, 29)
	if got, want := h.pairs(t), []string{"l25-r20"}; !slices.Equal(got, want) {
		t.Errorf("window [20, 30): pairs %v, want %v", got, want)
	}
	if got := h.stateBytes(t); got != empty {
		t.Errorf("state after every window closed: %d bytes, want %d (empty)", got, empty)
	}
}

func TestWindowJoinRefusesABadSize(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second, time.Microsecond} {
		if _, err := (WindowJoinConfig{LeftKey: KeyRecordKey, RightKey: KeyRecordKey, LeftTime: "timestamp", RightTime: "timestamp", Size: d}).operator(nil); err == nil {
			t.Errorf("size %s: built", d)
		} else if want := "size must be positive"; !strings.Contains(err.Error(), want) {
			t.Errorf("size %s: %v, want %q", d, err, want)
		}
	}
}

func newWJShape(t *testing.T, c WindowJoinConfig) *ijHarness {
	t.Helper()
	c.LeftKey, c.RightKey, c.LeftTime, c.RightTime = "value.k", "value.k", "value.t", "value.t"
	late := &atomic.Int64{}
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

// windowPairs are the emitted pairs as "left-right@start-end", sorted;
// emitted is emptied.
func (h *ijHarness) windowPairs(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, e := range h.emitted {
		_, v, _ := strings.Cut(e, " ")
		var j struct {
			Left, Right struct{ N string }
			Start       int64 `json:"window_start"`
			End         int64 `json:"window_end"`
		}
		if err := json.Unmarshal([]byte(v), &j); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s-%s@%d-%d", j.Left.N, j.Right.N, j.Start, j.End))
	}
	h.emitted = nil
	sort.Strings(out)
	return out
}

func TestWindowJoinSlidingAndCumulateWindows(t *testing.T) {
	// Sliding windows of 20 every 10: a record at 15 is in [0, 20) and
	// [10, 30); one at 25 in [10, 30) and [20, 40).
	h := newWJShape(t, WindowJoinConfig{Size: 20 * time.Millisecond, Slide: 10 * time.Millisecond})
	h.advance(t, -1)
	empty := h.stateBytes(t)
	h.feed(t, true, "a", 15, "l15")
	h.feed(t, false, "a", 25, "r25")
	h.feed(t, false, "a", 5, "r5")
	h.advance(t, 19)
	if got, want := h.windowPairs(t), []string{"l15-r5@0-20"}; !slices.Equal(got, want) {
		t.Errorf("sliding, watermark 19: %v, want %v", got, want)
	}
	h.feed(t, true, "a", 12, "l12") // [0, 20) closed, [10, 30) open: kept there, not late
	if n := h.late.Load(); n != 0 {
		t.Errorf("a record with an open window counted late: %d", n)
	}
	h.advance(t, 100)
	if got, want := h.windowPairs(t), []string{"l12-r25@10-30", "l15-r25@10-30"}; !slices.Equal(got, want) {
		t.Errorf("sliding, watermark 100: %v, want %v", got, want)
	}
	h.feed(t, true, "a", 85, "late") // [70, 90) and [80, 100) both closed
	if n := h.late.Load(); n != 1 {
		t.Errorf("late records %d, want 1", n)
	}
	if got := h.stateBytes(t); got != empty {
		t.Errorf("state after every window closed: %d bytes, want %d (empty)", got, empty)
	}

	// Cumulate windows of 30 by 10: [0, 10), [0, 20), [0, 30), [30, 40), …
	h = newWJShape(t, WindowJoinConfig{Size: 30 * time.Millisecond, Step: 10 * time.Millisecond})
	h.advance(t, -1)
	h.feed(t, true, "a", 5, "l5")
	h.feed(t, false, "a", 15, "r15")
	h.feed(t, false, "a", 8, "r8")
	h.feed(t, true, "a", 29, "l29")
	h.feed(t, false, "a", 30, "r30") // the next cumulate window
	h.advance(t, 9)
	if got, want := h.windowPairs(t), []string{"l5-r8@0-10"}; !slices.Equal(got, want) {
		t.Errorf("cumulate, watermark 9: %v, want %v", got, want)
	}
	h.advance(t, 100)
	want := []string{"l29-r15@0-30", "l29-r8@0-30", "l5-r15@0-20", "l5-r15@0-30", "l5-r8@0-20", "l5-r8@0-30"}
	if got := h.windowPairs(t); !slices.Equal(got, want) {
		t.Errorf("cumulate, watermark 100: %v, want %v", got, want)
	}
	if got := h.stateBytes(t); got != empty {
		t.Errorf("cumulate: state after every window closed: %d bytes, want %d (empty)", got, empty)
	}
}

func TestWindowJoinRefusesBadShapes(t *testing.T) {
	for _, tc := range []struct {
		c    WindowJoinConfig
		want string
	}{
		{WindowJoinConfig{Size: time.Minute, Slide: 25 * time.Second}, "slide 25s does not divide size 1m"},
		{WindowJoinConfig{Size: time.Minute, Slide: 2 * time.Minute}, "longer than size"},
		{WindowJoinConfig{Size: time.Minute, Step: 7 * time.Second}, "step"},
		{WindowJoinConfig{Size: time.Minute, Slide: 10 * time.Second, Step: 10 * time.Second}, "cannot go with slide"},
	} {
		tc.c.LeftKey, tc.c.RightKey, tc.c.LeftTime, tc.c.RightTime = KeyRecordKey, KeyRecordKey, "timestamp", "timestamp"
		if _, err := tc.c.operator(nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.c, err, tc.want)
		}
	}
}
