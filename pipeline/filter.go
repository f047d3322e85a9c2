package pipeline

import (
	"fmt"

	"github.com/onceflow/onceflow/flow"
)

// FilterConfig configures Filter.
type FilterConfig struct {
	// If is the condition a record must meet to go on (an expression
	// whose value is true or false, such as value.amount > 100).
	If string
	// OnError is what happens to a record the condition cannot be
	// evaluated on (a field it compares is missing, the value is not
	// JSON): flow.FailOnError (default), SkipOnError or DeadLetterOnError.
	OnError flow.ErrorPolicy
}

var filterSpec = Spec{
	Retractions: passesRetractions,
	Name:        "filter",
	Summary:     "Keeps the records for which a condition holds and drops the others.",
	Doc: "The condition is an expression whose value is true or false. A record it cannot be evaluated on (a " +
		"compared field is missing, so null is compared with a number; the value is not JSON) is a poison record: " +
		"the job's errors.policy decides. Write `value.amount ?? 0 > 100` to treat a missing field as 0.",
	Fields: []Field{
		{Name: "if", Type: Condition, Required: true, Example: `value.amount > 100`,
			Missing:     `give the condition records must meet to go on, such as if: 'value.amount > 100'`,
			Description: "The condition: records for which it is true go on."},
	},
	Validate: func(Params) error { return nil },
	Props:    keepsKeys,
	Build: func(p Params, env Env) (Operator, error) {
		return FilterConfig{If: p.Text("if"), OnError: env.Policy}.operator()
	},
	Describe: func(p Params) string { return "filter if " + p.Text("if") },
	GoFunc:   "Filter",
	Example:  `- filter: { if: value.amount > 100 }`,
}

func init() { Register(filterSpec) }

func (c FilterConfig) operator() (Operator, error) {
	cond, err := CompileExpr(c.If, BoolResult)
	if err != nil {
		return Operator{}, &FieldError{Field: "if", Err: err}
	}
	return Operator{Uses: cond.access(), Each: func(r Record, emit func()) error {
		ok, err := cond.EvalBool(r)
		if err != nil {
			return recordError(r, "filter", err)
		}
		if ok {
			emit()
		}
		return nil
	}}, nil
}

// recordError is the error about one record a stateless operator could
// not process: unrecoverable, since it fails the same way every time.
func recordError(r Record, op string, err error) error {
	return flow.Unrecoverable(fmt.Errorf("record %s: %s: %w", r.Position(), op, err))
}

// Filter keeps the records for which cfg.If holds. The second stream
// carries, under flow.DeadLetterOnError, the records the condition could
// not be evaluated on. The operator's id is "filter" unless opts give
// another with flow.UID.
func Filter[T any](s flow.Stream[T], acc RecordAccess[T], cfg FilterConfig, opts ...flow.OpOption) (flow.Stream[T], flow.Stream[flow.Failure[T]], error) {
	return applyStateless(s, acc, filterSpec, nil, cfg.OnError, opts, cfg.operator)
}

// applyStateless builds and applies a stateless operator for a Go entry
// point.
func applyStateless[T any](s flow.Stream[T], acc RecordAccess[T], spec Spec, p Params, policy flow.ErrorPolicy, opts []flow.OpOption, build func() (Operator, error)) (flow.Stream[T], flow.Stream[flow.Failure[T]], error) {
	op, err := build()
	if err != nil {
		return s, flow.Stream[flow.Failure[T]]{}, fmt.Errorf("pipeline.%s: %w", spec.GoFunc, err)
	}
	out, bad, err := apply(s, acc, spec.Name, spec.DefaultID(p), op, policy, opts...)
	if err != nil {
		return s, flow.Stream[flow.Failure[T]]{}, fmt.Errorf("pipeline.%s: %w", spec.GoFunc, err)
	}
	return out, *bad, nil
}
