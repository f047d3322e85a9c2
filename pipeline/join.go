package pipeline

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"github.com/onceflow/onceflow/internal/sql/eval"
	"strings"
	"time"

	"github.com/onceflow/onceflow/internal/durfmt"
	"github.com/onceflow/onceflow/state"
)

// The kinds of join (docs/design.md, "Named streams"). JoinInner pairs
// the records of the two inputs with equal keys; a record without a
// partner emits nothing, and the output only appends. The outer kinds
// also emit a record of their preserved side (the left of JoinLeft, the
// right of JoinRight, either of JoinFull) that finds no partner, padded
// with null for the other side, and retract it (-D, RowKind) when its
// first partner comes: their output is a changelog.
const (
	JoinInner = "inner"
	JoinLeft  = "left"
	JoinRight = "right"
	JoinFull  = "full"
)

var joinSpec = Spec{
	Name:    "join",
	Summary: "Pairs the records of a stream's two inputs whose keys are equal and that came within ttl of each other (an inner, left, right or full outer join).",
	Doc: "Only the first step of a stream whose `from:` names exactly two inputs: the first is the left side, the second " +
		"the right. Each record is kept for ttl in the keyed state of its key (the step's id) and meets every record " +
		"of the other side kept under the same key: for each pair the step emits one record whose key is the join " +
		"key and whose value is `{\"left\": <left value>, \"right\": <right value>}` (a value that is not JSON is " +
		"embedded as a string), with the later of the two timestamps. The pairs are emitted once: a restore " +
		"resumes from the checkpoint with the state it had, so no pair is emitted twice by an exactly-once job.\n\n" +
		"Both key expressions must give equal text for equal keys: a JSON number 1000 and a string \"1000\" are " +
		"the same key, 1000.0 is another. A key expression that gives null, or names a missing field, gives no key: " +
		"the record pairs with nothing and is not kept, as SQL's NULL equals nothing (the record key is text: an " +
		"empty or absent record key is the key \"\", which pairs with \"\"). ttl bounds the state: a record older " +
		"than ttl (processing time since it was kept) is forgotten and pairs with nothing later.\n\n" +
		"kind: left, right or full makes an outer join: a record of the preserved side (the left, the right, " +
		"either) that finds no kept record of the other side is emitted padded, `{\"left\": <value>, \"right\": null}` " +
		"(or the mirror); when the first record of that key arrives on the other side, every kept record emitted " +
		"padded is retracted (the same value with the header onceflow.rowkind: -D) before the pairs are emitted. " +
		"So the output is a changelog (docs/design.md, \"Changelogs\"): write it to an upsert sink (a database " +
		"table with a key, a Kafka topic of upserts) keyed so that the retraction finds its row. A preserved " +
		"record with no key (null) is emitted padded and not kept. A padded record forgotten by its ttl is not " +
		"retracted (its output stays); once every kept record of the other side is forgotten, new records are " +
		"padded again.\n\n" +
		"retractions: true makes the join take a changelog on either input (docs/design.md, \"Changelogs\"): each side " +
		"keeps its rows with their copies (a map of the row to its count), a retraction (-U/-D) takes one copy out and " +
		"retracts (-D) every joined row it was part of; an outer join emits a preserved row padded again when the last " +
		"partner of its key is retracted. Its output is a changelog. Without it a retraction arriving at a join is a " +
		"poison record: its inputs must append only.",
	Fields: []Field{
		{Name: "left-key", Type: KeyExpr, Default: KeyRecordKey, Example: "value.customer_id",
			Description: "The key of the first input's records. Part of the step's default id."},
		{Name: "right-key", Type: KeyExpr, Default: KeyRecordKey, Example: "value.id",
			Description: "The key of the second input's records."},
		{Name: "ttl", Type: Duration, Required: true, Example: "1h",
			Missing:     "set how long each side's records are kept to meet the other side's, such as ttl: 1h (the join's state holds every record of that span)",
			Description: "How long a record is kept to meet records of the other side; positive."},
		{Name: "left-ttl", Type: Duration, Example: "2h",
			Description: "How long a record of the first input is kept, when not ttl (Flink's STATE_TTL hint per table)."},
		{Name: "right-ttl", Type: Duration, Example: "30m",
			Description: "How long a record of the second input is kept, when not ttl."},
		{Name: "kind", Type: String, Default: JoinInner, Example: JoinInner,
			Description: "The kind of join: inner, left, right or full (outer joins emit a changelog)."},
		{Name: "left-match", Type: String, Example: "value.amount > 10",
			Description: "A condition a record of the first input must meet to match: one that does not has no key (it pairs with nothing, and an outer join emits it padded). SQL's ON condition of a preserved side's own columns."},
		{Name: "right-match", Type: String, Example: "value.active",
			Description: "The same for the second input."},
		{Name: "condition", Type: String, Example: "`left`.num >= `right`.maxn",
			Description: "A SQL condition a pair must meet to be joined, over the joined row (`left` and `right`, typed by schema): SQL's ON condition of both tables. An outer join pads a preserved row while no kept row of the other side meets it with the row. Only with retractions: true."},
		{Name: "schema", Type: OrderedMap, Example: "{ left: \"ROW<num BIGINT>\", right: \"ROW<maxn BIGINT>\" }",
			Description: "The columns condition reads (`left` and `right`) and their SQL types, as a select step's schema."},
		{Name: "retractions", Type: Bool, Example: "true",
			Description: "Take a changelog on either input: a retraction takes its row out and retracts the joined rows it made (the output is a changelog); the state keeps each row's copies, another layout than without."},

		{Name: "left-columns", Type: StringList, Example: "[ id, x ]",
			Description: "The columns the first input's kept rows hold, when the steps before wrote only those (a SQL join's side pruned to what the query reads): it computes nothing, but it is part of the step's state layout, so a restore whose kept rows lack a column it names is refused (rows holding more serve)."},
		{Name: "right-columns", Type: StringList, Example: "[ id, z ]",
			Description: "The same for the second input."},
	},
	IDField: "left-key",
	// An outer join emits retractions; a join takes them only with
	// retractions: true (else a retraction would be paired as a row), and
	// then emits them too.
	Retractions: func(p Params, _ bool) (bool, bool) {
		return p.Bool("retractions"), p.Text("kind") != JoinInner || p.Bool("retractions")
	},
	// retractions keeps another state (a map of rows to copies), so a
	// checkpoint of the other layout is refused, not misread; so are kept
	// rows that hold other columns (left-columns, right-columns: rows
	// lacking a column the query now reads would join with it NULL,
	// docs/design.md, "State across query changes").
	StateFields:  []string{"left-key", "right-key", "kind", "retractions", "left-columns", "right-columns"},
	SubsetFields: []string{"left-columns", "right-columns"},
	Stateful:     true,
	Inputs:       2,
	Validate:     func(p Params) error { return joinConfigOf(p).validate() },
	Props: func(p Params) Props {
		c := joinConfigOf(p)
		return Props{Key: c.LeftKey, RightKey: c.RightKey, Keys: KeysLost, StateBound: c.ttlText()}
	},
	Build: func(p Params, _ Env) (Operator, error) { return joinConfigOf(p).operator() },
	Describe: func(p Params) string {
		c := joinConfigOf(p)
		d := fmt.Sprintf("%s join on %s = %s", c.Kind, c.LeftKey, c.RightKey)
		for _, m := range []struct{ side, cond string }{{"left", c.LeftMatch}, {"right", c.RightMatch}} {
			if m.cond != "" {
				d += fmt.Sprintf(", %s rows match if %s", m.side, m.cond)
			}
		}
		if c.Condition != "" {
			d += ", pairs match if " + c.Condition
		}
		if c.Retractions {
			d += ", taking retractions"
		}
		return d + ", " + c.ttlText()
	},
	GoFunc:  "flow.CoProcess",
	Example: "- join: { left-key: value.customer_id, right-key: value.id, ttl: 1h }",
}

