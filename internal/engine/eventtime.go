package engine

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Event time (docs/design.md, "Event time and timers"). A source with a
// WatermarkSpec dates its records and generates watermarks per split
// (bounded out-of-orderness); the subtask's watermark is the smallest of
// its splits' that are not idle. Watermarks travel in-band as control
// messages, like barriers: chained operators pass them on, an exchange
// receiver combines its channels (the smallest of those neither idle nor
// ended), and a keyed operator fires its event-time timers when its
// watermark passes them. Sources and keyed operators store their
// watermarks in every checkpoint, so event time does not go back after a
// restore (a window that fired would otherwise take late records as on
// time and fire again).

// Watermark bounds.
const (
	// NoWatermark is the watermark before any: every time is ahead of it.
	NoWatermark int64 = math.MinInt64
	// MaxWatermark is the watermark at the end of a bounded input: every
	// event-time timer is due.
	MaxWatermark int64 = math.MaxInt64
	// NoTimestamp is what a Timestamp function returns for a record it
	// cannot date: the record does not move the watermark.
	NoTimestamp int64 = math.MinInt64
)

// DefaultWatermarkInterval is how often a source emits its watermark (Flink's
// auto-watermark interval).
const DefaultWatermarkInterval = 200 * time.Millisecond

// WatermarkSpec is a source's event-time strategy (flow.Watermarks).
type WatermarkSpec[T any] struct {
	// Timestamp returns a record's event time in ms since the Unix epoch,
	// or NoTimestamp.
	Timestamp func(T) int64
	// Split names the split a record came from (nil: one per subtask).
	Split func(T) string
	// MaxOutOfOrderness is how far behind its split's newest record a
	// record may be and still be on time.
	MaxOutOfOrderness time.Duration
	// IdleTimeout is how long a split may deliver nothing before it stops
	// holding the watermark back; 0: never.
	IdleTimeout time.Duration
	// Interval is how often the watermark is emitted; 0: the default.
	Interval time.Duration
}

// SplitLister is implemented by source readers that know the splits they
// read, named as WatermarkSpec.Split names them: a split that has not
// delivered yet holds the watermark back until it goes idle.
type SplitLister interface {
	AssignedSplits() []string
}

// WithWatermarks gives a source its event-time strategy, a
// WatermarkSpec of the source's record type.
func WithWatermarks(spec any) NodeOption { return func(n *Node) { n.watermarks = spec } }

// Blob keys of event time in checkpoints. They start with a NUL byte so
// they never collide with a source's split names; the runtime removes
// them before a source reader sees its restored positions.
const (
	wmSplitPrefix    = "\x00wm/split/"    // + split name: the split's newest timestamp
	wmRangePrefix    = "\x00wm/kg/"       // + first-last key group: a keyed operator's watermark
	wmUpstreamPrefix = "\x00wm/upstream/" // + upstream task: the newest watermark it sent in-band
)

// UpstreamMark is a watermark an upstream task wrote into a source's
// input, in order with its records: a scale-out repartition topic's
// watermark marker (docs/design.md, "Scale-out").
type UpstreamMark struct {
	// Upstream names the task that wrote it.
	Upstream string
	// Watermark is that task's watermark when it wrote the mark.
	Watermark int64
	// Idle says the task had no input holding event time back: its
	// Watermark does not count until it sends one that is not idle.
	Idle bool
}

// UpstreamReader is implemented by source readers whose input is written
// by upstream tasks that put their watermarks into it (a scale-out task
// reading a repartition topic). A source with event time whose reader
// says Upstreams() is not empty takes its watermark from the marks
// instead of its records' timestamps: the smallest over the upstream
// tasks that are not idle, each holding event time back until its first
// mark. Records still count as late against it.
type UpstreamReader interface {
	// Upstreams names every upstream task whose marks the source must
	// hear before event time moves; a mark from a task not listed adds
	// it.
	Upstreams() []string
	// TakeMarks returns the marks read since the last call, in order.
	// Called from the source's subtask between polls.
	TakeMarks() []UpstreamMark
}

