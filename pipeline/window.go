package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/durfmt"
	"github.com/onceflow/onceflow/state"
)

// WindowConfig configures Window: aggregates per key and event-time
// window. Exactly one shape: Size alone (tumbling), Size and Slide
// (sliding, hopping), Size and Step (cumulate), or Gap (session).
type WindowConfig struct {
	// Key is the expression records are grouped by (KeyRecordKey by
	// default).
	Key string
	// Time is the expression giving a record's event time in ms since
	// the Unix epoch; default "timestamp", the Kafka record's. It must be
	// the time the job's watermarks follow (the job file's event-time
	// section). ProcessingTime ("processing") makes processing-time
	// windows instead: a record is in the windows of the wall-clock time
	// at which the step handles it, and they fire on processing-time
	// timers.
	Time string
	// Size is the length of tumbling and sliding windows, and the
	// largest of cumulate windows.
	Size time.Duration
	// Slide is how far apart sliding windows start; 0 for tumbling.
	Slide time.Duration
	// Offset shifts tumbling and sliding windows from the epoch: they
	// start at multiples of Size (Slide) plus Offset, which is at least
	// 0 and less than Size (Slide).
	Offset time.Duration
	// Step makes cumulate windows: each Size-aligned window [s, s+Size)
	// is emitted as [s, s+Step), [s, s+2·Step), … [s, s+Size), each when
	// the watermark passes its end. Size must be a multiple of Step.
	Step time.Duration
	// Gap closes a session window this long after its last record.
	Gap time.Duration
	// AllowedLateness keeps a window this long after it fired: a record
	// for it arriving then updates it and emits it again.
	AllowedLateness time.Duration
	// EarlyFiring emits a window's figures so far every EarlyFiring of
	// processing time while it is open and changed (0: only when it
	// closes). The results then carry "final": false for those, true for
	// the one at the close and the late updates.
	EarlyFiring time.Duration
	// Fields are the output's fields, as Aggregate's: count(), sum(e),
	// min(e), max(e), avg(e), first(e), last(e), distinct(e).
	Fields map[string]string
	// LateTopic receives the records later than AllowedLateness,
	// unchanged; empty: they are dropped. Either way they are counted
	// (Env.Counter LateRecords).
	LateTopic string
	// OnError is what happens to a record whose key, time or input
	// fails.
	OnError flow.ErrorPolicy
}

// ProcessingTime is WindowConfig.Time (the step's `time: processing`)
// for processing-time windows (docs/design.md, "Event time and timers").
const ProcessingTime = "processing"

// LateRecords is the counter (Env.Counter) window adds every record that
// came later than its windows' allowed lateness to.
const LateRecords = "late-records"

