package planner

import (
	"errors"
	"fmt"
	"strings"

	"github.com/onceflow/onceflow/internal/sql/ast"
	"github.com/onceflow/onceflow/internal/sql/eval"
	"github.com/onceflow/onceflow/internal/sql/parser"
)

// materialize writes r's open select as a select step keyed by key (the
// names of output columns; nil: the key is kept) and makes its output
// the schema of the records from here on. It returns the output columns'
// types by name, nil after an error.
func (p *planner) materialize(r *rel, key []string, at ast.Pos) map[string]*ast.Type {
	if len(p.errs) > 0 {
		return nil // the columns are not all known: typing them would repeat the errors
	}
	p.simplifyCases(r) // prune.go
	var sp *sidePrune  // a regular join's side: what its reader uses (prune.go)
	sp, r.sidePrune = r.sidePrune, nil
	jprune := r.prune // a join's result read by this select
	r.prune = nil
	if jprune != nil {
		if len(r.steps) == 1 { // right after the join step
			exprs := []ast.Expr{r.where}
			for _, c := range r.cols {
				exprs = append(exprs, c.expr)
			}
			if r.pair != nil {
				exprs = append(exprs, r.pair.cond)
			}
			jprune.record(exprs)
		} else {
			jprune.known = false
		}
	}
	types, out := p.typeColumns(r, key, at)
	if out == nil {
		return nil
	}
	if !r.identity() || key != nil {
		in, cols, where, csv, cdc, of := r.in, r.cols, r.where, r.csv, r.cdc, r.out
		r.steps = append(r.steps, step{at: at, write: func(w *yamlWriter, d int) {
			w.linef(at, d, "- select:")
			if csv != nil {
				csv.write(w, d+2)
			}
			if cdc {
				w.linef(at, d+2, "format: debezium-json")
			}
			if jprune != nil && jprune.known {
				in = jprune.prunedSchema(in)
			}
			w.linef(at, d+2, "schema:")
			for _, c := range in {
				t := c.typ.String()
				if c.meta != "" {
					t += fmt.Sprintf(" METADATA FROM '%s'", c.meta)
				}
				w.linef(at, d+3, "%s: %s", q(c.name), q(t))
			}
			w.linef(at, d+2, "columns:")
			for _, c := range cols {
				if sp != nil && !sp.keeps(c.name) {
					continue // no reader after the join uses it
				}
				w.linef(c.expr.Position(), d+3, "%s: %s", q(c.name), q(c.expr.String()))
			}
			if where != nil {
				w.linef(where.Position(), d+2, "where: %s", q(where.String()))
			}
			if key != nil {
				w.linef(at, d+2, "key: %s", qlist(key))
			}
			if of != nil {
				w.linef(of.at, d+2, "output-format: %s", of.format)
				if of.delim != "" {
					w.linef(of.at, d+2, "output-csv-field-delimiter: %s", q(of.delim))
				}
				if of.null != "" {
					w.linef(of.at, d+2, "output-csv-null-literal: %s", q(of.null))
				}
			}
		}})
	}
	r.in = out
	r.cols = nil
	for _, c := range out {
		r.cols = append(r.cols, relCol{name: c.name, expr: ref(c.name)})
	}
	r.where = nil
	r.csv, r.cdc, r.out = nil, false, nil
	return types
}

// identity tells whether r's open select changes nothing: every column
// of the schema, in order, unfiltered, read from the JSON value.
func (r *rel) identity() bool {
	if r.where != nil || len(r.cols) != len(r.in) || r.csv != nil || r.cdc || r.out != nil {
		return false
	}
	for i, c := range r.cols {
		if r.in[i].meta != "" || c.name != r.in[i].name || !isRef(c.expr, c.name) {
			return false
		}
	}
	return true
}

// stateful appends a keyed step of the kind (window, aggregate) whose
// fields write writes.
func (p *planner) stateful(r *rel, at ast.Pos, kind string, write func(w *yamlWriter, d int)) {
	r.steps = append(r.steps, step{at: at, write: func(w *yamlWriter, d int) {
		w.linef(at, d, "- %s:", kind)
		write(w, d+2)
	}})
}

