package pipeline

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/durfmt"
	"github.com/onceflow/onceflow/state"
)

// TopNConfig configures TopN.
type TopNConfig struct {
	// Key is what partitions the rows (KeyRecordKey, or an expression
	// with a string or number value): each partition has its own top N.
	Key string
	// N is how many rows a partition keeps; 1 or more.
	N int
	// Order are the sort expressions, most significant first, each
	// "expr", "expr asc" or "expr desc", optionally followed by "nulls
	// first" or "nulls last".
	Order []string
	// RankField is the name of the field the output's value gets with
	// the rank (1 to N). Default "rank".
	RankField string
	// TTL, when positive, forgets a partition's rows TTL after its last
	// record.
	TTL time.Duration
	// OnError is what happens to a record whose value is not a JSON
	// object or on which a sort expression fails.
	OnError flow.ErrorPolicy
}

// maxTopN bounds n: every row that enters a partition's top N rewrites
// the ranks below it, so a large n makes every record cost as much.
const maxTopN = 10000

var topNSpec = Spec{
	Name:    "top-n",
	Summary: "Keeps the n best rows of every key, by sort expressions, and emits an upsert for every rank whose row changed.",
	Doc: "The rows of a key are ordered by `order`, most significant expression first. A record that ranks among the " +
		"key's best `n` takes its place, and every rank from its own down to the last kept gets an output record: the " +
		"rank's row (the input's JSON object value, with field `rank-field` set to the rank, 1 to n), keyed by the JSON " +
		"array `[key, rank]`, with the timestamp of the record that changed it. A consumer that keeps the newest row per " +
		"key and rank, such as a database table with that primary key, holds the current top n: the output is an upsert " +
		"changelog, and never needs a row deleted, since a key's ranks only fill up. A record that does not rank emits " +
		"nothing.\n\n" +
		"Ties: rows whose sort values are all equal rank in arrival order, the earlier first (a new row goes below the rows " +
		"equal to it); give a last sort expression that is unique, such as a sequence number, for an order that does not " +
		"depend on arrival. Values compare as numbers with numbers and text with text (text by its bytes, which is Unicode " +
		"code point order); nulls come first ascending and last descending unless `nulls first` or `nulls last` says " +
		"otherwise; values of different kinds order as false < true < numbers < text < other JSON.\n\n" +
		"The rows kept are keyed state under the step's id, at most n per key, restored exactly with the checkpoint; with " +
		"`ttl` a key's rows are forgotten that long after its last record, and the key starts afresh: its ranks are " +
		"written again from 1 as rows come, and a consumer keeps its older rows in the ranks not written yet. The value must be a JSON object without a field " +
		"named `rank-field`; a record whose value is not, or on which a sort expression fails or gives a number that is " +
		"not finite, is a poison record for the job's errors.policy, evaluated before the records are partitioned.",
	Fields: []Field{
		{Name: "key", Type: KeyExpr, Default: KeyRecordKey, Example: "value.auction",
			Description: "What partitions the rows: each key keeps its own top n. Part of the step's default id."},
		keyOfField,
		{Name: "n", Type: Int, Required: true, Example: "3",
			Missing:     "give how many rows each key keeps, such as n: 3",
			Description: fmt.Sprintf("How many rows each key keeps, 1 to %d.", maxTopN)},
		{Name: "order", Type: StringList, Required: true, Example: "[ value.price desc, value.seq ]",
			Missing:     "give the sort expressions, most significant first, such as order: [ value.price desc, value.seq ]",
			Description: "The sort expressions, most significant first: each `expr`, `expr asc` or `expr desc`, optionally followed by `nulls first` or `nulls last`."},
		{Name: "rank-field", Type: String, Default: "rank", Example: "rn",
			Description: "The field of the output's value that holds the rank."},
		{Name: "ttl", Type: Duration, Example: "7d",
			Description: "Forget a key's rows this long after its last record; not set: keep them forever."},
	},
	IDField:     "key",
	StateFields: []string{"key", "key-of", "n", "order"},
	Validate: func(p Params) error {
		_, err := topNConfig(p, Env{}).operator()
		return err
	},
	Stateful: true,
	Props:    topNProps,
	Build:    func(p Params, env Env) (Operator, error) { return topNConfig(p, env).operator() },
	Describe: func(p Params) string { return topNConfig(p, Env{}).describe() },
	GoFunc:   "TopN",
	Example:  "- top-n: { key: value.auction, n: 3, order: [ value.price desc, value.seq ] }",
}

