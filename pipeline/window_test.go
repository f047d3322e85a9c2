package pipeline

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/state"
)

func TestAssign(t *testing.T) {
	for _, tc := range []struct {
		sh   shape
		ts   int64
		want []span
	}{
		{shape{size: 60}, 0, []span{{0, 60}}},
		{shape{size: 60}, 59, []span{{0, 60}}},
		{shape{size: 60}, 60, []span{{60, 120}}},
		{shape{size: 60}, -1, []span{{-60, 0}}},
		{shape{size: 60, slide: 20}, 65, []span{{20, 80}, {40, 100}, {60, 120}}},
		{shape{size: 60, slide: 20}, 60, []span{{20, 80}, {40, 100}, {60, 120}}},
		{shape{size: 60, slide: 20}, 59, []span{{0, 60}, {20, 80}, {40, 100}}},
		{shape{gap: 30}, 100, []span{{100, 130}}},
		// An offset moves the windows later.
		{shape{size: 60, offset: 15}, 14, []span{{-45, 15}}},
		{shape{size: 60, offset: 15}, 15, []span{{15, 75}}},
		{shape{size: 60, offset: 15}, 74, []span{{15, 75}}},
		{shape{size: 60, slide: 20, offset: 5}, 65, []span{{25, 85}, {45, 105}, {65, 125}}},
		{shape{size: 60, slide: 20, offset: 5}, 64, []span{{5, 65}, {25, 85}, {45, 105}}},
	} {
		if got := tc.sh.assign(tc.ts); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%+v.assign(%d) = %v, want %v", tc.sh, tc.ts, got, tc.want)
		}
	}
}

// fakeTime drives a windower the way the engine does: per key its
// timers, a watermark, and the emitted results.
type fakeTime struct {
	rt      *state.Runtime
	wm      int64
	key     string
	timers  map[string]map[int64]bool
	emitted []string
	forward int
	// processing time and timers
	now     int64
	ptimers map[string]map[int64]bool
}

func (f *fakeTime) Watermark() int64                { return f.wm }
func (f *fakeTime) RegisterEventTimeTimer(at int64) { f.timers[f.key][at] = true }
func (f *fakeTime) DeleteEventTimeTimer(at int64)   { delete(f.timers[f.key], at) }
func (f *fakeTime) Forward()                        { f.forward++ }
func (f *fakeTime) ProcessingTime() int64           { return f.now }
func (f *fakeTime) RegisterProcessingTimeTimer(at int64) {
	if f.ptimers[f.key] == nil {
		f.ptimers[f.key] = map[int64]bool{}
	}
	f.ptimers[f.key][at] = true
}

func (f *fakeTime) DeleteProcessingTimeTimer(at int64) { delete(f.ptimers[f.key], at) }

// tick moves processing time to now, firing due processing-time timers.
func (f *fakeTime) tick(t *testing.T, tm Timed, now int64) {
	t.Helper()
	f.now = now
	for _, k := range sortedKeys(f.ptimers) {
		for _, at := range slices.Sorted(maps.Keys(f.ptimers[k])) {
			if at > now {
				continue
			}
			delete(f.ptimers[k], at)
			f.setKey(k)
			if err := tm.OnProcessingTimer(k, at, f, f); err != nil {
				t.Fatal(err)
			}
		}
	}
}
func (f *fakeTime) Emit(key, value []byte, ts int64) {
	f.emitted = append(f.emitted, fmt.Sprintf("%s@%d %s", key, ts, value))
}

// EmitRetraction records a retraction as an emitted record marked -D.
func (f *fakeTime) EmitRetraction(key, value []byte, ts int64) {
	f.emitted = append(f.emitted, fmt.Sprintf("-D %s@%d %s", key, ts, value))
}

func (f *fakeTime) setKey(k string) {
	f.key = k
	f.rt.SetKey(k)
	if f.timers[k] == nil {
		f.timers[k] = map[int64]bool{}
	}
}

// advance moves the watermark to wm, firing due timers in time order.
func (f *fakeTime) advance(t *testing.T, tm Timed, wm int64) {
	t.Helper()
	f.advanceB(t, tm, wm)
}

