package pipeline

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/onceflow/onceflow/flow"
)

// MapConfig configures Map. Every expression sees the record as it came
// in; the results are applied together, in the order the fields are
// listed here.
type MapConfig struct {
	// Value, when set, is the new value: an expression whose result is
	// written as JSON (a map literal builds an object:
	// {"user": value.user_id, "total": value.amount * 1.19}).
	Value string
	// Set sets fields of the JSON object in the value (after Value) to
	// the expressions' results; a name with dots (a.b) sets a nested
	// field, creating the objects on the way.
	Set map[string]string
	// Remove removes fields of the JSON object in the value (after Set);
	// a name with dots removes a nested field.
	Remove []string
	// Key, when set, is the new key (a string or number).
	Key string
	// Topic, when set, is the topic the record is written to.
	Topic string
	// Headers sets headers to the expressions' results (a string as it
	// is, anything else as JSON).
	Headers map[string]string
	// Format is how Value's result is written: FormatJSON (default) or
	// FormatRaw (a string as its bytes, a number in decimal, a boolean
	// as true or false; a list or an object is an error).
	Format string
	// OnError is what happens to a record an expression fails on.
	OnError flow.ErrorPolicy
}

// The output formats of map's value.
const (
	FormatJSON = "json"
	FormatRaw  = "raw"
)

var mapSpec = Spec{
	Retractions: passesRetractions,
	Name:        "map",
	Summary:     "Reshapes each record: builds a new JSON value, sets or removes fields, sets the key, the topic or headers.",
	Doc: "Every expression sees the record as it came in, and the results are applied in this order: value, set, " +
		"remove, key, topic, headers. A value that is not a JSON object, when set or remove need one, or an expression " +
		"that fails on a record makes it a poison record: the job's errors.policy decides. set and remove edit the JSON " +
		"text in place (the other fields keep their order and form, new ones are appended); a value built by value is " +
		"written as JSON with its object keys sorted.",
	Fields: []Field{
		{Name: "value", Type: Expression, Example: `{"user": value.user_id, "total": value.amount * 1.19}`,
			Description: "The new value: the expression's result written as JSON."},
		{Name: "set", Type: ExprMap, Example: `{ total: "value.amount * 1.19", source: "topic" }`,
			Description: "Fields of the JSON object to set, each to an expression's result; a.b sets a nested field."},
		{Name: "remove", Type: StringList, Example: "[ items, debug.trace ]",
			Description: "Fields of the JSON object to remove; a.b removes a nested field."},
		{Name: "key", Type: Expression, Example: "value.user_id",
			Description: "The new key: the expression's result, a string or number."},
		{Name: "topic", Type: Expression, Example: `"orders-" + value.country`,
			Description: "The topic the record is written to: the expression's result, a string."},
		{Name: "headers", Type: ExprMap, Example: `{ origin: "topic" }`,
			Description: "Headers to set, each to an expression's result (a string as it is, anything else as JSON)."},
		{Name: "format", Type: String, Default: FormatJSON, Example: FormatRaw,
			Description: "How value's result is written: json, or raw (a string as its bytes, a number in decimal; for consumers that read plain text)."},
	},
	Validate: func(p Params) error {
		_, err := mapConfig(p, Env{}).operator()
		return err
	},
	Props:    mapProps,
	Build:    func(p Params, env Env) (Operator, error) { return mapConfig(p, env).operator() },
	Describe: func(p Params) string { return mapConfig(p, Env{}).describe() },
	GoFunc:   "Map",
	Example:  `- map: { set: { total: "value.amount * 1.19" }, remove: [ items ], key: value.user_id }`,
}

func init() { Register(mapSpec) }

func mapConfig(p Params, env Env) MapConfig {
	return MapConfig{Value: p.Text("value"), Set: p.Map("set"), Remove: p.List("remove"), Key: p.Text("key"),
		Topic: p.Text("topic"), Headers: p.Map("headers"), Format: p.Text("format"), OnError: env.Policy}
}

func (c MapConfig) describe() string {
	var parts []string
	if c.Value != "" {
		parts = append(parts, "value = "+c.Value)
		if c.Format == FormatRaw {
			parts[len(parts)-1] += " (raw)"
		}
	}
	for _, k := range sortedKeys(c.Set) {
		parts = append(parts, k+" = "+c.Set[k])
	}
	if len(c.Remove) > 0 {
		parts = append(parts, "remove "+strings.Join(c.Remove, ", "))
	}
	if c.Key != "" {
		parts = append(parts, "key = "+c.Key)
	}
	if c.Topic != "" {
		parts = append(parts, "topic = "+c.Topic)
	}
	for _, k := range sortedKeys(c.Headers) {
		parts = append(parts, "header "+k+" = "+c.Headers[k])
	}
	return "map: " + strings.Join(parts, "; ")
}

type namedExpr struct {
	name string
	path []string
	e    *Expr
}