func init() { Register(joinSpec) }

type joinConfig struct {
	LeftKey, RightKey, Kind string
	// LeftMatch and RightMatch are the sides' match conditions ("": none).
	LeftMatch, RightMatch string
	TTL                   time.Duration
	// LeftTTL and RightTTL override TTL for one side (0: TTL).
	LeftTTL, RightTTL time.Duration
	// Retractions: the inputs are changelogs (retractingJoin).
	Retractions bool
	// Condition, with Schema, is a SQL condition of both sides a pair
	// must meet (retractingJoin).
	Condition string
	Schema    []Named
}

func joinConfigOf(p Params) joinConfig {
	return joinConfig{LeftKey: p.Text("left-key"), RightKey: p.Text("right-key"), Kind: p.Text("kind"), TTL: p.Duration("ttl"),
		LeftMatch: p.Text("left-match"), RightMatch: p.Text("right-match"),
		LeftTTL: p.Duration("left-ttl"), RightTTL: p.Duration("right-ttl"), Retractions: p.Bool("retractions"),
		Condition: p.Text("condition"), Schema: p.Ordered("schema")}
}

// sideTTLs is how long each side's records are kept.
func (c joinConfig) sideTTLs() (left, right time.Duration) {
	left, right = c.TTL, c.TTL
	if c.LeftTTL != 0 {
		left = c.LeftTTL
	}
	if c.RightTTL != 0 {
		right = c.RightTTL
	}
	return left, right
}