func (f *fakeTime) advanceB(t testing.TB, tm Timed, wm int64) {
	t.Helper()
	for {
		var best int64
		bestKey := ""
		for k, ts := range f.timers {
			for at := range ts {
				if at <= wm && (bestKey == "" || at < best || at == best && k < bestKey) {
					best, bestKey = at, k
				}
			}
		}
		if bestKey == "" {
			break
		}
		delete(f.timers[bestKey], best)
		f.wm = best
		f.setKey(bestKey)
		if err := tm.OnTimer(bestKey, best, f, f); err != nil {
			t.Fatal(err)
		}
	}
	f.wm = wm
}

func newFake(t *testing.T, c WindowConfig) (*fakeTime, Timed) {
	t.Helper()
	op, err := c.operator(nil)
	if err != nil {
		t.Fatal(err)
	}
	rt := state.NewRuntime(0, 127, 128, nil, nil)
	tm := op.Timed(rt.Store())
	rt.Seal()
	return &fakeTime{rt: rt, wm: -1 << 62, timers: map[string]map[int64]bool{}, ptimers: map[string]map[int64]bool{}}, tm
}

// feed hands the windower a record with key k at time ts and amount a.
func (f *fakeTime) feed(t *testing.T, tm Timed, k string, ts int64, a float64) {
	t.Helper()
	f.setKey(k)
	r := &handle[krec]{acc: &kAccess, group: k, prep: winPrep{ts: ts, inputs: []any{nil, a}}}
	if err := tm.OnRecord(r, f, f); err != nil {
		t.Fatal(err)
	}
}

func TestTumblingWindows(t *testing.T) {
	f, tm := newFake(t, WindowConfig{Size: time.Minute, Fields: map[string]string{"n": "count()", "s": "sum(value.a)"}})
	f.feed(t, tm, "u", 1_000, 1)
	f.feed(t, tm, "u", 59_999, 2)
	f.feed(t, tm, "v", 30_000, 5)
	f.feed(t, tm, "u", 60_000, 4)
	f.advance(t, tm, 59_998)
	if len(f.emitted) != 0 {
		t.Fatalf("emitted before the window's end: %q", f.emitted)
	}
	f.advance(t, tm, 59_999)
	want := []string{
		`u@59999 {"key":"u","n":2,"s":3,"window_end":60000,"window_start":0}`,
		`v@59999 {"key":"v","n":1,"s":5,"window_end":60000,"window_start":0}`,
	}
	if !reflect.DeepEqual(f.emitted, want) {
		t.Errorf("%q\nwant %q", f.emitted, want)
	}
	// A late record (no lateness) is late: not counted, forwarded to the
	// late output by the caller.
	f.feed(t, tm, "u", 10, 100)
	if f.forward != 0 || len(f.emitted) != 2 {
		t.Errorf("late record: forward %d, emitted %q", f.forward, f.emitted)
	}
	f.advance(t, tm, 1<<62)
	if got := f.emitted[2]; got != `u@119999 {"key":"u","n":1,"s":4,"window_end":120000,"window_start":60000}` {
		t.Errorf("second window %q", got)
	}
}

func TestAllowedLatenessReemits(t *testing.T) {
	f, tm := newFake(t, WindowConfig{Size: time.Minute, AllowedLateness: 30 * time.Second, LateTopic: "late", Fields: map[string]string{"n": "count()", "s": "sum(value.a)"}})
	f.feed(t, tm, "u", 1_000, 1)
	f.advance(t, tm, 70_000)
	f.feed(t, tm, "u", 2_000, 2) // late, within the lateness: re-emitted
	f.advance(t, tm, 89_999)     // the window's state is dropped now
	f.feed(t, tm, "u", 3_000, 4) // too late
	want := []string{
		`u@59999 {"key":"u","n":1,"s":1,"window_end":60000,"window_start":0}`,
		`u@59999 {"key":"u","n":2,"s":3,"window_end":60000,"window_start":0}`,
	}
	if !reflect.DeepEqual(f.emitted, want) || f.forward != 1 {
		t.Errorf("%q, forwarded %d\nwant %q, forwarded 1", f.emitted, f.forward, want)
	}
	if len(f.timers["u"]) != 0 {
		t.Errorf("timers left: %v", f.timers["u"])
	}
	f.setKey("u")
	if n := countWindows(t, tm, f); n != 0 {
		t.Errorf("%d windows left in state after their lateness", n)
	}
}