var windowSpec = Spec{
	Name:    "window",
	Summary: "Aggregates per key over event-time windows (tumbling, sliding, cumulate or session) and emits each window's figures when the watermark passes its end.",
	Doc: "Give `size` for tumbling windows, `size` and `slide` for sliding (hopping) windows, `size` and `step` for " +
		"cumulate windows (each `size` window's figures so far, every `step`), or `gap` for session " +
		"windows, which close `gap` after their last record. A window fires once, when the watermark passes its end " +
		"(event time: the job's `event-time` section says where a record's time comes from and how late records may be). " +
		"The output record has the group's key as its key, the window's last millisecond as its timestamp and, as its " +
		"value, a JSON object with `key`, `window_start`, `window_end` (ms, end exclusive) and the fields, computed as " +
		"aggregate's. With `allowed-lateness` a window is kept that long after it fired, and a late record for it " +
		"updates it and emits it again (a consumer keeps the newest result per key and window_start). A record later " +
		"than that goes to `late-topic` unchanged, or is dropped when none is set; either way it is counted " +
		"(`onceflow_window_late_records_total`). With `early-firing` an open window that changed also emits its " +
		"figures so far that often (processing time); every result then has `final`, false for those. Windows, their " +
		"timers and the watermark are keyed state and checkpointed, so a window open at a crash is restored and fires " +
		"exactly once in the committed output.\n\n" +
		"Precisely (times in ms since the Unix epoch, UTC): tumbling windows are `[n·size, (n+1)·size)`, so they start at " +
		"multiples of `size` from 1970-01-01 00:00 UTC (1m windows at whole minutes, 1h at whole hours; 90s windows at multiples of " +
		"90 s from the epoch, not at the first record); `offset` moves them later: with `size: 1h` and `offset: 15m` they are " +
		"`[00:15, 01:15)`, `[01:15, 02:15)`, …. Sliding windows start at multiples of `slide`, and a record is in " +
		"`size / slide` of them. Cumulate windows share their start, a multiple of `size`, and end at each `step` after it: " +
		"with `size: 10m` and `step: 1m` a record of 10:03:20 is in `[10:00, 10:04)`, `[10:00, 10:05)`, … `[10:00, 10:10)`, " +
		"and the window `[10:00, 10:04)` fires when the watermark reaches 10:03:59.999 with the records of 10:00 to 10:03:59.999 " +
		"(not one of 10:04:30 that came before it). A key's windows of a `size` window are emitted from the first `step` that " +
		"has a record of the key, once per `step`, up to `size`; with `allowed-lateness` a consumer keeps the newest result per " +
		"key, window_start and window_end. first(e) and last(e) are by arrival, as in the other windows. The state is one set " +
		"of figures per key and `size` window, plus one per `step` with records that the watermark has not passed (or whose " +
		"allowed lateness has not run out). `early-firing` does not go with `step`. A session starts at its first record; a record less than `gap` after the session's last one " +
		"joins it (and a record that bridges two sessions merges them), one exactly `gap` after starts a new session; a " +
		"session's `window_end` is its last record's time + `gap`. A window fires when the watermark reaches `window_end - 1`, " +
		"its last millisecond; the watermark is the newest time read from each partition, less `max-out-of-orderness`, less " +
		"1 ms, the smallest over the partitions that are not idle. So with `max-out-of-orderness: 5s` the window " +
		"`[10:00, 10:01)` fires once every partition that is not idle has delivered a record dated 10:01:05 or later; " +
		"no record, no firing: the last windows of an input that stopped stay open (see Closing the last windows in the " +
		"README). A record is late for a window once the watermark has reached `window_end - 1 + allowed-lateness`.\n\n" +
		"With `time: processing` the windows are processing-time windows: a record is in the windows of the wall-clock " +
		"time (ms, UTC) at which the step handles it, and a window fires on a processing-time timer once the clock reaches " +
		"its end; the job needs no event-time section. No record is late, so `allowed-lateness`, `late-topic` and " +
		"`early-firing` do not go with it. Windows and timers are checkpointed as above: each record is counted in " +
		"exactly one committed result, and a window emits once in the committed output. But the results depend on " +
		"when records are handled: records replayed after a restore go into the windows of the time they are handled " +
		"again, so a rerun or a restore gives other windows (as in Flink, processing-time results are not " +
		"deterministic). At the end of a bounded input every open window fires, as event-time windows do.\n\n" +
		"To write the result in another shape, follow the step with a `map` " +
		"(`- map: { value: 'string(value.revenue)', format: raw }` writes the number alone; `key:` sets another key).",
	Fields: []Field{
		{Name: "key", Type: KeyExpr, Default: KeyRecordKey, Example: "value.user_id",
			Description: "What the records are grouped by. Part of the step's default id."},
		keyOfField,
		{Name: "size", Type: Duration, Example: "1m",
			Description: "The length of tumbling and sliding windows; the largest of cumulate windows."},
		{Name: "slide", Type: Duration, Example: "10s",
			Description: "How far apart sliding windows start (less than size); not set: tumbling windows."},
		{Name: "offset", Type: Duration, Example: "15m",
			Description: "Tumbling and sliding windows: they start this long after the multiples of size (slide) from the epoch; less than size (slide)."},
		{Name: "step", Type: Duration, Example: "1m",
			Description: "Cumulate windows: how much each window of a size window grows by; size must be a multiple of it."},
		{Name: "gap", Type: Duration, Example: "30m",
			Description: "Session windows: a key's session closes this long after its last record (instead of size)."},
		{Name: "allowed-lateness", Type: Duration, Example: "1m",
			Description: "How long a window is kept after it fired; a late record within it updates and re-emits the window."},
		{Name: "early-firing", Type: Duration, Example: "10s",
			Description: "Also emit an open window's figures so far this often (processing time) when it changed; results then carry final: false, and true once the window closes."},
		{Name: "fields", Type: StringMap, Required: true, Example: `{ revenue: "sum(value.amount)", orders: "count()" }`,
			Missing:     `give the output's fields, such as fields: { revenue: "sum(value.amount)", orders: "count()" }`,
			Description: "The output's fields, each count(), sum(e), min(e), max(e), avg(e), first(e), last(e) or distinct(e)."},
		{Name: "late-topic", Type: String, Example: "late-orders",
			Description: "The topic records later than allowed-lateness go to, unchanged; not set: they are dropped (and counted)."},
		{Name: "time", Type: Expression, Example: "to_timestamp(value.ts)", Vars: []string{ProcessingTime},
			Description: "A record's event time in ms, where earlier steps moved it (a SQL job's select); not set: the job's event-time timestamp. It must be the time the watermarks follow. `processing`: processing-time windows (see above)."},
	},
	IDField:     "key",
	StateFields: []string{"key", "key-of", "size", "slide", "step", "gap", "offset", "time", "fields"},
	Stateful:    true,
	Validate: func(p Params) error {
		_, err := windowConfig(p, Env{}).operator(nil)
		return err
	},
	Props: windowProps,
	Build: func(p Params, env Env) (Operator, error) {
		return windowConfig(p, env).operator(env.counter(LateRecords))
	},
	DescribeIn: func(p Params, env Env) string { return windowConfig(p, env).describe() },
	GoFunc:     "Window",
	Example:    `- window: { key: value.user_id, size: 1m, fields: { revenue: "sum(value.amount)", orders: "count()" } }`,
}

