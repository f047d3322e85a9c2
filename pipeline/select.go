package pipeline

import (
	"bytes"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/sql/ast"
	"github.com/onceflow/onceflow/internal/sql/eval"
	"github.com/onceflow/onceflow/internal/sql/parser"
	"github.com/onceflow/onceflow/internal/sql/types"
)

// SelectConfig configures Select: SQL expressions over the typed columns
// of a record's JSON value, the step a SQL job's projections and filters
// compile to.
type SelectConfig struct {
	// Schema are the input columns in order: each name and its SQL type,
	// such as BIGINT, TIMESTAMP(3), ROW<id BIGINT, name STRING>, or a
	// metadata column, TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' (key,
	// timestamp, partition, offset, topic, headers).
	Schema []Named
	// Columns are the output columns in order: each name and its SQL
	// expression. Empty: the schema's columns, unchanged.
	Columns []Named
	// Where, when set, is the SQL condition a record must meet to go on
	// (NULL and FALSE drop it).
	Where string
	// Key, when set, names the output columns that become the record key:
	// one column's text, or a JSON array of several.
	Key []string
	// OnError is what happens to a record that does not fit the schema or
	// that an expression fails on.
	OnError flow.ErrorPolicy
	// Format is how the value holds the schema's physical columns:
	// "json" (the default: an object) or "csv" (one line, the columns in
	// order). CSVFieldDelimiter and CSVQuoteCharacter (one byte each;
	// "": Flink's , and ") and CSVNullLiteral (the text of a NULL; "":
	// none) apply to csv.
	Format                                               string
	CSVFieldDelimiter, CSVQuoteCharacter, CSVNullLiteral string
	// OutputFormat is how the output value is written: "json" (the
	// default), "csv" (OutputCSVFieldDelimiter, one byte, "": ","; NULL
	// as OutputCSVNullLiteral) or "raw" (the one column's text or bytes).
	OutputFormat                                  string
	OutputCSVFieldDelimiter, OutputCSVNullLiteral string
}

