package pipeline

import (
	"encoding/json"
	"slices"
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