func init() { Register(windowSpec) }

func windowConfig(p Params, env Env) WindowConfig {
	key := p.Text("key")
	if key == "" {
		key = KeyRecordKey
	}
	tm := p.Text("time")
	if tm == "" {
		tm = env.Time
	}
	if tm == "" {
		tm = "timestamp"
	}
	return WindowConfig{Key: key, Time: tm, Size: p.Duration("size"), Slide: p.Duration("slide"), Offset: p.Duration("offset"), Step: p.Duration("step"), Gap: p.Duration("gap"),
		AllowedLateness: p.Duration("allowed-lateness"), EarlyFiring: p.Duration("early-firing"), Fields: p.Map("fields"), LateTopic: p.Text("late-topic"), OnError: env.Policy}
}

func (c WindowConfig) describe() string {
	var shape string
	switch {
	case c.Gap > 0:
		shape = "session windows, gap " + durfmt.Short(c.Gap)
	case c.Step > 0:
		shape = "cumulate windows up to " + durfmt.Short(c.Size) + " every " + durfmt.Short(c.Step)
	case c.Slide > 0:
		shape = "sliding windows of " + durfmt.Short(c.Size) + " every " + durfmt.Short(c.Slide)
	default:
		shape = "tumbling windows of " + durfmt.Short(c.Size)
	}
	if c.Offset > 0 {
		shape += " from " + durfmt.Short(c.Offset) + " past"
	}
	var fs []string
	for _, k := range sortedKeys(c.Fields) {
		fs = append(fs, k+" = "+c.Fields[k])
	}
	over := c.Time
	if over == ProcessingTime {
		over = "processing time"
	}
	s := fmt.Sprintf("window by %s, %s over %s: %s", c.Key, shape, over, strings.Join(fs, ", "))
	if c.AllowedLateness > 0 {
		s += ", allowed lateness " + durfmt.Short(c.AllowedLateness)
	}
	if c.EarlyFiring > 0 {
		s += ", early results every " + durfmt.Short(c.EarlyFiring)
	}
	if c.LateTopic != "" {
		s += ", late records to " + c.LateTopic
	}
	return s
}

// shape is a window assigner in milliseconds: step is set for cumulate
// windows (size their largest); offset shifts tumbling and sliding
// windows.
type shape struct {
	size, slide, step, gap, offset int64
}

// span is one window [Start, End).
type span struct{ Start, End int64 }

// assign returns the tumbling, sliding or cumulate windows holding ts,
// oldest first (cumulate: shortest first); a session's is [ts, ts+gap).
func (s shape) assign(ts int64) []span { return s.appendAssign(nil, ts) }

// appendAssign appends the windows of ts to out (assign without an
// allocation per record when out has room).
func (s shape) appendAssign(out []span, ts int64) []span {
	if s.gap > 0 {
		return append(out, span{ts, ts + s.gap})
	}
	if s.step > 0 {
		start := floorDiv(ts, s.size) * s.size
		for end := s.stepEnd(ts); end <= start+s.size; end += s.step {
			out = append(out, span{start, end})
		}
		return out
	}
	slide := s.slide
	if slide == 0 {
		slide = s.size
	}
	last := floorDiv(ts-s.offset, slide)*slide + s.offset
	for start := last - s.size + slide; start <= last; start += slide {
		if start+s.size > ts {
			out = append(out, span{start, start + s.size})
		}
	}
	return out
}

// floorDiv divides rounding towards minus infinity (times before 1970).
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// WinState is one open window of one key, as kept in keyed state.
type WinState struct {
	Start, End int64
	Accs       []Acc
	// Distinct holds, per distinct() field, the values seen.
	Distinct [][]string `json:",omitempty"`
	// Fired is set once the window emitted its result.
	Fired bool `json:",omitempty"`
	// Dirty is set when an open window changed since it last emitted
	// (early firing).
	Dirty bool `json:",omitempty"`
}

