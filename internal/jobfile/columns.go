package jobfile

// Column sources: where a sink's column (sink.postgres.columns), key or
// value (sink.redis.key) comes from, in the pipeline's expression
// language. The job file's reader checks them (connector.Check) and the
// compiler builds the sinks' row functions from them.

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/pipeline"
	"github.com/onceflow/onceflow/pipeline/kafkarec"
)

// columnSources are what a column's value can come from, for messages:
// the record's parts by the names pipeline expressions use, a JSON field of
// the value, or any expression (docs/operators.md, "Expressions").
// record.key, record.value and record.value.<field> are the same names.
var columnSources = []string{"key", "raw", "topic", "partition", "offset", "timestamp", "value.<field>", "an expression such as concat(value.a, '-', key)"}

// sqlColumnSources are a table column's: the column sources, and
// timestamp(<source>) for TIMESTAMP and DATETIME columns.
var sqlColumnSources = append(columnSources[:len(columnSources):len(columnSources)], "timestamp(<source>)")

// ColumnValue returns the function that reads a column's value from a
// record: key and value as text, a JSON field of the value as its JSON
// type (a string, a number, true or false, NULL when absent or null, the
// JSON text of an object or array).
func ColumnValue(from string) (func(kafka.Record) (any, error), error) {
	return columnValueOf(from, columnSources)
}

// SQLColumnValue is ColumnValue for a table column, which also takes
// timestamp(<source>): milliseconds since 1970 (a number or the text of
// one: a window's window_start and window_end, an event time) read as a
// point in time, for a TIMESTAMP, TIMESTAMPTZ or DATETIME column.
func SQLColumnValue(from string) (func(kafka.Record) (any, error), error) {
	if inner, ok := strings.CutPrefix(from, "timestamp("); ok && strings.HasSuffix(inner, ")") {
		inner = strings.TrimSpace(strings.TrimSuffix(inner, ")"))
		if strings.HasPrefix(inner, "timestamp(") {
			return nil, fmt.Errorf("%q: timestamp(...) takes a column source such as record.value.window_start, not another timestamp(...)", from)
		}
		if inner == "record.timestamp" {
			return nil, fmt.Errorf("%q: record.timestamp is a point in time already: write it without timestamp(...)", from)
		}
		v, err := columnValueOf(inner, sqlColumnSources)
		if err != nil {
			return nil, err
		}
		return func(r kafka.Record) (any, error) {
			x, err := v(r)
			if err != nil || x == nil {
				return x, err
			}
			return millisToTime(x)
		}, nil
	}
	return columnValueOf(from, sqlColumnSources)
}

// columnValueOf is columnValue, naming sources in its error. A column
// source is written in the pipeline's expression language, so a field is
// named the same way in a filter, a key and a column (value.user.id). The
// record's own parts keep their SQL types: the key and the value as text
// (NULL when null), the timestamp as a point in time.
func columnValueOf(from string, sources []string) (func(kafka.Record) (any, error), error) {
	switch from {
	case "record.key", "key":
		return func(r kafka.Record) (any, error) { return textOrNull(r.Key), nil }, nil
	case "record.value", "raw", "record.raw":
		return func(r kafka.Record) (any, error) { return textOrNull(r.Value), nil }, nil
	case "record.topic", "topic":
		return func(r kafka.Record) (any, error) { return r.Topic, nil }, nil
	case "record.partition", "partition":
		return func(r kafka.Record) (any, error) { return int64(r.Partition), nil }, nil
	case "record.offset", "offset":
		return func(r kafka.Record) (any, error) { return r.Offset, nil }, nil
	case "record.timestamp", "timestamp":
		return func(r kafka.Record) (any, error) { return r.Timestamp, nil }, nil
	}
	if rest, ok := strings.CutPrefix(from, "record."); ok {
		part, _, _ := strings.Cut(rest, ".")
		if !slices.Contains(recordParts, part) {
			return nil, fmt.Errorf("%q is not a column source: a record has %s; use one of %s", from, strings.Join(recordParts, ", "), strings.Join(sources, ", "))
		}
	}
	e, err := pipeline.CompileExpr(from, pipeline.AnyResult)
	if err != nil {
		return nil, fmt.Errorf("%q is not a column source: %v; use one of %s", from, err, strings.Join(sources, ", "))
	}
	return func(r kafka.Record) (any, error) {
		v, err := e.Eval(pipeline.RecordOf(kafkarec.Access, r))
		if err != nil {
			return nil, err
		}
		return sqlValue(v)
	}, nil
}

// recordParts are the names under record. in an expression.
var recordParts = []string{"key", "value", "raw", "headers", "topic", "partition", "offset", "timestamp"}

// sqlValue is an expression's value as a database driver takes it: whole
// numbers as int64, objects and lists as their JSON text.
func sqlValue(v any) (any, error) {
	switch x := v.(type) {
	case int:
		return int64(x), nil
	case map[string]any, []any:
		b, err := json.Marshal(x)
		return string(b), err
	}
	return v, nil
}

// millisToTime is the point in time x milliseconds after 1970 (UTC), for
// timestamp(...) column sources.
func millisToTime(x any) (any, error) {
	var ms int64
	switch v := x.(type) {
	case int64:
		ms = v
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > 1e15 {
			return nil, fmt.Errorf("%v is not milliseconds since 1970", v)
		}
		ms = int64(v)
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%.40q is not milliseconds since 1970 (timestamp(...) reads a number of milliseconds; a text date goes into the column as it is, without timestamp(...))", v)
		}
		ms = n
	default:
		return nil, fmt.Errorf("%v is not milliseconds since 1970", x)
	}
	return time.UnixMilli(ms).UTC(), nil
}

// textOrNull is b as text, NULL for a null key or value.
func textOrNull(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}
