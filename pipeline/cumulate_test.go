package pipeline

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/state"
)

// cumFields are the fields the cumulate tests use; cumFeed gives their
// inputs (in field name order) from a record's amount.
var cumFields = map[string]string{"f": "first(value.a)", "l": "last(value.a)", "n": "count()", "s": "sum(value.a)"}

func cumFeed(t testing.TB, f *fakeTime, tm Timed, k string, ts int64, a int) {
	t.Helper()
	f.setKey(k)
	r := &handle[krec]{acc: &kAccess, group: k, prep: winPrep{ts: ts, inputs: []any{a, a, nil, a}}}
	if err := tm.OnRecord(r, f, f); err != nil {
		t.Fatal(err)
	}
}

func TestCumulateAssign(t *testing.T) {
	sh := shape{size: 600, step: 200}
	for _, tc := range []struct {
		ts   int64
		want []span
	}{
		{0, []span{{0, 200}, {0, 400}, {0, 600}}},
		{199, []span{{0, 200}, {0, 400}, {0, 600}}},
		{200, []span{{0, 400}, {0, 600}}},
		{599, []span{{0, 600}}},
		{600, []span{{600, 800}, {600, 1000}, {600, 1200}}},
		{-1, []span{{-600, 0}}},
		{-600, []span{{-600, -400}, {-600, -200}, {-600, 0}}},
	} {
		if got := sh.assign(tc.ts); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("assign(%d) = %v, want %v", tc.ts, got, tc.want)
		}
	}
}

// Windows fire at each step's last millisecond, in time order across
// keys, each holding the records of its size window up to its end (a
// record of a later step that came early is not in an earlier window).
func TestCumulateWindows(t *testing.T) {
	f, tm := newFake(t, WindowConfig{Size: 30 * time.Second, Step: 10 * time.Second, Fields: cumFields})
	cumFeed(t, f, tm, "u", 1_000, 1)
	cumFeed(t, f, tm, "u", 15_000, 2) // a later step, before the first fired
	cumFeed(t, f, tm, "v", 12_000, 5) // v's first window is [0, 20000)
	cumFeed(t, f, tm, "u", 9_999, 4)  // the first step's last millisecond
	cumFeed(t, f, tm, "u", 30_000, 8) // the next size window
	f.advance(t, tm, 9_998)
	if len(f.emitted) != 0 {
		t.Fatalf("emitted before the first step's end: %q", f.emitted)
	}
	f.advance(t, tm, 9_999)
	if want := []string{`u@9999 {"f":1,"key":"u","l":4,"n":2,"s":5,"window_end":10000,"window_start":0}`}; !reflect.DeepEqual(f.emitted, want) {
		t.Fatalf("at 9999: %q, want %q", f.emitted, want)
	}
	cumFeed(t, f, tm, "u", 25_000, 16)
	f.advance(t, tm, 1<<62)
	want := []string{
		`u@9999 {"f":1,"key":"u","l":4,"n":2,"s":5,"window_end":10000,"window_start":0}`,
		`u@19999 {"f":1,"key":"u","l":4,"n":3,"s":7,"window_end":20000,"window_start":0}`,
		`v@19999 {"f":5,"key":"v","l":5,"n":1,"s":5,"window_end":20000,"window_start":0}`,
		`u@29999 {"f":1,"key":"u","l":16,"n":4,"s":23,"window_end":30000,"window_start":0}`,
		`v@29999 {"f":5,"key":"v","l":5,"n":1,"s":5,"window_end":30000,"window_start":0}`,
		`u@39999 {"f":8,"key":"u","l":8,"n":1,"s":8,"window_end":40000,"window_start":30000}`,
		`u@49999 {"f":8,"key":"u","l":8,"n":1,"s":8,"window_end":50000,"window_start":30000}`,
		`u@59999 {"f":8,"key":"u","l":8,"n":1,"s":8,"window_end":60000,"window_start":30000}`,
	}
	if !reflect.DeepEqual(f.emitted, want) {
		t.Errorf("%q\nwant %q", f.emitted, want)
	}
	// Without lateness nothing stays once a size window's last fired.
	for _, k := range []string{"u", "v"} {
		if len(f.timers[k]) != 0 {
			t.Errorf("key %s: timers left: %v", k, f.timers[k])
		}
		f.setKey(k)
		if n := countWindows(t, tm, f); n != 0 {
			t.Errorf("key %s: %d bytes of state left after the last window fired", k, n)
		}
	}
}