func (c WindowConfig) shape() (shape, error) {
	switch {
	case c.Gap < 0 || c.Size < 0 || c.Slide < 0 || c.Step < 0 || c.AllowedLateness < 0 || c.EarlyFiring < 0 || c.Offset < 0:
		return shape{}, &FieldError{Field: "size", Msg: "and slide, offset, step, gap, allowed-lateness and early-firing must not be negative"}
	case c.Offset > 0 && (c.Gap > 0 || c.Step > 0):
		return shape{}, &FieldError{Field: "offset", Msg: "goes with tumbling and sliding windows only (size, and slide): leave it out of session and cumulate windows"}
	case c.EarlyFiring > 0 && c.EarlyFiring < time.Millisecond:
		return shape{}, &FieldError{Field: "early-firing", Msg: "must be at least 1ms"}
	case c.Gap > 0 && (c.Size > 0 || c.Slide > 0 || c.Step > 0):
		return shape{}, &FieldError{Field: "gap", Msg: "makes session windows and cannot go with size, slide or step: give gap alone, or size (and slide or step)"}
	case c.Gap > 0:
		return shape{gap: c.Gap.Milliseconds()}, nil
	case c.Size <= 0:
		return shape{}, &FieldError{Field: "size", Msg: "is missing: give size (tumbling), size and slide (sliding), size and step (cumulate) or gap (session), such as size: 1m"}
	case c.Step > 0:
		return c.cumulateShape()
	case c.Slide > c.Size:
		return shape{}, &FieldError{Field: "slide", Msg: fmt.Sprintf("%s is longer than size %s: records between windows would be lost; use a slide up to the size", durfmt.Short(c.Slide), durfmt.Short(c.Size))}
	case c.Slide > 0 && c.Size%c.Slide != 0:
		return shape{}, &FieldError{Field: "slide", Msg: fmt.Sprintf("%s does not divide size %s: choose a slide that does, such as %s", durfmt.Short(c.Slide), durfmt.Short(c.Size), durfmt.Short(c.Size/2))}
	case c.Size < time.Millisecond || (c.Slide > 0 && c.Slide < time.Millisecond):
		return shape{}, &FieldError{Field: "size", Msg: "must be at least 1ms (event time is in milliseconds)"}
	}
	s := shape{size: c.Size.Milliseconds(), offset: c.Offset.Milliseconds()}
	if c.Slide > 0 && c.Slide != c.Size {
		s.slide = c.Slide.Milliseconds()
	}
	unit, name := c.Size, "size"
	if c.Slide > 0 {
		unit, name = c.Slide, "slide"
	}
	if c.Offset >= unit || c.Offset%time.Millisecond != 0 {
		return shape{}, &FieldError{Field: "offset", Msg: fmt.Sprintf("%s must be whole milliseconds less than %s %s: windows start at multiples of %s plus the offset (an offset of %s or more moves them by whole windows)", durfmt.Short(c.Offset), name, durfmt.Short(unit), name, durfmt.Short(unit))}
	}
	return s, nil
}

// winPrep is what the window's stateless step computes of a record.
type winPrep struct {
	ts     int64
	inputs []any
}

