package eval

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/onceflow/onceflow/internal/jsontext"
	"github.com/onceflow/onceflow/internal/sql/ast"
	"github.com/onceflow/onceflow/internal/sql/types"
)

// SchemaColumn is an input column of a select: a physical column of the
// record's JSON value, or a metadata column (Metadata set: key,
// timestamp, partition, offset, topic or headers).
type SchemaColumn struct {
	Name     string
	Type     *types.Type
	Metadata string
}

// Schema is the ordered input columns of a select.
type Schema []SchemaColumn

// ParseSchemaColumn reads a column's type as the select step writes it:
// "BIGINT", "ROW<id BIGINT, name STRING>", "TIMESTAMP_LTZ(3) METADATA
// FROM 'timestamp'", "STRING METADATA" (the column's name is then the
// metadata key).
func ParseSchemaColumn(name, text string) (SchemaColumn, error) {
	t, rest, err := types.Parse(text)
	if err != nil {
		return SchemaColumn{}, err
	}
	c := SchemaColumn{Name: name, Type: t}
	rest = strings.TrimSpace(rest)
	if rest == "" {
		return c, nil
	}
	words := strings.Fields(rest)
	if !strings.EqualFold(words[0], "METADATA") {
		return SchemaColumn{}, fmt.Errorf("unexpected %q after the type %s: only METADATA [FROM 'key'] [VIRTUAL] may follow", rest, t)
	}
	c.Metadata = name
	words = words[1:]
	if len(words) >= 2 && strings.EqualFold(words[0], "FROM") {
		c.Metadata = strings.Trim(words[1], `'"`)
		words = words[2:]
	}
	if len(words) == 1 && strings.EqualFold(words[0], "VIRTUAL") {
		words = nil
	}
	if len(words) > 0 {
		return SchemaColumn{}, fmt.Errorf("unexpected %q after METADATA: write METADATA FROM 'timestamp'", strings.Join(words, " "))
	}
	if _, ok := metaTypes[c.Metadata]; !ok {
		return SchemaColumn{}, fmt.Errorf("unknown metadata key %q (known: key, timestamp, partition, offset, topic, headers)", c.Metadata)
	}
	if _, err := castFn(metaTypes[c.Metadata], t, false); err != nil {
		return SchemaColumn{}, fmt.Errorf("metadata %s is a %s and cannot be read as %s", c.Metadata, metaTypes[c.Metadata], t)
	}
	return c, nil
}

// SchemaColumnOf is a CREATE TABLE's physical or metadata column as an
// input column of a select (a computed column is an output column of the
// select that reads the table: the planner compiles its expression).
func SchemaColumnOf(c *ast.ColumnDef) (SchemaColumn, error) {
	if c.Expr != nil || c.Type == nil {
		return SchemaColumn{}, &Error{c.At, fmt.Sprintf("column %s is computed: it is an expression over the others, not an input column", c.Name.Name)}
	}
	t, err := types.FromAST(c.Type)
	if err != nil {
		return SchemaColumn{}, err
	}
	col := SchemaColumn{Name: c.Name.Name, Type: t}
	if c.Metadata {
		col.Metadata = c.MetadataKey
		if col.Metadata == "" {
			col.Metadata = c.Name.Name
		}
		mt, ok := metaTypes[col.Metadata]
		if !ok {
			return SchemaColumn{}, &Error{c.At, fmt.Sprintf("unknown metadata key %q (known: key, timestamp, partition, offset, topic, headers)", col.Metadata)}
		}
		if _, err := castFn(mt, t, false); err != nil {
			return SchemaColumn{}, &Error{c.At, fmt.Sprintf("metadata %s is a %s and cannot be read as %s", col.Metadata, mt, t)}
		}
	}
	return col, nil
}

// NamedExpr is an output column: its name and expression.
type NamedExpr struct {
	Name string
	Expr ast.Expr
}

// OutColumn is an output column's name and type.
type OutColumn struct {
	Name string
	Type *types.Type
}

// ColumnError is a compile error in one output column (Column set), the
// where condition (Where) or the key.
type ColumnError struct {
	Column string
	Where  bool
	Key    bool
	Err    error
}

func (e *ColumnError) Error() string {
	switch {
	case e.Where:
		return "where: " + e.Err.Error()
	case e.Key:
		return "key: " + e.Err.Error()
	}
	return "column " + e.Column + ": " + e.Err.Error()
}

func (e *ColumnError) Unwrap() error { return e.Err }

// Select is a compiled projection and filter over rows of a schema.
type Select struct {
	schema  Schema
	out     []OutColumn
	exprs   []*Expr
	where   *Expr
	dec     *rowDecoder
	names   [][]byte // `"name":` per output column, `{` or `,` first
	encs    []func([]byte, Value) []byte
	keyIdx  []int
	keyStr  []func(Value) string
	usesKey bool
	usesHdr bool
	usesMet bool
	usesVal bool
}