var selectSpec = Spec{
	Retractions: func(p Params, in bool) (bool, bool) {
		return true, in || p.Text("format") == FormatDebezium // a debezium-json select emits the retractions of its events
	},
	Name:    "select",
	Summary: "Projects and filters records with SQL expressions over typed columns of the JSON value (SQL jobs compile to it).",
	Doc: "The record's JSON value is read once into a row of the `schema`'s columns (Flink SQL types; nested `ROW`s are " +
		"read into nested rows; a missing field or JSON null is NULL; only the columns the expressions use are decoded), " +
		"then `where` is evaluated, then each of the `columns`, and the output row is written as a JSON object in the " +
		"columns' order, as Flink's json format writes it (`TIMESTAMP(3)` as `\"2026-12-01 10:00:00.123\"`, `DECIMAL` with " +
		"its scale's digits, `BYTES` in base64). A schema column may read the record instead of the value: " +
		"`TIMESTAMP_LTZ(3) METADATA FROM 'timestamp'`, and likewise `key`, `partition`, `offset`, `topic`, `headers` and `value` (the whole value as text, for a value that is not JSON).\n\n" +
		"The expressions are Flink SQL: three-valued logic, `CASE`, `CAST` and `TRY_CAST`, `LIKE`, `IN`, `BETWEEN`, " +
		"exact `DECIMAL` arithmetic (`0.908 * price` on a `BIGINT` price is a `DECIMAL(23, 3)`), intervals " +
		"(`ts - INTERVAL '4' SECOND`) and Flink's scalar functions by their names (`md5`, `concat`, `date_format`, " +
		"`regexp_extract`, `json_value`, …). They are type-checked when the job starts: an unknown column or function, " +
		"or an argument of the wrong type, is reported with the column in the expression. Nondeterministic functions " +
		"(`uuid()`, `rand()`) are refused, since a replay after a crash must write what the first run wrote; " +
		"`proctime()` and `current_timestamp` are allowed and give the time of the run (a replay's own).\n\n" +
		"A record whose value does not fit the schema (not JSON, a field of the wrong type: the error names the column, " +
		"the type and the value) or on which an expression fails (a division by zero, a `CAST` of a non-number) is a " +
		"poison record: the job's errors.policy decides. The record key stays unless `key` sets it; the output value " +
		"replaces the input's, so key expressions over the value see new fields.",
	Fields: []Field{
		{Name: "schema", Type: OrderedMap, Required: true,
			Example:     `{ user_id: BIGINT, action: STRING, ts: "TIMESTAMP_LTZ(3) METADATA FROM 'timestamp'" }`,
			Missing:     `give the input columns and their SQL types, such as schema: { user_id: BIGINT, action: STRING }`,
			Description: "The input columns of the JSON value in order, each with its SQL type; `TYPE METADATA FROM 'key'` reads the record's key, timestamp, partition, offset, topic or headers."},
		{Name: "columns", Type: OrderedMap, Example: `{ user_id: user_id, action: upper(action), day: "date_format(ts, 'yyyy-MM-dd')" }`,
			Description: "The output columns in order, each a SQL expression over the schema's columns; unset: the schema's columns unchanged."},
		{Name: "where", Type: String, Example: `action <> 'view'`,
			Description: "A SQL condition: records for which it is not TRUE (FALSE or NULL) are dropped."},
		{Name: "key", Type: StringList, Example: "[ user_id ]",
			Description: "Output columns that become the record key: one column's text, or several as a JSON array."},
		{Name: "format", Type: String, Default: "json", Example: "csv",
			Description: "How the value holds the schema's columns: `json` (an object, by name), `csv` (one line, the columns other than metadata in order; an empty field is NULL except for a STRING; each field read as `CAST(field AS type)` reads it) or `debezium-json` (a Debezium change event, `{\"before\": row, \"after\": row, \"op\": \"c\"|\"r\"|\"u\"|\"d\"}`, also inside `payload` when the schema is included: a create or snapshot read emits `after`, an update `before` as a retraction (-U) then `after`, a delete `before` as a retraction (-D), each through `where` and `columns`; a record with no value, the tombstone Debezium writes after a delete, is skipped)."},
		{Name: "csv-field-delimiter", Type: String, Example: "|",
			Description: "With `format: csv`: the one character between fields; unset: `,`."},
		{Name: "csv-quote-character", Type: String, Example: "'",
			Description: "With `format: csv`: the one character a field may be enclosed in (written twice inside it); unset: `\"`."},
		{Name: "csv-null-literal", Type: String, Example: `\N`,
			Description: "With `format: csv`: a field's text that means NULL (also for a STRING); unset: none."},
		{Name: "output-format", Type: String, Default: "json", Example: "csv",
			Description: "How the output value is written: `json` (an object, by column), `csv` (one line of the columns in order, RFC 4180 quoting with `\"`, NULL as `output-csv-null-literal`; no ROW, ARRAY or MAP columns) or `raw` (the one output column's text or bytes as they are; NULL: no value)."},
		{Name: "output-csv-field-delimiter", Type: String, Example: "|",
			Description: "With `output-format: csv`: the one character between fields; unset: `,`."},
		{Name: "output-csv-null-literal", Type: String, Example: `\N`,
			Description: "With `output-format: csv`: the text written for NULL; unset: an empty field."},
	},
	Validate: func(p Params) error {
		_, err := selectConfig(p, Env{}).compile()
		return err
	},
	Props:    func(Params) Props { return Props{Keys: KeysLost} },
	Build:    func(p Params, env Env) (Operator, error) { return selectConfig(p, env).operator() },
	Describe: func(p Params) string { return selectConfig(p, Env{}).describe() },
	GoFunc:   "Select",
	Example: `- select:
      schema: { user_id: BIGINT, action: STRING, ts: "TIMESTAMP_LTZ(3) METADATA FROM 'timestamp'" }
      columns: { user_id: user_id, action: upper(action), day: "date_format(ts, 'yyyy-MM-dd')" }
      where: action <> 'view'
      key: [ user_id ]`,
}

func init() { Register(selectSpec) }

func selectConfig(p Params, env Env) SelectConfig {
	return SelectConfig{Schema: p.Ordered("schema"), Columns: p.Ordered("columns"), Where: p.Text("where"),
		Key: p.List("key"), OnError: env.Policy, Format: p.Text("format"), CSVFieldDelimiter: p.Text("csv-field-delimiter"),
		CSVQuoteCharacter: p.Text("csv-quote-character"), CSVNullLiteral: p.Text("csv-null-literal"),
		OutputFormat: p.Text("output-format"), OutputCSVFieldDelimiter: p.Text("output-csv-field-delimiter"),
		OutputCSVNullLiteral: p.Text("output-csv-null-literal")}
}

