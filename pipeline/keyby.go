package pipeline

import "github.com/onceflow/onceflow/flow"

// KeyByConfig configures KeyBy.
type KeyByConfig struct {
	// Key is the expression whose value becomes the record key (a string
	// or number, such as value.user_id).
	Key string
	// OnError is what happens to a record the expression fails on.
	OnError flow.ErrorPolicy
}

var keyBySpec = Spec{
	Retractions: passesRetractions,
	Name:        "key-by",
	Summary:     "Makes an expression's value the record's key, so the keyed steps after it and the sink's partitioner use it.",
	Doc: "A string is used as it is, a number in its shortest decimal form (42, 4.2), a boolean as true or false. A " +
		"record for which the expression gives null (a missing field), a list or an object is a poison record: the " +
		"job's errors.policy decides. A keyed step can also take the expression itself as its key (aggregate's key: " +
		"value.user_id), which partitions by it without changing the record's key.",
	Fields: []Field{
		{Name: "key", Type: KeyExpr, Required: true, Example: "value.user_id",
			Missing:     "give the expression whose value becomes the key, such as key: value.user_id",
			Description: "The expression whose value becomes the record key. Part of the step's default id."},
	},
	IDField: "key",
	Props:   losesKeys,
	Build: func(p Params, env Env) (Operator, error) {
		return KeyByConfig{Key: p.Text("key"), OnError: env.Policy}.operator()
	},
	Describe: func(p Params) string { return "key-by " + p.Text("key") },
	GoFunc:   "KeyBy",
	Example:  "- key-by: { key: value.user_id }",
}

func init() { Register(keyBySpec) }

func (c KeyByConfig) operator() (Operator, error) {
	key, err := CompileExpr(c.Key, AnyResult)
	if err != nil {
		return Operator{}, &FieldError{Field: "key", Err: err}
	}
	return Operator{Uses: key.access() | UsesWithKey | UsesPosition, Map: func(r Record) error {
		k, err := key.EvalKey(r)
		if err != nil {
			return recordError(r, "key-by", err)
		}
		r.SetKey([]byte(k))
		return nil
	}}, nil
}

// KeyBy makes cfg.Key's value each record's key. The second stream
// carries, under flow.DeadLetterOnError, the records the expression failed
// on. The operator's id is "key-by:" and the expression unless opts give
// another with flow.UID.
func KeyBy[T any](s flow.Stream[T], acc RecordAccess[T], cfg KeyByConfig, opts ...flow.OpOption) (flow.Stream[T], flow.Stream[flow.Failure[T]], error) {
	return applyStateless(s, acc, keyBySpec, Params{"key": cfg.Key}, cfg.OnError, opts, cfg.operator)
}
