package jobfile

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/connector/mysql"
	"github.com/onceflow/onceflow/connector/postgres"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/sqlsink"
	"github.com/onceflow/onceflow/pipeline"
	"github.com/onceflow/onceflow/pipeline/kafkarec"
)

// DBSinkConfig is sink.postgres or sink.mysql: the job's results go to a
// database table (connector/postgres, connector/mysql) instead of a topic.
type DBSinkConfig struct {
	// Kind is "postgres" or "mysql", the section's name.
	Kind string
	// DSN is the server and database (PostgreSQL: a URL or key=value
	// pairs; MySQL: user:password@tcp(host:3306)/db; ${VAR} reads it from
	// the environment). Required.
	DSN string
	// Table is the table to write to, optionally schema-qualified.
	// Required.
	Table string
	// Key are the table's primary key columns: a row whose key exists is
	// updated. Required with delivery at-least-once.
	Key []string
	// Columns say where each column's value comes from, in file order.
	// Required.
	Columns []ColumnSource
	// BatchRows is how many rows go to the server at once (default
	// 1000).
	BatchRows int
}

// ColumnSource is one entry of sink.postgres.columns.
type ColumnSource struct {
	Column string
	// From is a column source: see columnValueOf.
	From string
	line int
}

// columnSources are what a column's value can come from, for messages:
// the record's parts by the names pipeline expressions use, a JSON field of
// the value, or any expression (docs/operators.md, "Expressions").
// record.key, record.value and record.value.<field> are the same names.
var columnSources = []string{"key", "raw", "topic", "partition", "offset", "timestamp", "value.<field>", "an expression such as concat(value.a, '-', key)"}

// sqlColumnSources are a table column's: the column sources, and
// timestamp(<source>) for TIMESTAMP and DATETIME columns.
var sqlColumnSources = append(columnSources[:len(columnSources):len(columnSources)], "timestamp(<source>)")

func (d *decoder) decodeDBSink(path string, v *yaml.Node, p *DBSinkConfig) {
	d.mapping(path, v, map[string]field{
		"dsn":        d.secret(&p.DSN),
		"table":      d.str(&p.Table),
		"key":        d.strList(&p.Key),
		"batch-rows": d.integer(&p.BatchRows),
		"columns": func(cp string, v *yaml.Node) {
			v = resolve(v)
			if v.Kind != yaml.MappingNode {
				d.errorf(v.Line, "%s must map each column to where its value comes from (n: record.value), not %s", cp, describe(v))
				return
			}
			for i := 0; i+1 < len(v.Content); i += 2 {
				k, val := resolve(v.Content[i]), resolve(v.Content[i+1])
				if from, ok := d.scalar(cp+"."+k.Value, val); ok {
					p.Columns = append(p.Columns, ColumnSource{Column: k.Value, From: strings.TrimSpace(from), line: k.Line})
				}
			}
		},
	})
}

// dsnExample is an example DSN for messages.
func dsnExample(kind string) string {
	if kind == "mysql" {
		return "dsn: ${ORDERS_DB} with ORDERS_DB=user:password@tcp(db:3306)/orders in the environment"
	}
	return "dsn: ${ORDERS_DB} with ORDERS_DB=postgres://user:password@db:5432/orders in the environment"
}

