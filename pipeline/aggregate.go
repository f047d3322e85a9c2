package pipeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/durfmt"
	"github.com/onceflow/onceflow/state"
)

// AggregateConfig configures Aggregate.
type AggregateConfig struct {
	// Key is the expression records are grouped by (KeyRecordKey, or
	// any expression with a string or number value).
	Key string
	// Fields are the output's fields, each an aggregate function of an
	// expression: count(), sum(e), min(e), max(e), avg(e), first(e),
	// last(e), distinct(e) (the number of distinct values).
	Fields map[string]string
	// TTL, when positive, forgets a group TTL after its last record.
	TTL time.Duration
	// OnError is what happens to a record an expression fails on (or
	// whose sum/avg input is not a number).
	OnError flow.ErrorPolicy
	// UpdateBefore makes the output a changelog with retractions: before
	// a group's new figures the step emits its previous ones as an
	// update-before (RowUpdateBefore), and a group that loses its last
	// row is deleted (RowDelete). What a filter, an aggregate or a sink
	// keyed otherwise after it needs (docs/design.md, "Changelogs").
	UpdateBefore bool
	// Retractions makes the step take a changelog as its input: a
	// retraction (RecordAccess.RowKind) takes its row's inputs out of the
	// group's figures. The step then counts each group's rows and
	// deletes a group (emitting RowDelete) when none is left. Only
	// count, sum and avg can take an input out (first keeps the first
	// row's value while the group has rows: for values all its rows
	// share); min, max, last and distinct are refused.
	Retractions bool
}

var aggregateSpec = Spec{
	Retractions: func(p Params, in bool) (bool, bool) {
		// Without retractions: true it refuses them; its output retracts
		// with update-before, or when groups can empty (retractions).
		return p.Bool("retractions"), p.Bool("update-before") || p.Bool("retractions")
	},
	Name:    "aggregate",
	Summary: "Keeps running aggregates per key (count, sum, min, max, avg, first, last, distinct) and emits the group's new figures for every record.",
	Doc: "The output record has the group's key as its key and, as its value, a JSON object with the key (field " +
		"`key`) and every field's current value: a changelog of the groups, like a Kafka Streams table's. The figures " +
		"are keyed state under the step's id, restored exactly with the checkpoint, so after a crash every input counts " +
		"once. sum and avg need numbers (an integer sum stays an integer); min and max compare numbers with numbers and " +
		"strings with strings; distinct keeps each distinct value in state, so its size grows with them (bound it with " +
		"ttl). null inputs (a missing field) are skipped by every function but count() and first/last. The inputs are " +
		"evaluated and checked before the records are partitioned: a record whose key or input fails (text for sum, the " +
		"value not JSON) is a poison record for the job's errors.policy and changes no figure.",
	Fields: []Field{
		{Name: "key", Type: KeyExpr, Default: KeyRecordKey, Example: "value.user_id",
			Description: "What the records are grouped by. Part of the step's default id."},
		keyOfField,
		{Name: "fields", Type: StringMap, Required: true, Example: `{ revenue: "sum(value.amount)", orders: "count()" }`,
			Missing:     `give the output's fields, such as fields: { revenue: "sum(value.amount)", orders: "count()" }`,
			Description: "The output's fields, each count(), sum(e), min(e), max(e), avg(e), first(e), last(e) or distinct(e)."},
		{Name: "ttl", Type: Duration, Example: "7d",
			Description: "Forget a group this long after its last record; not set: keep it forever."},
		{Name: "update-before", Type: Bool, Example: "true",
			Description: "Emit a group's previous figures as a retraction (row kind -U, the header onceflow.rowkind) before its new ones, and a -D when a group loses its last row: what a filter, an aggregate or a sink keyed otherwise after the step needs to take the old row out."},
		{Name: "retractions", Type: Bool, Example: "true",
			Description: "The input is an updating result: a retraction (-U or -D) takes its row out of its group (count, sum, avg; min, max and distinct keep a count of each value of the group to find the next min or max; first keeps the first row's value while the group has rows, for values every row of the group shares); a group left with no row is deleted (-D). Without it a retraction is a poison record."},
	},
	IDField:     "key",
	StateFields: []string{"key", "key-of", "fields", "retractions"},
	Validate: func(p Params) error {
		_, err := aggregateConfig(p, Env{}).operator()
		return err
	},
	Stateful: true,
	Props:    aggregateProps,
	Build:    func(p Params, env Env) (Operator, error) { return aggregateConfig(p, env).operator() },
	Describe: func(p Params) string {
		c := aggregateConfig(p, Env{})
		var fs []string
		for _, k := range sortedKeys(c.Fields) {
			fs = append(fs, k+" = "+c.Fields[k])
		}
		s := "aggregate by " + c.Key + ": " + strings.Join(fs, ", ")
		if c.TTL > 0 {
			s += ", ttl " + durfmt.Short(c.TTL)
		}
		if c.Retractions {
			s += ", takes retractions"
		}
		if c.UpdateBefore {
			s += ", emits update-before"
		}
		return s
	},
	GoFunc:  "Aggregate",
	Example: `- aggregate: { key: value.user_id, fields: { revenue: "sum(value.amount)", orders: "count()" } }`,
}