func (c WindowConfig) operator(late lateCounter) (Operator, error) {
	sh, err := c.shape()
	if err != nil {
		return Operator{}, err
	}
	key, err := keyExpr(c.Key)
	if err != nil {
		return Operator{}, err
	}
	if c.Time == "" {
		c.Time = "timestamp"
	}
	proc := c.Time == ProcessingTime
	if proc {
		if err := c.checkProcessing(); err != nil {
			return Operator{}, err
		}
	}
	tm := &Expr{}
	if !proc {
		if tm, err = CompileExpr(c.Time, AnyResult); err != nil {
			return Operator{}, &FieldError{Field: "time", Err: err}
		}
	}
	fields, err := AggregateConfig{Fields: c.Fields}.fields()
	if err != nil {
		return Operator{}, err
	}
	for _, f := range fields {
		if _, ok := reservedMembers[f.name]; ok {
			return Operator{}, &FieldError{Field: "fields", Msg: fmt.Sprintf("%q is a member every window result has (key, window_start, window_end, final): name the field otherwise", f.name)}
		}
	}
	recordTime := c.Time == "timestamp" // the record's own: no evaluation
	var timeUses Access
	switch {
	case recordTime:
		timeUses = UsesMeta
	case !proc:
		timeUses = tm.access()
	}
	uses := UsesWithValue | UsesWithKey | UsesPosition | UsesNew | timeUses
	if c.LateTopic != "" {
		uses |= UsesWithTopic
	}
	for _, f := range fields {
		if f.arg != nil {
			uses |= f.arg.access()
		}
	}
	prepare := func(r Record) (any, error) {
		var ts int64
		if proc {
			// The time is the clock's when the keyed step takes it.
		} else if recordTime {
			ts = r.Meta().Timestamp
		} else {
			v, err := tm.Eval(r)
			if err != nil {
				return nil, recordError(r, "window time", err)
			}
			var ok bool
			if ts, ok = millis(v); !ok {
				return nil, recordError(r, "window time", fmt.Errorf("expression %q gave %s, not a time in milliseconds", c.Time, describeValue(v)))
			}
		}
		p := winPrep{ts: ts, inputs: make([]any, len(fields))}
		for i, f := range fields {
			if f.arg == nil {
				continue
			}
			v, err := f.arg.Eval(r)
			if err != nil {
				return nil, recordError(r, "window "+f.name, err)
			}
			if err := checkInput(f.fn, v); err != nil {
				return nil, recordError(r, "window "+f.name, err)
			}
			p.inputs[i] = v
		}
		return p, nil
	}
	lateness := c.AllowedLateness.Milliseconds()
	lateTopic := c.LateTopic
	return Operator{Uses: uses, KeyBy: key, Prepare: prepare, Timed: func(st *state.Store) Timed {
		w := &windower{sh: sh, lateness: lateness, early: c.EarlyFiring.Milliseconds(), fields: fields}
		add := w.add
		fire := func(key string, at int64, _ Clock, out Out) error { return w.fire(key, at, out) }
		var cw *cumulator
		if sh.step > 0 {
			cw = &cumulator{windower: w, state: state.NewMapWithCodecs(st, "cumulate", state.DefaultCodec[int64](), state.Codec[CumState](cumCodec{}))}
			add, fire = cw.add, cw.fire
		} else {
			w.wins = state.NewMapWithCodecs(st, "windows", state.DefaultCodec[int64](), state.Codec[WinState](winCodec{}))
		}
		if proc {
			return procWindows{w: w, cw: cw, add: add, fire: fire}.timed()
		}
		return Timed{
			OnRecord: func(r Record, clk Clock, out Out) error {
				p := r.Prepared().(winPrep)
				on, err := add(r.GroupKey(), p, clk, out)
				if err != nil {
					return flow.Unrecoverable(fmt.Errorf("record %s: window: %w", r.Position(), err))
				}
				if !on {
					if late != nil {
						late.Add(1)
					}
					if lateTopic != "" {
						r.SetTopic(lateTopic)
						out.Forward()
					}
				}
				return nil
			},
			OnTimer: func(key string, at int64, clk Clock, out Out) error {
				return fire(key, at, clk, out)
			},
			OnProcessingTimer: func(key string, _ int64, _ Clock, out Out) error {
				return w.fireEarly(key, out)
			},
		}
	}}, nil
}

// Timestamps returns the function giving a record's event time in ms from
// the expression expr (a Watermarks.Timestamp): "timestamp" reads the
// record's own (RecordAccess.Meta), anything else is evaluated. A record
// it cannot date gives flow.NoTimestamp: it does not move the watermark,
// and the window step that needs its time applies the error policy to it.
func Timestamps[T any](acc RecordAccess[T], expr string) (func(T) int64, error) {
	if expr == "" || expr == "timestamp" {
		if acc.Meta == nil {
			return nil, errors.New("RecordAccess.Meta is nil: the record timestamp needs it")
		}
		return func(rec T) int64 {
			if ts := acc.Meta(rec).Timestamp; ts != 0 {
				return ts
			}
			return flow.NoTimestamp
		}, nil
	}
	tm, err := CompileExpr(expr, AnyResult)
	if err != nil {
		return nil, err
	}
	if missing := acc.missing(tm.access()); len(missing) > 0 {
		return nil, fmt.Errorf("%s needed by %q: the record type does not provide it", describeAccessList(missing), expr)
	}
	pool := sync.Pool{New: func() any { return new(handle[T]) }} // a handle per record cost an allocation
	return func(rec T) int64 {
		h := pool.Get().(*handle[T])
		*h = handle[T]{acc: &acc, rec: rec}
		v, err := tm.Eval(h)
		*h = handle[T]{}
		pool.Put(h)
		if err != nil {
			return flow.NoTimestamp
		}
		ts, ok := millis(v)
		if !ok {
			return flow.NoTimestamp
		}
		return ts
	}, nil
}

func describeAccessList(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return describeAccess(names)
}

// lateCounter counts late records (an *atomic.Int64).
type lateCounter interface{ Add(int64) int64 }

// millis reads an expression's value as a time in ms.
func millis(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int64:
		return x, true
	case float64:
		return int64(x), true
	case time.Time:
		return x.UnixMilli(), true
	}
	return 0, false
}

// windower is one subtask's window logic over the keyed state of the
// current key.
type windower struct {
	sh       shape
	lateness int64
	early    int64
	fields   []aggField
	wins     *state.Map[int64, WinState]
	// order is the output's members in name order (as JSON objects are
	// written here), buf the result being built.
	order []outMember
	buf   []byte
	due   []WinState
}