// A record late for some windows of its size window goes into the later
// ones only; late for all, it is refused (counted, to the late topic).
func TestCumulatePartlyLate(t *testing.T) {
	f, tm := newFake(t, WindowConfig{Size: 30 * time.Second, Step: 10 * time.Second, LateTopic: "late", Fields: cumFields})
	cumFeed(t, f, tm, "u", 1_000, 1)
	f.advance(t, tm, 12_000)
	cumFeed(t, f, tm, "u", 2_000, 2) // late for [0, 10000), in the others
	f.advance(t, tm, 40_000)
	cumFeed(t, f, tm, "u", 3_000, 4) // late for all
	want := []string{
		`u@9999 {"f":1,"key":"u","l":1,"n":1,"s":1,"window_end":10000,"window_start":0}`,
		`u@19999 {"f":1,"key":"u","l":2,"n":2,"s":3,"window_end":20000,"window_start":0}`,
		`u@29999 {"f":1,"key":"u","l":2,"n":2,"s":3,"window_end":30000,"window_start":0}`,
	}
	if !reflect.DeepEqual(f.emitted, want) || f.forward != 1 {
		t.Errorf("%q, forwarded %d\nwant %q, forwarded 1", f.emitted, f.forward, want)
	}
}

// With allowed lateness a late record re-emits each fired window it
// belongs to whose lateness has not run out; the state goes when the
// size window's lateness does.
func TestCumulateAllowedLateness(t *testing.T) {
	f, tm := newFake(t, WindowConfig{Size: 30 * time.Second, Step: 10 * time.Second, AllowedLateness: 15 * time.Second, LateTopic: "late", Fields: cumFields})
	cumFeed(t, f, tm, "u", 1_000, 1)
	f.advance(t, tm, 25_000)
	cumFeed(t, f, tm, "u", 2_000, 2) // past [0, 10000)'s lateness; [0, 20000) fired: again
	f.advance(t, tm, 44_998)
	cumFeed(t, f, tm, "u", 3_000, 4) // within [0, 30000)'s lateness only
	f.advance(t, tm, 44_999)         // the state goes
	cumFeed(t, f, tm, "u", 4_000, 8) // late for all
	want := []string{
		`u@9999 {"f":1,"key":"u","l":1,"n":1,"s":1,"window_end":10000,"window_start":0}`,
		`u@19999 {"f":1,"key":"u","l":1,"n":1,"s":1,"window_end":20000,"window_start":0}`,
		`u@19999 {"f":1,"key":"u","l":2,"n":2,"s":3,"window_end":20000,"window_start":0}`,
		`u@29999 {"f":1,"key":"u","l":2,"n":2,"s":3,"window_end":30000,"window_start":0}`,
		`u@29999 {"f":1,"key":"u","l":4,"n":3,"s":7,"window_end":30000,"window_start":0}`,
	}
	if !reflect.DeepEqual(f.emitted, want) || f.forward != 1 {
		t.Errorf("%q, forwarded %d\nwant %q, forwarded 1", f.emitted, f.forward, want)
	}
	if len(f.timers["u"]) != 0 {
		t.Errorf("timers left: %v", f.timers["u"])
	}
	f.setKey("u")
	if n := countWindows(t, tm, f); n != 0 {
		t.Errorf("%d bytes of state left after the lateness", n)
	}
}

