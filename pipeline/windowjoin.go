package pipeline

import (
	"fmt"
	"strconv"
	"time"

	"github.com/onceflow/onceflow/internal/durfmt"
	"github.com/onceflow/onceflow/state"
)

// The window join (docs/design.md, "Named streams" and "SQL"): an inner
// join of two streams on equal keys within the same event-time window,
// SQL's join of two TUMBLE, HOP or CUMULATE table functions on
// window_start, window_end and keys. Each side's records are kept by
// window (a record of sliding or cumulate windows in each of its
// windows) until the watermark passes the window's end; an event-time
// timer then emits the window's pairs, once, and frees both sides'
// records of it. A record whose windows have all closed is late:
// counted, and sent to late-topic or dropped, as the window step does.

var windowJoinSpec = Spec{
	Name:    "window-join",
	Summary: "Pairs the records of a stream's two inputs whose keys are equal and whose event times fall in the same window (tumbling, sliding or cumulate), when the window closes (an inner window join).",
	Doc: "Only the first step of a stream whose `from:` names exactly two inputs: the first is the left side, the second " +
		"the right. Each record is kept in the keyed state of its key and of each window that holds it, cut as the window " +
		"step cuts them: `size` alone, tumbling windows `[start, start + size)` (start a multiple of `size` from the Unix " +
		"epoch); with `slide`, sliding (hopping) windows of `size` starting at multiples of `slide` (a record is in " +
		"`size / slide` of them); with `step`, cumulate windows starting at multiples of `size` and ending at each `step` " +
		"after it (a record is in each that ends after it). When the watermark passes a window's last " +
		"millisecond, the step emits every pair of a left and a right record of the key and window, once: key the join " +
		"key, value `{\"left\": <left value>, \"right\": <right value>, \"window_start\": ms, \"window_end\": ms, " +
		"\"window_time\": ms}` (window_time is window_end - 1 ms), timestamp window_time; then it frees the window's " +
		"records. The result only appends; the state holds the open windows' records and needs no ttl.\n\n" +
		"The step's watermark is the smaller of its two inputs' (an idle input does not hold it back). A record is kept " +
		"in its windows the watermark has not passed; one whose windows it has all passed is late: it pairs with nothing, goes to `late-topic` unchanged or is " +
		"dropped when none is set, and is counted with the window step's late records " +
		"(`onceflow_window_late_records_total`). `left-time` and `right-time` are each side's event time in ms; not set: " +
		"the event-time timestamp of the side's sources. Keys are as join's: a null key pairs with nothing and is not kept. " +
		"A restore resumes from the checkpoint with the kept records and their timers, so no pair is emitted twice by an " +
		"exactly-once job.",
	Fields: eventJoinFields(Field{Name: "size", Type: Duration, Required: true, Example: "1m",
		Missing:     "give the length of the windows, such as size: 1m",
		Description: "The length of the windows both sides are cut into (cumulate: the largest); positive, in whole milliseconds."},
		Field{Name: "slide", Type: Duration, Example: "10s",
			Description: "Sliding (hopping) windows: a window starts every slide; it divides size. Not set: tumbling windows."},
		Field{Name: "step", Type: Duration, Example: "10s",
			Description: "Cumulate windows: each window of size also ends at every step after its start; it divides size."},
	),
	IDField:     "left-key",
	StateFields: []string{"left-key", "right-key", "size", "slide", "step"},
	Stateful:    true,
	Inputs:      2,
	Validate:    func(p Params) error { return windowJoinConfigOf(p, Env{}).validate() },
	Props: func(p Params) Props {
		c := windowJoinConfigOf(p, Env{})
		return eventTimeJoinProps(c.LeftKey, c.RightKey, c.LateTopic, "watermark: a window's rows go when it closes")
	},
	Build: func(p Params, env Env) (Operator, error) {
		return windowJoinConfigOf(p, env).operator(env.counter(LateRecords))
	},
	DescribeIn: func(p Params, env Env) string {
		c := windowJoinConfigOf(p, env)
		s := fmt.Sprintf("window join on %s = %s in %s (left time %s, right time %s)", c.LeftKey, c.RightKey, c.windowsText(), c.LeftTime, c.RightTime)
		if c.LateTopic != "" {
			s += ", late records to " + c.LateTopic
		}
		return s
	},
	GoFunc:  "flow.CoProcess",
	Example: "- window-join: { left-key: value.auction, right-key: value.id, size: 1m, slide: 30s, left-time: value.ts, right-time: value.ts }",
}

func init() { Register(windowJoinSpec) }

// WindowJoinConfig is a window-join step's configuration.
type WindowJoinConfig struct {
	LeftKey, RightKey   string
	LeftTime, RightTime string
	// Size alone: tumbling windows; with Slide: sliding ones; with Step:
	// cumulate ones (the window step's shapes).
	Size, Slide, Step time.Duration
	LateTopic         string
}

func windowJoinConfigOf(p Params, env Env) WindowJoinConfig {
	ic := intervalJoinConfigOf(p, env) // the keys, times and late-topic, read alike
	return WindowJoinConfig{LeftKey: ic.LeftKey, RightKey: ic.RightKey, LeftTime: ic.LeftTime, RightTime: ic.RightTime,
		Size: p.Duration("size"), Slide: p.Duration("slide"), Step: p.Duration("step"), LateTopic: ic.LateTopic}
}