// format checks the format fields and returns eval's Format.
func (c SelectConfig) format() (eval.Format, error) {
	csvFields := map[string]string{"csv-field-delimiter": c.CSVFieldDelimiter, "csv-quote-character": c.CSVQuoteCharacter, "csv-null-literal": c.CSVNullLiteral}
	switch c.Format {
	case "", "json", FormatDebezium:
		for _, f := range []string{"csv-field-delimiter", "csv-quote-character", "csv-null-literal"} {
			if csvFields[f] != "" {
				return eval.Format{}, &FieldError{Field: f, Msg: "applies with format: csv only"}
			}
		}
		return eval.Format{}, nil
	case "csv":
		f := eval.DefaultCSV
		for _, x := range []struct {
			field string
			to    *byte
		}{{"csv-field-delimiter", &f.Delimiter}, {"csv-quote-character", &f.Quote}} {
			switch v := csvFields[x.field]; len(v) {
			case 0:
			case 1:
				*x.to = v[0]
			default:
				return eval.Format{}, &FieldError{Field: x.field, Msg: fmt.Sprintf("is %q: give one character (one byte)", v)}
			}
		}
		f.NullLiteral = c.CSVNullLiteral
		return eval.Format{CSV: &f}, nil
	}
	return eval.Format{}, &FieldError{Field: "format", Msg: fmt.Sprintf("is %q: json, csv or debezium-json", c.Format)}
}

func (c SelectConfig) describe() string {
	var cols []string
	for _, n := range c.Columns {
		cols = append(cols, n.Name+" = "+n.Text)
	}
	if len(cols) == 0 {
		cols = append(cols, "the schema's columns")
	}
	s := "select " + strings.Join(cols, ", ")
	if c.Format == "csv" {
		s = "read csv, " + s
	}
	if c.Where != "" {
		s += " where " + c.Where
	}
	if len(c.Key) > 0 {
		s += ", key " + strings.Join(c.Key, ", ")
	}
	return s
}

// sqlError is an error about the SQL text src of a field.
func sqlError(field, src string, err error) error {
	return &FieldError{Field: field, Err: fmt.Errorf("%q: %w", src, err)}
}

// compile parses and type-checks the schema, columns, condition and key.
func (c SelectConfig) compile() (*eval.Select, error) {
	if len(c.Schema) == 0 {
		return nil, &FieldError{Field: "schema", Msg: "is empty: give the input columns and their SQL types"}
	}
	schema := make(eval.Schema, len(c.Schema))
	for i, n := range c.Schema {
		col, err := eval.ParseSchemaColumn(n.Name, n.Text)
		if err != nil {
			return nil, sqlError("schema."+n.Name, n.Text, err)
		}
		schema[i] = col
	}
	var columns []eval.NamedExpr
	for _, n := range c.Columns {
		e, err := parser.ParseExpr(n.Text)
		if err != nil {
			return nil, sqlError("columns."+n.Name, n.Text, err)
		}
		columns = append(columns, eval.NamedExpr{Name: n.Name, Expr: e})
	}
	var where ast.Expr
	if c.Where != "" {
		var err error
		if where, err = parser.ParseExpr(c.Where); err != nil {
			return nil, sqlError("where", c.Where, err)
		}
	}
	f, err := c.format()
	if err != nil {
		return nil, err
	}
	sel, err := eval.CompileSelectOf(schema, f, columns, where, c.Key)
	if err != nil {
		if ce, ok := err.(*eval.ColumnError); ok {
			switch {
			case ce.Where:
				return nil, sqlError("where", c.Where, ce.Err)
			case ce.Key:
				return nil, &FieldError{Field: "key", Err: ce.Err}
			}
			for _, n := range c.Columns {
				if n.Name == ce.Column {
					return nil, sqlError("columns."+n.Name, n.Text, ce.Err)
				}
			}
			return nil, &FieldError{Field: "schema", Err: ce}
		}
		return nil, &FieldError{Field: "schema", Err: err}
	}
	return sel, nil
}

// selectState is what one goroutine needs to run a select: the row and
// the output buffer, reused record after record.
type selectState struct {
	ctx eval.Ctx
	buf []byte
}