// validateDBSink checks sink.postgres or sink.mysql (p) against the rest
// of the sink section.
func (d *decoder) validateDBSink(sink SinkConfig, p *DBSinkConfig) {
	sec := "sink." + p.Kind
	if p.DSN == "" && d.at(sec+".dsn") == 0 {
		d.errorf(d.at(sec), "%s.dsn is missing: name the server and database, such as %s", sec, dsnExample(p.Kind))
	}
	before := len(d.errs)
	validTable := postgres.ValidateTable
	if p.Kind == "mysql" {
		validTable = mysql.ValidateTable
	}
	if p.Table == "" && d.at(sec+".table") == 0 {
		d.errorf(d.at(sec), "%s.table is missing: name the table to write to", sec)
	} else if err := validTable(p.Table); p.Table != "" && err != nil {
		d.errorf(d.at(sec+".table"), "%s.%v", sec, err)
	}
	if len(p.Columns) == 0 && d.at(sec+".columns") == 0 {
		d.errorf(d.at(sec), "%s.columns is missing: map each column to where its value comes from, such as columns: {user_id: record.key, n: record.value}", sec)
	}
	seen := map[string]bool{}
	for _, c := range p.Columns {
		if seen[c.Column] {
			d.errorf(c.line, "%s.columns lists %q twice", sec, c.Column)
		}
		seen[c.Column] = true
		if _, err := sqlColumnValue(c.From); err != nil {
			d.errorf(c.line, "%s.columns.%s: %v", sec, c.Column, err)
		}
	}
	for _, k := range p.Key {
		if len(p.Columns) > 0 && !seen[k] {
			d.errorf(d.at(sec+".key"), "%s.key %q is not among the columns: add it to %s.columns", sec, k, sec)
		}
	}
	if line := d.at(sec + ".batch-rows"); line != 0 && p.BatchRows < 1 {
		d.errorf(line, "%s.batch-rows must be at least 1; remove it for the default 1000", sec)
	}
	if sink.Delivery == DeliveryNone {
		d.errorf(d.at("sink.delivery"), "sink.delivery none is for Kafka sinks: a database sink is exactly-once (its transaction is the commit point, or a prepared transaction under another sink's) or at-least-once (epoch-fenced upserts)")
	}
	if sink.Delivery == DeliveryAtLeastOnce && len(p.Key) == 0 {
		d.errorf(d.first("sink.delivery", sec), "sink.delivery at-least-once into a database writes idempotent upserts: name the table's primary key in %s.key", sec)
	}
	// Whatever else the connector refuses is reported here, before
	// anything connects (the checks above say it in the file's terms).
	if len(d.errs) == before && p.DSN != "" && p.Table != "" && len(p.Columns) > 0 {
		if _, _, err := NewDBSink(p, sink.DBDelivery(p.Kind), "", flow.FailOnError); err != nil {
			msg := strings.TrimPrefix(strings.TrimPrefix(err.Error(), "postgres sink: "), "mysql sink: ")
			for _, line := range strings.Split(msg, "\n") {
				d.errorf(d.at(sec), "%s: %s", sec, line)
			}
		}
	}
}

// NewDBSink makes the connector of a table section with delivery (one of
// dbExactlyOnce, dbTwoPhase, dbAtLeastOnce).
func NewDBSink(p *DBSinkConfig, delivery, job string, policy flow.ErrorPolicy) (flow.Sink[kafka.Record], func() error, error) {
	cols, row := rowOf(p)
	var dead *sqlsink.DeadLetters[kafka.Record]
	if policy == flow.DeadLetterOnError {
		dead = deadLetters()
	}
	if p.Kind == SinkMySQL {
		s, err := mysql.NewSink(mysql.Config[kafka.Record]{DSN: p.DSN, Table: p.Table, Columns: cols, Key: p.Key, Delivery: mysql.Delivery(delivery), BatchRows: p.BatchRows, Job: job, Row: row, DeadLetters: dead})
		if err != nil {
			return nil, nil, err
		}
		return s, s.Close, nil
	}
	s, err := postgres.NewSink(postgres.Config[kafka.Record]{DSN: p.DSN, Table: p.Table, Columns: cols, Key: p.Key, Delivery: postgres.Delivery(delivery), BatchRows: p.BatchRows, Job: job, Row: row, DeadLetters: dead})
	if err != nil {
		return nil, nil, err
	}
	return s, s.Close, nil
}

// rowOf returns the columns of a database sink and the function that
// makes a record's row.
func rowOf(p *DBSinkConfig) ([]string, func(kafka.Record) ([]any, error)) {
	cols := make([]string, len(p.Columns))
	values := make([]func(kafka.Record) (any, error), len(p.Columns))
	for i, c := range p.Columns {
		cols[i] = c.Column
		values[i], _ = sqlColumnValue(c.From) // validated
	}
	return cols, func(r kafka.Record) ([]any, error) {
		row := make([]any, len(values))
		for i, v := range values {
			if v == nil {
				continue
			}
			x, err := v(r)
			if err != nil {
				// The record fails the same way after every restart.
				return nil, flow.Unrecoverable(fmt.Errorf("record %s, column %s: %w", r, cols[i], err))
			}
			row[i] = x
		}
		return row, nil
	}
}

// columnValue returns the function that reads a column's value from a
// record: key and value as text, a JSON field of the value as its JSON
// type (a string, a number, true or false, NULL when absent or null, the
// JSON text of an object or array).
func columnValue(from string) (func(kafka.Record) (any, error), error) {
	return columnValueOf(from, columnSources)
}

// sqlColumnValue is columnValue for a table column, which also takes
// timestamp(<source>): milliseconds since 1970 (a number or the text of
// one: a window's window_start and window_end, an event time) read as a
// point in time, for a TIMESTAMP, TIMESTAMPTZ or DATETIME column.
func sqlColumnValue(from string) (func(kafka.Record) (any, error), error) {
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
