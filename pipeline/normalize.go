package pipeline

import (
	"bytes"
	"fmt"
	"time"

	"github.com/onceflow/onceflow/internal/durfmt"
	"github.com/onceflow/onceflow/state"
)

// normalizeSpec is the changelog-normalize step: it turns a stream of
// upserts (each record its key's row now; a tombstone or a retraction: no
// row) into a changelog with retractions, by keeping each key's last row
// (docs/design.md, "Changelogs"). What reads an upsert-kafka table, or a
// keep-last deduplication whose old rows something must take out, needs it.
var normalizeSpec = Spec{
	Retractions: func(Params, bool) (bool, bool) { return true, true },
	Name:        "changelog-normalize",
	Summary:     "Keeps each key's last row and turns upserts into a changelog with retractions: the old row is retracted (-U) before the new one, a tombstone deletes (-D).",
	Doc: "Each record is its key's row now (an upsert); a record without a value (a Kafka tombstone) or a retraction " +
		"(row kind -U or -D) says the key has no row. The step keeps each key's last row in keyed state and emits, for " +
		"an upsert of a key that has a row, that row as a retraction (row kind -U, the header onceflow.rowkind) then " +
		"the new one; for an upsert equal to the row it has, nothing; for a tombstone or retraction of a key with a row, " +
		"that row as a delete (-D), and forgets it; for one of a key without a row, nothing. So the records after it " +
		"carry whole rows, and a filter, an aggregate or a sink keyed otherwise can take old rows out. ttl forgets a key " +
		"that long after its last record (a later tombstone of it then deletes nothing).",
	Fields: []Field{
		{Name: "key", Type: KeyExpr, Default: KeyRecordKey, Example: KeyRecordKey,
			Description: "The upsert key: records of one key replace each other. Part of the step's default id."},
		keyOfField,
		{Name: "ttl", Type: Duration, Example: "7d",
			Description: "Forget a key this long after its last record; not set: keep it forever."},
	},
	IDField:     "key",
	StateFields: []string{"key", "key-of"},
	Stateful:    true,
	Props: func(p Params) Props {
		pr := Props{Keys: KeysKept}
		if ttl := p.Duration("ttl"); ttl > 0 {
			pr.StateBound = "ttl " + durfmt.Short(ttl)
		}
		return pr
	},
	Build: func(p Params, _ Env) (Operator, error) { return normalizeOperator(p.Text("key"), p.Duration("ttl")) },
	Describe: func(p Params) string {
		s := "changelog-normalize by " + p.Text("key")
		if ttl := p.Duration("ttl"); ttl > 0 {
			s += ", ttl " + durfmt.Short(ttl)
		}
		return s
	},
	Example: "- changelog-normalize: { key: record.key }",
}

func init() { Register(normalizeSpec) }

func normalizeOperator(keyExpr string, ttl time.Duration) (Operator, error) {
	if keyExpr == "" {
		keyExpr = KeyRecordKey
	}
	key, err := CompileExpr(keyExpr, AnyResult)
	if err != nil {
		return Operator{}, &FieldError{Field: "key", Err: err}
	}
	if ttl < 0 {
		return Operator{}, &FieldError{Field: "ttl", Msg: "must be positive, or not set to keep keys forever"}
	}
	var opts []state.Option
	if ttl > 0 {
		opts = append(opts, state.WithTTL(ttl))
	}
	return Operator{Uses: UsesValue | UsesWithValue | UsesRowKind | UsesWithRowKind, KeyBy: key, TakesRetractions: true,
		Timed: func(st *state.Store) Timed {
			last := state.NewValue[[]byte](st, "row", opts...)
			return Timed{
				OnRecord: func(r Record, _ Clock, o Out) error {
					prev, had := last.Get()
					v := r.Value()
					if len(v) == 0 || r.RowKind().Retracts() {
						if had {
							last.Clear()
							r.SetValue(prev)
							r.SetRowKind(RowDelete)
							o.Forward()
						}
						return nil
					}
					if had && bytes.Equal(prev, v) {
						return nil // the same row again: nothing changes
					}
					row := bytes.Clone(v)
					last.Set(row)
					if had {
						r.SetValue(prev)
						r.SetRowKind(RowUpdateBefore)
						o.Forward()
					}
					r.SetValue(row)
					r.SetRowKind(RowAdd)
					o.Forward()
					return nil
				},
				OnTimer: func(key string, at int64, _ Clock, _ Out) error {
					return fmt.Errorf("changelog-normalize: a timer of key %q at %d: the step sets none", key, at)
				},
			}
		}}, nil
}
