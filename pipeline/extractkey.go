package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/onceflow/onceflow/flow"
)

// ExtractKeyConfig configures ExtractKey.
type ExtractKeyConfig struct {
	// JSONField is the top-level field of the JSON object in the record
	// value whose value becomes the record key. Required.
	JSONField string
	// OnError is what happens to a record that has no such field (a
	// poison record): flow.FailOnError (default), flow.SkipOnError or
	// flow.DeadLetterOnError (sent to the failure stream).
	OnError flow.ErrorPolicy
}

var extractKeySpec = Spec{
	Retractions: passesRetractions,
	Name:        "extract-key",
	Summary:     "Makes the value of a top-level field of the JSON object in the record's value the record's key.",
	Doc: "A string is used as it is, a number as written in the JSON (so 42 and 4.2e1 are different keys). A record " +
		"whose value is not a JSON object, or whose object lacks the field or holds something else in it (null, a " +
		"boolean, an object, a list), is a poison record: the job's errors.policy decides what happens to it.",
	Fields: []Field{
		{Name: "json-field", Type: String, Required: true, Example: "user",
			Missing:     "name the JSON field whose value becomes the record key, such as json-field: user",
			Description: "The top-level field of the JSON object in the record value whose value becomes the record key. Part of the step's default id."},
	},
	IDField:  "json-field",
	Validate: func(p Params) error { return ExtractKeyConfig{JSONField: p.Text("json-field")}.validate() },
	Props:    losesKeys,
	Build: func(p Params, env Env) (Operator, error) {
		return ExtractKeyConfig{JSONField: p.Text("json-field"), OnError: env.Policy}.operator()
	},
	Describe: func(p Params) string {
		return fmt.Sprintf("extract-key from JSON field %q of the value", p.Text("json-field"))
	},
	GoFunc:  "ExtractKey",
	Example: "- extract-key: { json-field: user }",
}

func init() { Register(extractKeySpec) }

func (c ExtractKeyConfig) validate() error {
	if c.JSONField == "" {
		return &FieldError{Field: "json-field", Msg: "is empty: name the JSON field whose value becomes the record key, such as json-field: user"}
	}
	return nil
}

func (c ExtractKeyConfig) operator() (Operator, error) {
	if err := c.validate(); err != nil {
		return Operator{}, err
	}
	field := c.JSONField
	return Operator{Uses: UsesValue | UsesWithKey | UsesPosition, Map: func(r Record) error {
		key, err := jsonFieldKey(r.Value(), field)
		if err != nil {
			// The position is in the message because the engine's own
			// position may name the source's, not this record's. The
			// same record fails the same way after any restart: under
			// the fail policy the job stops instead of restarting
			// forever.
			return flow.Unrecoverable(fmt.Errorf("record %s: extract-key json-field %q: %w", r.Position(), field, err))
		}
		r.SetKey(key)
		return nil
	}}, nil
}

// ExtractKey makes the value of cfg.JSONField, a top-level field of the
// JSON object each record's value (acc.Value) holds, the record's key
// (acc.WithKey): a string as it is, a number as written in the JSON (so 42
// and 4.2e1 are different keys). A record whose value is not a JSON object,
// or whose object lacks the field or holds something else in it, is a
// poison record: cfg.OnError decides what happens to it, and under
// flow.DeadLetterOnError the second stream carries it (unchanged, with an
// error wrapping ErrNotExtractable). The error always wraps
// flow.ErrUnrecoverable too, so under flow.FailOnError the job stops
// instead of restarting into the same record. The step is stateless.
//
// The operator's id is "extract-key:" and the field, unless opts give
// another with flow.UID. The error is about cfg or acc (acc.Value,
// acc.WithKey and acc.Position are needed).
func ExtractKey[T any](s flow.Stream[T], acc RecordAccess[T], cfg ExtractKeyConfig, opts ...flow.OpOption) (flow.Stream[T], flow.Stream[flow.Failure[T]], error) {
	op, err := cfg.operator()
	if err != nil {
		return s, flow.Stream[flow.Failure[T]]{}, fmt.Errorf("pipeline.ExtractKey: %w", err)
	}
	id := extractKeySpec.DefaultID(Params{"json-field": cfg.JSONField})
	out, bad, err := apply(s, acc, extractKeySpec.Name, id, op, cfg.OnError, opts...)
	if err != nil {
		return s, flow.Stream[flow.Failure[T]]{}, fmt.Errorf("pipeline.ExtractKey: %w", err)
	}
	return out, *bad, nil
}

// ErrNotExtractable is wrapped by the error extract-key gives for a record
// it cannot take a key from.
var ErrNotExtractable = errors.New("no key in the record value")

// jsonFieldKey returns the value of field in the JSON object value as key
// bytes.
func jsonFieldKey(value []byte, field string) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(value, &obj); err != nil {
		if te := (*json.UnmarshalTypeError)(nil); errors.As(err, &te) {
			return nil, fmt.Errorf("%w: the value is a JSON %s, not an object", ErrNotExtractable, te.Value)
		}
		if len(value) == 0 {
			return nil, fmt.Errorf("%w: the value is empty, not a JSON object", ErrNotExtractable)
		}
		return nil, fmt.Errorf("%w: the value is not JSON (%v)", ErrNotExtractable, err)
	}
	if obj == nil {
		return nil, fmt.Errorf("%w: the value is JSON null, not an object", ErrNotExtractable)
	}
	raw, ok := obj[field]
	if !ok {
		return nil, fmt.Errorf("%w: the JSON object has no field %q", ErrNotExtractable, field)
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil { // unreachable: the object parsed
			return nil, fmt.Errorf("%w: %v", ErrNotExtractable, err)
		}
		return []byte(s), nil
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return []byte(raw), nil
	case 't', 'f':
		return nil, fmt.Errorf("%w: field %q is a boolean, not a string or number", ErrNotExtractable, field)
	case 'n':
		return nil, fmt.Errorf("%w: field %q is null, not a string or number", ErrNotExtractable, field)
	case '{':
		return nil, fmt.Errorf("%w: field %q is an object, not a string or number", ErrNotExtractable, field)
	default:
		return nil, fmt.Errorf("%w: field %q is a list, not a string or number", ErrNotExtractable, field)
	}
}