func init() { Register(aggregateSpec) }

func aggregateConfig(p Params, env Env) AggregateConfig {
	key := p.Text("key")
	if key == "" {
		key = KeyRecordKey
	}
	return AggregateConfig{Key: key, Fields: p.Map("fields"), TTL: p.Duration("ttl"), OnError: env.Policy,
		UpdateBefore: p.Bool("update-before"), Retractions: p.Bool("retractions")}
}

// aggCall is one field's function and argument, as written.
var aggCall = regexp.MustCompile(`^\s*(count|sum|min|max|avg|first|last|distinct)\s*\((.*)\)\s*$`)

// AggFunc is an aggregate function.
type AggFunc string

// The aggregate functions.
const (
	AggCount    AggFunc = "count"
	AggSum      AggFunc = "sum"
	AggMin      AggFunc = "min"
	AggMax      AggFunc = "max"
	AggAvg      AggFunc = "avg"
	AggFirst    AggFunc = "first"
	AggLast     AggFunc = "last"
	AggDistinct AggFunc = "distinct"
)

// aggField is one compiled output field.
type aggField struct {
	name string
	fn   AggFunc
	arg  *Expr // nil for count()
}

// ParseAggregate compiles "fn(expr)".
func parseAggregate(name, src string) (aggField, error) {
	m := aggCall.FindStringSubmatch(src)
	if m == nil {
		return aggField{}, fmt.Errorf("%s: %q is not an aggregate: write count(), sum(e), min(e), max(e), avg(e), first(e), last(e) or distinct(e)", name, src)
	}
	f := aggField{name: name, fn: AggFunc(m[1])}
	arg := strings.TrimSpace(m[2])
	if f.fn == AggCount {
		if arg != "" {
			return aggField{}, fmt.Errorf("%s: count() takes no argument (it counts records); use a filter step before it to count some", name)
		}
		return f, nil
	}
	if arg == "" {
		return aggField{}, fmt.Errorf("%s: %s needs an expression, such as %s(value.amount)", name, f.fn, f.fn)
	}
	e, err := CompileExpr(arg, AnyResult)
	if err != nil {
		return aggField{}, fmt.Errorf("%s: %w", name, err)
	}
	f.arg = e
	return f, nil
}

// Acc is the running figure of one aggregate field of one group, as
// kept in keyed state.
type Acc struct {
	// N counts the inputs taken (not null), or the records for count().
	N int64 `json:"n"`
	// I is an integer sum; F a float sum, used once a float was seen
	// (Float).
	I     int64   `json:"i,omitempty"`
	F     float64 `json:"f,omitempty"`
	Float bool    `json:"float,omitempty"`
	// V is the min, max, first or last value.
	V any `json:"v,omitempty"`
}

