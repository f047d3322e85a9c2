package pipeline

import (
	"encoding/json"
	"github.com/onceflow/onceflow/flow"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// procFeed hands a processing-time window step a record of key k at the
// fake clock's time (the prepared time is ignored).
func procFeed(t *testing.T, f *fakeTime, tm Timed, k string) {
	t.Helper()
	f.setKey(k)
	r := &handle[krec]{acc: &kAccess, group: k, prep: winPrep{ts: -12345, inputs: []any{nil}}}
	if err := tm.OnRecord(r, f, f); err != nil {
		t.Fatal(err)
	}
}

// A processing-time window holds the records handled while the clock is
// inside it and fires on the processing-time timer at its end, not on the
// watermark; the key's end-of-input timer goes with its last window.
func TestProcessingTimeWindows(t *testing.T) {
	f, tm := newFake(t, WindowConfig{Time: ProcessingTime, Size: time.Minute, Fields: map[string]string{"n": "count()"}})
	f.now = 1_000
	procFeed(t, f, tm, "u")
	procFeed(t, f, tm, "v")
	f.now = 59_999
	procFeed(t, f, tm, "u")
	f.advance(t, tm, 1<<40) // the watermark does not fire them
	f.tick(t, tm, 59_999)
	if len(f.emitted) != 0 {
		t.Fatalf("emitted before the clock reached the windows' end: %q", f.emitted)
	}
	f.tick(t, tm, 60_000)
	want := []string{
		`u@59999 {"key":"u","n":2,"window_end":60000,"window_start":0}`,
		`v@59999 {"key":"v","n":1,"window_end":60000,"window_start":0}`,
	}
	if !reflect.DeepEqual(f.emitted, want) {
		t.Fatalf("%q\nwant %q", f.emitted, want)
	}
	if len(f.timers["u"])+len(f.timers["v"]) != 0 {
		t.Errorf("end-of-input timers left for keys without windows: %v", f.timers)
	}
	f.now = 60_000
	procFeed(t, f, tm, "u")
	if !f.timers["u"][math.MaxInt64] || !f.ptimers["u"][120_000] {
		t.Errorf("timers %v, processing-time timers %v: want the end-of-input timer and one at 120000", f.timers, f.ptimers)
	}
	// The end of a bounded input fires the open window at once.
	f.advance(t, tm, math.MaxInt64)
	if got := f.emitted[2:]; !reflect.DeepEqual(got, []string{`u@119999 {"key":"u","n":1,"window_end":120000,"window_start":60000}`}) {
		t.Errorf("at the end of input: %q", got)
	}
	if len(f.ptimers["u"]) != 0 {
		t.Errorf("processing-time timers left after the end of input: %v", f.ptimers["u"])
	}
	f.setKey("u")
	if n := countWindows(t, tm, f); n != 0 {
		t.Errorf("%d windows left in state", n)
	}
}

func TestProcessingTimeValidation(t *testing.T) {
	for _, tc := range []struct {
		c    WindowConfig
		want string
	}{
		{WindowConfig{AllowedLateness: time.Second}, "allowed-lateness does not go with time: processing"},
		{WindowConfig{LateTopic: "late"}, "late-topic does not go with time: processing"},
		{WindowConfig{EarlyFiring: time.Second}, "early-firing does not go with time: processing"},
	} {
		tc.c.Time, tc.c.Size, tc.c.Fields = ProcessingTime, time.Minute, map[string]string{"n": "count()"}
		if _, err := tc.c.operator(nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.c, err, tc.want)
		}
	}
	if pr := windowProps(Params{"time": ProcessingTime}); pr.EventTime {
		t.Error("a processing-time window asks for event time")
	}
}

