package pipeline

import (
	"errors"
	"fmt"
	"strings"
)

// RecordAccess tells the operators how to handle a record type T. An
// operator needs only some of the functions (Dedupe: Key; Count: Key and
// WithCount; ExtractKey: Value, WithKey and Position); the others may be
// nil.
type RecordAccess[T any] struct {
	// Key returns the record's key: the key expression record.key, which
	// keyed operators partition the stream by.
	Key func(T) string
	// WithCount returns the record count emits for rec: rec with the
	// running count of its key as its value.
	WithCount func(rec T, count int64) T
	// Value returns the record's value (what extract-key parses).
	Value func(T) []byte
	// WithKey returns rec with key as its key (what extract-key emits).
	WithKey func(rec T, key []byte) T
	// Position names where the record came from, such as orders/0@42, for
	// errors about the record.
	Position func(T) string
	// Meta returns where the record came from and its timestamp (the
	// expression names topic, partition, offset and timestamp).
	Meta func(T) Meta
	// Headers returns the record's headers as text (the expression name
	// headers); a header given twice keeps its last value.
	Headers func(T) map[string]string
	// WithValue returns rec with value as its value (what map emits).
	WithValue func(rec T, value []byte) T
	// WithTopic returns rec with the topic it is to be written to (what
	// route and map's topic emit).
	WithTopic func(rec T, topic string) T
	// WithHeader returns rec with header name set to value, replacing a
	// header of that name.
	WithHeader func(rec T, name string, value []byte) T
	// New returns a new record (what window emits), timestamp in ms.
	New func(key, value []byte, timestamp int64) T
	// RowKind returns the record's row kind (RowKindHeader): what an
	// aggregate over an updating result reads.
	RowKind func(T) RowKind
	// WithRowKind returns rec with kind as its row kind (RowAdd: none),
	// for the operators that emit retractions.
	WithRowKind func(rec T, kind RowKind) T
}

// Meta is where a record came from and when it was written.
type Meta struct {
	Topic     string
	Partition int32
	Offset    int64
	// Timestamp is in milliseconds since the Unix epoch.
	Timestamp int64
}

// Access is a set of RecordAccess functions an operator calls.
type Access uint16

// The RecordAccess functions, as an Access set.
const (
	UsesKey Access = 1 << iota
	UsesValue
	UsesPosition
	UsesWithKey
	UsesWithCount
	UsesMeta
	UsesHeaders
	UsesWithValue
	UsesWithTopic
	UsesWithHeader
	UsesNew
	UsesRowKind
	UsesWithRowKind
)

// accessNames are the RecordAccess field names of the Access bits, in bit
// order.
var accessNames = []string{"Key", "Value", "Position", "WithKey", "WithCount", "Meta", "Headers", "WithValue", "WithTopic", "WithHeader", "New", "RowKind", "WithRowKind"}

// missing returns the names of the functions in uses that acc lacks.
func (acc *RecordAccess[T]) missing(uses Access) []string {
	set := []bool{acc.Key != nil, acc.Value != nil, acc.Position != nil, acc.WithKey != nil, acc.WithCount != nil,
		acc.Meta != nil, acc.Headers != nil, acc.WithValue != nil, acc.WithTopic != nil, acc.WithHeader != nil, acc.New != nil,
		acc.RowKind != nil, acc.WithRowKind != nil}
	var names []string
	for i, name := range accessNames {
		if uses&(1<<i) != 0 && !set[i] {
			names = append(names, "RecordAccess."+name)
		}
	}
	return names
}