// A key's state holds one set of figures per size window and one per
// step the watermark has not reached: a day of 1 s steps is not 86400
// sets.
func TestCumulateStateIsBounded(t *testing.T) {
	f, tm := newFake(t, WindowConfig{Size: 24 * time.Hour, Step: time.Second, Fields: cumFields})
	for i := int64(0); i < 5_000; i++ {
		cumFeed(t, f, tm, "u", i*1_000+500, 1)
		f.advance(t, tm, i*1_000-2_001) // 2 s out of orderness
	}
	f.setKey("u")
	if n := len(cumState(t, f).Steps); n > 3 {
		t.Errorf("%d steps kept apart, want at most 3 (those the watermark has not reached)", n)
	}
	if len(f.timers["u"]) > 1 {
		t.Errorf("%d timers for one key, want one (the next window end)", len(f.timers["u"]))
	}
	if want := `u@4996999 {"f":1,"key":"u","l":1,"n":4997,"s":4997,"window_end":4997000,"window_start":0}`; f.emitted[len(f.emitted)-1] != want {
		t.Errorf("last result %s, want %s", f.emitted[len(f.emitted)-1], want)
	}
}

// cumState reads the current key's one cumulate state from a snapshot.
func cumState(t *testing.T, f *fakeTime) CumState {
	t.Helper()
	rt := state.NewRuntime(0, 127, 128, nil, nil)
	m := state.NewMapWithCodecs(rt.Store(), "cumulate", state.DefaultCodec[int64](), state.Codec[CumState](cumCodec{}))
	rt.Seal()
	snap, err := f.rt.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Restore(snap); err != nil {
		t.Fatal(err)
	}
	rt.SetKey(f.key)
	var out []CumState
	m.All(func(_ int64, cs CumState) bool { out = append(out, cs); return true })
	if len(out) != 1 {
		t.Fatalf("%d cumulate states for key %s, want 1", len(out), f.key)
	}
	return out[0]
}

// cumEvent is a record of the random tests.
type cumEvent struct {
	k  string
	ts int64
	a  int
}

// cumInput is random input out of order by up to bound, and the
// watermark to advance to after each record.
func cumInput(seed uint64, n int, bound int64) ([]cumEvent, []int64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	var evs []cumEvent
	var wms []int64
	maxTS := int64(0)
	for i := 0; i < n; i++ {
		ts := max(int64(i)*97-rng.Int64N(bound), 0)
		evs = append(evs, cumEvent{fmt.Sprint("k", rng.IntN(5)), ts, rng.IntN(10)})
		maxTS = max(maxTS, ts)
		wms = append(wms, maxTS-bound-1)
	}
	return evs, wms
}

// Cumulate windows over random out-of-order input (every record on
// time) match each window computed alone from the records in it, in
// arrival order (first and last included); each window fires once, in
// window_end order per key.
func TestCumulateMatchesBruteForce(t *testing.T) {
	for _, c := range []WindowConfig{
		{Size: 10 * time.Second, Step: 2 * time.Second},
		{Size: 10 * time.Second, Step: 10 * time.Second},
		{Size: 12 * time.Second, Step: time.Second, AllowedLateness: 5 * time.Second},
	} {
		t.Run(c.describe(), func(t *testing.T) {
			c.Fields = cumFields
			f, tm := newFake(t, c)
			evs, wms := cumInput(uint64(c.Step), 3000, 4_000)
			for i, e := range evs {
				cumFeed(t, f, tm, e.k, e.ts, e.a)
				f.advance(t, tm, wms[i])
			}
			f.advance(t, tm, 1<<62)
			sh, _ := c.shape()
			type agg struct{ f, l, n, s int }
			want := map[string]agg{}
			for _, e := range evs {
				for _, s := range sh.assign(e.ts) {
					id := fmt.Sprintf("%s/%d/%d", e.k, s.Start, s.End)
					a, seen := want[id]
					if !seen {
						a.f = e.a
					}
					a.l = e.a
					a.n++
					a.s += e.a
					want[id] = a
				}
			}
			got := map[string]agg{}
			lastEnd := map[string]int64{}
			for _, line := range f.emitted {
				_, rest, _ := strings.Cut(line, " ")
				v, err := ParseJSON([]byte(rest))
				if err != nil {
					t.Fatal(err)
				}
				m := v.(map[string]any)
				k, end := m["key"].(string), int64(m["window_end"].(int))
				id := fmt.Sprintf("%s/%d/%d", k, m["window_start"], end)
				if _, dup := got[id]; dup {
					t.Errorf("window %s emitted twice", id)
				}
				if end <= lastEnd[k] {
					t.Errorf("window %s after one ending at %d", id, lastEnd[k])
				}
				lastEnd[k] = end
				got[id] = agg{m["f"].(int), m["l"].(int), m["n"].(int), m["s"].(int)}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%d windows, want %d", len(got), len(want))
				for id, w := range want {
					if got[id] != w {
						t.Errorf("%s: %+v, want %+v", id, got[id], w)
						break
					}
				}
			}
		})
	}
}