// WatermarkWriter is implemented by sink writers that pass the watermark
// reaching them on: a scale-out repartition sink writes it into every
// partition of its topic (UpstreamReader reads it). Called from the
// sink's subtask, between its Write calls, each time the watermark or
// idleness reaching the sink changes.
type WatermarkWriter interface {
	Watermark(wm int64, idle bool)
}

// splitTime is one split's progress.
type splitTime struct {
	newest int64 // the newest timestamp seen; NoTimestamp: none yet
	// active is when the split was last seen delivering (unix ns), or
	// when it was first listed; delivered is set by a record and turned
	// into active at the next computation (so a poll slowed down by
	// backpressure does not make its splits look idle).
	active    int64
	delivered bool
}

// wmGen generates a source subtask's watermarks.
type wmGen[T any] struct {
	spec      WatermarkSpec[T]
	ooo       int64
	interval  int64
	lister    SplitLister
	splits    map[string]*splitTime
	restored  map[string]int64
	lastName  string
	last      *splitTime
	emitted   int64
	idle      bool
	checked   int64
	started   int64
	listedBuf map[string]bool
	// late counts per split the records dated at or before the watermark
	// the subtask had already emitted, since the last warning;
	// lateWarned is when that was logged (unix ns, 0: never).
	late       map[string]int64
	lateWarned int64
	// upRecords counts the records read with upstream marks expected;
	// silentWarned is when upstream tasks that never marked were logged.
	upRecords, silentWarned int64
	// up is the reader of marks from upstream tasks (nil: the watermark
	// comes from the records' timestamps); ups is each upstream task's
	// newest mark.
	up  UpstreamReader
	ups map[string]*upstreamTime
}

// upstreamTime is what a source knows of one upstream task's event time.
type upstreamTime struct {
	wm   int64 // the newest watermark it sent; NoWatermark: none yet
	idle bool
}

// lateWarnEvery bounds how often a source subtask warns about records
// behind its watermark.
const lateWarnEvery = 10 * time.Second

func newWMGen[T any](spec WatermarkSpec[T], reader any, restored map[string]int64, restoredUp map[string]upstreamTime, now int64) *wmGen[T] {
	g := &wmGen[T]{spec: spec, ooo: spec.MaxOutOfOrderness.Milliseconds(), splits: map[string]*splitTime{}, restored: restored, emitted: NoWatermark, started: now, checked: now}
	g.interval = int64(spec.Interval)
	if g.interval <= 0 {
		g.interval = int64(DefaultWatermarkInterval)
	}
	if l, ok := reader.(SplitLister); ok {
		g.lister = l
	}
	if u, ok := reader.(UpstreamReader); ok && len(u.Upstreams()) > 0 {
		g.up = u
		g.ups = map[string]*upstreamTime{}
		for _, name := range u.Upstreams() {
			g.ups[name] = &upstreamTime{wm: NoWatermark}
		}
		for name, r := range restoredUp {
			if g.ups[name] == nil {
				g.ups[name] = &upstreamTime{wm: NoWatermark}
			}
			// Idleness is restored too: an idle writer marks again only
			// when its state changes, which may be never.
			g.ups[name].wm = max(g.ups[name].wm, r.wm)
			g.ups[name].idle = r.idle
		}
	}
	return g
}

// takeMarks applies the marks the reader read since the last call.
func (g *wmGen[T]) takeMarks() {
	for _, m := range g.up.TakeMarks() {
		u := g.ups[m.Upstream]
		if u == nil {
			u = &upstreamTime{wm: NoWatermark}
			g.ups[m.Upstream] = u
		}
		u.idle = m.Idle
		if !m.Idle {
			u.wm = max(u.wm, m.Watermark)
		}
	}
}

// upstreamCurrent is current for a source whose watermark comes from its
// upstream tasks' marks: the smallest over those not idle (one not heard
// from yet holds it back), idle when all are. No idle timeout applies:
// an upstream task that sends nothing is down or late, and its records
// are still to come.
func (g *wmGen[T]) upstreamCurrent() (wm int64, idle bool) {
	g.takeMarks()
	wm, idle = MaxWatermark, true
	for _, u := range g.ups {
		if u.idle {
			continue
		}
		idle = false
		wm = min(wm, u.wm)
	}
	if idle {
		return NoWatermark, true
	}
	return wm, false
}

