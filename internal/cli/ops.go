package cli

import (
	"fmt"
	"strconv"
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

// BuildPipeline applies the job file's pipeline steps to s in order; an
// empty pipeline returns s unchanged (pass-through). m may be nil.
func BuildPipeline[T any](s flow.Stream[T], steps []Step, acc RecordAccess[T], m *PipelineMetrics) (flow.Stream[T], error) {
	var dropped *atomic.Int64
	if m != nil {
		dropped = &m.DuplicatesDropped
	}
	for _, st := range steps {
		if st.Key != KeyRecordKey {
			return s, fmt.Errorf("pipeline operator %s (line %d): unsupported key expression %q: only %s is supported", st.Op, st.Line, st.Key, KeyRecordKey)
		}
		switch st.Op {
		case OpDedupe:
			if st.TTL <= 0 {
				return s, fmt.Errorf("pipeline operator dedupe (line %d): ttl %v must be positive", st.Line, st.TTL)
			}
			s = Dedupe(s, st.UID, acc.Key, st.TTL, dropped)
		case OpCount:
			s = Count(s, st.UID, acc.Key, acc.WithCount)
		default:
			return s, fmt.Errorf("pipeline operator %q (line %d) is not supported; supported operators: %s, %s", st.Op, st.Line, OpCount, OpDedupe)
		}
	}
	return s, nil
}

// formatCount is how count writes its value: a decimal number, so any
// consumer can read it without a schema.
func formatCount(n int64) []byte { return strconv.AppendInt(nil, n, 10) }