func compileNamed(field string, m map[string]string) ([]namedExpr, error) {
	var out []namedExpr
	for _, k := range sortedKeys(m) {
		e, err := CompileExpr(m[k], AnyResult)
		if err != nil {
			return nil, &FieldError{Field: field, Err: fmt.Errorf("%s: %w", k, err)}
		}
		if k == "" {
			return nil, &FieldError{Field: field, Msg: "has an empty name"}
		}
		out = append(out, namedExpr{name: k, path: strings.Split(k, "."), e: e})
	}
	return out, nil
}

func (c MapConfig) operator() (Operator, error) {
	if c.Value == "" && len(c.Set) == 0 && len(c.Remove) == 0 && c.Key == "" && c.Topic == "" && len(c.Headers) == 0 {
		return Operator{}, &FieldError{Field: "value", Msg: "is missing, and so are set, remove, key, topic and headers: give at least one"}
	}
	raw := false
	switch c.Format {
	case "", FormatJSON:
	case FormatRaw:
		if c.Value == "" {
			return Operator{}, &FieldError{Field: "format", Msg: "raw applies to value, which is not set"}
		}
		if len(c.Set) > 0 || len(c.Remove) > 0 {
			return Operator{}, &FieldError{Field: "format", Msg: "raw cannot go with set or remove, which change a JSON object"}
		}
		raw = true
	default:
		return Operator{}, &FieldError{Field: "format", Msg: fmt.Sprintf("is %q: write json or raw", c.Format)}
	}
	var value, key, topic *Expr
	var err error
	uses := Access(0)
	compile := func(field, src string) *Expr {
		if src == "" || err != nil {
			return nil
		}
		var e *Expr
		if e, err = CompileExpr(src, AnyResult); err != nil {
			err = &FieldError{Field: field, Err: err}
			return nil
		}
		uses |= e.access()
		return e
	}
	value, key, topic = compile("value", c.Value), compile("key", c.Key), compile("topic", c.Topic)
	if err != nil {
		return Operator{}, err
	}
	set, err := compileNamed("set", c.Set)
	if err != nil {
		return Operator{}, err
	}
	headers, err := compileNamed("headers", c.Headers)
	if err != nil {
		return Operator{}, err
	}
	for _, n := range append(append([]namedExpr(nil), set...), headers...) {
		uses |= n.e.access()
	}
	remove := make([][]string, len(c.Remove))
	for i, r := range c.Remove {
		if r == "" {
			return Operator{}, &FieldError{Field: "remove", Msg: "has an empty field name"}
		}
		remove[i] = strings.Split(r, ".")
	}
	reshapes := value != nil || len(set) > 0 || len(remove) > 0
	if reshapes {
		uses |= UsesValue | UsesWithValue | UsesPosition
	}
	if key != nil {
		uses |= UsesWithKey
	}
	if topic != nil {
		uses |= UsesWithTopic
	}
	if len(headers) > 0 {
		uses |= UsesWithHeader
	}
	return Operator{Uses: uses, Map: func(r Record) error {
		// Evaluate everything on the record as it came in.
		var newValue any
		haveValue := false
		if value != nil {
			v, err := value.Eval(r)
			if err != nil {
				return recordError(r, "map value", err)
			}
			newValue, haveValue = v, true
		}
		setVals := make([]any, len(set))
		for i, n := range set {
			v, err := n.e.Eval(r)
			if err != nil {
				return recordError(r, "map set "+n.name, err)
			}
			setVals[i] = v
		}
		var newKey, newTopic string
		if key != nil {
			v, err := key.EvalKey(r)
			if err != nil {
				return recordError(r, "map key", err)
			}
			newKey = v
		}
		if topic != nil {
			v, err := topic.Eval(r)
			if err != nil {
				return recordError(r, "map topic", err)
			}
			s, ok := v.(string)
			if !ok || s == "" {
				return recordError(r, "map topic", fmt.Errorf("expression %q gave %s, not a topic name", topic.src, describeValue(v)))
			}
			newTopic = s
		}
		hdrs := make([][]byte, len(headers))
		for i, n := range headers {
			v, err := n.e.Eval(r)
			if err != nil {
				return recordError(r, "map header "+n.name, err)
			}
			if s, ok := v.(string); ok {
				hdrs[i] = []byte(s)
			} else if hdrs[i], err = EncodeJSON(v); err != nil {
				return recordError(r, "map header "+n.name, err)
			}
		}
		// Apply.
		if reshapes && !haveValue {
			// Edit the JSON text in place: no parse of the rest, and
			// the other fields keep their order and form.
			b, err := editJSON(r.Value(), set, setVals, remove)
			if err != nil {
				return recordError(r, "map", err)
			}
			r.SetValue(b)
		} else if reshapes {
			if !haveValue && (len(set) > 0 || len(remove) > 0) {
				v, err := ParseJSON(r.Value())
				if err != nil {
					return recordError(r, "map", fmt.Errorf("the value is not JSON: %w", err))
				}
				newValue = v
			}
			if len(set) > 0 || len(remove) > 0 {
				obj, ok := newValue.(map[string]any)
				if !ok {
					return recordError(r, "map", fmt.Errorf("set and remove need a JSON object, and the value is %s", describeValue(newValue)))
				}
				for i, n := range set {
					if err := setPath(obj, n.path, setVals[i]); err != nil {
						return recordError(r, "map set "+n.name, err)
					}
				}
				for _, p := range remove {
					removePath(obj, p)
				}
			}
			var b []byte
			var err error
			if raw {
				b, err = rawText(newValue)
			} else {
				b, err = EncodeJSON(newValue)
			}
			if err != nil {
				return recordError(r, "map value", err)
			}
			r.SetValue(b)
		}
		if key != nil {
			r.SetKey([]byte(newKey))
		}
		if topic != nil {
			r.SetTopic(newTopic)
		}
		for i, n := range headers {
			r.SetHeader(n.name, hdrs[i])
		}
		return nil
	}}, nil
}