// split returns the progress of split name, created on first sight (with
// its restored timestamp).
func (g *wmGen[T]) split(name string, now int64) *splitTime {
	if g.last != nil && name == g.lastName {
		return g.last
	}
	s := g.splits[name]
	if s == nil {
		s = &splitTime{newest: NoTimestamp, active: now}
		if ts, ok := g.restored[name]; ok {
			s.newest = ts
		}
		g.splits[name] = s
	}
	g.lastName, g.last = name, s
	return s
}

// record takes one record's timestamp. It reports whether the record is
// late: dated at or before the watermark the subtask already emitted, so
// event-time operators downstream take it as late. That happens to the
// records of a partition added while the job runs and written before
// discovery found it, while the others moved event time on
// (docs/design.md, "The Kafka source"), and to records later than the
// out-of-orderness bound or coming back from idleness.
func (g *wmGen[T]) record(x T) (late bool) {
	ts := g.spec.Timestamp(x)
	var name string
	if g.spec.Split != nil {
		name = g.spec.Split(x)
	}
	if g.up != nil {
		// Event time comes from the upstream tasks' marks; a record is
		// only checked against it.
		g.upRecords++
		if ts != NoTimestamp && ts <= g.emitted {
			if g.late == nil {
				g.late = map[string]int64{}
			}
			g.late[name]++
			return true
		}
		return false
	}
	s := g.split(name, g.checked)
	s.delivered = true
	if ts == NoTimestamp {
		return false
	}
	if ts > s.newest {
		s.newest = ts
	}
	if ts <= g.emitted {
		if g.late == nil {
			g.late = map[string]int64{}
		}
		g.late[name]++
		return true
	}
	return false
}

// silentAfter is how long a source reading a repartition topic waits
// for marks from every upstream task before it warns of the silent ones.
const silentAfter = 30 * time.Second

// warnSilent logs, at most every minute, the upstream tasks that never
// sent a mark once the source has read records for silentAfter: its event
// time waits for them, so windows downstream do not fire. A writer
// without event time of its own sends none.
func (g *wmGen[T]) warnSilent(now int64, log *slog.Logger) {
	if g.up == nil || g.upRecords == 0 || now-g.started < int64(silentAfter) ||
		g.silentWarned != 0 && now-g.silentWarned < int64(time.Minute) {
		return
	}
	var silent []string
	for name, u := range g.ups {
		if u.wm == NoWatermark && !u.idle {
			silent = append(silent, name)
		}
	}
	if len(silent) == 0 {
		return
	}
	g.silentWarned = now
	slices.Sort(silent)
	log.Warn("event time waits for upstream tasks that have sent no watermark: event-time operators here (windows) do not fire until each has. "+
		"A task of the stage writing the repartition topic sends its watermark with each checkpoint once its input has event time; "+
		"if that stage has none (from Go: flow.WithWatermarks on its source, and kafka.SinkConfig.MarkWatermarks on the sink writing the topic), it never will",
		"silent_upstream_tasks", strings.Join(silent, ", "), "records_read", g.upRecords)
}

// warnLate logs, at most every lateWarnEvery, the late records of each
// split since the last warning, with what to do about them.
func (g *wmGen[T]) warnLate(now int64, log *slog.Logger) {
	if len(g.late) == 0 || g.lateWarned != 0 && now-g.lateWarned < int64(lateWarnEvery) {
		return
	}
	g.lateWarned = now
	for _, name := range slices.Sorted(maps.Keys(g.late)) {
		if g.up != nil {
			log.Warn("records read from a repartition topic were older than the watermark its upstream tasks had already sent: they were late in the task that read them from the input too "+
				"(later than the out-of-orderness bound there, or back from idleness), and event-time operators downstream take them as late; "+
				"raise event-time.max-out-of-orderness, or the windows' allowed-lateness, to keep them",
				"split", name, "late_records", g.late[name], "watermark", time.UnixMilli(g.emitted).UTC().Format(time.RFC3339Nano))
			continue
		}
		log.Warn("a source split delivered records older than the watermark the source had already emitted: event-time operators downstream take them as late (a window beyond its allowed lateness drops them, or sends them to its late topic). "+
			"If the split is a partition added to the topic while the job ran, they were written before partition discovery found it: "+
			"keep the discovery interval short (job file source.discovery-interval, kafka.SourceConfig.DiscoveryInterval; such records are late by about that much), "+
			"set windows' allowed-lateness to at least that, or add partitions before producers write to them",
			"split", name, "late_records", g.late[name], "watermark", time.UnixMilli(g.emitted).UTC().Format(time.RFC3339Nano))
	}
	clear(g.late)
}

