package pipeline

import (
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/internal/durfmt"
	"github.com/onceflow/onceflow/state"
)

// The interval join (docs/design.md, "Named streams" and "SQL"): an inner
// join of two streams on equal keys and event times within bounds of each
// other, SQL's `a.ts BETWEEN b.ts - INTERVAL … AND b.ts + INTERVAL …`.
// It is a step of its own rather than a kind of join: its state is bound
// by the watermark, not by a ttl, and it needs each side's event time,
// so its fields and its guarantees differ from join's.
//
// Each side's records are kept in keyed state by their event time. A
// record pairs with every kept record of the other side whose time is
// within the bounds, and is kept until the watermark passes the last
// time a partner of it can still come on time: for a left record at tl,
// right records dated tl-upper … tl-lower, so until tl-lower; for a right
// record at tr, until tr+upper. An event-time timer frees it then. A
// record at or before the watermark is late: it is counted, and goes to
// late-topic or is dropped, as the window step's late records do.

var intervalJoinSpec = Spec{
	Name:    "interval-join",
	Summary: "Pairs the records of a stream's two inputs whose keys are equal and whose event times are within bounds of each other (an inner interval join); the watermark frees its state.",
	Doc: "Only the first step of a stream whose `from:` names exactly two inputs: the first is the left side, the second " +
		"the right. A left record at time tl and a right record at time tr with equal keys pair when " +
		"`tr + lower <= tl <= tr + upper` (SQL's `l.ts BETWEEN r.ts + lower AND r.ts + upper`; bounds are signed " +
		"durations such as -10m, both inclusive: for an exclusive bound move it by 1ms). Each pair is emitted once, as " +
		"join emits it: key the join key, value `{\"left\": <left value>, \"right\": <right value>}`, timestamp the later " +
		"of the two times. The result only appends.\n\n" +
		"Each record is kept in the keyed state of its key with its time until the watermark passes the last time a " +
		"partner can still come on time (tl - lower for a left record, tr + upper for a right one); an event-time timer " +
		"frees it then, so the state holds about (upper - lower + the inputs' out-of-orderness) of records and needs no ttl. " +
		"The step's watermark is the smaller of its two inputs' (an idle input does not hold it back). A record dated at " +
		"or before the watermark is late: it pairs with nothing, goes to `late-topic` unchanged or is dropped when none " +
		"is set, and is counted with the window step's late records (`onceflow_window_late_records_total`). Raise the " +
		"sources' `max-out-of-orderness` to keep records that come later than that.\n\n" +
		"`left-time` and `right-time` are each side's event time in ms, where earlier steps moved it (a SQL job's " +
		"select); not set: the event-time timestamp of the side's sources. Keys are as join's: a null key pairs with nothing and is " +
		"not kept. A restore resumes from the checkpoint with the kept records and their timers, so no pair is " +
		"emitted twice by an exactly-once job.",
	Fields: eventJoinFields(Field{Name: "lower", Type: String, Required: true, Example: "-10m",
		Missing:     "give the lower bound of left time - right time, such as lower: -10m (a left record pairs with right records up to 10 minutes later than it)",
		Description: "The smallest left time - right time of a pair, a signed duration (inclusive)."},
		Field{Name: "upper", Type: String, Required: true, Example: "0s",
			Missing:     "give the upper bound of left time - right time, such as upper: 5m",
			Description: "The largest left time - right time of a pair, a signed duration (inclusive); at least lower."},
	),
	IDField:     "left-key",
	StateFields: []string{"left-key", "right-key", "lower", "upper"},
	Stateful:    true,
	Inputs:      2,
	Validate: func(p Params) error {
		_, err := intervalJoinConfigOf(p, Env{}).bounds()
		return err
	},
	Props: func(p Params) Props {
		c := intervalJoinConfigOf(p, Env{})
		return eventTimeJoinProps(c.LeftKey, c.RightKey, c.LateTopic, "watermark: a row goes once no partner can come on time")
	},
	Build: func(p Params, env Env) (Operator, error) {
		return intervalJoinConfigOf(p, env).operator(env.counter(LateRecords))
	},
	DescribeIn: func(p Params, env Env) string { return intervalJoinConfigOf(p, env).describe() },
	GoFunc:     "flow.CoProcess",
	Example:    "- interval-join: { left-key: value.auction, right-key: value.id, lower: -10m, upper: 0s, left-time: value.ts, right-time: value.ts }",
}

func init() { Register(intervalJoinSpec) }

// IntervalJoinConfig is an interval-join step's configuration.
type IntervalJoinConfig struct {
	LeftKey, RightKey   string
	LeftTime, RightTime string
	// Lower and Upper as written: signed durations.
	Lower, Upper string
	LateTopic    string
}