func (c WindowJoinConfig) windowsText() string {
	switch {
	case c.Step > 0:
		return fmt.Sprintf("cumulate windows of %s by %s", durfmt.Short(c.Size), durfmt.Short(c.Step))
	case c.Slide > 0 && c.Slide != c.Size:
		return fmt.Sprintf("sliding windows of %s every %s", durfmt.Short(c.Size), durfmt.Short(c.Slide))
	}
	return "tumbling windows of " + durfmt.Short(c.Size)
}

// shape is the windows as the window step cuts them.
func (c WindowJoinConfig) shape() (shape, error) {
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"size", c.Size}, {"slide", c.Slide}, {"step", c.Step}} {
		if f.d < 0 || f.d%time.Millisecond != 0 || f.name == "size" && f.d == 0 {
			return shape{}, &FieldError{Field: f.name, Msg: fmt.Sprintf("must be positive and in whole milliseconds, not %s", durfmt.Short(f.d))}
		}
	}
	if c.Slide > 0 && c.Step > 0 {
		return shape{}, &FieldError{Field: "step", Msg: "makes cumulate windows and cannot go with slide (sliding windows): give one of them"}
	}
	return WindowConfig{Size: c.Size, Slide: c.Slide, Step: c.Step}.shape()
}

func (c WindowJoinConfig) validate() error {
	_, err := c.shape()
	return err
}

func (c WindowJoinConfig) operator(late lateCounter) (Operator, error) {
	sh, err := c.shape()
	if err != nil {
		return Operator{}, err
	}
	size := sh.size
	op, err := eventTimeJoin(c.LeftKey, c.RightKey, c.LeftTime, c.RightTime, c.LateTopic)
	if err != nil {
		return Operator{}, err
	}
	lateTopic := c.LateTopic
	op.Two = func(st *state.Store) TwoInputs {
		// Each side's kept records of the current key, by window: its
		// start (tumbling and sliding windows, all of one size), or its
		// end (cumulate windows, which share their starts).
		codec := state.Codec[[][]byte](rowsCodec{})
		left := state.NewMapWithCodecs(st, "left", state.DefaultCodec[int64](), codec)
		right := state.NewMapWithCodecs(st, "right", state.DefaultCodec[int64](), codec)
		windowKey := func(w span) int64 {
			if sh.step > 0 {
				return w.End
			}
			return w.Start
		}
		side := func(mine *state.Map[int64, [][]byte]) func(Record, Clock, Out) error {
			return func(r Record, clk Clock, out Out) error {
				ts := r.Prepared().(int64)
				wm, kept := clk.Watermark(), false
				for _, w := range sh.assign(ts) {
					if w.End-1 <= wm {
						continue // closed
					}
					k := windowKey(w)
					rows, _ := mine.Get(k)
					mine.Put(k, append(rows, append([]byte(nil), r.Value()...)))
					clk.RegisterEventTimeTimer(w.End - 1)
					kept = true
				}
				if !kept {
					if late != nil {
						late.Add(1)
					}
					if lateTopic != "" {
						r.SetTopic(lateTopic)
						out.Forward()
					}
				}
				return nil
			}
		}
		return TwoInputs{
			OnLeft:  side(left),
			OnRight: side(right),
			// A timer at t closes the window ending at t+1.
			OnTimer: func(key string, at int64, _ Clock, out Out) error {
				w := span{Start: at + 1 - size, End: at + 1}
				if sh.step > 0 {
					w.Start = floorDiv(at, size) * size
				}
				k := windowKey(w)
				ls, _ := left.Get(k)
				rs, _ := right.Get(k)
				for _, l := range ls {
					for _, r := range rs {
						out.Emit([]byte(key), windowJoinedValue(l, r, w.Start, w.End), at)
					}
				}
				left.Delete(k)
				right.Delete(k)
				return nil
			},
		}
	}
	return op, nil
}

// windowJoinedValue is joinedValue with the window's members.
func windowJoinedValue(l, r []byte, start, end int64) []byte {
	b := joinedValue(l, r)
	b = b[:len(b)-1] // the closing brace
	b = append(b, `,"window_start":`...)
	b = strconv.AppendInt(b, start, 10)
	b = append(b, `,"window_end":`...)
	b = strconv.AppendInt(b, end, 10)
	b = append(b, `,"window_time":`...)
	b = strconv.AppendInt(b, end-1, 10)
	return append(b, '}')
}

// eventTimeJoinProps are the properties of a join whose state the
// watermark frees (interval, window and temporal joins): keyed on both
// sides, the key lost in its output, and routing late rows to lateTopic
// when one is set.
func eventTimeJoinProps(leftKey, rightKey, lateTopic, bound string) Props {
	pr := Props{Key: leftKey, RightKey: rightKey, Keys: KeysLost, EventTime: true, StateBound: bound}
	if lateTopic != "" {
		pr.Routes, pr.StaticTopics = true, []string{lateTopic}
	}
	return pr
}