// due reports whether the watermark should be computed now.
func (g *wmGen[T]) due(now int64) bool { return now-g.checked >= g.interval }

// current computes the subtask's watermark and whether every split is
// idle (or it has none).
func (g *wmGen[T]) current(now int64) (wm int64, idle bool) {
	g.checked = now
	if g.up != nil {
		return g.upstreamCurrent()
	}
	var names []string
	if g.lister != nil {
		names = g.lister.AssignedSplits()
		if g.listedBuf == nil {
			g.listedBuf = map[string]bool{}
		}
		clear(g.listedBuf)
		for _, n := range names {
			g.listedBuf[n] = true
			g.split(n, now)
		}
		for n := range g.splits {
			if !g.listedBuf[n] {
				// A split the reader gave up (a deleted topic's):
				// it no longer holds event time back.
				delete(g.splits, n)
				if g.lastName == n {
					g.last = nil
				}
			}
		}
	}
	timeout := int64(g.spec.IdleTimeout)
	if len(g.splits) == 0 && g.lister == nil {
		// No record yet and no list of splits: the subtask holds event
		// time back like a split that has not delivered.
		if timeout > 0 && now-g.started >= timeout {
			return NoWatermark, true
		}
		return NoWatermark, false
	}
	wm, idle = MaxWatermark, true
	for _, s := range g.splits {
		if s.delivered {
			s.active, s.delivered = now, false
		}
		if timeout > 0 && now-s.active >= timeout {
			continue
		}
		idle = false
		w := NoWatermark
		if s.newest != NoTimestamp {
			w = s.newest - g.ooo - 1
		}
		wm = min(wm, w)
	}
	if idle {
		return NoWatermark, true
	}
	return wm, false
}

// snapshot adds the splits' newest timestamps to a source's checkpoint
// blobs.
func (g *wmGen[T]) snapshot(blobs map[string][]byte) map[string][]byte {
	out := make(map[string][]byte, len(blobs)+len(g.splits))
	for k, v := range blobs {
		out[k] = v
	}
	for name, s := range g.splits {
		if s.newest != NoTimestamp {
			out[wmSplitPrefix+name] = binary.AppendVarint(nil, s.newest)
		}
	}
	if g.up != nil {
		// The marks read up to the barrier: the reader's positions are
		// past them.
		g.takeMarks()
		for name, u := range g.ups {
			if u.wm != NoWatermark || u.idle {
				b := binary.AppendVarint(nil, u.wm)
				if u.idle {
					b = append(b, 1)
				}
				out[wmUpstreamPrefix+name] = b
			}
		}
	}
	// A split restored but neither listed nor read by this subtask is
	// left out: its reader stores its time. (Without a SplitLister a
	// subtask cannot tell, and such a split restarts from no time; the
	// keyed operators' own watermarks still keep event time from going
	// back.)
	return out
}