// A subtask restored from a snapshot taken mid-window (state, timers and
// watermark, as a checkpoint keeps them) emits what one that never
// stopped does.
func TestCumulateRestoreMidWindow(t *testing.T) {
	for _, c := range []WindowConfig{
		{Size: 10 * time.Second, Step: 2 * time.Second},
		{Size: 10 * time.Second, Step: 2 * time.Second, AllowedLateness: 3 * time.Second},
	} {
		t.Run(c.describe(), func(t *testing.T) {
			c.Fields = cumFields
			evs, wms := cumInput(5, 1200, 4_000)
			run := func(stopAt int) []string {
				f, tm := newFake(t, c)
				for i, e := range evs {
					if i == stopAt {
						snap, err := f.rt.Snapshot()
						if err != nil {
							t.Fatal(err)
						}
						g, gtm := newFake(t, c)
						if err := g.rt.Restore(snap); err != nil {
							t.Fatal(err)
						}
						for k, ts := range f.timers {
							g.timers[k] = maps.Clone(ts)
						}
						g.wm, g.emitted = f.wm, f.emitted
						f, tm = g, gtm
					}
					// Late records a few times, to re-emit with lateness.
					if i%100 == 99 {
						cumFeed(t, f, tm, e.k, wms[i]-5_000, 1)
					}
					cumFeed(t, f, tm, e.k, e.ts, e.a)
					f.advance(t, tm, wms[i])
				}
				f.advance(t, tm, 1<<62)
				return f.emitted
			}
			want := run(-1)
			if len(want) < 100 {
				t.Fatalf("only %d results", len(want))
			}
			for _, at := range []int{1, 333, 600, 1111} {
				if got := run(at); !reflect.DeepEqual(got, want) {
					t.Errorf("restored before record %d: %d results, want %d", at, len(got), len(want))
					for i := range min(len(got), len(want)) {
						if got[i] != want[i] {
							t.Errorf("first difference at %d: %s, want %s", i, got[i], want[i])
							break
						}
					}
				}
			}
		})
	}
}

func TestCumulateValidation(t *testing.T) {
	fields := map[string]string{"n": "count()"}
	for _, tc := range []struct {
		c    WindowConfig
		want string
	}{
		{WindowConfig{Size: 10 * time.Minute, Step: 3 * time.Minute}, "step 3m does not divide size 10m into whole steps of milliseconds: cumulate windows grow by step up to size; choose a step that does, such as 1m"},
		{WindowConfig{Size: time.Minute, Step: 2 * time.Minute}, "step 2m is longer than size 1m"},
		{WindowConfig{Step: time.Minute}, "size is missing"},
		{WindowConfig{Size: 10 * time.Minute, Step: time.Minute, Slide: time.Minute}, "step makes cumulate windows and cannot go with slide"},
		{WindowConfig{Gap: 10 * time.Minute, Step: time.Minute}, "gap makes session windows and cannot go with size, slide or step"},
		{WindowConfig{Size: 10 * time.Minute, Step: -time.Minute}, "must not be negative"},
		{WindowConfig{Size: 10 * time.Millisecond, Step: 500 * time.Microsecond}, "step must be at least 1ms"},
		{WindowConfig{Size: 3 * time.Millisecond, Step: 1500 * time.Microsecond}, "such as 1ms"},
		{WindowConfig{Size: 24 * time.Hour, Step: 7 * time.Hour}, "such as 1h"},
		{WindowConfig{Size: 10 * time.Minute, Step: time.Minute, EarlyFiring: time.Second}, "early-firing does not go with step"},
	} {
		tc.c.Fields = fields
		_, err := tc.c.operator(nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.c, err, tc.want)
		}
	}
	c := WindowConfig{Key: "value.u", Time: "timestamp", Size: 10 * time.Minute, Step: time.Minute, Fields: fields}
	if _, err := c.operator(nil); err != nil {
		t.Fatal(err)
	}
	if got, want := c.describe(), "window by value.u, cumulate windows up to 10m every 1m over timestamp: n = count()"; got != want {
		t.Errorf("describe: %q, want %q", got, want)
	}
}