// With early firing an open window emits its figures so far, when it
// changed, every interval of processing time; the close emits the final
// result.
func TestEarlyFiring(t *testing.T) {
	f, tm := newFake(t, WindowConfig{Size: time.Minute, EarlyFiring: 10 * time.Second, Fields: map[string]string{"n": "count()"}})
	f.now = 1_000
	f.feed(t, tm, "u", 1_000, 1)
	f.feed(t, tm, "u", 2_000, 1)
	f.tick(t, tm, 10_000) // early: 2 so far
	f.tick(t, tm, 20_000) // nothing changed: nothing
	f.feed(t, tm, "u", 3_000, 1)
	f.tick(t, tm, 30_000) // early: 3
	f.advance(t, tm, 59_999)
	f.tick(t, tm, 40_000) // closed: no more early results
	want := []string{
		`u@59999 {"final":false,"key":"u","n":2,"window_end":60000,"window_start":0}`,
		`u@59999 {"final":false,"key":"u","n":3,"window_end":60000,"window_start":0}`,
		`u@59999 {"final":true,"key":"u","n":3,"window_end":60000,"window_start":0}`,
	}
	if !reflect.DeepEqual(f.emitted, want) {
		t.Errorf("%q\nwant %q", f.emitted, want)
	}
}

// A window whose first record comes after its end (within the lateness)
// emits at once and is still dropped when its lateness runs out.
func TestLateFirstRecordWindowIsDropped(t *testing.T) {
	f, tm := newFake(t, WindowConfig{Size: time.Minute, AllowedLateness: 30 * time.Second, Fields: map[string]string{"n": "count()"}})
	f.feed(t, tm, "u", 65_000, 1)
	f.advance(t, tm, 70_000)
	f.feed(t, tm, "u", 2_000, 1) // window [0, 60000) never had a record
	if want := `u@59999 {"key":"u","n":1,"window_end":60000,"window_start":0}`; len(f.emitted) != 1 || f.emitted[0] != want {
		t.Fatalf("emitted %q, want %q", f.emitted, want)
	}
	f.advance(t, tm, 1<<62)
	if len(f.timers["u"]) != 0 {
		t.Errorf("timers left: %v", f.timers["u"])
	}
	f.setKey("u")
	if n := countWindows(t, tm, f); n != 0 {
		t.Errorf("%d bytes of windows left in state after their lateness", n)
	}
}

// A figure read back from keyed state keeps integers exact.
func TestAccRoundTrip(t *testing.T) {
	a := Acc{N: 3, V: 1 << 60}
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var back Acc
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.N != 3 || back.V != any(1<<60) {
		t.Errorf("round trip of %+v: %+v (%T)", a, back, back.V)
	}
}

// countWindows counts the current key's windows in state.
func countWindows(t *testing.T, tm Timed, f *fakeTime) int {
	t.Helper()
	snap, err := f.rt.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, b := range snap {
		n += len(b)
	}
	return n
}

func TestSessionWindows(t *testing.T) {
	f, tm := newFake(t, WindowConfig{Gap: 10 * time.Second, Fields: map[string]string{"n": "count()", "s": "sum(value.a)"}})
	f.feed(t, tm, "u", 0, 1)
	f.feed(t, tm, "u", 25_000, 2) // a second session
	f.feed(t, tm, "u", 8_000, 4)  // extends the first: [0, 18000)
	f.feed(t, tm, "u", 16_000, 8) // bridges them: [0, 35000)
	f.feed(t, tm, "u", 50_000, 8) // a third
	f.advance(t, tm, 1<<62)
	want := []string{
		`u@34999 {"key":"u","n":4,"s":15,"window_end":35000,"window_start":0}`,
		`u@59999 {"key":"u","n":1,"s":8,"window_end":60000,"window_start":50000}`,
	}
	if !reflect.DeepEqual(f.emitted, want) {
		t.Errorf("%q\nwant %q", f.emitted, want)
	}
}