// outMember is one member of a window result: its `"name":` and what it
// holds (one of the member kinds, or the index of a field).
type outMember struct {
	name []byte
	kind int
}

// Member kinds of a window result besides its fields (0..).
const (
	memberKey = -1 - iota
	memberStart
	memberEnd
	memberFinal
)

// reservedMembers are the result's members the fields cannot be named.
var reservedMembers = map[string]int{"key": memberKey, "window_start": memberStart, "window_end": memberEnd, "final": memberFinal}

// members returns the result's members in name order.
func (w *windower) members() []outMember {
	kinds := map[string]int{"key": memberKey, "window_start": memberStart, "window_end": memberEnd}
	if w.early > 0 {
		kinds["final"] = memberFinal
	}
	for i, f := range w.fields {
		kinds[f.name] = i
	}
	var out []outMember
	for _, name := range sortedKeys(kinds) {
		n, _ := json.Marshal(name)
		out = append(out, outMember{name: append(n, ':'), kind: kinds[name]})
	}
	return out
}

// fireAt is when a window fires: its last millisecond.
func fireAt(w span) int64 { return w.End - 1 }

// add takes one record into its windows; false when it was late for all
// of them (and changed nothing).
func (w *windower) add(key string, p winPrep, clk Clock, out Out) (bool, error) {
	wm := clk.Watermark()
	var buf [8]span
	all := w.sh.appendAssign(buf[:0], p.ts)
	spans := all[:0] // filtered in place
	for _, s := range all {
		// Late for a window: the watermark passed its end and its
		// allowed lateness.
		if fireAt(s)+w.lateness > wm {
			spans = append(spans, s)
		}
	}
	if len(spans) == 0 {
		return false, nil
	}
	if w.sh.gap > 0 {
		return true, w.addSession(key, spans[0], p, clk, out)
	}
	for _, s := range spans {
		ws, ok := w.wins.Get(s.Start)
		if !ok {
			ws = WinState{Start: s.Start, End: s.End, Accs: make([]Acc, len(w.fields))}
		}
		if err := w.take(&ws, p.inputs); err != nil {
			return false, err
		}
		if err := w.settle(key, ws, clk, out, !ok); err != nil {
			return false, err
		}
	}
	return true, nil
}

// settle stores ws after a change: a window the watermark already passed
// (a late record within the lateness) emits at once; a new one registers
// its timers.
func (w *windower) settle(key string, ws WinState, clk Clock, out Out, isNew bool) error {
	s := span{ws.Start, ws.End}
	if isNew && w.lateness > 0 {
		// The timer that drops the window once its lateness ran out.
		clk.RegisterEventTimeTimer(fireAt(s) + w.lateness)
	}
	if fireAt(s) <= clk.Watermark() {
		ws.Fired, ws.Dirty = true, false
		w.wins.Put(ws.Start, ws)
		return w.emit(key, ws, out, true)
	}
	if w.early > 0 {
		// The window's figures so far go out at the next multiple of
		// the early-firing interval: one timer per key and interval.
		ws.Dirty = true
		clk.RegisterProcessingTimeTimer((floorDiv(clk.ProcessingTime(), w.early) + 1) * w.early)
	}
	w.wins.Put(ws.Start, ws)
	if isNew {
		clk.RegisterEventTimeTimer(fireAt(s))
	}
	return nil
}

// release deletes the current key's timer at at unless a window left in
// state still needs it (windows of one key can share a timer: one's end,
// another's end of lateness).
func (w *windower) release(at int64, clk Clock) {
	needed := false
	w.wins.All(func(_ int64, ws WinState) bool {
		f := fireAt(span{ws.Start, ws.End})
		needed = f == at && !ws.Fired || w.lateness > 0 && f+w.lateness == at
		return !needed
	})
	if !needed {
		clk.DeleteEventTimeTimer(at)
	}
}

// addSession merges the record's session with the key's sessions it
// overlaps.
func (w *windower) addSession(key string, s span, p winPrep, clk Clock, out Out) error {
	var merged []WinState
	w.wins.All(func(_ int64, ws WinState) bool {
		if ws.Start < s.End && s.Start < ws.End {
			merged = append(merged, ws)
		}
		return true
	})
	sort.Slice(merged, func(i, j int) bool { return merged[i].Start < merged[j].Start })
	ws := WinState{Start: s.Start, End: s.End, Accs: make([]Acc, len(w.fields))}
	if len(merged) > 0 {
		ws = merged[0]
		ws.Start, ws.End = min(ws.Start, s.Start), max(ws.End, s.End)
		for _, m := range merged[1:] {
			w.merge(&ws, m)
			ws.End = max(ws.End, m.End)
		}
	}
	if err := w.take(&ws, p.inputs); err != nil {
		return err
	}
	changed := len(merged) != 1 || merged[0].Start != ws.Start || merged[0].End != ws.End
	if changed {
		for _, m := range merged {
			w.wins.Delete(m.Start)
		}
		for _, m := range merged {
			w.release(fireAt(span{m.Start, m.End}), clk)
			if w.lateness > 0 {
				w.release(fireAt(span{m.Start, m.End})+w.lateness, clk)
			}
		}
	}
	ws.Fired = false
	return w.settle(key, ws, clk, out, changed)
}