// CompileSelect type-checks the output columns and the where condition
// (nil: none) over schema, and the key columns (names of output
// columns); columns nil means every schema column unchanged. The SQL
// planner calls it to learn the output's types (Columns) before it
// emits a select step.
func CompileSelect(schema Schema, columns []NamedExpr, where ast.Expr, key []string) (*Select, error) {
	return CompileSelectOf(schema, Format{}, columns, where, key)
}

// Format is how a value holds the schema's physical columns: a JSON
// object (the zero Format) or, with CSV set, a csv line.
type Format struct {
	CSV *CSV
}

// CompileSelectOf is CompileSelect over values in format f.
func CompileSelectOf(schema Schema, f Format, columns []NamedExpr, where ast.Expr, key []string) (*Select, error) {
	s := &Select{schema: schema}
	scope := &Scope{}
	seen := map[string]bool{}
	for _, c := range schema {
		if seen[c.Name] {
			return nil, fmt.Errorf("schema: column %s is declared twice", c.Name)
		}
		seen[c.Name] = true
		scope.Columns = append(scope.Columns, Column{Name: c.Name, Type: c.Type})
	}
	if columns == nil {
		for _, c := range schema {
			columns = append(columns, NamedExpr{Name: c.Name, Expr: &ast.ColumnRef{Name: ast.Name{Parts: []ast.Ident{{Name: c.Name}}}}})
		}
	}
	seen = map[string]bool{}
	for _, c := range columns {
		if seen[c.Name] {
			return nil, &ColumnError{Column: c.Name, Err: fmt.Errorf("the output column %s is named twice", c.Name)}
		}
		seen[c.Name] = true
		e, err := Compile(c.Expr, scope)
		if err != nil {
			return nil, &ColumnError{Column: c.Name, Err: err}
		}
		if e.Type.Kind == types.Null {
			e.Type = types.StringT // a bare NULL: Flink types it NULL; JSON writes null either way
		}
		s.exprs = append(s.exprs, e)
		s.out = append(s.out, OutColumn{Name: c.Name, Type: e.Type.Nullable()})
		sep := byte(',')
		if len(s.names) == 0 {
			sep = '{'
		}
		s.names = append(s.names, append(jsontext.AppendString([]byte{sep}, c.Name), ':'))
		s.encs = append(s.encs, encoderFor(e.Type))
	}
	if where != nil {
		w, err := Compile(where, scope)
		if err != nil {
			return nil, &ColumnError{Where: true, Err: err}
		}
		if w.Type.Kind != types.Boolean && w.Type.Kind != types.Null {
			return nil, &ColumnError{Where: true, Err: errorf(w.Pos, "the condition is a %s, not a BOOLEAN", w.Type)}
		}
		s.where = w
	}
	for _, k := range key {
		i := -1
		for j, o := range s.out {
			if o.Name == k {
				i = j
			}
		}
		if i < 0 {
			names := make([]string, len(s.out))
			for j, o := range s.out {
				names[j] = o.Name
			}
			return nil, &ColumnError{Key: true, Err: fmt.Errorf("%s is not an output column; output columns: %s", k, strings.Join(names, ", "))}
		}
		str, err := toStringFn(s.out[i].Type)
		if s.out[i].Type.Kind == types.Bytes {
			str = func(v Value) string { return v.S } // the bytes as they are
		}
		if err != nil {
			return nil, &ColumnError{Key: true, Err: fmt.Errorf("%s is a %s, which cannot be a key", k, s.out[i].Type)}
		}
		s.keyIdx = append(s.keyIdx, i)
		s.keyStr = append(s.keyStr, str)
	}
	dec, err := newRowDecoder(schema, scope.Used, scope.FieldsUsed)
	if err != nil {
		return nil, err
	}
	if f.CSV != nil {
		if dec.csv, err = newCSVDecoder(*f.CSV, schema, scope.Used); err != nil {
			return nil, err
		}
	}
	s.dec = dec
	s.usesVal = dec.anyPhy
	for _, m := range dec.meta {
		switch m.key {
		case MetaKey:
			s.usesKey = true
		case MetaHeaders:
			s.usesHdr = true
		case MetaValue:
			s.usesVal = true
		default:
			s.usesMet = true
		}
	}
	return s, nil
}

// Columns are the output columns and their types.
func (s *Select) Columns() []OutColumn { return s.out }

// SetsKey tells whether the select sets the record key.
func (s *Select) SetsKey() bool { return len(s.keyIdx) > 0 }

// Needs tells which parts of a record Run reads: the value, the key, the
// headers, the other metadata (topic, partition, offset, timestamp).
func (s *Select) Needs() (value, key, headers, meta bool) {
	return s.usesVal, s.usesKey, s.usesHdr, s.usesMet
}

