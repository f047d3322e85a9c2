package pipeline

import (
	"fmt"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/state"
)

// CountConfig configures Count.
type CountConfig struct {
	// Key is what is counted: an expression (default KeyRecordKey, the
	// record key), such as value.user_id. The output keeps the record's
	// own key.
	Key string
}

var countSpec = Spec{
	Name:    "count",
	Summary: "Emits, for every record, the number of records with its key so far, this one included.",
	Doc: "The output record is the input record with the count as its value; in a job file it keeps the key and " +
		"timestamp, and the value is the count as a decimal number, so any consumer can read it. The counts are " +
		"keyed state under the step's id.",
	Fields: []Field{
		{Name: "key", Type: KeyExpr, Default: KeyRecordKey, Example: KeyRecordKey,
			Description: "What is counted: the records with the same key. Part of the step's default id."},
	},
	IDField:     "key",
	StateFields: []string{"key"},
	Stateful:    true,
	Props:       losesKeys,
	Build:       func(p Params, _ Env) (Operator, error) { return CountConfig{Key: p.Text("key")}.operator() },
	Describe:    func(p Params) string { return "count by " + p.Text("key") },
	GoFunc:      "Count",
	Example:     "- count: { key: record.key }",
}

func init() { Register(countSpec) }

func (c CountConfig) operator() (Operator, error) {
	key, err := keyExpr(c.Key)
	if err != nil {
		return Operator{}, err
	}
	return Operator{KeyBy: key, Uses: UsesWithCount | key.access(), Process: func(st *state.Store) func(Record) (bool, error) {
		n := state.NewValue[int64](st, "count")
		return func(r Record) (bool, error) {
			r.SetCount(increment(n))
			return true, nil
		}
	}}, nil
}

// increment adds one to the current key's count and returns the new count.
func increment(n *state.Value[int64]) int64 {
	c, _ := n.Get()
	c++
	n.Set(c)
	return c
}

// Count emits, for every record, the number of records with its key
// (cfg.Key, by default acc.Key) so far, this one included, as the record acc.WithCount makes.
// The counts are keyed state.
//
// The operator's id, which names its state in checkpoints, is
// "count:record.key" unless opts give another with flow.UID. The error is
// about acc (acc.Key and acc.WithCount are needed).
func Count[T any](s flow.Stream[T], acc RecordAccess[T], cfg CountConfig, opts ...flow.OpOption) (flow.Stream[T], error) {
	op, err := cfg.operator()
	if err != nil {
		return s, fmt.Errorf("pipeline.Count: %w", err)
	}
	out, _, err := apply(s, acc, countSpec.Name, countSpec.DefaultID(Params{"key": op.KeyBy.String()}), op, flow.FailOnError, opts...)
	if err != nil {
		return s, fmt.Errorf("pipeline.Count: %w", err)
	}
	return out, nil
}
