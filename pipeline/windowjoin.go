package pipeline

import (
	"fmt"
	"strconv"
	"time"

	"github.com/onceflow/onceflow/internal/durfmt"
	"github.com/onceflow/onceflow/state"
)

// The window join (docs/design.md, "Named streams" and "SQL"): an inner
// join of two streams on equal keys within the same tumbling event-time
// window, SQL's join of two TUMBLE table functions on window_start,
// window_end and keys. Each side's records are kept by window until the
// watermark passes the window's end; an event-time timer then emits the
// window's pairs, once, and frees both sides' records of it. A record
// whose window has already closed is late: counted, and sent to
// late-topic or dropped, as the window step does.

var windowJoinSpec = Spec{
	Name:    "window-join",
	Summary: "Pairs the records of a stream's two inputs whose keys are equal and whose event times fall in the same tumbling window, when the window closes (an inner window join).",
	Doc: "Only the first step of a stream whose `from:` names exactly two inputs: the first is the left side, the second " +
		"the right. Each record is kept in the keyed state of its key and its window `[start, start + size)` (start a " +
		"multiple of `size` from the Unix epoch, as the window step's). When the watermark passes the window's last " +
		"millisecond, the step emits every pair of a left and a right record of the key and window, once: key the join " +
		"key, value `{\"left\": <left value>, \"right\": <right value>, \"window_start\": ms, \"window_end\": ms, " +
		"\"window_time\": ms}` (window_time is window_end - 1 ms), timestamp window_time; then it frees the window's " +
		"records. The result only appends; the state holds the open windows' records and needs no ttl.\n\n" +
		"The step's watermark is the smaller of its two inputs' (an idle input does not hold it back). A record whose " +
		"window the watermark has already passed is late: it pairs with nothing, goes to `late-topic` unchanged or is " +
		"dropped when none is set, and is counted with the window step's late records " +
		"(`onceflow_window_late_records_total`). `left-time` and `right-time` are each side's event time in ms; not set: " +
		"the event-time timestamp of the side's sources. Keys are as join's: a null key pairs with nothing and is not kept. " +
		"A restore resumes from the checkpoint with the kept records and their timers, so no pair is emitted twice by an " +
		"exactly-once job.",
	Fields: eventJoinFields(Field{Name: "size", Type: Duration, Required: true, Example: "1m",
		Missing:     "give the length of the tumbling windows, such as size: 1m",
		Description: "The length of the tumbling windows both sides are cut into; positive, in whole milliseconds."},
	),
	IDField:     "left-key",
	StateFields: []string{"left-key", "right-key", "size"},
	Stateful:    true,
	Inputs:      2,
	Validate:    func(p Params) error { return windowJoinConfigOf(p, Env{}).validate() },
	Props: func(p Params) Props {
		c := windowJoinConfigOf(p, Env{})
		pr := Props{Key: c.LeftKey, RightKey: c.RightKey, Keys: KeysLost, EventTime: true,
			StateBound: "watermark: a window's rows go when it closes"}
		if c.LateTopic != "" {
			pr.Routes, pr.StaticTopics = true, []string{c.LateTopic}
		}
		return pr
	},
	Build: func(p Params, env Env) (Operator, error) {
		return windowJoinConfigOf(p, env).operator(env.counter(LateRecords))
	},
	DescribeIn: func(p Params, env Env) string {
		c := windowJoinConfigOf(p, env)
		s := fmt.Sprintf("window join on %s = %s in tumbling windows of %s (left time %s, right time %s)", c.LeftKey, c.RightKey, durfmt.Short(c.Size), c.LeftTime, c.RightTime)
		if c.LateTopic != "" {
			s += ", late records to " + c.LateTopic
		}
		return s
	},
	GoFunc:  "flow.CoProcess",
	Example: "- window-join: { left-key: value.auction, right-key: value.id, size: 1m, left-time: value.ts, right-time: value.ts }",
}

func init() { Register(windowJoinSpec) }

// WindowJoinConfig is a window-join step's configuration.
type WindowJoinConfig struct {
	LeftKey, RightKey   string
	LeftTime, RightTime string
	Size                time.Duration
	LateTopic           string
}

func windowJoinConfigOf(p Params, env Env) WindowJoinConfig {
	ic := intervalJoinConfigOf(p, env) // the keys, times and late-topic, read alike
	return WindowJoinConfig{LeftKey: ic.LeftKey, RightKey: ic.RightKey, LeftTime: ic.LeftTime, RightTime: ic.RightTime,
		Size: p.Duration("size"), LateTopic: ic.LateTopic}
}

func (c WindowJoinConfig) validate() error {
	if c.Size <= 0 || c.Size%time.Millisecond != 0 {
		return &FieldError{Field: "size", Msg: fmt.Sprintf("must be positive and in whole milliseconds, not %s", durfmt.Short(c.Size))}
	}
	return nil
}

func (c WindowJoinConfig) operator(late lateCounter) (Operator, error) {
	if err := c.validate(); err != nil {
		return Operator{}, err
	}
	size := c.Size.Milliseconds()
	op, err := eventTimeJoin(c.LeftKey, c.RightKey, c.LeftTime, c.RightTime, c.LateTopic)
	if err != nil {
		return Operator{}, err
	}
	lateTopic := c.LateTopic
	op.Two = func(st *state.Store) TwoInputs {
		// Each side's kept records of the current key, by window start.
		codec := state.Codec[[][]byte](rowsCodec{})
		left := state.NewMapWithCodecs(st, "left", state.DefaultCodec[int64](), codec)
		right := state.NewMapWithCodecs(st, "right", state.DefaultCodec[int64](), codec)
		side := func(mine *state.Map[int64, [][]byte]) func(Record, Clock, Out) error {
			return func(r Record, clk Clock, out Out) error {
				ts := r.Prepared().(int64)
				start := ts - ((ts%size)+size)%size // floor, for times before 1970 too
				last := start + size - 1
				if last <= clk.Watermark() {
					if late != nil {
						late.Add(1)
					}
					if lateTopic != "" {
						r.SetTopic(lateTopic)
						out.Forward()
					}
					return nil
				}
				rows, _ := mine.Get(start)
				mine.Put(start, append(rows, append([]byte(nil), r.Value()...)))
				clk.RegisterEventTimeTimer(last)
				return nil
			}
		}
		return TwoInputs{
			OnLeft:  side(left),
			OnRight: side(right),
			OnTimer: func(key string, at int64, _ Clock, out Out) error {
				start := at - size + 1
				ls, _ := left.Get(start)
				rs, _ := right.Get(start)
				for _, l := range ls {
					for _, r := range rs {
						out.Emit([]byte(key), windowJoinedValue(l, r, start, start+size), at)
					}
				}
				left.Delete(start)
				right.Delete(start)
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
