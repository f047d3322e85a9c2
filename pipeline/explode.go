package pipeline

import (
	"fmt"

	"github.com/onceflow/onceflow/flow"
)

// ExplodeConfig configures Explode.
type ExplodeConfig struct {
	// Array is the expression giving the list to explode (value.items).
	Array string
	// Value, when set, builds each output's value, with item bound to the
	// element and index to its position (from 0); by default the element
	// itself is the value.
	Value string
	// OnError is what happens to a record the expressions fail on, or
	// whose Array is not a list.
	OnError flow.ErrorPolicy
}

var explodeSpec = Spec{
	Retractions: passesRetractions,
	Name:        "explode",
	Summary:     "Emits one record per element of a JSON list in the record (flat-map), with the element or a value built from it.",
	Doc: "Every output keeps the input's key, headers and timestamp. A record whose list is missing, null or empty " +
		"emits nothing; one where the expression gives something other than a list is a poison record: the job's " +
		"errors.policy decides. In value, item is the element and index its position from 0, besides the record's names " +
		"(value is the whole input value).",
	Fields: []Field{
		{Name: "array", Type: Expression, Required: true, Example: "value.items",
			Missing:     "give the expression of the list to explode, such as array: value.items",
			Description: "The list whose elements become records. Part of the step's default id."},
		{Name: "value", Type: Expression, Example: `{"order": value.order_id, "sku": item.sku, "qty": item.qty}`,
			Description: "Each output's value, with item bound to the element and index to its position; default: the element.",
			Vars:        []string{"item", "index"}},
	},
	IDField: "array",
	Validate: func(p Params) error {
		_, err := explodeConfig(p, Env{}).operator()
		return err
	},
	Props:    losesKeys,
	Build:    func(p Params, env Env) (Operator, error) { return explodeConfig(p, env).operator() },
	Describe: func(p Params) string { return "explode " + p.Text("array") },
	GoFunc:   "Explode",
	Example:  `- explode: { array: value.items, value: '{"order": value.order_id, "sku": item.sku}' }`,
}

func init() { Register(explodeSpec) }

func explodeConfig(p Params, env Env) ExplodeConfig {
	return ExplodeConfig{Array: p.Text("array"), Value: p.Text("value"), OnError: env.Policy}
}

func (c ExplodeConfig) operator() (Operator, error) {
	arr, err := CompileExpr(c.Array, AnyResult)
	if err != nil {
		return Operator{}, &FieldError{Field: "array", Err: err}
	}
	uses := arr.access() | UsesWithValue | UsesPosition
	var value *Expr
	if c.Value != "" {
		if value, err = CompileExpr(c.Value, AnyResult, "item", "index"); err != nil {
			return Operator{}, &FieldError{Field: "value", Err: err}
		}
		uses |= value.access()
	}
	return Operator{Uses: uses, Each: func(r Record, emit func()) error {
		v, err := arr.Eval(r)
		if err != nil {
			return recordError(r, "explode", err)
		}
		if v == nil {
			return nil
		}
		items, ok := v.([]any)
		if !ok {
			return recordError(r, "explode", fmt.Errorf("expression %q gave %s, not a list", c.Array, describeValue(v)))
		}
		outs := make([][]byte, len(items))
		for i, it := range items {
			out := it
			if value != nil {
				if out, err = value.EvalWith(r, it, i); err != nil {
					return recordError(r, "explode value", err)
				}
			}
			if outs[i], err = EncodeJSON(out); err != nil {
				return recordError(r, "explode value", err)
			}
		}
		for _, b := range outs {
			r.SetValue(b)
			emit()
		}
		return nil
	}}, nil
}

// Explode emits one record per element of cfg.Array. The second stream
// carries, under flow.DeadLetterOnError, the records it failed on. The
// operator's id is "explode:" and the expression unless opts give another
// with flow.UID.
func Explode[T any](s flow.Stream[T], acc RecordAccess[T], cfg ExplodeConfig, opts ...flow.OpOption) (flow.Stream[T], flow.Stream[flow.Failure[T]], error) {
	return applyStateless(s, acc, explodeSpec, Params{"array": cfg.Array}, cfg.OnError, opts, cfg.operator)
}