// Processing-time windows of every shape, crashed and restored: the
// results committed before a snapshot, and those of a run restored from
// it that handles the records after it again (later, so in other
// windows), count each record exactly once, and no window is emitted
// twice. Without a crash, the same holds with the input's end firing the
// last windows.
func TestProcessingTimeRestore(t *testing.T) {
	for _, c := range []WindowConfig{
		{Size: time.Second},
		{Size: time.Second, Slide: 250 * time.Millisecond},
		{Size: time.Second, Step: 250 * time.Millisecond},
		{Gap: 300 * time.Millisecond},
	} {
		c.Time, c.Fields = ProcessingTime, map[string]string{"n": "count()"}
		t.Run(c.describe(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 4))
			const records = 2_000
			keys := make([]string, records)
			gaps := make([]int64, records)
			for i := range keys {
				keys[i] = string(rune('a' + rng.IntN(5)))
				gaps[i] = int64(rng.IntN(40))
			}
			for _, crashAt := range []int{-1, 1, 700, 1500} {
				f, tm := newFake(t, c)
				var committed []string
				for i := range keys {
					if i == crashAt {
						// A checkpoint here; the run goes on a while,
						// emitting what the crash loses, and a new one
						// restores the checkpoint and handles the records
						// after it again, 5 s later.
						snap, err := f.rt.Snapshot()
						if err != nil {
							t.Fatal(err)
						}
						committed = append(committed, f.emitted...)
						g, gtm := newFake(t, c)
						if err := g.rt.Restore(snap); err != nil {
							t.Fatal(err)
						}
						for k, ts := range f.timers {
							g.timers[k] = maps.Clone(ts)
						}
						for k, ts := range f.ptimers {
							g.ptimers[k] = maps.Clone(ts)
						}
						for j := i; j < min(i+50, records); j++ {
							f.now += gaps[j]
							f.tick(t, tm, f.now)
							procFeed(t, f, tm, keys[j])
						}
						g.now = f.now + 5_000
						f, tm = g, gtm
						f.tick(t, tm, f.now) // the restored timers due now
					}
					f.now += gaps[i]
					f.tick(t, tm, f.now)
					procFeed(t, f, tm, keys[i])
				}
				f.advance(t, tm, math.MaxInt64)
				committed = append(committed, f.emitted...)
				checkProcResults(t, c, committed, keys, crashAt)
			}
		})
	}
}

// checkProcResults checks committed window results against the records
// of keys: each window once, each record counted once (in every window
// of its time for sliding windows, in the full window for cumulate).
func checkProcResults(t *testing.T, c WindowConfig, committed, keys []string, crashAt int) {
	t.Helper()
	want := map[string]int64{}
	for _, k := range keys {
		want[k]++
	}
	got := map[string]int64{}
	seen := map[string]bool{}
	for _, e := range committed {
		_, v, _ := strings.Cut(e, " ")
		var r struct {
			Key        string `json:"key"`
			N          int64  `json:"n"`
			Start, End int64
		}
		if err := json.Unmarshal([]byte(v), &r); err != nil {
			t.Fatal(err)
		}
		var w struct {
			Start int64 `json:"window_start"`
			End   int64 `json:"window_end"`
		}
		_ = json.Unmarshal([]byte(v), &w)
		id := r.Key + "/" + time.Duration(w.Start).String() + "/" + time.Duration(w.End).String()
		if seen[id] {
			t.Errorf("crash at %d: window %s emitted twice", crashAt, id)
		}
		seen[id] = true
		switch {
		case c.Step > 0:
			if w.End-w.Start == c.Size.Milliseconds() {
				got[r.Key] += r.N
			}
		case c.Slide > 0:
			got[r.Key] += r.N * int64(c.Slide) // size/slide windows hold each record
		default:
			got[r.Key] += r.N
		}
	}
	if c.Slide > 0 {
		for k := range got {
			got[k] /= int64(c.Size)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("crash at %d: counts %v, want %v (%d results)", crashAt, got, want, len(committed))
	}
	if len(committed) < 20 {
		t.Errorf("crash at %d: only %d results", crashAt, len(committed))
	}
}

// Through the engine, in a job without event time: a bounded input's end
// fires the open processing-time windows (1h: none fires on the clock in
// the run; 5ms: most do), and each key's counts sum to its records.
func TestProcessingTimeWindowsInAJob(t *testing.T) {
	var in []krec
	want := map[string]int{}
	for i := range 3000 {
		u := "u" + string(rune('0'+i%7))
		in = append(in, krec{Key: u, Value: `{"user":"` + u + `"}`, Topic: "in", Offset: int64(i)})
		want[u]++
	}
	for _, size := range []string{"1h", "5ms"} {
		out, dead, err := runK(t, in, 2, []Step{{Op: "window", Params: Params{"key": "value.user", "time": "processing", "size": dur(size),
			"fields": map[string]string{"n": "count()"}}}}, flow.FailOnError)
		if err != nil || len(dead) > 0 {
			t.Fatalf("size %s: %v, %d dead letters", size, err, len(dead))
		}
		got := map[string]int{}
		windows := map[string]bool{}
		for _, r := range out {
			var v struct {
				Key   string `json:"key"`
				N     int    `json:"n"`
				Start int64  `json:"window_start"`
			}
			if err := json.Unmarshal([]byte(r.Value), &v); err != nil {
				t.Fatal(err)
			}
			got[v.Key] += v.N
			id := v.Key + "@" + time.UnixMilli(v.Start).String()
			if windows[id] {
				t.Errorf("size %s: window %s emitted twice", size, id)
			}
			windows[id] = true
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("size %s: counts %v, want %v", size, got, want)
		}
		t.Logf("size %s: %d window results", size, len(out))
	}
}

func dur(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return d
}