// Result is what Run makes of one record.
type Result struct {
	// Keep: the record passes the where condition.
	Keep bool
	// Value is the output row as JSON, appended to the buffer Run was
	// given.
	Value []byte
	// Key is the new key when the select sets one (nil for a NULL key).
	Key []byte
}

// Run decodes one record's value into a row, evaluates the condition and
// the columns, and appends the output row's JSON to buf. An error is a
// record the schema or an expression cannot take (a poison record): a
// *DecodeError, or an evaluation error naming the column.
func (s *Select) Run(ctx *Ctx, value []byte, m *Meta, buf []byte) (Result, error) {
	return s.run(ctx, value, m, buf, nil)
}

// run is Run reading value through ix (index.go), or an index of the
// pool's when ix is nil.
func (s *Select) run(ctx *Ctx, value []byte, m *Meta, buf []byte, ix *valueIndex) (Result, error) {
	ctx.Reset()
	if err := s.dec.decode(ctx, value, m, ix); err != nil {
		return Result{}, err
	}
	if s.where != nil {
		ok := s.where.Fn(ctx)
		if ctx.err != nil {
			return Result{}, fmt.Errorf("where: %w", ctx.err)
		}
		if !ok.True() {
			return Result{}, nil
		}
	}
	var small [4]Value
	keyVals := small[:0]
	if len(s.keyIdx) > 0 {
		if len(s.keyIdx) <= len(small) {
			keyVals = small[:len(s.keyIdx)]
		} else {
			keyVals = make([]Value, len(s.keyIdx))
		}
	}
	for i, e := range s.exprs {
		v := e.Fn(ctx)
		if ctx.err != nil {
			return Result{}, fmt.Errorf("column %s: %w", s.out[i].Name, ctx.err)
		}
		buf = append(buf, s.names[i]...)
		buf = s.encs[i](buf, v)
		for j, k := range s.keyIdx {
			if k == i {
				keyVals[j] = v
			}
		}
	}
	if len(s.exprs) == 0 {
		buf = append(buf, '{')
	}
	buf = append(buf, '}')
	r := Result{Keep: true, Value: buf}
	if len(s.keyIdx) > 0 {
		r.Key = s.key(keyVals)
	}
	return r, nil
}

// Match is Run's Keep for a select whose schema is exactly two physical
// columns, a join's two sides (the value {"left": left, "right":
// right}), with each column read from its own side's JSON instead of
// from that joined value: a retracting join tests its condition on every
// pair a row meets, and most fail it (docs/design.md, "Changelogs").
// ok is false when it cannot answer without the joined value (a side
// that is not one JSON value, or a decode error): the caller then builds
// it and calls Run, for the same answer and the same error.
func (s *Select) Match(ctx *Ctx, left, right []byte) (keep, ok bool, err error) {
	d := s.dec
	if d.csv != nil || len(d.meta) > 0 || d.ncols != 2 {
		return false, false, nil
	}
	ctx.Reset()
	if cap(ctx.Row) < 2 {
		ctx.Row = make([]Value, 2)
	}
	ctx.Row = ctx.Row[:2]
	clear(ctx.Row)
	for i, side := range [2][]byte{left, right} {
		if d.decs[i] == nil || len(side) == 0 { // not read, or null
			continue
		}
		p := &ctx.scan
		*p = scanner{s: unsafe.String(&side[0], len(side))}
		v, err := d.decs[i](ctx, p)
		if err != nil {
			return false, false, nil
		}
		if p.ws(); p.i != len(p.s) {
			return false, false, nil
		}
		ctx.Row[i] = v
	}
	if s.where == nil {
		return true, true, nil
	}
	w := s.where.Fn(ctx)
	if ctx.err != nil {
		return false, true, fmt.Errorf("where: %w", ctx.err)
	}
	return w.True(), true, nil
}

// key is the record key of the key columns' values (in the order key
// names them): one column's text, or a JSON array of several.
func (s *Select) key(vals []Value) []byte {
	if len(vals) == 1 {
		if vals[0].K == VNull {
			return nil
		}
		return []byte(s.keyStr[0](vals[0]))
	}
	b := []byte{'['}
	for j, v := range vals {
		if j > 0 {
			b = append(b, ',')
		}
		b = s.encs[s.keyIdx[j]](b, v)
	}
	return append(b, ']')
}

// ColumnTypes returns the names and types of the output columns of
// columns over schema (nil columns: the schema's), without a condition or
// a key: what the SQL planner needs to type the next step's input.
func ColumnTypes(schema Schema, columns []NamedExpr) ([]OutColumn, error) {
	s, err := CompileSelect(schema, columns, nil, nil)
	if err != nil {
		return nil, err
	}
	return s.Columns(), nil
}