func intervalJoinConfigOf(p Params, env Env) IntervalJoinConfig {
	c := IntervalJoinConfig{LeftKey: p.Text("left-key"), RightKey: p.Text("right-key"), LeftTime: p.Text("left-time"), RightTime: p.Text("right-time"),
		Lower: p.Text("lower"), Upper: p.Text("upper"), LateTopic: p.Text("late-topic")}
	for i, t := range []*string{&c.LeftTime, &c.RightTime} {
		if *t == "" && i < len(env.InputTimes) {
			*t = env.InputTimes[i]
		}
		if *t == "" {
			*t = env.Time
		}
		if *t == "" {
			*t = "timestamp"
		}
	}
	return c
}

// signedDuration reads a duration with an optional sign.
func signedDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	neg := strings.HasPrefix(s, "-")
	d, err := connector.ParseDuration(strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+"))
	if err != nil {
		return 0, err
	}
	if neg {
		d = -d
	}
	return d, nil
}

// bounds are Lower and Upper in ms.
func (c IntervalJoinConfig) bounds() ([2]int64, error) {
	var out [2]int64
	for i, f := range []struct{ name, v string }{{"lower", c.Lower}, {"upper", c.Upper}} {
		d, err := signedDuration(f.v)
		if err != nil {
			return out, &FieldError{Field: f.name, Msg: fmt.Sprintf("%q is not a duration: write a signed number with a unit, such as -10m, 0s or 5m", f.v)}
		}
		if d%time.Millisecond != 0 {
			return out, &FieldError{Field: f.name, Msg: fmt.Sprintf("%s is finer than a millisecond, the unit of event time", f.v)}
		}
		out[i] = d.Milliseconds()
	}
	if out[0] > out[1] {
		return out, &FieldError{Field: "upper", Msg: fmt.Sprintf("%s is less than lower %s: no pair could meet both bounds", c.Upper, c.Lower)}
	}
	return out, nil
}

func signedText(ms int64) string {
	if ms < 0 {
		return "-" + durfmt.Short(time.Duration(-ms)*time.Millisecond)
	}
	return durfmt.Short(time.Duration(ms) * time.Millisecond)
}

func (c IntervalJoinConfig) describe() string {
	b, err := c.bounds()
	if err != nil {
		return "interval join: " + err.Error()
	}
	s := fmt.Sprintf("interval join on %s = %s, left time - right time within [%s, %s] (left time %s, right time %s)",
		c.LeftKey, c.RightKey, signedText(b[0]), signedText(b[1]), c.LeftTime, c.RightTime)
	if c.LateTopic != "" {
		s += ", late records to " + c.LateTopic
	}
	return s
}

// timeOf compiles a side's time expression into a Prepare function.
func timeOf(side, expr string) (func(Record) (any, error), Access, error) {
	if expr == "timestamp" {
		return func(r Record) (any, error) { return r.Meta().Timestamp, nil }, UsesMeta, nil
	}
	tm, err := CompileExpr(expr, AnyResult)
	if err != nil {
		return nil, 0, &FieldError{Field: side + "-time", Err: err}
	}
	return func(r Record) (any, error) {
		v, err := tm.Eval(r)
		if err != nil {
			return nil, recordError(r, "interval-join "+side+" time", err)
		}
		ts, ok := millis(v)
		if !ok {
			return nil, recordError(r, "interval-join "+side+" time", fmt.Errorf("expression %q gave %s, not a time in milliseconds", expr, describeValue(v)))
		}
		return ts, nil
	}, tm.access(), nil
}

