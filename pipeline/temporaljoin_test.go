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

func newTJ(t *testing.T, kind, lateTopic string) *ijHarness {
	t.Helper()
	late := &atomic.Int64{}
	c := TemporalJoinConfig{LeftKey: "value.k", RightKey: "value.k", LeftTime: "value.t", RightTime: "value.t", Kind: kind, LateTopic: lateTopic}
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

// version hands the join a record of the versioned side: name at ts, or
// with kind a retraction (-U, -D) of key k at ts.
func (h *ijHarness) version(t *testing.T, k string, ts int64, name string, kind RowKind) {
	t.Helper()
	h.setKey(k)
	v := fmt.Sprintf(`{"k":%q,"t":%d,"n":%q}`, k, ts, name)
	rec := krec{Key: k, Value: v}
	if kind.Retracts() {
		rec.Headers = map[string]string{RowKindHeader: kind.String()}
	}
	r := &handle[krec]{acc: &kAccess, rec: rec, group: k}
	p, err := h.op.PrepareRight(r)
	if err != nil {
		t.Fatal(err)
	}
	r.prep = p
	if err := h.fns.OnRight(r, h, h); err != nil {
		t.Fatal(err)
	}
}

// joined are the emitted records as "probe-version" names ("probe-"
// when padded), sorted; emitted is emptied.
func (h *ijHarness) joined(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, e := range h.emitted {
		_, v, _ := strings.Cut(e, " ")
		var j struct {
			Left  struct{ N string }
			Right *struct{ N string }
		}
		if err := json.Unmarshal([]byte(v), &j); err != nil {
			t.Fatalf("joined value %s: %v", v, err)
		}
		s := j.Left.N + "-"
		if j.Right != nil {
			s += j.Right.N
		}
		out = append(out, s)
	}
	h.emitted = nil
	sort.Strings(out)
	return out
}

func TestTemporalJoinPicksTheVersionAtTheProbeTime(t *testing.T) {
	for _, kind := range []string{JoinInner, JoinLeft} {
		h := newTJ(t, kind, "")
		h.advance(t, 0)
		// Versions of a: v10 from 10, v20 from 20, none from 30, v40
		// from 40, updated at 50 (-U then +U at one time: the add wins).
		h.version(t, "a", 20, "v20", RowAdd)
		h.version(t, "a", 10, "v10", RowAdd) // out of order: sorted by time
		h.version(t, "a", 30, "v20", RowDelete)
		h.version(t, "a", 40, "v40", RowAdd)
		h.version(t, "a", 50, "v40", RowUpdateBefore)
		h.version(t, "a", 50, "v50", RowAdd)
		h.version(t, "b", 1, "vb", RowAdd) // another key
		for _, ts := range []int64{5, 10, 15, 20, 29, 30, 35, 40, 49, 50, 60} {
			h.feed(t, true, "a", ts, fmt.Sprint("p", ts))
		}
		h.feed(t, true, "c", 12, "pc") // a key without versions
		if len(h.emitted) != 0 {
			t.Fatalf("%s: emitted before the watermark: %v", kind, h.emitted)
		}
		h.advance(t, 29)
		want := []string{"p10-v10", "p15-v10", "p20-v20", "p29-v20"}
		if kind == JoinLeft {
			want = append(want, "p5-", "pc-")
		}
		sort.Strings(want)
		if got := h.joined(t); !slices.Equal(got, want) {
			t.Errorf("%s, watermark 29: %v, want %v", kind, got, want)
		}
		h.advance(t, 100)
		want = []string{"p40-v40", "p49-v40", "p50-v50", "p60-v50"}
		if kind == JoinLeft {
			want = append(want, "p30-", "p35-")
		}
		sort.Strings(want)
		if got := h.joined(t); !slices.Equal(got, want) {
			t.Errorf("%s, watermark 100: %v, want %v", kind, got, want)
		}
	}
}

func TestTemporalJoinFreesVersionsWithTheWatermark(t *testing.T) {
	h := newTJ(t, JoinInner, "")
	h.advance(t, 0)
	empty := h.stateBytes(t)
	h.version(t, "a", 10, "v10", RowAdd)
	one := h.stateBytes(t)
	for i := int64(2); i <= 50; i++ {
		h.version(t, "a", i*10, fmt.Sprint("v", i*10), RowAdd)
	}
	h.advance(t, 1000)
	if got := h.stateBytes(t); got > one+4 || got <= empty {
		t.Errorf("after 50 versions and the watermark past them: %d bytes, want about one version's %d", got, one)
	}
	h.feed(t, true, "a", 2000, "p")
	h.advance(t, 2000)
	if got := h.joined(t); !slices.Equal(got, []string{"p-v500"}) {
		t.Errorf("probe after the freeing: %v, want [p-v500]", got)
	}
	// A deletion at or before the watermark frees the key altogether.
	h.version(t, "a", 2500, "v500", RowDelete)
	h.advance(t, 3000)
	if got := h.stateBytes(t); got != empty {
		t.Errorf("state after the key's deletion passed the watermark: %d bytes, want %d (empty)", got, empty)
	}
	for k, ts := range h.timers {
		if len(ts) > 0 {
			t.Errorf("key %s still has timers %v", k, ts)
		}
	}
}

func TestTemporalJoinLateRecords(t *testing.T) {
	h := newTJ(t, JoinLeft, "late")
	h.version(t, "a", 10, "v10", RowAdd)
	h.advance(t, 100)
	h.feed(t, true, "a", 100, "late") // at the watermark: late
	h.feed(t, true, "a", 150, "p150")
	// Versions dated at or before the watermark are late too: a
	// deletion at 60 (were it kept, v10 would be freed and v50 below
	// would bring the key back) and a newer row.
	h.version(t, "a", 60, "v10", RowDelete)
	h.version(t, "a", 50, "v50", RowAdd)
	h.advance(t, 200)
	if got := h.joined(t); !slices.Equal(got, []string{"p150-v10"}) {
		t.Errorf("joined %v, want [p150-v10]", got)
	}
	if n := h.late.Load(); n != 3 {
		t.Errorf("late records counted: %d, want 3", n)
	}
	if h.forward != 3 {
		t.Errorf("late records forwarded to late-topic: %d, want 3", h.forward)
	}
}

func TestTemporalJoinRefusesABadKind(t *testing.T) {
	for _, tc := range []struct{ kind, match, want string }{
		{"right", "", `"right": write inner or left`},
		{JoinInner, "value.ok", "left-match is for kind: left"},
	} {
		_, err := TemporalJoinConfig{LeftKey: KeyRecordKey, RightKey: KeyRecordKey, LeftTime: "timestamp", RightTime: "timestamp", Kind: tc.kind, LeftMatch: tc.match}.operator(nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("kind %s: %v, want %q", tc.kind, err, tc.want)
		}
	}
}

// tjEvent is a record of a temporal join test: a probe row or a version.
type tjEvent struct {
	probe bool
	k     string
	ts    int64
	name  string
	kind  RowKind
}

// tjReference is the temporal join of evs computed directly: each
// probe row with the newest version of its key at or before its time
// (of one time, the last given), none when that is a retraction.
func tjReference(evs []tjEvent, outer bool) []string {
	var out []string
	for _, p := range evs {
		if !p.probe {
			continue
		}
		var best *tjEvent
		for i := range evs {
			v := &evs[i]
			if !v.probe && v.k == p.k && v.ts <= p.ts && (best == nil || v.ts >= best.ts) {
				best = v
			}
		}
		switch {
		case best != nil && !best.kind.Retracts():
			out = append(out, p.name+"-"+best.name)
		case outer:
			out = append(out, p.name+"-")
		}
	}
	sort.Strings(out)
	return out
}

// TestTemporalJoinRestoreEmitsNothingTwice: a run cut at a snapshot and
// restored into a new runtime (with its timers) emits, before and after,
// exactly the uncut run's records.
func TestTemporalJoinRestoreEmitsNothingTwice(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	var evs []tjEvent
	for i := range 600 {
		e := tjEvent{probe: rng.Intn(2) == 0, k: fmt.Sprint("k", rng.Intn(5)), ts: int64(i*3 + rng.Intn(20)), name: fmt.Sprint("e", i)}
		if !e.probe && rng.Intn(4) == 0 {
			e.kind = RowDelete
		}
		evs = append(evs, e)
	}
	run := func(h *ijHarness, from, to int) {
		for i := from; i < to; i++ {
			e := evs[i]
			if e.probe {
				h.feed(t, true, e.k, e.ts, e.name)
			} else {
				h.version(t, e.k, e.ts, e.name, e.kind)
			}
			if i%10 == 9 {
				h.advance(t, int64(i*3)-25) // behind every later record
			}
		}
		if to == len(evs) {
			h.advance(t, 1<<40)
		}
	}
	whole := newTJ(t, JoinLeft, "")
	run(whole, 0, len(evs))
	want := whole.joined(t)
	if ref := tjReference(evs, true); !slices.Equal(want, ref) {
		t.Fatalf("uncut run: %d records, the reference %d; they differ:\n%v\nwant\n%v", len(want), len(ref), want, ref)
	}
	padded := 0
	for _, w := range want {
		if strings.HasSuffix(w, "-") {
			padded++
		}
	}
	if len(want) < 250 || padded < 20 || len(want)-padded < 150 {
		t.Fatalf("%d records (%d padded): the test needs more of both", len(want), padded)
	}
	if whole.late.Load() != 0 {
		t.Fatalf("%d late records in a run meant to have none", whole.late.Load())
	}
	first := newTJ(t, JoinLeft, "")
	run(first, 0, 300)
	snap, err := first.rt.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	timers := map[string]map[int64]bool{}
	for k, ts := range first.timers {
		timers[k] = map[int64]bool{}
		for at := range ts {
			timers[k][at] = true
		}
	}
	snapWM := first.wm
	before := first.joined(t)
	run(first, 300, 360) // emitted after the checkpoint: lost with the crash
	second := newTJ(t, JoinLeft, "")
	if err := second.rt.Restore(snap); err != nil {
		t.Fatal(err)
	}
	second.wm, second.timers = snapWM, timers
	run(second, 300, len(evs))
	got := append(before, second.joined(t)...)
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("restored run: %d records, uncut: %d; they differ", len(got), len(want))
	}
}