// take adds a record's inputs to a window's figures.
func (w *windower) take(ws *WinState, inputs []any) error {
	for i, f := range w.fields {
		if f.fn == AggDistinct {
			if inputs[i] == nil {
				continue
			}
			for len(ws.Distinct) < len(w.fields) {
				ws.Distinct = append(ws.Distinct, nil)
			}
			k := distinctKey(inputs[i])
			j := sort.SearchStrings(ws.Distinct[i], k)
			if j < len(ws.Distinct[i]) && ws.Distinct[i][j] == k {
				continue
			}
			ws.Distinct[i] = append(ws.Distinct[i], "")
			copy(ws.Distinct[i][j+1:], ws.Distinct[i][j:])
			ws.Distinct[i][j] = k
			ws.Accs[i].N = int64(len(ws.Distinct[i]))
			continue
		}
		if err := ws.Accs[i].add(f.fn, inputs[i]); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return nil
}

// merge folds session m (later or earlier) into ws.
func (w *windower) merge(ws *WinState, m WinState) {
	w.mergeAccs(ws, m, m.Start < ws.Start, m.Start > ws.Start)
}

// mergeAccs folds m's figures into ws's; mFirst says m's first() values
// come before ws's, mLast that its last() values come after.
func (w *windower) mergeAccs(ws *WinState, m WinState, mFirst, mLast bool) {
	for i, f := range w.fields {
		a, b := &ws.Accs[i], m.Accs[i]
		switch f.fn {
		case AggDistinct:
			for len(ws.Distinct) < len(w.fields) {
				ws.Distinct = append(ws.Distinct, nil)
			}
			var mi []string
			if i < len(m.Distinct) {
				mi = m.Distinct[i]
			}
			set := map[string]bool{}
			for _, x := range append(append([]string(nil), ws.Distinct[i]...), mi...) {
				set[x] = true
			}
			ws.Distinct[i] = sortedKeys(set)
			a.N = int64(len(ws.Distinct[i]))
			continue
		case AggSum, AggAvg:
			if a.Float || b.Float {
				if !a.Float {
					a.Float, a.F = true, float64(a.I)
				}
				bf := b.F
				if !b.Float {
					bf = float64(b.I)
				}
				a.F += bf
			} else {
				a.I += b.I
			}
		case AggMin, AggMax:
			if b.N > 0 && a.N > 0 {
				less, err := lessThan(b.V, a.V)
				if err == nil && (f.fn == AggMin) == less {
					a.V = b.V
				}
			} else if b.N > 0 {
				a.V = b.V
			}
		case AggFirst:
			if mFirst && b.N > 0 {
				a.V = b.V
			}
		case AggLast:
			if mLast && b.N > 0 {
				a.V = b.V
			}
		}
		a.N += b.N
	}
}

func distinctKey(v any) string {
	if k, ok := keyText(v); ok {
		return k
	}
	b, _ := EncodeJSON(v)
	return string(b)
}

// fire emits the key's windows due at at and drops those whose lateness
// ran out.
func (w *windower) fire(key string, at int64, out Out) error {
	due := w.due[:0]
	if w.sh.gap == 0 {
		// Tumbling and sliding windows have a fixed size: the windows a
		// timer can be for are the one ending at at+1 and, with a
		// lateness, the one whose lateness ends then. Two reads, no scan.
		for _, end := range []int64{at + 1, at + 1 - w.lateness} {
			if ws, ok := w.wins.Get(end - w.sh.size); ok && ws.End == end {
				due = append(due, ws)
			}
			if w.lateness == 0 {
				break
			}
		}
	} else {
		w.wins.All(func(_ int64, ws WinState) bool {
			s := span{ws.Start, ws.End}
			if fireAt(s) == at || fireAt(s)+w.lateness == at {
				due = append(due, ws)
			}
			return true
		})
	}
	w.due = due
	sort.Slice(due, func(i, j int) bool { return due[i].Start < due[j].Start })
	for _, ws := range due {
		s := span{ws.Start, ws.End}
		if fireAt(s) == at && !ws.Fired {
			if err := w.emit(key, ws, out, true); err != nil {
				return err
			}
			ws.Fired, ws.Dirty = true, false
			w.wins.Put(ws.Start, ws)
		}
		if fireAt(s)+w.lateness == at {
			w.wins.Delete(ws.Start)
		}
	}
	return nil
}

// fireEarly emits the figures so far of the key's open windows that
// changed since they last did.
func (w *windower) fireEarly(key string, out Out) error {
	var due []WinState
	w.wins.All(func(_ int64, ws WinState) bool {
		if ws.Dirty && !ws.Fired {
			due = append(due, ws)
		}
		return true
	})
	sort.Slice(due, func(i, j int) bool { return due[i].Start < due[j].Start })
	for _, ws := range due {
		if err := w.emit(key, ws, out, false); err != nil {
			return err
		}
		ws.Dirty = false
		w.wins.Put(ws.Start, ws)
	}
	return nil
}

// emit writes a window's figures; final is false for an early result.
//
// The result is written by hand, members in name order, the way
// EncodeJSON writes a map: what a window emits per record is most of its
// cost when windows hold few records.
func (w *windower) emit(key string, ws WinState, out Out, final bool) error {
	if w.order == nil {
		w.order = w.members()
	}
	b := append(w.buf[:0], '{')
	for i, m := range w.order {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, m.name...)
		switch m.kind {
		case memberKey:
			b = appendJSONString(b, key)
		case memberStart:
			b = strconv.AppendInt(b, ws.Start, 10)
		case memberEnd:
			b = strconv.AppendInt(b, ws.End, 10)
		case memberFinal:
			b = strconv.AppendBool(b, final)
		default:
			var err error
			if b, err = appendJSONValue(b, ws.Accs[m.kind].result(w.fields[m.kind].fn)); err != nil {
				return fmt.Errorf("%s: %w", w.fields[m.kind].name, err)
			}
		}
	}
	b = append(b, '}')
	w.buf = b
	out.Emit([]byte(key), bytes.Clone(b), ws.End-1)
	return nil
}

