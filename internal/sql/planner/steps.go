package planner

import (
	"fmt"
	"strings"

	"github.com/onceflow/onceflow/internal/sql/ast"
)

// materialize writes r's open select as a select step keyed by key (the
// names of output columns; nil: the key is kept) and makes its output
// the schema of the records from here on. It returns the output columns'
// types by name, nil after an error.
func (p *planner) materialize(r *rel, key []string, at ast.Pos) map[string]*ast.Type {
	if len(p.errs) > 0 {
		return nil // the columns are not all known: typing them would repeat the errors
	}
	types := map[string]*ast.Type{}
	out := make([]schemaCol, 0, len(r.cols))
	for _, c := range r.cols {
		if m, ok := c.expr.(*ast.ColumnRef); ok && strings.HasPrefix(m.Name.Parts[0].Name, "\x00") {
			p.errorf(at, "%s can only be used with GROUP BY window_start, window_end", c.name)
			return nil
		}
		t, err := typeOf(r.in, c.expr)
		if err != nil {
			p.errorf(c.expr.Position(), "%s: %v", c.name, err)
			continue
		}
		types[c.name] = t
		out = append(out, schemaCol{name: c.name, typ: t})
	}
	if len(out) != len(r.cols) {
		return nil
	}
	if !r.identity() || key != nil {
		in, cols, where := r.in, r.cols, r.where
		r.steps = append(r.steps, step{at: at, write: func(w *yamlWriter, d int) {
			w.linef(at, d, "- select:")
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
				w.linef(c.expr.Position(), d+3, "%s: %s", q(c.name), q(c.expr.String()))
			}
			if where != nil {
				w.linef(where.Position(), d+2, "where: %s", q(where.String()))
			}
			if key != nil {
				w.linef(at, d+2, "key: %s", qlist(key))
			}
		}})
	}
	r.in = out
	r.cols = nil
	for _, c := range out {
		r.cols = append(r.cols, relCol{name: c.name, expr: ref(c.name)})
	}
	r.where = nil
	return types
}

// identity tells whether r's open select changes nothing: every column
// of the schema, in order, unfiltered, read from the JSON value.
func (r *rel) identity() bool {
	if r.where != nil || len(r.cols) != len(r.in) {
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