// UnmarshalJSON reads a figure back from keyed state, its value as the
// expressions see JSON (integers stay int: a restored min of 2^60 is still
// exact).
func (a *Acc) UnmarshalJSON(b []byte) error {
	var raw struct {
		N     int64           `json:"n"`
		I     int64           `json:"i"`
		F     float64         `json:"f"`
		Float bool            `json:"float"`
		V     json.RawMessage `json:"v"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*a = Acc{N: raw.N, I: raw.I, F: raw.F, Float: raw.Float}
	if len(raw.V) > 0 && string(raw.V) != "null" {
		v, err := ParseJSON(raw.V)
		if err != nil {
			return err
		}
		a.V = v
	}
	return nil
}

// add takes one input of fn into the figure. The error is about an input
// fn cannot take.
func (a *Acc) add(fn AggFunc, v any) error {
	switch fn {
	case AggCount:
		a.N++
		return nil
	case AggFirst:
		if a.N == 0 {
			a.V = v
		}
		a.N++
		return nil
	case AggLast:
		a.V = v
		a.N++
		return nil
	}
	if v == nil {
		return nil
	}
	switch fn {
	case AggSum, AggAvg:
		switch x := v.(type) {
		case int:
			if a.Float {
				a.F += float64(x)
			} else {
				a.I += int64(x)
			}
		case float64:
			if !a.Float {
				a.Float, a.F = true, float64(a.I)
			}
			a.F += x
		default:
			return fmt.Errorf("%s needs numbers, and got %s", fn, describeValue(v))
		}
	case AggMin, AggMax:
		if a.N > 0 {
			less, err := lessThan(v, a.V)
			if err != nil {
				return fmt.Errorf("%s: %w", fn, err)
			}
			if (fn == AggMin) != less {
				a.N++
				return nil
			}
		} else if _, err := lessThan(v, v); err != nil {
			return fmt.Errorf("%s: %w", fn, err)
		}
		a.V = v
	}
	a.N++
	return nil
}

// result is the figure's value in the output.
func (a *Acc) result(fn AggFunc) any {
	switch fn {
	case AggCount, AggDistinct:
		return a.N
	case AggSum:
		if a.Float {
			return a.F
		}
		return a.I
	case AggAvg:
		if a.N == 0 {
			return nil
		}
		if a.Float {
			return a.F / float64(a.N)
		}
		return float64(a.I) / float64(a.N)
	}
	return a.V
}

// checkInput reports an input fn cannot take: sum and avg take numbers,
// min and max numbers or strings; null is skipped by all.
func checkInput(fn AggFunc, v any) error {
	if v == nil {
		return nil
	}
	switch fn {
	case AggSum, AggAvg:
		switch v.(type) {
		case int, float64:
			return nil
		}
		return fmt.Errorf("%s needs numbers, and got %s", fn, describeValue(v))
	case AggMin, AggMax:
		if isOther(v) {
			return fmt.Errorf("%s compares numbers or strings, not %s", fn, describeValue(v))
		}
	}
	return nil
}

// lessThan compares two numbers or two strings.
func lessThan(a, b any) (bool, error) {
	switch x := a.(type) {
	case string:
		if y, ok := b.(string); ok {
			return x < y, nil
		}
	case int, float64:
		fx := toFloat(x)
		switch y := b.(type) {
		case int, float64:
			return fx < toFloat(y), nil
		}
	}
	if b == nil || a == nil || isOther(a) || isOther(b) {
		return false, fmt.Errorf("compares numbers or strings, not %s", describeValue(a))
	}
	return false, fmt.Errorf("cannot compare %s with %s", describeValue(a), describeValue(b))
}

func isOther(v any) bool {
	switch v.(type) {
	case string, int, float64:
		return false
	}
	return true
}

func toFloat(v any) float64 {
	switch x := v.(type) {
	case int:
		return float64(x)
	case float64:
		return x
	}
	return 0
}

func (c AggregateConfig) fields() ([]aggField, error) {
	if len(c.Fields) == 0 {
		return nil, &FieldError{Field: "fields", Msg: `is empty: give at least one, such as orders: "count()"`}
	}
	var out []aggField
	for _, name := range sortedKeys(c.Fields) {
		if name == "key" {
			return nil, &FieldError{Field: "fields", Msg: "has a field called key: the output's key field is the group's key; name it otherwise"}
		}
		f, err := parseAggregate(name, c.Fields[name])
		if err != nil {
			return nil, &FieldError{Field: "fields", Err: err}
		}
		out = append(out, f)
	}
	return out, nil
}

func (c AggregateConfig) operator() (Operator, error) {
	key, err := CompileExpr(c.Key, AnyResult)
	if err != nil {
		return Operator{}, &FieldError{Field: "key", Err: err}
	}
	fields, err := c.fields()
	if err != nil {
		return Operator{}, err
	}
	if c.TTL < 0 {
		return Operator{}, &FieldError{Field: "ttl", Msg: "must be positive, or not set to keep groups forever"}
	}
	if c.Retractions {
		for _, f := range fields {
			switch f.fn {
			case AggCount, AggSum, AggAvg, AggFirst, AggMin, AggMax, AggDistinct:
			default:
				return Operator{}, &FieldError{Field: "retractions", Msg: fmt.Sprintf("takes rows out of count, sum, avg, min, max, distinct and first only: %s = %s(…) cannot say which value came last once the last one is taken out; not supported", f.name, f.fn)}
			}
		}
	}
	uses := UsesWithValue | UsesWithKey | UsesPosition
	for _, f := range fields {
		if f.arg != nil {
			uses |= f.arg.access()
		}
	}
	if c.UpdateBefore || c.Retractions {
		uses |= UsesRowKind | UsesWithRowKind
	}
	var opts []state.Option
	if c.TTL > 0 {
		opts = append(opts, state.WithTTL(c.TTL))
	}
	// The inputs are evaluated and checked before the exchange, so a
	// record with a bad input goes to the error policy and the state
	// never sees it.
	prepare := func(r Record) (any, error) {
		if !c.Retractions {
			if k := r.RowKind(); k.Retracts() {
				return nil, recordError(r, "aggregate", fmt.Errorf("the record is a retraction (%s) of an updating result, and the step does not take them: set retractions: true", k))
			}
		}
		inputs := make([]any, len(fields))
		for i, f := range fields {
			if f.arg == nil {
				continue
			}
			v, err := f.arg.Eval(r)
			if err != nil {
				return nil, recordError(r, "aggregate "+f.name, err)
			}
			if err := checkInput(f.fn, v); err != nil {
				return nil, recordError(r, "aggregate "+f.name, err)
			}
			inputs[i] = v
		}
		return inputs, nil
	}
	if c.UpdateBefore || c.Retractions {
		return Operator{Uses: uses, KeyBy: key, Prepare: prepare, TakesRetractions: c.Retractions, Timed: func(st *state.Store) Timed {
			return changelogAggregate(st, fields, opts, c)
		}}, nil
	}
	return Operator{Uses: uses, KeyBy: key, Prepare: prepare, Process: func(st *state.Store) func(Record) (bool, error) {
		accs := make([]*state.Value[Acc], len(fields))
		seen := make([]*state.Map[string, bool], len(fields))
		for i, f := range fields {
			accs[i] = state.NewValueWithCodec[Acc](st, "agg/"+f.name, accCodec{}, opts...)
			if f.fn == AggDistinct {
				seen[i] = state.NewMap[string, bool](st, "distinct/"+f.name, opts...)
			}
		}
		members := aggMembers(fields)
		return func(r Record) (bool, error) {
			inputs := r.Prepared().([]any)
			figures := make([]Acc, len(fields))
			for i, f := range fields {
				a, _ := accs[i].Get()
				if f.fn == AggDistinct {
					if inputs[i] != nil {
						k, ok := keyText(inputs[i])
						if !ok {
							b, _ := EncodeJSON(inputs[i])
							k = string(b)
						}
						if _, dup := seen[i].Get(k); !dup {
							a.N++
						}
					}
				} else if err := a.add(f.fn, inputs[i]); err != nil {
					return false, flow.Unrecoverable(fmt.Errorf("record %s: aggregate %s: %w", r.Position(), f.name, err))
				}
				figures[i] = a
			}
			for i, f := range fields {
				accs[i].Set(figures[i])
				if f.fn == AggDistinct && inputs[i] != nil {
					k, ok := keyText(inputs[i])
					if !ok {
						b, _ := EncodeJSON(inputs[i])
						k = string(b)
					}
					seen[i].Put(k, true)
				}
			}
			gk := r.GroupKey()
			b, err := encodeAggRow(members, fields, gk, figures)
			if err != nil {
				return false, flow.Unrecoverable(fmt.Errorf("record %s: aggregate: %w", r.Position(), err))
			}
			r.SetKey([]byte(gk))
			r.SetValue(b)
			return true, nil
		}
	}}, nil
}

// changelogAggregate is the aggregate of a step with update-before or
// retractions (docs/design.md, "Changelogs"): for each record it may emit
// the group's previous row as a retraction, then its new row, or only a
// delete when the group lost its last row. Retractions need the group's
// row count ("agg/#rows"): a group exists while it has rows.
func changelogAggregate(st *state.Store, fields []aggField, opts []state.Option, c AggregateConfig) Timed {
	accs := make([]*state.Value[Acc], len(fields))
	// vals, for min, max and distinct over retractions, counts each
	// value of the group (by its JSON text): a retraction of the group's
	// min finds the next one there, and distinct is the number of values.
	vals := make([]*state.Map[string, int64], len(fields))
	// seen, for distinct without retractions, is the values seen, as
	// the aggregate without a changelog keeps them (the same state).
	seen := make([]*state.Map[string, bool], len(fields))
	for i, f := range fields {
		accs[i] = state.NewValueWithCodec[Acc](st, "agg/"+f.name, accCodec{}, opts...)
		switch {
		case c.Retractions && (f.fn == AggMin || f.fn == AggMax || f.fn == AggDistinct):
			vals[i] = state.NewMap[string, int64](st, "vals/"+f.name, opts...)
		case f.fn == AggDistinct:
			seen[i] = state.NewMap[string, bool](st, "distinct/"+f.name, opts...)
		}
	}
	var rows *state.Value[int64]
	if c.Retractions {
		rows = state.NewValue[int64](st, "agg/#rows", opts...)
	}
	prev := make([]Acc, len(fields))
	next := make([]Acc, len(fields))
	members := aggMembers(fields)
	encode := func(r Record, gk string, figures []Acc) ([]byte, error) {
		b, err := encodeAggRow(members, fields, gk, figures)
		if err != nil {
			return nil, flow.Unrecoverable(fmt.Errorf("record %s: aggregate: %w", r.Position(), err))
		}
		return b, nil
	}
	emit := func(r Record, o Out, gk string, kind RowKind, figures []Acc) error {
		b, err := encode(r, gk, figures)
		if err != nil {
			return err
		}
		r.SetKey([]byte(gk))
		r.SetValue(b)
		r.SetRowKind(kind)
		o.Forward()
		return nil
	}
	return Timed{
		OnRecord: func(r Record, _ Clock, o Out) error {
			inputs := r.Prepared().([]any)
			retract := c.Retractions && r.RowKind().Retracts()
			existed := false
			var n int64
			if rows != nil {
				n, _ = rows.Get()
				existed = n > 0
			}
			for i := range fields {
				a, ok := accs[i].Get()
				if rows == nil && ok {
					existed = true
				}
				prev[i], next[i] = a, a
			}
			if retract && !existed {
				// The group is not there: its rows were forgotten (ttl), or
				// the retraction overtook its row. Nothing to take out.
				return nil
			}
			for i, f := range fields {
				var err error
				switch {
				case vals[i] != nil:
					err = next[i].countValue(f.fn, vals[i], inputs[i], retract)
				case seen[i] != nil:
					if inputs[i] != nil {
						k, ok := keyText(inputs[i])
						if !ok {
							b, _ := EncodeJSON(inputs[i])
							k = string(b)
						}
						if _, dup := seen[i].Get(k); !dup {
							next[i].N++
							seen[i].Put(k, true)
						}
					}
				case retract:
					err = next[i].sub(f.fn, inputs[i])
				default:
					err = next[i].add(f.fn, inputs[i])
				}
				if err != nil {
					return flow.Unrecoverable(fmt.Errorf("record %s: aggregate %s: %w", r.Position(), f.name, err))
				}
			}
			gk := r.GroupKey()
			if retract {
				n--
			} else if rows != nil {
				n++
			}
			if rows != nil && n == 0 {
				rows.Clear()
				for i := range fields {
					accs[i].Clear()
					if vals[i] != nil {
						vals[i].Clear()
					}
				}
				return emit(r, o, gk, RowDelete, prev)
			}
			if rows != nil {
				rows.Set(n)
			}
			for i := range fields {
				accs[i].Set(next[i])
			}
			if existed {
				// A record that leaves the group's row as it was emits
				// nothing: a retraction and an add of the same row change
				// nothing downstream, and a join of this result would
				// retract and re-emit every row it joined (docs/design.md,
				// "Changelogs").
				pb, err := encode(r, gk, prev)
				if err != nil {
					return err
				}
				nb, err := encode(r, gk, next)
				if err != nil {
					return err
				}
				if bytes.Equal(pb, nb) {
					return nil
				}
			}
			if c.UpdateBefore && existed {
				if err := emit(r, o, gk, RowUpdateBefore, prev); err != nil {
					return err
				}
			}
			return emit(r, o, gk, RowAdd, next)
		},
		OnTimer: func(key string, at int64, _ Clock, _ Out) error {
			return fmt.Errorf("aggregate: a timer of key %q at %d: the step sets none", key, at)
		},
	}
}

// countValue adds (or, retract, takes out) one input of min, max or
// distinct over a changelog: m counts the group's values by their JSON
// text. min and max keep their figure in a.V and look for the next one
// in m only when the last copy of the current one is taken out.
func (a *Acc) countValue(fn AggFunc, m *state.Map[string, int64], v any, retract bool) error {
	if v == nil {
		return nil
	}
	b, err := EncodeJSON(v)
	if err != nil {
		return err
	}
	k := string(b)
	n, _ := m.Get(k)
	if !retract {
		m.Put(k, n+1)
		if fn == AggDistinct {
			if n == 0 {
				a.N++
			}
			return nil
		}
		return a.add(fn, v)
	}
	if n == 0 {
		return nil // a value the group does not have (forgotten by ttl)
	}
	if n > 1 {
		m.Put(k, n-1)
		if fn != AggDistinct {
			a.N--
		}
		return nil
	}
	m.Delete(k)
	if fn == AggDistinct {
		a.N--
		return nil
	}
	a.N--
	if cur, err := EncodeJSON(a.V); err != nil || string(cur) != k {
		return err // another value is still the min (max)
	}
	// The last copy of the min (max) is gone: the next is among the rest.
	a.V = nil
	var ferr error
	m.All(func(text string, _ int64) bool {
		x, err := ParseJSON([]byte(text))
		if err != nil {
			ferr = err
			return false
		}
		if a.V == nil {
			a.V = x
			return true
		}
		less, err := lessThan(x, a.V)
		if err != nil {
			ferr = err
			return false
		}
		if less == (fn == AggMin) {
			a.V = x
		}
		return true
	})
	return ferr
}

// sub takes one input of fn out of the figure: count, sum and avg only
// (AggregateConfig.Retractions).
//
// first keeps the first row's value while the group has rows, whichever
// is taken out: it is for a value every row of the group has, such as a
// column the group is keyed by (what the SQL planner uses it for).
func (a *Acc) sub(fn AggFunc, v any) error {
	if fn == AggCount || fn == AggFirst {
		a.N--
		return nil
	}
	if v == nil {
		return nil
	}
	switch x := v.(type) {
	case int:
		if a.Float {
			a.F -= float64(x)
		} else {
			a.I -= int64(x)
		}
	case float64:
		if !a.Float {
			a.Float, a.F = true, float64(a.I)
		}
		a.F -= x
	default:
		return fmt.Errorf("%s needs numbers, and got %s", fn, describeValue(v))
	}
	a.N--
	return nil
}

// Aggregate keeps running aggregates per group (cfg.Key) and emits, for
// every record, its group's new figures: the key as the record key and a
// JSON object as its value. The operator's id is "aggregate:" and the key
// expression unless opts give another with flow.UID. Under
// flow.DeadLetterOnError the second stream carries the records whose key
// expression failed.
func Aggregate[T any](s flow.Stream[T], acc RecordAccess[T], cfg AggregateConfig, opts ...flow.OpOption) (flow.Stream[T], flow.Stream[flow.Failure[T]], error) {
	if cfg.Key == "" {
		cfg.Key = KeyRecordKey
	}
	op, err := cfg.operator()
	if err != nil {
		return s, flow.Stream[flow.Failure[T]]{}, fmt.Errorf("pipeline.Aggregate: %w", err)
	}
	out, bad, err := apply(s, acc, aggregateSpec.Name, aggregateSpec.DefaultID(Params{"key": cfg.Key}), op, cfg.OnError, opts...)
	if err != nil {
		return s, flow.Stream[flow.Failure[T]]{}, fmt.Errorf("pipeline.Aggregate: %w", err)
	}
	if bad == nil {
		return out, flow.Stream[flow.Failure[T]]{}, nil
	}
	return out, *bad, nil
}

// aggregateProps: an aggregate replaces records with its results; with
// ttl a key's totals are forgotten that long after its last record.
func aggregateProps(p Params) Props {
	pr := Props{Keys: KeysLost}
	if ttl := p.Duration("ttl"); ttl > 0 {
		pr.StateBound = "ttl " + durfmt.Short(ttl)
	}
	return pr
}

// aggMembers are the members of an aggregate's row, {"key": …} and its
// fields, in the order EncodeJSON writes a map's (a field named key
// replaces the group key, as it did in the map).
func aggMembers(fields []aggField) []outMember {
	kinds := map[string]int{"key": memberKey}
	for i, f := range fields {
		kinds[f.name] = i
	}
	var out []outMember
	for _, name := range sortedKeys(kinds) {
		n, _ := json.Marshal(name)
		out = append(out, outMember{name: append(n, ':'), kind: kinds[name]})
	}
	return out
}

// encodeAggRow writes an aggregate's row as EncodeJSON writes the map of
// its members, without the map and reflection (a tenth of the CPU of
// Nexmark's q4, docs/benchmarks.md).
func encodeAggRow(members []outMember, fields []aggField, gk string, figures []Acc) ([]byte, error) {
	b := make([]byte, 0, 16+len(gk)+24*len(fields))
	b = append(b, '{')
	for i, m := range members {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, m.name...)
		if m.kind == memberKey {
			b = appendJSONString(b, gk)
			continue
		}
		var err error
		if b, err = appendJSONValue(b, figures[m.kind].result(fields[m.kind].fn)); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}