// appendJSONString appends s as EncodeJSON writes it.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendJSONValue appends a figure as EncodeJSON writes it.
func appendJSONValue(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return b, fmt.Errorf("%v cannot be written as JSON", x)
		}
		// encoding/json's format: %f within [1e-6, 1e21), else %e
		// with a two-digit exponent at least.
		f := byte('f')
		if a := math.Abs(x); a != 0 && (a < 1e-6 || a >= 1e21) {
			f = 'e'
		}
		b = strconv.AppendFloat(b, x, f, -1, 64)
		if f == 'e' {
			if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
				b[n-2] = b[n-1]
				b = b[:n-1]
			}
		}
		return b, nil
	case string:
		return appendJSONString(b, x), nil
	case nil:
		return append(b, "null"...), nil
	}
	e, err := EncodeJSON(v)
	return append(b, e...), err
}

// Window aggregates per key and event-time window as cfg says. The
// stream's source must generate watermarks (flow.WithWatermarks) from
// the same time as cfg.Time; acc.New builds the output records. The
// second stream carries, under flow.DeadLetterOnError, the records whose
// key, time or inputs failed. The operator's id is "window:" and the key
// expression unless opts give another with flow.UID. late counts the
// records later than the allowed lateness (nil: not counted).
func Window[T any](s flow.Stream[T], acc RecordAccess[T], cfg WindowConfig, late lateCounter, opts ...flow.OpOption) (flow.Stream[T], flow.Stream[flow.Failure[T]], error) {
	if cfg.Key == "" {
		cfg.Key = KeyRecordKey
	}
	op, err := cfg.operator(late)
	if err != nil {
		return s, flow.Stream[flow.Failure[T]]{}, fmt.Errorf("pipeline.Window: %w", err)
	}
	out, bad, err := apply(s, acc, windowSpec.Name, windowSpec.DefaultID(Params{"key": cfg.Key}), op, cfg.OnError, opts...)
	if err != nil {
		return s, flow.Stream[flow.Failure[T]]{}, fmt.Errorf("pipeline.Window: %w", err)
	}
	return out, *bad, nil
}

// windowProps: a window replaces records with its results, runs on event
// time, and with late-topic routes late records there.
func windowProps(p Params) Props {
	if p.Text("time") == ProcessingTime {
		return Props{Keys: KeysLost, StateBound: "processing time: a window's state goes when it fires"}
	}
	pr := Props{Keys: KeysLost, EventTime: true, StateBound: "the watermark: a window's state goes when it fires"}
	if l := p.Duration("allowed-lateness"); l > 0 {
		pr.StateBound += " and allowed-lateness " + durfmt.Short(l) + " has passed"
	}
	if t := p.Text("late-topic"); t != "" {
		pr.Routes, pr.StaticTopics = true, []string{t}
	}
	return pr
}
