package pipeline

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/durfmt"
	"github.com/onceflow/onceflow/state"
)

// DuplicatesDropped is the counter (Env.Counter) dedupe adds every record
// it drops to.
const DuplicatesDropped = "duplicates-dropped"

// DedupeConfig configures Dedupe.
type DedupeConfig struct {
	// Key is what makes two records duplicates: an expression (default
	// KeyRecordKey, the record key), such as value.order_id. The record
	// passes unchanged: its key stays its own.
	Key string
	// TTL is how long a key is remembered after it was last seen. It must
	// be positive.
	TTL time.Duration
	// Dropped, when set, counts the records dropped as duplicates. The
	// count is live: after a restart, replayed records count again.
	Dropped *atomic.Int64
}

var dedupeSpec = Spec{
	Name:    "dedupe",
	Summary: "Drops every record whose key was already seen within ttl; the first record of a key passes.",
	Doc: "Seeing a key, whether its record passes or is dropped, restarts its ttl: a key that keeps being resent " +
		"more often than ttl never passes again. The keys seen are keyed state under the step's id, so they " +
		"survive restarts and are restored exactly with the checkpoint; a key is forgotten ttl after it was last " +
		"seen, which bounds the state's size (one entry per distinct key seen within ttl).",
	Fields: []Field{
		{Name: "key", Type: KeyExpr, Default: KeyRecordKey, Example: KeyRecordKey,
			Description: "What makes two records duplicates: records with the same key are. Part of the step's default id."},
		keyOfField,
		{Name: "ttl", Type: Duration, Required: true, Example: "24h",
			Missing:     "set how long a key is remembered, such as ttl: 24h (dedupe keeps one entry per distinct key until it expires)",
			Description: "How long a key is remembered after it was last seen; positive. Changing it keeps the step's state."},
	},
	IDField:     "key",
	StateFields: []string{"key", "key-of"},
	Stateful:    true,
	Validate:    func(p Params) error { return dedupeConfig(p, Env{}).validate() },
	Props:       dedupeProps,
	Build:       func(p Params, env Env) (Operator, error) { return dedupeConfig(p, env).operator() },
	Describe: func(p Params) string {
		return fmt.Sprintf("dedupe by %s, ttl %s", p.Text("key"), durfmt.Short(p.Duration("ttl")))
	},
	GoFunc:  "Dedupe",
	Example: "- dedupe: { key: record.key, ttl: 24h }",
}

func init() { Register(dedupeSpec) }

func dedupeConfig(p Params, env Env) DedupeConfig {
	return DedupeConfig{Key: p.Text("key"), TTL: p.Duration("ttl"), Dropped: env.counter(DuplicatesDropped)}
}

func (c DedupeConfig) validate() error {
	if c.TTL <= 0 {
		return &FieldError{Field: "ttl", Msg: fmt.Sprintf("must be positive: a key remembered for %s drops nothing", durfmt.Short(c.TTL))}
	}
	return nil
}

func (c DedupeConfig) operator() (Operator, error) {
	if err := c.validate(); err != nil {
		return Operator{}, err
	}
	key, err := keyExpr(c.Key)
	if err != nil {
		return Operator{}, err
	}
	return Operator{KeyBy: key, Uses: key.access(), Process: func(st *state.Store) func(Record) (bool, error) {
		seen := state.NewValue[bool](st, "seen", state.WithTTL(c.TTL))
		return func(Record) (bool, error) {
			if seenBefore(seen) {
				if c.Dropped != nil {
					c.Dropped.Add(1)
				}
				return false, nil
			}
			return true, nil
		}
	}}, nil
}

// seenBefore reports whether the current key was seen within the ttl of
// seen, and marks it seen now.
func seenBefore(seen *state.Value[bool]) bool {
	_, ok := seen.Get()
	seen.Set(true)
	return ok
}

// Dedupe drops every record whose key (cfg.Key, by default acc.Key) was already seen within
// cfg.TTL; the first record of a key passes. Seeing a key (passed or
// dropped) restarts its TTL, so a key that keeps being resent more often
// than the TTL never passes again. The set of seen keys is keyed state, so
// it survives restarts and is restored exactly with the checkpoint; a key
// is forgotten TTL after it was last seen, which bounds its size.
//
// The operator's id, which names its state in checkpoints, is
// "dedupe:record.key" unless opts give another with flow.UID: a job with
// two Dedupe steps gives at least one of them its own. The error is about
// cfg or acc (acc.Key is needed).
func Dedupe[T any](s flow.Stream[T], acc RecordAccess[T], cfg DedupeConfig, opts ...flow.OpOption) (flow.Stream[T], error) {
	op, err := cfg.operator()
	if err != nil {
		return s, fmt.Errorf("pipeline.Dedupe: %w", err)
	}
	out, _, err := apply(s, acc, dedupeSpec.Name, dedupeSpec.DefaultID(Params{"key": op.KeyBy.String()}), op, flow.FailOnError, opts...)
	if err != nil {
		return s, fmt.Errorf("pipeline.Dedupe: %w", err)
	}
	return out, nil
}

// keyExpr compiles a keyed operator's key expression; empty is the
// record key.
func keyExpr(src string) (*Expr, error) {
	if src == "" {
		src = KeyRecordKey
	}
	e, err := CompileExpr(src, AnyResult)
	if err != nil {
		return nil, &FieldError{Field: "key", Err: err}
	}
	return e, nil
}

// dedupeProps: dedupe passes the first record of a key on unchanged and
// forgets the key after its ttl.
func dedupeProps(p Params) Props {
	return Props{Keys: KeysKept, StateBound: "ttl " + durfmt.Short(p.Duration("ttl"))}
}
