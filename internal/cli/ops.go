package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/state"
)

// The job file's pipeline operators. They are generic over the record type
// so they can be tested with plain structs and run on kafka.Record.

// RecordAccess tells the pipeline operators how to handle a record type.
type RecordAccess[T any] struct {
	// Key returns the record's key (the key expression record.key).
	Key func(T) string
	// WithCount returns the record count emits for rec: rec's key with the
	// running count as its value.
	WithCount func(rec T, count int64) T
	// Value returns the record's value (what extract-key parses).
	Value func(T) []byte
	// WithKey returns rec with key as its key (what extract-key emits).
	WithKey func(rec T, key []byte) T
	// Position names where the record came from, such as orders/0@42,
	// for the error about a record extract-key cannot handle.
	Position func(T) string
}

// PipelineMetrics counts what the pipeline operators did, for status lines.
// The counters are live: after a restart, replayed records count again.
type PipelineMetrics struct {
	// RecordsRead counts records read from the source (set by the run
	// wiring, which sees the source).
	RecordsRead atomic.Int64
	// DuplicatesDropped counts records dedupe dropped.
	DuplicatesDropped atomic.Int64
}

// Dedupe drops every record whose key was already seen within ttl; the
// first record of a key passes. Seeing a key (passed or dropped) restarts
// its ttl, so a key that keeps being resent more often than ttl never passes
// again. The set of seen keys is keyed state under uid, so it survives
// restarts and is restored exactly with the checkpoint; entries are dropped
// from it ttl after their last sighting, which bounds its size. dropped may
// be nil.
func Dedupe[T any](s flow.Stream[T], uid string, key func(T) string, ttl time.Duration, dropped *atomic.Int64) flow.Stream[T] {
	return flow.Process(flow.KeyBy(s, key), uid, func(st *state.Store) flow.ProcessFunc[T, T] {
		seen := state.NewValue[bool](st, "seen", state.WithTTL(ttl))
		return func(_ flow.Context, rec T, out flow.Collector[T]) error {
			if seenBefore(seen) {
				if dropped != nil {
					dropped.Add(1)
				}
				return nil
			}
			out.Emit(rec)
			return nil
		}
	}, flow.Name("dedupe"))
}

// seenBefore reports whether the current key was seen within the ttl of
// seen, and marks it seen now.
func seenBefore(seen *state.Value[bool]) bool {
	_, ok := seen.Get()
	seen.Set(true)
	return ok
}

// Count emits, for every record, the number of records with its key so
// far (this one included), built by withCount. The counts are keyed state
// under uid.
func Count[T any](s flow.Stream[T], uid string, key func(T) string, withCount func(T, int64) T) flow.Stream[T] {
	return flow.Process(flow.KeyBy(s, key), uid, func(st *state.Store) flow.ProcessFunc[T, T] {
		n := state.NewValue[int64](st, "count")
		return func(_ flow.Context, rec T, out flow.Collector[T]) error {
			out.Emit(withCount(rec, increment(n)))
			return nil
		}
	}, flow.Name("count"))
}

// increment adds one to the current key's count and returns the new count.
func increment(n *state.Value[int64]) int64 {
	c, _ := n.Get()
	c++
	n.Set(c)
	return c
}

// ExtractKey makes the value of field, a top-level field of the JSON object
// each record's value holds, the record's key: a string as it is, a number
// as written in the JSON (so 42 and 4.2e1 are different keys). A record
// whose value is not a JSON object, or whose object lacks the field or
// holds something else in it, is a poison record: policy decides what
// happens to it, and under flow.DeadLetterOnError the second stream
// carries it. The step is stateless; uid names it in the job graph.
func ExtractKey[T any](s flow.Stream[T], uid, field string, acc RecordAccess[T], policy flow.ErrorPolicy) (flow.Stream[T], flow.Stream[flow.Failure[T]]) {
	return flow.TryMap(s, func(r T) (T, error) {
		key, err := jsonFieldKey(acc.Value(r), field)
		if err != nil {
			// The position is in the message because the engine's own
			// position may name the source's, not this record's. The
			// same record fails the same way after any restart: under
			// the fail policy the job stops instead of restarting
			// forever.
			return r, flow.Unrecoverable(fmt.Errorf("record %s: extract-key json-field %q: %w", acc.Position(r), field, err))
		}
		return acc.WithKey(r, key), nil
	}, policy, flow.UID(uid), flow.Name(OpExtractKey))
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

// BuildPipeline applies the job file's pipeline steps to s in order; an
// empty pipeline returns s unchanged (pass-through). policy is what
// extract-key does with a record it cannot take a key from; under
// flow.DeadLetterOnError the returned failure streams (one per extract-key
// step) carry those records and must be connected to a sink, otherwise
// there are none. m may be nil.
func BuildPipeline[T any](s flow.Stream[T], steps []Step, acc RecordAccess[T], policy flow.ErrorPolicy, m *PipelineMetrics) (flow.Stream[T], []flow.Stream[flow.Failure[T]], error) {
	var dropped *atomic.Int64
	if m != nil {
		dropped = &m.DuplicatesDropped
	}
	var failures []flow.Stream[flow.Failure[T]]
	for _, st := range steps {
		if st.Key != KeyRecordKey && st.Op != OpExtractKey {
			return s, nil, fmt.Errorf("pipeline operator %s (line %d): unsupported key expression %q: only %s is supported", st.Op, st.Line, st.Key, KeyRecordKey)
		}
		switch st.Op {
		case OpDedupe:
			if st.TTL <= 0 {
				return s, nil, fmt.Errorf("pipeline operator dedupe (line %d): ttl %v must be positive", st.Line, st.TTL)
			}
			s = Dedupe(s, st.UID, acc.Key, st.TTL, dropped)
		case OpCount:
			s = Count(s, st.UID, acc.Key, acc.WithCount)
		case OpExtractKey:
			if st.JSONField == "" {
				return s, nil, fmt.Errorf("pipeline operator extract-key (line %d): json-field is empty", st.Line)
			}
			var bad flow.Stream[flow.Failure[T]]
			s, bad = ExtractKey(s, st.UID, st.JSONField, acc, policy)
			if policy == flow.DeadLetterOnError {
				failures = append(failures, bad)
			}
		default:
			return s, nil, fmt.Errorf("pipeline operator %q (line %d) is not supported; supported operators: %s", st.Op, st.Line, strings.Join(operators, ", "))
		}
	}
	return s, failures, nil
}

// formatCount is how count writes its value: a decimal number, so any
// consumer can read it without a schema.
func formatCount(n int64) []byte { return strconv.AppendInt(nil, n, 10) }