// Cumulate state survives its codec; damaged bytes are refused.
func TestCumCodec(t *testing.T) {
	cs := CumState{Start: -60_000, End: 60_000, Seq: 9,
		Base: CumPart{WinState: WinState{Start: -60_000, End: -20_000, Accs: []Acc{{N: 3, I: -9}, {N: 1, V: "a"}}, Distinct: [][]string{nil, {"x"}}}, First: 1, Last: 7},
		Steps: []CumPart{
			{WinState: WinState{Start: 0, End: 20_000, Accs: []Acc{{N: 1, Float: true, F: 1.5}, {N: 1, V: 2}}}, First: 8, Last: 8},
			{WinState: WinState{Start: 20_000, End: 40_000, Accs: []Acc{{}, {}}}, First: 9, Last: 9},
		}}
	b := cumCodec{}.Append(nil, cs)
	back, err := cumCodec{}.Decode(b)
	if err != nil || !reflect.DeepEqual(back, cs) {
		t.Fatalf("round trip: %+v, %v\nwant %+v", back, err, cs)
	}
	for i := range b {
		if _, err := (cumCodec{}).Decode(b[:i]); err == nil {
			t.Fatalf("a cumulate state cut to %d of %d bytes decoded", i, len(b))
		}
	}
	if _, err := (cumCodec{}).Decode(append(b, 0)); err == nil {
		t.Error("a cumulate state with a byte after it decoded")
	}
}

// The cumulate statements of the window step's docs (windowSpec.Doc,
// docs/operators.md), pinned: with size 10m and step 1m a record of
// 10:03:20 is in [10:00, 10:04) … [10:00, 10:10), and [10:00, 10:04)
// fires at 10:03:59.999 without a record of 10:04:30 that came before it.
func TestCumulateSemanticsAsDocumented(t *testing.T) {
	const tenOClock = 1796119200000 // 2026-12-01 10:00:00 UTC
	const minute = 60_000
	got := (shape{size: 10 * minute, step: minute}).assign(tenOClock + 3*minute + 20_000)
	if len(got) != 7 || got[0] != (span{tenOClock, tenOClock + 4*minute}) || got[6] != (span{tenOClock, tenOClock + 10*minute}) {
		t.Errorf("windows of 10:03:20: %v, want [10:00, 10:04) … [10:00, 10:10)", got)
	}
	f, tm := newFake(t, WindowConfig{Size: 10 * time.Minute, Step: time.Minute, Fields: cumFields})
	cumFeed(t, f, tm, "u", tenOClock+3*minute+20_000, 1)
	cumFeed(t, f, tm, "u", tenOClock+4*minute+30_000, 2)
	f.advance(t, tm, tenOClock+4*minute-2)
	if len(f.emitted) != 0 {
		t.Fatalf("fired before 10:03:59.999: %q", f.emitted)
	}
	f.advance(t, tm, tenOClock+4*minute-1)
	if want := []string{`u@1796119439999 {"f":1,"key":"u","l":1,"n":1,"s":1,"window_end":1796119440000,"window_start":1796119200000}`}; !reflect.DeepEqual(f.emitted, want) {
		t.Errorf("at 10:03:59.999: %q, want %q", f.emitted, want)
	}
}