// ttlText is the state bound as validate shows it.
func (c joinConfig) ttlText() string {
	l, r := c.sideTTLs()
	if l == r {
		return "ttl " + durfmt.Short(l)
	}
	return fmt.Sprintf("ttl %s left, %s right", durfmt.Short(l), durfmt.Short(r))
}

func (c joinConfig) validate() error {
	switch c.Kind {
	case JoinInner, JoinLeft, JoinRight, JoinFull:
	case "full outer", "outer", "left outer", "right outer":
		return &FieldError{Field: "kind", Msg: fmt.Sprintf("%q: write kind: %s (left, right and full are the outer joins)", c.Kind, strings.Fields(strings.Replace(c.Kind, "outer", "full", 1))[0])}
	default:
		return &FieldError{Field: "kind", Msg: fmt.Sprintf("%q is not a kind of join: use inner, left, right or full", c.Kind)}
	}
	if c.Condition != "" && !c.Retractions {
		return &FieldError{Field: "condition", Msg: "needs retractions: true (the join then keeps each row with its copies and which of them are out padded)"}
	}
	if c.Condition != "" && len(c.Schema) == 0 {
		return &FieldError{Field: "schema", Msg: "is missing: condition reads the joined row's left and right, give their SQL types"}
	}
	if c.TTL <= 0 {
		return &FieldError{Field: "ttl", Msg: fmt.Sprintf("must be positive: records kept for %s meet nothing", durfmt.Short(c.TTL))}
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"left-ttl", c.LeftTTL}, {"right-ttl", c.RightTTL}} {
		if f.d < 0 {
			return &FieldError{Field: f.name, Msg: fmt.Sprintf("must be positive: records kept for %s meet nothing", durfmt.Short(f.d))}
		}
	}
	return nil
}

func (c joinConfig) operator() (Operator, error) {
	if err := c.validate(); err != nil {
		return Operator{}, err
	}
	lk, err := matchKeyExpr(c.LeftKey, c.LeftMatch, "left")
	if err != nil {
		return Operator{}, err
	}
	rk, err := matchKeyExpr(c.RightKey, c.RightMatch, "right")
	if err != nil {
		return Operator{}, err
	}
	lttl, rttl := c.sideTTLs()
	outerL := c.Kind == JoinLeft || c.Kind == JoinFull
	outerR := c.Kind == JoinRight || c.Kind == JoinFull
	uses := UsesValue | UsesMeta | UsesNew
	if outerL || outerR {
		uses |= UsesWithRowKind
	}
	if c.Retractions {
		match, err := c.pairCondition()
		if err != nil {
			return Operator{}, err
		}
		return Operator{KeyBy: lk, KeyByRight: rk, NullKeyNone: true, Uses: uses | UsesRowKind | UsesWithRowKind, TakesRetractions: true,
			Two: func(st *state.Store) TwoInputs { return retractingJoin(st, lttl, rttl, outerL, outerR, match) }}, nil
	}
	// The inputs append only: a retraction reaching the join is a poison
	// record (keyStep: the operator does not take retractions).
	return Operator{KeyBy: lk, KeyByRight: rk, NullKeyNone: true, Uses: uses, Two: func(st *state.Store) TwoInputs {
		left := state.NewList[[]byte](st, "left", state.WithTTL(lttl))
		right := state.NewList[[]byte](st, "right", state.WithTTL(rttl))
		// An outer side's padded count: how many of its kept records,
		// the last ones of its list, were emitted padded and not yet
		// retracted (docs/design.md, "Named streams"). Records are padded
		// only while the other side keeps none, and the other side's
		// next record retracts them all, so they are always the end of
		// the list; the count lives as long as the last of them (the
		// same ttl, set when it was added), and min(count, kept) is
		// right after the first of them are forgotten.
		var lpad, rpad *state.Value[int64]
		if outerL {
			lpad = state.NewValue[int64](st, "left-padded", state.WithTTL(lttl))
		}
		if outerR {
			rpad = state.NewValue[int64](st, "right-padded", state.WithTTL(rttl))
		}
		side := func(mine, other *state.List[[]byte], myPad, otherPad *state.Value[int64], isLeft bool) func(Record, Clock, Out) error {
			return func(r Record, _ Clock, out Out) error {
				ts, v := r.Meta().Timestamp, r.Value()
				key := []byte(r.GroupKey())
				kept := other.Get()
				if otherPad != nil {
					if n, ok := otherPad.Get(); ok {
						n = min(n, int64(len(kept)))
						for _, e := range kept[int64(len(kept))-n:] {
							ots, ov, err := decodeJoinEntry(e)
							if err != nil {
								return fmt.Errorf("join state of key %q: %w", r.GroupKey(), err)
							}
							out.EmitRetraction(key, paddedValue(ov, !isLeft), ots)
						}
						otherPad.Clear()
					}
				}
				for _, e := range kept {
					ots, ov, err := decodeJoinEntry(e)
					if err != nil {
						return fmt.Errorf("join state of key %q: %w", r.GroupKey(), err)
					}
					lv, rv := v, ov
					if !isLeft {
						lv, rv = ov, v
					}
					out.Emit(key, joinedValue(lv, rv), max(ts, ots))
				}
				if len(kept) == 0 && myPad != nil {
					out.Emit(key, paddedValue(v, isLeft), ts)
					n, _ := myPad.Get()
					myPad.Set(n + 1)
				}
				mine.Add(encodeJoinEntry(ts, v))
				return nil
			}
		}
		fns := TwoInputs{OnLeft: side(left, right, lpad, rpad, true), OnRight: side(right, left, rpad, lpad, false)}
		if outerL || outerR {
			// A record without a key matches nothing, ever: a preserved
			// one is emitted padded, with no key, and not kept.
			fns.OnNoKey = func(r Record, isLeft bool, out Out) error {
				if isLeft && outerL || !isLeft && outerR {
					out.Emit(nil, paddedValue(r.Value(), isLeft), r.Meta().Timestamp)
				}
				return nil
			}
		}
		return fns
	}}, nil
}