func init() { Register(topNSpec) }

func topNConfig(p Params, env Env) TopNConfig {
	return TopNConfig{Key: p.Text("key"), N: p.Int("n"), Order: p.List("order"), RankField: p.Text("rank-field"),
		TTL: p.Duration("ttl"), OnError: env.Policy}
}

func (c TopNConfig) describe() string {
	key := c.Key
	if key == "" {
		key = KeyRecordKey
	}
	s := fmt.Sprintf("top %d by %s, ordered by %s", c.N, key, strings.Join(c.Order, ", "))
	if c.TTL > 0 {
		s += ", ttl " + durfmt.Short(c.TTL)
	}
	return s
}

// sortKey is one compiled sort expression.
type sortKey struct {
	expr       *Expr
	desc       bool
	nullsFirst bool
}

// parseSortKey reads "expr [asc|desc] [nulls first|nulls last]".
func parseSortKey(src string) (sortKey, error) {
	rest := strings.TrimSpace(src)
	cut := func(word string) bool {
		i := len(rest) - len(word)
		if i > 0 && strings.EqualFold(rest[i:], word) && (rest[i-1] == ' ' || rest[i-1] == '\t') {
			rest = strings.TrimSpace(rest[:i])
			return true
		}
		return false
	}
	var nulls *bool
	if cut("first") || cut("last") {
		first := strings.HasSuffix(strings.ToLower(src), "first")
		if !cut("nulls") {
			return sortKey{}, fmt.Errorf("%q: write nulls first or nulls last after the expression", src)
		}
		nulls = &first
	}
	k := sortKey{}
	if cut("desc") {
		k.desc = true
	} else {
		cut("asc")
	}
	e, err := CompileExpr(rest, AnyResult)
	if err != nil {
		return sortKey{}, fmt.Errorf("%q: %w", src, err)
	}
	k.expr = e
	// Nulls are the least values unless said otherwise: first ascending,
	// last descending.
	k.nullsFirst = !k.desc
	if nulls != nil {
		k.nullsFirst = *nulls
	}
	return k, nil
}

func (c TopNConfig) validate() ([]sortKey, error) {
	var errs []error
	if c.N < 1 || c.N > maxTopN {
		errs = append(errs, &FieldError{Field: "n", Msg: fmt.Sprintf("is %d: give a number of rows from 1 to %d", c.N, maxTopN)})
	}
	if len(c.Order) == 0 {
		errs = append(errs, &FieldError{Field: "order", Msg: "is empty: give at least one sort expression, such as value.price desc"})
	}
	var keys []sortKey
	for _, o := range c.Order {
		k, err := parseSortKey(o)
		if err != nil {
			errs = append(errs, &FieldError{Field: "order", Err: err})
			continue
		}
		keys = append(keys, k)
	}
	if c.RankField == "" {
		errs = append(errs, &FieldError{Field: "rank-field", Msg: "is empty: name the field that holds the rank, such as rank"})
	}
	if c.TTL < 0 {
		errs = append(errs, &FieldError{Field: "ttl", Msg: "must be positive, or not set to keep the rows forever"})
	}
	return keys, errors.Join(errs...)
}

// topRow is a row kept in a key's top N: its sort values and its value
// (a JSON object, without the rank field).
type topRow struct {
	Sort  []any           `json:"s"`
	Value json.RawMessage `json:"v"`
}