// editJSON sets and removes fields of the JSON object in value.
func editJSON(value []byte, set []namedExpr, vals []any, remove [][]string) ([]byte, error) {
	if !gjson.ValidBytes(value) {
		return nil, errors.New("the value is not JSON")
	}
	if !gjson.ParseBytes(value).IsObject() {
		return nil, fmt.Errorf("set and remove need a JSON object, and the value is %s", describeValue(resultValue(gjson.ParseBytes(value))))
	}
	out := append([]byte(nil), value...)
	for i, n := range set {
		// A field on the way that is not an object cannot hold one.
		for j := 1; j < len(n.path); j++ {
			at := gjson.GetBytes(out, jsonPath(n.path[:j]))
			if at.Exists() && at.Type != gjson.Null && !at.IsObject() {
				return nil, fmt.Errorf("cannot set %s: %s is %s, not an object", n.name, strings.Join(n.path[:j], "."), describeValue(resultValue(at)))
			}
		}
		enc, err := EncodeJSON(vals[i])
		if err != nil {
			return nil, fmt.Errorf("set %s: %w", n.name, err)
		}
		if out, err = sjson.SetRawBytesOptions(out, jsonPath(n.path), enc, &sjson.Options{ReplaceInPlace: true}); err != nil {
			return nil, fmt.Errorf("set %s: %w", n.name, err)
		}
	}
	for _, p := range remove {
		var err error
		if out, err = sjson.DeleteBytes(out, jsonPath(p)); err != nil {
			return nil, fmt.Errorf("remove %s: %w", strings.Join(p, "."), err)
		}
	}
	return out, nil
}

// jsonPath is a field path in gjson/sjson syntax.
func jsonPath(segs []string) string {
	esc := make([]string, len(segs))
	for i, s := range segs {
		esc[i] = escapePath(s)
	}
	return strings.Join(esc, ".")
}

// rawText writes a scalar as plain text.
func rawText(v any) ([]byte, error) {
	switch x := v.(type) {
	case []byte:
		return x, nil
	case nil:
		return nil, fmt.Errorf("the value is %s: raw needs a string, number or boolean", describeValue(v))
	}
	if s, ok := keyText(v); ok {
		return []byte(s), nil
	}
	return nil, fmt.Errorf("the value is %s: raw needs a string, number or boolean (or format: json)", describeValue(v))
}

// setPath sets obj[a][b]... = v, creating objects on the way.
func setPath(obj map[string]any, path []string, v any) error {
	for i, seg := range path[:len(path)-1] {
		next, ok := obj[seg]
		if !ok || next == nil {
			m := map[string]any{}
			obj[seg] = m
			obj = m
			continue
		}
		m, ok := next.(map[string]any)
		if !ok {
			return fmt.Errorf("cannot set %s: %s is %s, not an object", strings.Join(path, "."), strings.Join(path[:i+1], "."), describeValue(next))
		}
		obj = m
	}
	obj[path[len(path)-1]] = v
	return nil
}

// removePath removes obj[a][b]...; a missing field is no error.
func removePath(obj map[string]any, path []string) {
	for _, seg := range path[:len(path)-1] {
		m, ok := obj[seg].(map[string]any)
		if !ok {
			return
		}
		obj = m
	}
	delete(obj, path[len(path)-1])
}

// Map reshapes each record as cfg says. The second stream carries, under
// flow.DeadLetterOnError, the records an expression failed on. The
// operator's id is "map" unless opts give another with flow.UID.
func Map[T any](s flow.Stream[T], acc RecordAccess[T], cfg MapConfig, opts ...flow.OpOption) (flow.Stream[T], flow.Stream[flow.Failure[T]], error) {
	return applyStateless(s, acc, mapSpec, nil, cfg.OnError, opts, cfg.operator)
}

// mapProps: map changes records; with topic it sets each one's topic from
// an expression, known only per record.
func mapProps(p Params) Props {
	return Props{Keys: KeysLost, Routes: p.Text("topic") != ""}
}