// Record is the record an operator's function handles, whatever the
// stream's record type: it reads and changes the record through the
// stream's RecordAccess. It is only valid during the call it is passed
// to.
type Record interface {
	// Key returns the record's key (RecordAccess.Key).
	Key() string
	// Value returns the record's value (RecordAccess.Value).
	Value() []byte
	// Position names where the record came from (RecordAccess.Position).
	Position() string
	// SetKey replaces the record with one whose key is key
	// (RecordAccess.WithKey).
	SetKey(key []byte)
	// SetCount replaces the record with the one count emits for it
	// (RecordAccess.WithCount).
	SetCount(n int64)
	// Meta returns where the record came from (RecordAccess.Meta).
	Meta() Meta
	// Headers returns the headers (RecordAccess.Headers).
	Headers() map[string]string
	// SetValue replaces the value (RecordAccess.WithValue).
	SetValue(value []byte)
	// SetTopic sets the topic to write to (RecordAccess.WithTopic).
	SetTopic(topic string)
	// SetHeader sets a header (RecordAccess.WithHeader).
	SetHeader(name string, value []byte)
	// GroupKey is, in a keyed operator, the key the stream is partitioned
	// by: the record key, or the value of the operator's key expression
	// (Operator.KeyBy). Empty in a stateless operator.
	GroupKey() string
	// Prepared is, in a keyed operator's Process, what its Prepare gave
	// for this record; nil without one.
	Prepared() any
	// RowKind is the record's row kind (RecordAccess.RowKind).
	RowKind() RowKind
	// SetRowKind sets it (RecordAccess.WithRowKind).
	SetRowKind(kind RowKind)
}

// handle is the Record of a T. A keyed operator reuses one per subtask,
// so records pass through it without an allocation.
type handle[T any] struct {
	acc   *RecordAccess[T]
	rec   T
	group string
	prep  any
}

func (h *handle[T]) GroupKey() string { return h.group }
func (h *handle[T]) Prepared() any    { return h.prep }

func (h *handle[T]) Key() string      { return h.acc.Key(h.rec) }
func (h *handle[T]) Value() []byte    { return h.acc.Value(h.rec) }
func (h *handle[T]) Position() string { return h.acc.Position(h.rec) }
func (h *handle[T]) SetKey(key []byte) {
	h.rec = h.acc.WithKey(h.rec, key)
}
func (h *handle[T]) SetCount(n int64) { h.rec = h.acc.WithCount(h.rec, n) }
func (h *handle[T]) Meta() Meta       { return h.acc.Meta(h.rec) }
func (h *handle[T]) Headers() map[string]string {
	return h.acc.Headers(h.rec)
}
func (h *handle[T]) SetValue(v []byte) { h.rec = h.acc.WithValue(h.rec, v) }
func (h *handle[T]) RowKind() RowKind {
	if h.acc.RowKind == nil {
		return RowAdd // a record type without row kinds: every stream of it appends
	}
	return h.acc.RowKind(h.rec)
}
func (h *handle[T]) SetRowKind(k RowKind) {
	h.rec = h.acc.WithRowKind(h.rec, k)
}
func (h *handle[T]) SetTopic(t string) { h.rec = h.acc.WithTopic(h.rec, t) }
func (h *handle[T]) SetHeader(name string, v []byte) {
	h.rec = h.acc.WithHeader(h.rec, name, v)
}

// describeAccess lists two or more names for a message: "a and b", "a, b
// and c".
func describeAccess(names []string) string {
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// RecordOf is rec as a Record, to evaluate an expression on it outside an
// operator (the job file's event-time timestamp).
func RecordOf[T any](acc RecordAccess[T], rec T) Record {
	return &handle[T]{acc: &acc, rec: rec}
}

// Keys returns the function giving a record's group key by the key
// expression expr, as a keyed step keyed by expr computes it: a scale-out
// job partitions a repartition topic by it.
func Keys[T any](acc RecordAccess[T], expr string) (func(T) (string, error), error) {
	e, err := keyExpr(expr)
	if err != nil {
		return nil, err
	}
	if e.IsRecordKey() {
		if acc.Key == nil {
			return nil, errors.New("RecordAccess.Key is nil: the record key needs it")
		}
		return func(rec T) (string, error) { return acc.Key(rec), nil }, nil
	}
	if missing := acc.missing(e.access()); len(missing) > 0 {
		return nil, fmt.Errorf("%s needed by %q: the record type does not provide it", describeAccessList(missing), expr)
	}
	return func(rec T) (string, error) { return e.EvalKey(&handle[T]{acc: &acc, rec: rec}) }, nil
}