// UnmarshalJSON reads a row back from keyed state, its sort values as
// the expressions give them (integers stay int: the order after a
// restore is the order before it).
func (t *topRow) UnmarshalJSON(b []byte) error {
	var raw struct {
		Sort  []json.RawMessage `json:"s"`
		Value json.RawMessage   `json:"v"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*t = topRow{Sort: make([]any, len(raw.Sort)), Value: raw.Value}
	for i, s := range raw.Sort {
		v, err := ParseJSON(s)
		if err != nil {
			return err
		}
		t.Sort[i] = v
	}
	return nil
}

// kindRank orders values of different kinds: null, booleans, numbers,
// text, anything else.
func kindRank(v any) int {
	switch v.(type) {
	case nil:
		return 0
	case bool:
		return 1
	case int, float64:
		return 2
	case string:
		return 3
	}
	return 4
}

// compareValues is a total order of the values sort expressions give
// (nulls aside): -1, 0 or 1.
func compareValues(a, b any) int {
	ka, kb := kindRank(a), kindRank(b)
	if ka != kb {
		return cmp.Compare(ka, kb)
	}
	switch x := a.(type) {
	case bool:
		y := b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case int:
		if y, ok := b.(int); ok {
			return cmp.Compare(x, y)
		}
		return cmp.Compare(float64(x), b.(float64))
	case float64:
		return cmp.Compare(x, toFloat(b))
	case string:
		return strings.Compare(x, b.(string))
	case nil:
		return 0
	}
	ea, _ := json.Marshal(a)
	eb, _ := json.Marshal(b)
	return bytes.Compare(ea, eb)
}

// before reports whether a row with sort values a ranks strictly before
// one with b.
func before(keys []sortKey, a, b []any) bool {
	for i, k := range keys {
		x, y := a[i], b[i]
		var c int
		switch {
		case x == nil && y == nil:
			c = 0
		case x == nil:
			c = 1
			if k.nullsFirst {
				c = -1
			}
		case y == nil:
			c = -1
			if k.nullsFirst {
				c = 1
			}
		default:
			c = compareValues(x, y)
			if k.desc {
				c = -c
			}
		}
		if c != 0 {
			return c < 0
		}
	}
	return false
}

// topNPrep is what top-n's stateless step computes of a record.
type topNPrep struct {
	sort  []any
	value []byte // the JSON object, trimmed
}

func (c TopNConfig) operator() (Operator, error) {
	keys, err := c.validate()
	if err != nil {
		return Operator{}, err
	}
	key, err := keyExpr(c.Key)
	if err != nil {
		return Operator{}, err
	}
	uses := UsesValue | UsesPosition | UsesMeta | UsesNew
	for _, k := range keys {
		uses |= k.expr.access()
	}
	var opts []state.Option
	if c.TTL > 0 {
		opts = append(opts, state.WithTTL(c.TTL))
	}
	rankField := c.RankField
	rankName, _ := json.Marshal(rankField)
	// The sort values and the value are read and checked before the
	// exchange: a record top-n cannot rank is a poison record there.
	prepare := func(r Record) (any, error) {
		v := bytes.TrimSpace(r.Value())
		if len(v) == 0 || v[0] != '{' || !json.Valid(v) {
			return nil, recordError(r, "top-n", errors.New("the value is not a JSON object: top-n adds the rank to the row's fields"))
		}
		has := false
		gjson.ParseBytes(v).ForEach(func(k, _ gjson.Result) bool {
			has = k.String() == rankField
			return !has
		})
		if has {
			return nil, recordError(r, "top-n", fmt.Errorf("the value has a field %s already: set rank-field to another name", rankField))
		}
		// The partition key is written in the output's JSON key: text
		// that is not UTF-8 would be changed there, and two partitions
		// could write the same rows.
		if k, err := key.EvalKey(r); err == nil && !utf8.ValidString(k) {
			return nil, recordError(r, "top-n", fmt.Errorf("the key %q is not UTF-8 text, and the output key is JSON text: key the step by text (such as a field of the value)", k))
		}
		p := topNPrep{sort: make([]any, len(keys)), value: append([]byte(nil), v...)}
		for i, k := range keys {
			x, err := k.expr.Eval(r)
			if err != nil {
				return nil, recordError(r, "top-n order "+k.expr.String(), err)
			}
			if f, ok := x.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
				return nil, recordError(r, "top-n order "+k.expr.String(), fmt.Errorf("%v is not a number it can sort by", f))
			}
			p.sort[i] = x
		}
		return p, nil
	}
	n := c.N
	return Operator{Uses: uses, KeyBy: key, Prepare: prepare, Timed: func(st *state.Store) Timed {
		top := state.NewValue[[]topRow](st, "top", opts...)
		return Timed{
			OnRecord: func(r Record, _ Clock, out Out) error {
				p := r.Prepared().(topNPrep)
				rows, _ := top.Get()
				// The new row goes below every row that does not rank
				// after it: equal rows keep their arrival order.
				at := len(rows)
				for i := range rows {
					if before(keys, p.sort, rows[i].Sort) {
						at = i
						break
					}
				}
				if at >= n {
					if c.TTL > 0 {
						top.Set(rows) // the key was seen: its ttl starts again
					}
					return nil
				}
				next := make([]topRow, 0, min(len(rows)+1, n))
				next = append(next, rows[:at]...)
				next = append(next, topRow{Sort: p.sort, Value: p.value})
				next = append(next, rows[at:min(len(rows), n-1)]...)
				top.Set(next)
				ts := r.Meta().Timestamp
				gk, _ := json.Marshal(r.GroupKey()) // a string always encodes
				for i := at; i < len(next); i++ {
					rank := i + 1
					// New slices for every record: the record holds them.
					kb := make([]byte, 0, len(gk)+8)
					kb = append(kb, '[')
					kb = append(kb, gk...)
					kb = append(kb, ',')
					kb = strconv.AppendInt(kb, int64(rank), 10)
					kb = append(kb, ']')
					out.Emit(kb, withRank(make([]byte, 0, len(next[i].Value)+len(rankName)+8), next[i].Value, rankName, rank), ts)
				}
				return nil
			},
			OnTimer: func(key string, at int64, _ Clock, _ Out) error {
				return fmt.Errorf("top-n registers no timers, and one of key %q at %d is due", key, at)
			},
		}
	}}, nil
}

// withRank appends obj, a JSON object, with the field name (JSON text)
// set to rank as its last field.
func withRank(dst, obj, name []byte, rank int) []byte {
	body := bytes.TrimSpace(obj[1 : len(obj)-1])
	dst = append(dst, '{')
	dst = append(dst, body...)
	if len(body) > 0 {
		dst = append(dst, ',')
	}
	dst = append(dst, name...)
	dst = append(dst, ':')
	dst = strconv.AppendInt(dst, int64(rank), 10)
	return append(dst, '}')
}

// TopN keeps the cfg.N best rows of every key (cfg.Key, by default the
// record key) ordered by cfg.Order, and emits, for every record that
// ranks, the rows of every rank whose row changed: the row's JSON object
// with cfg.RankField set to its rank, keyed by the JSON array [key,
// rank]. Rows with equal sort values rank in arrival order. The
// operator's id is "top-n:" and the key expression unless opts give
// another with flow.UID. Under flow.DeadLetterOnError the second stream
// carries the records top-n could not rank (a value that is not a JSON
// object, a sort expression that failed).
func TopN[T any](s flow.Stream[T], acc RecordAccess[T], cfg TopNConfig, opts ...flow.OpOption) (flow.Stream[T], flow.Stream[flow.Failure[T]], error) {
	if cfg.Key == "" {
		cfg.Key = KeyRecordKey
	}
	if cfg.RankField == "" {
		cfg.RankField = "rank"
	}
	op, err := cfg.operator()
	if err != nil {
		return s, flow.Stream[flow.Failure[T]]{}, fmt.Errorf("pipeline.TopN: %w", err)
	}
	out, bad, err := apply(s, acc, topNSpec.Name, topNSpec.DefaultID(Params{"key": cfg.Key}), op, cfg.OnError, opts...)
	if err != nil {
		return s, flow.Stream[flow.Failure[T]]{}, fmt.Errorf("pipeline.TopN: %w", err)
	}
	return out, *bad, nil
}

// topNProps: top-n replaces records with its rows, keyed by key and
// rank; with ttl a key's rows are forgotten that long after its last
// record, else its state is bounded by n rows per key.
func topNProps(p Params) Props {
	pr := Props{Keys: KeysLost}
	if ttl := p.Duration("ttl"); ttl > 0 {
		pr.StateBound = "ttl " + durfmt.Short(ttl)
	}
	return pr
}