// Windows over random out-of-order input, with a watermark that trails
// by a bound, match a brute-force computation from the input.
func TestWindowsMatchBruteForce(t *testing.T) {
	for _, c := range []WindowConfig{
		{Size: 10 * time.Second},
		{Size: 10 * time.Second, Slide: 5 * time.Second},
		{Gap: 3 * time.Second},
		{Size: 10 * time.Second, AllowedLateness: 5 * time.Second},
	} {
		t.Run(c.describe(), func(t *testing.T) {
			c.Fields = map[string]string{"n": "count()", "s": "sum(value.a)"}
			rng := rand.New(rand.NewPCG(1, uint64(c.Size+c.Gap+c.Slide)))
			f, tm := newFake(t, c)
			type ev struct {
				k  string
				ts int64
				a  int
			}
			var evs []ev
			const bound = 4_000
			maxTS := int64(0)
			for i := 0; i < 3000; i++ {
				base := int64(i) * 97
				ts := base - rng.Int64N(bound) // out of order by up to bound
				if ts < 0 {
					ts = 0
				}
				e := ev{fmt.Sprint("k", rng.IntN(5)), ts, rng.IntN(10)}
				evs = append(evs, e)
				f.feed(t, tm, e.k, e.ts, float64(e.a))
				maxTS = max(maxTS, ts)
				f.advance(t, tm, maxTS-bound-1)
			}
			f.advance(t, tm, 1<<62)
			// Brute force: every record is on time (it trails the
			// highest timestamp by less than the bound).
			type agg struct{ n, s int }
			want := map[string]agg{}
			if c.Gap > 0 {
				byKey := map[string][]ev{}
				for _, e := range evs {
					byKey[e.k] = append(byKey[e.k], e)
				}
				for k, es := range byKey {
					sort.Slice(es, func(i, j int) bool { return es[i].ts < es[j].ts })
					start, end := es[0].ts, es[0].ts+c.Gap.Milliseconds()
					cur := agg{}
					for _, e := range es {
						if e.ts >= end {
							want[fmt.Sprintf("%s/%d/%d", k, start, end)] = cur
							start, cur = e.ts, agg{}
						}
						end = max(end, e.ts+c.Gap.Milliseconds())
						cur.n++
						cur.s += e.a
					}
					want[fmt.Sprintf("%s/%d/%d", k, start, end)] = cur
				}
			} else {
				sh, _ := c.shape()
				for _, e := range evs {
					for _, s := range sh.assign(e.ts) {
						id := fmt.Sprintf("%s/%d/%d", e.k, s.Start, s.End)
						a := want[id]
						a.n++
						a.s += e.a
						want[id] = a
					}
				}
			}
			got := map[string]agg{}
			for _, line := range f.emitted {
				var k, rest string
				if _, err := fmt.Sscanf(line, "%s %s", &k, &rest); err != nil {
					t.Fatal(err)
				}
				v, err := ParseJSON([]byte(rest))
				if err != nil {
					t.Fatal(err)
				}
				m := v.(map[string]any)
				n, s := m["n"].(int), int(toFloat(m["s"]))
				id := fmt.Sprintf("%s/%d/%d", m["key"], m["window_start"], m["window_end"])
				if _, dup := got[id]; dup {
					t.Errorf("window %s emitted twice", id)
				}
				got[id] = agg{n, s}
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

// The window result's hand-written JSON is what EncodeJSON writes.
func TestWindowJSONMatchesEncodeJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	values := []any{int64(0), int64(-7), int64(1 << 62), 0, 42, 0.0, 1.5, -2.25, 1e-7, 3.3e-12, 1e21, 1.2345e300, 5e-324,
		"", "plain", `quo"te`, "back\\slash", "<tag>&", "tab\there", "ünï", "\u2028", nil, true, []any{1, "a"}, map[string]any{"b": 1, "a": 2}}
	for i := 0; i < 2000; i++ {
		values = append(values, rng.NormFloat64()*math.Pow(10, float64(rng.IntN(60)-30)), rng.Int64()-rng.Int64())
	}
	for _, v := range values {
		want, err := EncodeJSON(v)
		got, gerr := appendJSONValue(nil, v)
		if err != nil || gerr != nil || string(got) != string(want) {
			t.Errorf("%#v: wrote %s (%v), EncodeJSON %s (%v)", v, got, gerr, want, err)
		}
	}
	for _, bad := range []float64{math.NaN(), math.Inf(1)} {
		if _, err := appendJSONValue(nil, bad); err == nil {
			t.Errorf("%v written as JSON", bad)
		}
	}
}

// Window state survives its codec: every kind of figure, distinct sets,
// flags; damaged bytes are refused.
func TestWinCodec(t *testing.T) {
	ws := WinState{Start: -60_000, End: 1 << 40, Fired: true, Dirty: true,
		Accs: []Acc{{N: 3, I: -9}, {N: 2, Float: true, F: 1.5}, {N: 1, V: 7}, {N: 1, V: 2.5}, {N: 1, V: "ünï"},
			{N: 1, V: true}, {N: 1, V: false}, {N: 1, V: []any{1, "a"}}, {N: 1, V: map[string]any{"x": 1}}},
		Distinct: [][]string{nil, {"a", "b"}}}
	b := winCodec{}.Append(nil, ws)
	back, err := winCodec{}.Decode(b)
	if err != nil || !reflect.DeepEqual(back, ws) {
		t.Fatalf("round trip: %+v, %v\nwant %+v", back, err, ws)
	}
	for i := range b {
		if _, err := (winCodec{}).Decode(b[:i]); err == nil {
			t.Fatalf("a window state cut to %d of %d bytes decoded", i, len(b))
		}
	}
}

// An aggregate's figure survives its codec, every kind of figure; damaged
// bytes are refused; a figure written as JSON before the codec (how
// keyed state of earlier builds holds it) still decodes.
func TestAccCodec(t *testing.T) {
	for _, a := range []Acc{{}, {N: 3, I: -9}, {N: 2, Float: true, F: 1.5}, {N: 1, V: 7}, {N: 1, V: 2.5}, {N: 1, V: "ünï"},
		{N: 1, V: true}, {N: 1, V: false}, {N: 1, V: []any{1, "a"}}, {N: 1, V: map[string]any{"x": 1}}} {
		b := accCodec{}.Append(nil, a)
		back, err := accCodec{}.Decode(b)
		if err != nil || !reflect.DeepEqual(back, a) {
			t.Fatalf("round trip of %+v: %+v, %v", a, back, err)
		}
		for i := range b {
			if _, err := (accCodec{}).Decode(b[:i]); err == nil {
				t.Fatalf("%+v cut to %d of %d bytes decoded", a, i, len(b))
			}
		}
		if _, err := (accCodec{}).Decode(append(b, 0)); err == nil {
			t.Fatalf("%+v with a byte more decoded", a)
		}
		old, err := state.DefaultCodec[Acc]().Decode(state.DefaultCodec[Acc]().Append(nil, a))
		if err != nil {
			t.Fatal(err)
		}
		js := state.DefaultCodec[Acc]().Append(nil, a)
		if back, err := (accCodec{}).Decode(js); err != nil || !reflect.DeepEqual(back, old) {
			t.Fatalf("JSON %s decodes to %+v, %v; want %+v", js, back, err, old)
		}
	}
}

// Each statement of the window step's docs (windowSpec.Doc,
// docs/operators.md) about where windows start, which records share a
// session and when a window fires, pinned.
func TestWindowSemanticsAsDocumented(t *testing.T) {
	const tenOClock = 1796119200000 // 2026-12-01 10:00:00 UTC
	// Tumbling windows start at multiples of size from the Unix epoch:
	// 1m windows at whole minutes (UTC), 90s windows at multiples of
	// 90 s since 1970-01-01 00:00 UTC.
	if got := (shape{size: 60_000}).assign(tenOClock + 30_500); !reflect.DeepEqual(got, []span{{tenOClock, tenOClock + 60_000}}) {
		t.Errorf("1m window of 10:00:30.5: %v, want [10:00, 10:01)", got)
	}
	if got := (shape{size: 90_000}).assign(tenOClock + 60_000); !reflect.DeepEqual(got, []span{{tenOClock, tenOClock + 90_000}}) {
		t.Errorf("90s window of 10:01:00: %v, want [10:00:00, 10:01:30): windows start at multiples of 90s from the epoch, not at the record", got)
	}
	// Sliding windows start at multiples of slide; a record is in
	// size/slide of them.
	if got := (shape{size: 60_000, slide: 20_000}).assign(tenOClock + 5_000); len(got) != 3 || got[0].Start%20_000 != 0 || got[2].Start != tenOClock {
		t.Errorf("sliding 1m every 20s at 10:00:05: %v", got)
	}
	// Sessions: records less than gap apart share a session; exactly gap
	// apart they do not. window_end is the last record's time + gap.
	f, tm := newFake(t, WindowConfig{Gap: 10 * time.Second, Fields: map[string]string{"n": "count()"}})
	f.feed(t, tm, "a", 0, 1)
	f.feed(t, tm, "a", 9_999, 1) // 1 ms less than gap: the same session
	f.feed(t, tm, "b", 0, 1)
	f.feed(t, tm, "b", 10_000, 1) // exactly gap: a new session
	// A window fires when the watermark reaches window_end - 1 (its last
	// millisecond), not before.
	f.advance(t, tm, 9_998)
	if len(f.emitted) != 0 {
		t.Fatalf("fired before the watermark reached window_end - 1: %q", f.emitted)
	}
	f.advance(t, tm, 9_999)
	if want := []string{`b@9999 {"key":"b","n":1,"window_end":10000,"window_start":0}`}; !reflect.DeepEqual(f.emitted, want) {
		t.Fatalf("at watermark 9999: %q, want %q", f.emitted, want)
	}
	f.advance(t, tm, 1<<62)
	want := []string{
		`b@9999 {"key":"b","n":1,"window_end":10000,"window_start":0}`,
		`a@19998 {"key":"a","n":2,"window_end":19999,"window_start":0}`,
		`b@19999 {"key":"b","n":1,"window_end":20000,"window_start":10000}`,
	}
	if !reflect.DeepEqual(f.emitted, want) {
		t.Errorf("%q\nwant %q", f.emitted, want)
	}
}

// A window offset: whole milliseconds less than the size (the slide of
// sliding windows), for tumbling and sliding windows only; the windows
// fire at their shifted ends.
func TestWindowOffset(t *testing.T) {
	for _, tc := range []struct {
		c    WindowConfig
		want string
	}{
		{WindowConfig{Size: time.Minute, Offset: time.Minute}, "offset 1m must be whole milliseconds less than size 1m"},
		{WindowConfig{Size: time.Minute, Slide: 10 * time.Second, Offset: 15 * time.Second}, "offset 15s must be whole milliseconds less than slide 10s"},
		{WindowConfig{Gap: time.Minute, Offset: time.Second}, "offset goes with tumbling and sliding windows only"},
		{WindowConfig{Size: time.Minute, Step: 10 * time.Second, Offset: time.Second}, "offset goes with tumbling and sliding windows only"},
		{WindowConfig{Size: time.Minute, Offset: -time.Second}, "must not be negative"},
	} {
		tc.c.Fields = map[string]string{"n": "count()"}
		if _, err := tc.c.operator(nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.c, err, tc.want)
		}
	}
	f, tm := newFake(t, WindowConfig{Size: time.Minute, Offset: 15 * time.Second, Fields: map[string]string{"n": "count()", "s": "sum(value.a)"}})
	f.feed(t, tm, "u", 14_999, 1)
	f.feed(t, tm, "u", 15_000, 2)
	f.feed(t, tm, "u", 74_999, 4)
	f.advance(t, tm, 1<<62)
	want := []string{
		`u@14999 {"key":"u","n":1,"s":1,"window_end":15000,"window_start":-45000}`,
		`u@74999 {"key":"u","n":2,"s":6,"window_end":75000,"window_start":15000}`,
	}
	if !reflect.DeepEqual(f.emitted, want) {
		t.Errorf("%q\nwant %q", f.emitted, want)
	}
}