func (c SelectConfig) operator() (Operator, error) {
	sel, err := c.compile()
	if err != nil {
		return Operator{}, err
	}
	needValue, needKey, needHeaders, needMeta := sel.Needs()
	uses := UsesWithValue | UsesPosition
	if needValue {
		uses |= UsesValue
	}
	if needKey {
		uses |= UsesKey
	}
	if needHeaders {
		uses |= UsesHeaders
	}
	if needMeta {
		uses |= UsesMeta
	}
	setsKey := sel.SetsKey()
	if setsKey {
		uses |= UsesWithKey
	}
	// Subtasks run the operator concurrently: each takes a state from the
	// pool for a record.
	pool := sync.Pool{New: func() any { return new(selectState) }}
	if c.Format == FormatDebezium {
		return c.debeziumOperator(sel, uses, &pool)
	}
	out, err := c.outputWriter(sel)
	if err != nil {
		return Operator{}, err
	}
	return Operator{Uses: uses, Each: func(r Record, emit func()) error {
		st := pool.Get().(*selectState)
		var m eval.Meta
		if needKey {
			m.Key = r.Key()
		}
		if needMeta {
			rm := r.Meta()
			m.Topic, m.Partition, m.Offset, m.Timestamp = rm.Topic, rm.Partition, rm.Offset, rm.Timestamp
		}
		if needHeaders {
			m.Headers = r.Headers()
		}
		var value []byte
		if needValue {
			value = r.Value()
		}
		res, err := sel.Run(&st.ctx, value, &m, st.buf[:0])
		if err != nil {
			pool.Put(st)
			return recordError(r, "select", err)
		}
		if !res.Keep {
			pool.Put(st)
			return nil
		}
		st.buf = res.Value
		v, err := out(res.Value)
		pool.Put(st)
		if err != nil {
			return recordError(r, "select", err)
		}
		r.SetValue(v)
		if setsKey {
			r.SetKey(res.Key)
		}
		emit()
		return nil
	}}, nil
}

// outputWriter returns what writes a row's JSON (buf, reused by the next
// row) as the output value, in c.OutputFormat.
func (c SelectConfig) outputWriter(sel *eval.Select) (func(row []byte) ([]byte, error), error) {
	cols := sel.Columns()
	switch c.OutputFormat {
	case "", "json":
		if c.OutputCSVFieldDelimiter != "" || c.OutputCSVNullLiteral != "" {
			return nil, &FieldError{Field: "output-csv-field-delimiter", Msg: "applies with output-format: csv only"}
		}
		return func(row []byte) ([]byte, error) { return bytes.Clone(row), nil }, nil
	case "raw":
		if len(cols) != 1 {
			return nil, &FieldError{Field: "output-format", Msg: fmt.Sprintf("raw writes one column, and the select has %d", len(cols))}
		}
		name := cols[0].Name
		return func(row []byte) ([]byte, error) {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(row, &m); err != nil {
				return nil, err
			}
			v := m[name]
			switch {
			case len(v) == 0 || string(v) == "null":
				return nil, nil
			case v[0] == '"':
				var s string
				if err := json.Unmarshal(v, &s); err != nil {
					return nil, err
				}
				if cols[0].Type.Kind == types.Bytes {
					return base64.StdEncoding.DecodeString(s)
				}
				return []byte(s), nil
			}
			return bytes.Clone(v), nil
		}, nil
	case "csv":
		delim := ','
		switch d := c.OutputCSVFieldDelimiter; len(d) {
		case 0:
		case 1:
			delim = rune(d[0])
		default:
			return nil, &FieldError{Field: "output-csv-field-delimiter", Msg: fmt.Sprintf("is %q: give one character (one byte)", d)}
		}
		names := make([]string, len(cols))
		for i, oc := range cols {
			switch oc.Type.Kind {
			case types.Row, types.Array, types.Map:
				return nil, &FieldError{Field: "output-format", Msg: fmt.Sprintf("csv writes flat columns, and %s is a %s", oc.Name, oc.Type)}
			}
			names[i] = oc.Name
		}
		null := c.OutputCSVNullLiteral
		return func(row []byte) ([]byte, error) {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(row, &m); err != nil {
				return nil, err
			}
			fields := make([]string, len(names))
			for i, n := range names {
				v := m[n]
				switch {
				case len(v) == 0 || string(v) == "null":
					fields[i] = null
				case v[0] == '"':
					if err := json.Unmarshal(v, &fields[i]); err != nil {
						return nil, err
					}
				default:
					fields[i] = string(v)
				}
			}
			var b bytes.Buffer
			w := csv.NewWriter(&b)
			w.Comma = delim
			if err := w.Write(fields); err != nil {
				return nil, err
			}
			w.Flush()
			return bytes.TrimSuffix(b.Bytes(), []byte("\n")), w.Error()
		}, nil
	}
	return nil, &FieldError{Field: "output-format", Msg: fmt.Sprintf("is %q: json, csv or raw", c.OutputFormat)}
}