// stateKeyCol is the column that makes a one-column state key a JSON
// array: the select's key of one column is its text, and NULL's (no key)
// would be the same as the empty string's.
const stateKeyCol = "__group"

// materializeKeyed is materialize for the select before a keyed step,
// key the columns its rows are grouped by. With one column the select's
// key would be that column's text, and NULL's (no key) the empty string's:
// stateKeyCol beside it makes the key a JSON array, which keeps them
// apart as several columns' does (docs/design.md, "### SQL"). The column
// stays in the records' values, not among r's columns.
func (p *planner) materializeKeyed(r *rel, key []string, at ast.Pos) map[string]*ast.Type {
	if len(key) == 1 {
		r.cols = append(r.cols, relCol{name: stateKeyCol, expr: &ast.Literal{Kind: ast.LitBool, Value: "TRUE"}})
		key = []string{key[0], stateKeyCol}
	}
	types := p.materialize(r, key, at)
	if types != nil && len(key) == 2 && key[1] == stateKeyCol {
		r.cols = r.cols[:len(r.cols)-1] // materialize made r.cols the output's, stateKeyCol last
	}
	return types
}

// writeKeyOf writes a keyed step's key-of: what its record key was made
// of, which its state layout records (docs/design.md, "State across query
// changes").
func writeKeyOf(w *yamlWriter, at ast.Pos, d int, exprs []string) {
	if len(exprs) > 0 {
		w.linef(at, d, "key-of: %s", qlist(exprs))
	}
}

// exprTexts is the SQL text of each of es.
func exprTexts(es []ast.Expr) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.String()
	}
	return out
}

// typeColumns type-checks r's open select as the select step will
// compile it (the same code: package eval), so a mistake is reported
// at the script's line and column when the script is validated, and
// returns the output columns' types.
func (p *planner) typeColumns(r *rel, key []string, at ast.Pos) (map[string]*ast.Type, []schemaCol) {
	schema := make(eval.Schema, 0, len(r.in))
	for _, c := range r.in {
		text := c.typ.String()
		if c.meta != "" {
			text += fmt.Sprintf(" METADATA FROM '%s'", c.meta)
		}
		sc, err := eval.ParseSchemaColumn(c.name, text)
		if err != nil {
			p.errorf(at, "column %s: %v", c.name, err)
			return nil, nil
		}
		schema = append(schema, sc)
	}
	cols := make([]eval.NamedExpr, len(r.cols))
	for i, c := range r.cols {
		if m, ok := c.expr.(*ast.ColumnRef); ok && strings.HasPrefix(m.Name.Parts[0].Name, "\x00") {
			p.errorf(at, "%s can only be used with GROUP BY window_start, window_end", c.name)
			return nil, nil
		}
		cols[i] = eval.NamedExpr{Name: c.name, Expr: c.expr}
	}
	var f eval.Format
	if r.csv != nil {
		f.CSV = &r.csv.f
	}
	sel, err := eval.CompileSelectOf(schema, f, cols, r.where, key)
	if err != nil {
		p.evalErrors(err, at)
		return nil, nil
	}
	types := map[string]*ast.Type{}
	var out []schemaCol
	for _, oc := range sel.Columns() {
		t, err := parser.ParseType(oc.Type.String())
		if err != nil { // the type printer writes what the parser reads
			p.errorf(at, "column %s: type %s: %v", oc.Name, oc.Type, err)
			return nil, nil
		}
		types[oc.Name] = t
		out = append(out, schemaCol{name: oc.Name, typ: t})
	}
	return types, out
}

// evalErrors reports the expression compiler's errors at their places
// in the script.
func (p *planner) evalErrors(err error, at ast.Pos) {
	for _, e := range unjoin(err) {
		var ee *eval.Error
		var ce *eval.ColumnError
		switch {
		case errors.As(e, &ee) && ee.Pos.Line > 0:
			p.errorf(ee.Pos, "%s", ee.Msg)
		case errors.As(e, &ce):
			p.errorf(at, "%v", ce)
		default:
			p.errorf(at, "%v", e)
		}
	}
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