// matchKeyExpr is a side's key expression: key, or with a match
// condition, the key when it holds and none (null) when it does not.
func matchKeyExpr(key, match, side string) (*Expr, error) {
	if key == "" {
		key = KeyRecordKey
	}
	if _, err := keyExpr(key); err != nil {
		return nil, &FieldError{Field: side + "-key", Err: err}
	}
	if match == "" {
		return keyExpr(key)
	}
	if _, err := CompileExpr(match, BoolResult); err != nil {
		return nil, &FieldError{Field: side + "-match", Err: err}
	}
	e, err := keyExpr("(" + match + ") == true ? (" + key + ") : nil")
	if err != nil {
		return nil, &FieldError{Field: side + "-match", Err: err}
	}
	return e, nil
}

// paddedValue is a record of an outer join's preserved side without a
// partner: {"left": v, "right": null} (the mirror for the right side).
func paddedValue(v []byte, isLeft bool) []byte {
	if isLeft {
		return joinedValue(v, nil)
	}
	return joinedValue(nil, v)
}

// encodeJoinEntry is a kept record: its timestamp (8 bytes, big endian)
// and its value.
func encodeJoinEntry(ts int64, v []byte) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(v)), uint64(ts))
	return append(b, v...)
}

func decodeJoinEntry(b []byte) (int64, []byte, error) {
	if len(b) < 8 {
		return 0, nil, fmt.Errorf("a kept record of %d bytes is shorter than its timestamp", len(b))
	}
	return int64(binary.BigEndian.Uint64(b)), b[8:], nil
}

// joinedValue is {"left": l, "right": r}, each embedded as JSON when it
// is JSON, else as a JSON string (null for an empty value).
func joinedValue(l, r []byte) []byte {
	b := append(make([]byte, 0, len(l)+len(r)+20), `{"left":`...)
	b = appendJoinSide(b, l)
	b = append(b, `,"right":`...)
	b = appendJoinSide(b, r)
	return append(b, '}')
}

func appendJoinSide(b, v []byte) []byte {
	switch {
	case len(v) == 0:
		return append(b, "null"...)
	case eval.ValidJSON(v): // json.Valid's answer, faster (Nexmark q4, docs/benchmarks.md)
		return append(b, v...)
	}
	q, _ := json.Marshal(string(v)) // a string always marshals
	return append(b, q...)
}