// FormatDebezium is SelectConfig.Format of Debezium's change events.
const FormatDebezium = "debezium-json"

// debeziumChange is a Debezium change event's envelope; Payload holds it
// when the event includes its schema.
type debeziumChange struct {
	Before, After json.RawMessage
	Op            string
	Payload       *debeziumChange
}

// debeziumOperator is the select of a debezium-json table: each change
// event becomes the rows it takes out and puts in (docs/design.md,
// "Changelogs"), each run through the select's where and columns.
func (c SelectConfig) debeziumOperator(sel *eval.Select, uses Access, pool *sync.Pool) (Operator, error) {
	needValue, needKey, needHeaders, needMeta := sel.Needs()
	_ = needValue // the rows are the event's before and after
	uses |= UsesValue | UsesWithRowKind
	setsKey := sel.SetsKey()
	return Operator{Uses: uses, Each: func(r Record, emit func()) error {
		v := r.Value()
		if len(v) == 0 {
			return nil // the tombstone after a delete, for compaction
		}
		var ev debeziumChange
		if err := json.Unmarshal(v, &ev); err != nil {
			return recordError(r, "select", fmt.Errorf("the value is not a Debezium change event (format debezium-json): %v", err))
		}
		if ev.Op == "" && ev.Payload != nil {
			ev = *ev.Payload
		}
		present := func(m json.RawMessage) bool { return len(m) > 0 && string(m) != "null" }
		type change struct {
			kind RowKind
			row  json.RawMessage
		}
		var changes [2]change
		n := 0
		switch ev.Op {
		case "c", "r":
			changes[0], n = change{RowAdd, ev.After}, 1
		case "u":
			if !present(ev.Before) {
				return recordError(r, "select", errors.New("a Debezium update without its before row: the source table must log whole rows (PostgreSQL: ALTER TABLE … REPLICA IDENTITY FULL), or the old row cannot be retracted"))
			}
			changes[0], changes[1], n = change{RowUpdateBefore, ev.Before}, change{RowAdd, ev.After}, 2
		case "d":
			changes[0], n = change{RowDelete, ev.Before}, 1
			if !present(ev.Before) {
				return recordError(r, "select", errors.New("a Debezium delete without its before row: the source table must log whole rows (PostgreSQL: ALTER TABLE … REPLICA IDENTITY FULL)"))
			}
		default:
			return recordError(r, "select", fmt.Errorf("a Debezium change event with op %q: want c, r, u or d", ev.Op))
		}
		var m eval.Meta
		if needKey {
			m.Key = r.Key()
		}
		if needMeta {
			rm := r.Meta()
			m.Topic, m.Partition, m.Offset, m.Timestamp = rm.Topic, rm.Partition, rm.Offset, rm.Timestamp
		}
		if needHeaders {
			m.Headers = r.Headers()
		}
		for _, ch := range changes[:n] {
			if !present(ch.row) {
				return recordError(r, "select", fmt.Errorf("a Debezium change event with op %q and no row", ev.Op))
			}
			st := pool.Get().(*selectState)
			res, err := sel.Run(&st.ctx, ch.row, &m, st.buf[:0])
			if err != nil {
				pool.Put(st)
				return recordError(r, "select", err)
			}
			if !res.Keep {
				pool.Put(st)
				continue
			}
			st.buf = res.Value
			out := make([]byte, len(res.Value))
			copy(out, res.Value)
			var key []byte
			if setsKey {
				key = append([]byte(nil), res.Key...)
			}
			pool.Put(st)
			r.SetValue(out)
			if setsKey {
				r.SetKey(key)
			}
			r.SetRowKind(ch.kind)
			emit()
		}
		return nil
	}}, nil
}

// Select projects and filters the records of s with SQL expressions over
// typed columns of their JSON values (see SelectConfig). The second
// stream carries, under flow.DeadLetterOnError, the records that do not
// fit the schema or that an expression fails on. The operator's id is
// "select" unless opts give another with flow.UID.
func Select[T any](s flow.Stream[T], acc RecordAccess[T], cfg SelectConfig, opts ...flow.OpOption) (flow.Stream[T], flow.Stream[flow.Failure[T]], error) {
	return applyStateless(s, acc, selectSpec, nil, cfg.OnError, opts, cfg.operator)
}