// TestTemporalJoinInAJob runs temporal-join in the engine at parallelism
// 1 and 3, inner and left: probe rows and versions (updates, deletions,
// probe rows before any version, at a version's exact time, NULL keys)
// from two sources with event time; the result equals tjReference.
func TestTemporalJoinInAJob(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	var probes, versions []krec
	var evs []tjEvent
	var nullProbes []string
	for i := range 300 {
		ts := int64(1000 + i*10)
		k := fmt.Sprint(rng.Intn(6))
		if rng.Intn(3) == 0 {
			kind, name := RowAdd, fmt.Sprintf("v%d", i)
			rec := krec{Key: k, Value: fmt.Sprintf(`{"k":%s,"t":%d,"n":%q}`, k, ts, name)}
			if rng.Intn(4) == 0 {
				kind = RowDelete
				rec.Headers = map[string]string{RowKindHeader: kind.String()}
			}
			versions = append(versions, rec)
			evs = append(evs, tjEvent{k: k, ts: ts, name: name, kind: kind})
			continue
		}
		if rng.Intn(5) == 0 {
			ts -= 10 * int64(rng.Intn(2)) // at the time of the record before
		}
		name := fmt.Sprintf("p%d", i)
		if rng.Intn(15) == 0 {
			probes = append(probes, krec{Key: "x", Value: fmt.Sprintf(`{"k":null,"t":%d,"n":%q}`, ts, name)})
			nullProbes = append(nullProbes, name+"-")
			continue
		}
		probes = append(probes, krec{Key: "x", Value: fmt.Sprintf(`{"k":%s,"t":%d,"n":%q}`, k, ts, name)})
		evs = append(evs, tjEvent{probe: true, k: k, ts: ts, name: name})
	}
	acc := kAccess
	acc.New = func(k, v []byte, ts int64) krec { return krec{Key: string(k), Value: string(v), TS: ts} }
	for _, kind := range []string{JoinInner, JoinLeft} {
		want := tjReference(evs, kind == JoinLeft)
		if kind == JoinLeft {
			want = append(want, nullProbes...)
			sort.Strings(want)
		}
		if len(want) < 80 || len(nullProbes) == 0 {
			t.Fatalf("%s: %d records expected, %d null keys: too few to prove anything", kind, len(want), len(nullProbes))
		}
		for _, p := range []int{1, 3} {
			env := flow.New(flow.JobName("tj"), flow.Parallelism(p), flow.Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			tsOf, err := Timestamps(acc, "value.t")
			if err != nil {
				t.Fatal(err)
			}
			// Each source is one split, listed: it holds event time back
			// until it delivers, so no probe row fires before the
			// versions at or before it came.
			wm := flow.Watermarks[krec]{Timestamp: tsOf, MaxOutOfOrderness: 10 * time.Millisecond,
				Split: func(krec) string { return flowtest.SplitName(0) }}
			var ins []flow.Stream[krec]
			for i, in := range [][]krec{probes, versions} {
				ins = append(ins, flow.From(env, flowtest.NewSource([][]krec{in}), flow.UID(fmt.Sprint("src-", i)), flow.WithWatermarks(wm)))
			}
			step := Step{Op: "temporal-join", Params: Params{"left-key": "value.k", "right-key": "value.k", "kind": kind, "left-time": "value.t", "right-time": "value.t"}}
			s, _, err := BuildFrom(ins, acc, []Step{step}, Env{})
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
				var j struct {
					Left  struct{ N string }
					Right *struct{ N string }
				}
				if err := json.Unmarshal([]byte(r.Value), &j); err != nil {
					t.Fatal(err)
				}
				s := j.Left.N + "-"
				if j.Right != nil {
					s += j.Right.N
				}
				got = append(got, s)
			}
			sort.Strings(got)
			if !slices.Equal(got, want) {
				t.Errorf("%s at parallelism %d: %d records, want %d:\n%v\nwant\n%v", kind, p, len(got), len(want), got, want)
			}
		}
	}
}

// A left temporal join emits a probe row without a key padded with the
// probe's event time as its timestamp, as it does a probe row with a key
// and no version (the step's doc: "timestamp t"), not the record's own
// timestamp (found in review: a SQL join's padded rows of a NULL key
// carried the Kafka timestamp of the orders topic, not order_time).
func TestTemporalJoinPaddedRowWithoutKeyTakesTheProbeTime(t *testing.T) {
	h := newTJ(t, JoinLeft, "")
	h.feed(t, true, "a", 100, "keyed")
	h.advance(t, 100)
	r := &handle[krec]{acc: &kAccess, rec: krec{Value: `{"t":200,"n":"nokey"}`, TS: 999}}
	if err := h.fns.OnNoKey(r, true, h); err != nil {
		t.Fatal(err)
	}
	if len(h.emitted) != 2 || !strings.HasPrefix(h.emitted[0], "a@100 ") || !strings.HasPrefix(h.emitted[1], "@200 ") {
		t.Fatalf("emitted %q; want the keyed probe padded at 100 and the one without a key padded at its time 200, not its record timestamp 999", h.emitted)
	}
}