func (c IntervalJoinConfig) operator(late lateCounter) (Operator, error) {
	b, err := c.bounds()
	if err != nil {
		return Operator{}, err
	}
	lower, upper := b[0], b[1]
	op, err := eventTimeJoin(c.LeftKey, c.RightKey, c.LeftTime, c.RightTime, c.LateTopic)
	if err != nil {
		return Operator{}, err
	}
	lateTopic := c.LateTopic
	op.Two = func(st *state.Store) TwoInputs {
		// Each side's kept records of the current key, by event time.
		codec := state.Codec[[][]byte](rowsCodec{})
		left := state.NewMapWithCodecs(st, "left", state.DefaultCodec[int64](), codec)
		right := state.NewMapWithCodecs(st, "right", state.DefaultCodec[int64](), codec)
		// side handles a record of one side: mine keeps it, other holds
		// the partners; [lo, hi] is the partners' time range for a
		// record at ts, and freeAt when the record can go.
		side := func(mine, other *state.Map[int64, [][]byte], isLeft bool) func(Record, Clock, Out) error {
			return func(r Record, clk Clock, out Out) error {
				ts := r.Prepared().(int64)
				wm := clk.Watermark()
				if ts <= wm {
					if late != nil {
						late.Add(1)
					}
					if lateTopic != "" {
						r.SetTopic(lateTopic)
						out.Forward()
					}
					return nil
				}
				lo, hi, freeAt := ts-upper, ts-lower, ts-lower
				if !isLeft {
					lo, hi, freeAt = ts+lower, ts+upper, ts+upper
				}
				v, key := r.Value(), []byte(r.GroupKey())
				other.All(func(ots int64, rows [][]byte) bool {
					if ots < lo || ots > hi {
						return true
					}
					for _, ov := range rows {
						lv, rv := v, ov
						if !isLeft {
							lv, rv = ov, v
						}
						out.Emit(key, joinedValue(lv, rv), max(ts, ots))
					}
					return true
				})
				if freeAt <= wm {
					return nil // no partner can come on time any more
				}
				rows, _ := mine.Get(ts)
				mine.Put(ts, append(rows, append([]byte(nil), v...)))
				clk.RegisterEventTimeTimer(freeAt)
				return nil
			}
		}
		return TwoInputs{
			OnLeft:  side(left, right, true),
			OnRight: side(right, left, false),
			// A timer at t frees the left records of time t+lower and
			// the right records of time t-upper: the ones that
			// registered it (a left and a right record may share it).
			OnTimer: func(_ string, at int64, _ Clock, _ Out) error {
				left.Delete(at + lower)
				right.Delete(at - upper)
				return nil
			},
		}
	}
	return op, nil
}

// rowsCodec encodes the records kept at one time: each length-prefixed.
type rowsCodec struct{}

func (rowsCodec) Append(dst []byte, rows [][]byte) []byte {
	for _, r := range rows {
		dst = binary.AppendUvarint(dst, uint64(len(r)))
		dst = append(dst, r...)
	}
	return dst
}

func (rowsCodec) Decode(src []byte) ([][]byte, error) {
	var rows [][]byte
	for len(src) > 0 {
		n, k := binary.Uvarint(src)
		if k <= 0 || uint64(len(src)-k) < n {
			return nil, fmt.Errorf("interval-join state: a kept record's length is cut short")
		}
		rows = append(rows, append([]byte(nil), src[k:k+int(n)]...))
		src = src[k+int(n):]
	}
	return rows, nil
}

// eventTimeJoin is the part of an interval or window join's operator
// both share: the sides' key expressions, each record's event time
// computed before the exchange, and what the records need; the caller
// sets Two.
func eventTimeJoin(leftKey, rightKey, leftTime, rightTime, lateTopic string) (Operator, error) {
	lk, err := keyExpr(leftKey)
	if err != nil {
		return Operator{}, fmt.Errorf("left-key: %w", err)
	}
	rk, err := keyExpr(rightKey)
	if err != nil {
		return Operator{}, fmt.Errorf("right-key: %w", err)
	}
	lt, lu, err := timeOf("left", leftTime)
	if err != nil {
		return Operator{}, err
	}
	rt, ru, err := timeOf("right", rightTime)
	if err != nil {
		return Operator{}, err
	}
	uses := UsesValue | UsesNew | lu | ru
	if lateTopic != "" {
		uses |= UsesWithTopic
	}
	return Operator{KeyBy: lk, KeyByRight: rk, Prepare: lt, PrepareRight: rt, NullKeyNone: true, Uses: uses}, nil
}

// eventJoinFields are the fields of an interval or window join: the two
// keys, then own (the bounds, the window size), then each side's time
// and late-topic.
func eventJoinFields(own ...Field) []Field {
	fs := []Field{
		{Name: "left-key", Type: KeyExpr, Default: KeyRecordKey, Example: "value.auction",
			Description: "The key of the first input's records. Part of the step's default id."},
		{Name: "right-key", Type: KeyExpr, Default: KeyRecordKey, Example: "value.id",
			Description: "The key of the second input's records."},
	}
	fs = append(fs, own...)
	return append(fs, []Field{
		{Name: "left-time", Type: Expression, Example: "to_timestamp(value.ts)",
			Description: "A left record's event time in ms; not set: the left input's sources' event-time timestamp. It must be the time the left input's watermarks follow."},
		{Name: "right-time", Type: Expression, Example: "to_timestamp(value.ts)",
			Description: "A right record's event time in ms; not set: the right input's sources' event-time timestamp."},
		{Name: "late-topic", Type: String, Example: "late-rows",
			Description: "The topic late records go to, unchanged; not set: they are dropped (and counted)."},
	}...)
}