// splitEventTime separates a source's restored blobs into the reader's
// positions, the splits' newest timestamps and the upstream tasks'
// newest watermarks.
func splitEventTime(blobs map[string][]byte) (positions map[string][]byte, times map[string]int64, ups map[string]upstreamTime, err error) {
	if blobs == nil {
		return nil, nil, nil, nil
	}
	positions = make(map[string][]byte, len(blobs))
	for k, v := range blobs {
		name, split := strings.CutPrefix(k, wmSplitPrefix)
		up := false
		if !split {
			name, up = strings.CutPrefix(k, wmUpstreamPrefix)
		}
		if !split && !up {
			positions[k] = v
			continue
		}
		ts, n := binary.Varint(v)
		switch {
		case n <= 0 || split && n != len(v):
			return nil, nil, nil, fmt.Errorf("damaged event time of split %q in the checkpoint", name)
		case split:
			if times == nil {
				times = map[string]int64{}
			}
			times[name] = ts
		default:
			// The watermark, then 1 when the upstream task was idle.
			rest := v[n:]
			if n <= 0 || len(rest) > 1 || len(rest) == 1 && rest[0] != 1 {
				return nil, nil, nil, fmt.Errorf("damaged event time of upstream task %q in the checkpoint", name)
			}
			if ups == nil {
				ups = map[string]upstreamTime{}
			}
			ups[name] = upstreamTime{wm: ts, idle: len(rest) == 1}
		}
	}
	return positions, times, ups, nil
}

// watermarkBlob is a keyed operator subtask's watermark in its checkpoint.
func watermarkBlob(first, last int, wm int64) map[string][]byte {
	if wm == NoWatermark {
		return nil
	}
	return map[string][]byte{wmRangePrefix + strconv.Itoa(first) + "-" + strconv.Itoa(last): binary.AppendVarint(nil, wm)}
}

// restoredWatermark returns the watermark a keyed subtask owning key groups
// first..last restores: the smallest of the former subtasks' whose ranges
// overlap it (with the same parallelism, its own).
func restoredWatermark(blobs map[string][]byte, first, last int) (int64, error) {
	wm, found := MaxWatermark, false
	for k, v := range blobs {
		r, ok := strings.CutPrefix(k, wmRangePrefix)
		if !ok {
			continue
		}
		a, b, ok := strings.Cut(r, "-")
		lo, err1 := strconv.Atoi(a)
		hi, err2 := strconv.Atoi(b)
		w, n := binary.Varint(v)
		if !ok || err1 != nil || err2 != nil || n <= 0 {
			return 0, fmt.Errorf("damaged watermark %q in the checkpoint", k)
		}
		if hi < first || lo > last {
			continue
		}
		wm, found = min(wm, w), true
	}
	if !found {
		return NoWatermark, nil
	}
	return wm, nil
}

// wmCombiner combines the watermarks of an exchange's channels.
type wmCombiner struct {
	wm      []int64
	idle    []bool
	ended   []bool
	out     int64 // the last watermark forwarded
	outIdle bool
}

func newWMCombiner(n int) *wmCombiner {
	c := &wmCombiner{wm: make([]int64, n), idle: make([]bool, n), ended: make([]bool, n), out: NoWatermark}
	for i := range c.wm {
		c.wm[i] = NoWatermark
	}
	return c
}

// onWatermark takes channel ch's watermark message; it returns the control
// to forward, if any.
func (c *wmCombiner) onWatermark(ch int, m ctl) (ctl, bool) {
	c.idle[ch] = m.idle
	if !m.idle && m.wm > c.wm[ch] {
		c.wm[ch] = m.wm
	}
	return c.combine()
}

// onEnd takes the end of channel ch.
func (c *wmCombiner) onEnd(ch int) (ctl, bool) {
	c.ended[ch] = true
	return c.combine()
}

func (c *wmCombiner) combine() (ctl, bool) {
	wm, active, open := MaxWatermark, false, false
	for ch := range c.wm {
		if c.ended[ch] {
			continue
		}
		open = true
		if c.idle[ch] {
			continue
		}
		active = true
		wm = min(wm, c.wm[ch])
	}
	switch {
	case !open:
		return ctl{}, false // the end of the stream follows
	case !active:
		if c.outIdle {
			return ctl{}, false
		}
		c.outIdle = true
		return ctl{kind: ctlWatermark, wm: c.out, idle: true}, true
	}
	if wm > c.out || c.outIdle {
		c.out = max(c.out, wm)
		c.outIdle = false
		return ctl{kind: ctlWatermark, wm: c.out}, true
	}
	return ctl{}, false
}
