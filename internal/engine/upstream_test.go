package engine

import (
	"bytes"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// upstreamFake is a source reader whose input carries its upstream
// tasks' watermark marks.
type upstreamFake struct {
	ups   []string
	marks []UpstreamMark
}

func (u *upstreamFake) Upstreams() []string { return u.ups }

func (u *upstreamFake) TakeMarks() []UpstreamMark {
	m := u.marks
	u.marks = nil
	return m
}

// A source reading a repartition topic takes event time from its
// upstream tasks' marks (docs/design.md, "Scale-out"): it waits for every
// listed task, takes the smallest, leaves idle ones out, ignores its
// records' timestamps, counts records behind it as late, and carries the
// marks through a checkpoint.
func TestWatermarkFromUpstreamMarks(t *testing.T) {
	spec := WatermarkSpec[int64]{Timestamp: func(x int64) int64 { return x }}
	r := &upstreamFake{ups: []string{"in/0", "in/1"}}
	g := newWMGen(spec, r, nil, nil, 0)
	check := func(step string, wantWM int64, wantIdle bool) {
		t.Helper()
		wm, idle := g.current(0)
		if wm != wantWM || idle != wantIdle {
			t.Fatalf("%s: watermark %d idle %v, want %d idle %v", step, wm, idle, wantWM, wantIdle)
		}
		if !idle {
			g.emitted = max(g.emitted, wm)
		}
	}
	// A record far ahead does not move event time: the fast upstream's
	// records must not make the slow one's late.
	if g.record(1_000_000) {
		t.Fatal("a record before any watermark is late")
	}
	check("no marks", NoWatermark, false)
	r.marks = []UpstreamMark{{Upstream: "in/0", Watermark: 500}}
	check("one of two upstreams heard", NoWatermark, false)
	r.marks = []UpstreamMark{{Upstream: "in/1", Watermark: 100}}
	check("both heard", 100, false)
	if g.record(150) {
		t.Fatal("a record after the watermark is late")
	}
	if !g.record(100) {
		t.Fatal("a record at the watermark is not late")
	}
	r.marks = []UpstreamMark{{Upstream: "in/1", Idle: true}}
	check("the slow one idle", 500, false)
	r.marks = []UpstreamMark{{Upstream: "in/0", Idle: true}}
	check("both idle", NoWatermark, true)
	r.marks = []UpstreamMark{{Upstream: "in/1", Watermark: 300}, {Upstream: "in/0", Watermark: 400}}
	check("both back; never below the emitted watermark downstream", 300, false)
	// A task not listed (a partition added since) counts from its first
	// mark.
	r.marks = []UpstreamMark{{Upstream: "in/2", Watermark: 200}}
	if wm, _ := g.current(0); wm != 200 {
		t.Fatalf("a new upstream task at 200: watermark %d, want 200", wm)
	}
	// The checkpoint carries each task's newest mark, also one read since
	// the last look.
	r.marks = []UpstreamMark{{Upstream: "in/2", Watermark: 350}}
	blobs := g.snapshot(map[string][]byte{"pos": {1}})
	pos, times, ups, err := splitEventTime(blobs)
	if err != nil {
		t.Fatal(err)
	}
	if len(pos) != 1 || len(times) != 0 || ups["in/0"].wm != 500 || ups["in/1"].wm != 300 || ups["in/2"].wm != 350 {
		t.Fatalf("restored positions %v, split times %v, upstream watermarks %v", pos, times, ups)
	}
	// A restore resumes from them: without new marks the watermark is
	// the smallest restored one, and a restored task not listed still
	// counts.
	g2 := newWMGen(spec, &upstreamFake{ups: []string{"in/0", "in/1"}}, nil, ups, 0)
	if wm, idle := g2.current(0); wm != 300 || idle {
		t.Fatalf("restored: watermark %d idle %v, want 300", wm, idle)
	}
	if names := slices.Sorted(maps.Keys(g2.ups)); !slices.Equal(names, []string{"in/0", "in/1", "in/2"}) {
		t.Fatalf("restored upstreams %v", names)
	}
	// Idleness goes through a checkpoint too: an idle writer marks
	// again only when its state changes, which may be never, so a
	// restore that forgot it would hold event time back for ever.
	r4 := &upstreamFake{ups: []string{"in/0", "in/1"}}
	g4 := newWMGen(spec, r4, nil, nil, 0)
	r4.marks = []UpstreamMark{{Upstream: "in/0", Watermark: 700}, {Upstream: "in/1", Idle: true}}
	if wm, idle := g4.current(0); wm != 700 || idle {
		t.Fatalf("one idle writer: watermark %d idle %v, want 700", wm, idle)
	}
	_, _, ups4, err := splitEventTime(g4.snapshot(nil))
	if err != nil || !ups4["in/1"].idle || ups4["in/0"].idle {
		t.Fatalf("restored upstreams %+v, %v: want in/1 idle", ups4, err)
	}
	g5 := newWMGen(spec, &upstreamFake{ups: []string{"in/0", "in/1"}}, nil, ups4, 0)
	if wm, idle := g5.current(0); wm != 700 || idle {
		t.Fatalf("restored with an idle writer: watermark %d idle %v, want 700", wm, idle)
	}
	if _, _, _, err := splitEventTime(map[string][]byte{wmUpstreamPrefix + "in/0": {2, 7}}); err == nil {
		t.Fatal("a damaged upstream entry was accepted")
	}
	// Without upstreams the reader's timestamps count as before.
	g3 := newWMGen(spec, &upstreamFake{}, nil, nil, 0)
	g3.record(1000)
	if wm, _ := g3.current(0); wm != 999 {
		t.Fatalf("without upstreams: watermark %d, want 999", wm)
	}
}

// A source reading a repartition topic names the upstream tasks it has
// heard nothing from once it has read records for a while: its windows
// wait for them, and a writer without event time never marks.
func TestSilentUpstreamsWarned(t *testing.T) {
	spec := WatermarkSpec[int64]{Timestamp: func(x int64) int64 { return x }}
	r := &upstreamFake{ups: []string{"in/0", "in/1"}}
	g := newWMGen(spec, r, nil, nil, 0)
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	r.marks = []UpstreamMark{{Upstream: "in/0", Watermark: 500}}
	g.current(0)
	g.record(600)
	g.warnSilent(int64(silentAfter)-1, log)
	if buf.Len() != 0 {
		t.Fatalf("warned before %v: %s", silentAfter, buf.String())
	}
	g.warnSilent(int64(silentAfter), log)
	if out := buf.String(); !strings.Contains(out, "silent_upstream_tasks=in/1 ") || strings.Contains(out, "in/0") {
		t.Fatalf("the warning does not name in/1 alone: %s", out)
	}
	buf.Reset()
	g.warnSilent(int64(silentAfter)+int64(time.Second), log)
	if buf.Len() != 0 {
		t.Fatalf("warned again within a minute: %s", buf.String())
	}
	r.marks = []UpstreamMark{{Upstream: "in/1", Idle: true}}
	g.current(0)
	g.warnSilent(int64(silentAfter)+int64(2*time.Minute), log)
	if buf.Len() != 0 {
		t.Fatalf("warned with every upstream heard from: %s", buf.String())
	}
}
