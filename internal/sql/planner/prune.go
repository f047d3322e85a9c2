package planner

import (
	"sort"
	"strconv"
	"strings"

	"github.com/onceflow/onceflow/internal/sql/ast"
)

// Pruning a regular join's sides (docs/design.md, "SQL"): a side's select
// writes only the columns the join's reader uses (and its key columns),
// so the side decodes fewer of its input's fields, the join keeps and
// checks smaller rows and the select after it reads fewer. What the
// reader uses is known only when its select is written (materialize of
// the join's result), after the side's select step was planned: the
// side's step consults joinPrune when the job file is written.

// joinPrune is what the reader of an inner, append-only, regular join's
// result uses of each side's columns.
type joinPrune struct {
	// known: the join's result was read by one select (materialize)
	// right after the join step, which recorded what it uses; otherwise
	// nothing is pruned.
	known bool
	// all: the side is read whole (a reference to `left` itself, or a
	// reader the pruning does not follow).
	all [2]bool
	// used are the side's columns read, by lower-case name; keys are the
	// side's key columns (always written).
	used, keys [2]map[string]bool
}

// sidePrune, on a join's side while its select is materialized, is the
// join's joinPrune and the side's index in it.
type sidePrune struct {
	jp   *joinPrune
	side int
}

// keeps tells whether the side's select writes the column name.
func (s *sidePrune) keeps(name string) bool {
	jp := s.jp
	if !jp.known || jp.all[s.side] {
		return true
	}
	n := strings.ToLower(name)
	return jp.used[s.side][n] || jp.keys[s.side][n]
}

// record notes what exprs (over the join's result: `left`.col and
// `right`.col) read of the sides.
func (jp *joinPrune) record(exprs []ast.Expr) {
	jp.known = true
	for i := range jp.used {
		if jp.used[i] == nil {
			jp.used[i] = map[string]bool{}
		}
	}
	for _, e := range exprs {
		if e == nil {
			continue
		}
		visit(e, func(x ast.Expr) bool {
			switch n := x.(type) {
			case *ast.Subquery:
				jp.all = [2]bool{true, true} // not followed
			case *ast.ColumnRef:
				parts := n.Name.Parts
				side := -1
				switch {
				case len(parts) > 0 && strings.EqualFold(parts[0].Name, "left"):
					side = 0
				case len(parts) > 0 && strings.EqualFold(parts[0].Name, "right"):
					side = 1
				}
				switch {
				case side < 0:
				case len(parts) == 1:
					jp.all[side] = true
				default:
					jp.used[side][strings.ToLower(parts[1].Name)] = true
				}
			}
			return true
		})
	}
}

// kept is what the side's select writes of its columns in (its output),
// sorted, when it writes only some: the join step's left-columns or
// right-columns, part of its state layout, so a restore whose kept rows
// hold other columns is refused instead of joining them with the
// columns they lack as NULL (docs/design.md, "State across query
// changes"). nil when the side writes them all: its rows are those of
// an unpruned join, whose layout names no columns.
func (s *sidePrune) kept(in []schemaCol) []string {
	if !s.jp.known || s.jp.all[s.side] {
		return nil
	}
	var names []string
	for _, c := range in {
		if s.keeps(c.name) {
			names = append(names, c.name)
		}
	}
	if len(names) == len(in) {
		return nil
	}
	sort.Strings(names)
	return names
}

// prunedSchema is in (a join's result's schema: the `left` and `right`
// ROWs) with the ROW fields its sides' selects do not write left out.
func (jp *joinPrune) prunedSchema(in []schemaCol) []schemaCol {
	out := make([]schemaCol, len(in))
	copy(out, in)
	for i, c := range out {
		side := -1
		switch c.name {
		case "left":
			side = 0
		case "right":
			side = 1
		}
		if side < 0 || c.typ == nil || !strings.EqualFold(c.typ.Name, "ROW") {
			continue
		}
		sp := &sidePrune{jp: jp, side: side}
		t := *c.typ
		t.Fields = nil
		for _, f := range c.typ.Fields {
			if sp.keeps(f.Name.Name) {
				t.Fields = append(t.Fields, f)
			}
		}
		out[i].typ = &t
	}
	return out
}

// Simplifying a CASE under the select's WHERE: the columns are computed
// only for the rows the WHERE keeps, so a conjunct col = literal of it
// decides each WHEN col = literal. A view over a table of several kinds
// of record (Nexmark's person, auction and bid) filters its kind and
// computes a column by a CASE of the kind; the simplified column reads
// only its kind's field, and the select decodes the others' not at all.

// equalities are the WHERE's conjuncts col = literal: the literal of
// each column, by its text.
func equalities(where ast.Expr) map[string]*ast.Literal {
	m := map[string]*ast.Literal{}
	var conj func(e ast.Expr)
	conj = func(e ast.Expr) {
		switch x := e.(type) {
		case *ast.Paren:
			conj(x.X)
		case *ast.Binary:
			switch {
			case strings.EqualFold(x.Op, "AND"):
				conj(x.X)
				conj(x.Y)
			case x.Op == "=":
				c, l := colLit(x)
				if c != nil {
					m[c.String()] = l
				}
			}
		}
	}
	if where != nil {
		conj(where)
	}
	return m
}

// colLit reads b as col = literal or literal = col (a number or string
// literal).
func colLit(b *ast.Binary) (*ast.ColumnRef, *ast.Literal) {
	x, y := unparen(b.X), unparen(b.Y)
	if _, ok := x.(*ast.Literal); ok {
		x, y = y, x
	}
	c, ok := x.(*ast.ColumnRef)
	l, ok2 := y.(*ast.Literal)
	if !ok || !ok2 || l.Kind != ast.LitNumber && l.Kind != ast.LitString {
		return nil, nil
	}
	return c, l
}

// sameLiteral tells whether two literals are equal (1) or not (0), or
// that it cannot tell (-1): integers by value; strings of one text are
// equal (of two, it cannot tell: CHAR's padding).
func sameLiteral(a, b *ast.Literal) int {
	if a.Kind != b.Kind {
		return -1
	}
	if a.Kind == ast.LitString {
		if a.Value == b.Value {
			return 1
		}
		return -1
	}
	x, err1 := strconv.ParseInt(a.Value, 10, 64)
	y, err2 := strconv.ParseInt(b.Value, 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	if x == y {
		return 1
	}
	return 0
}

// caseBranch is the branch a searched CASE takes on every row that
// meets eq (nil: unknown): each WHEN before it a col = literal that eq
// makes false, and its own one that eq makes true (or the ELSE).
func caseBranch(c *ast.Case, eq map[string]*ast.Literal) ast.Expr {
	if c.Operand != nil {
		return nil
	}
	for _, w := range c.Whens {
		b, ok := unparen(w.Cond).(*ast.Binary)
		if !ok || b.Op != "=" {
			return nil
		}
		col, lit := colLit(b)
		if col == nil {
			return nil
		}
		known, ok := eq[col.String()]
		if !ok {
			return nil
		}
		switch sameLiteral(known, lit) {
		case 1:
			return w.Result
		case -1:
			return nil
		}
	}
	return c.Else // nil: no ELSE, NULL, not simplified
}

// simplifyCases replaces in r's columns each searched CASE that r's
// WHERE decides by the branch it takes, when every branch is of one type
// (the CASE's, so the column's type and text stay).
func (p *planner) simplifyCases(r *rel) {
	eq := equalities(r.where)
	if len(eq) == 0 {
		return
	}
	for i, c := range r.cols {
		e := rewrite(c.expr, func(x ast.Expr) (ast.Expr, bool) {
			cs, ok := x.(*ast.Case)
			if !ok {
				return nil, false
			}
			b := caseBranch(cs, eq)
			if b == nil || !p.oneType(r, cs) {
				return nil, false
			}
			return b, true
		})
		r.cols[i].expr = e
	}
}

// oneType tells whether every result of the CASE is of one type.
func (p *planner) oneType(r *rel, c *ast.Case) bool {
	var results []ast.Expr
	for _, w := range c.Whens {
		results = append(results, w.Result)
	}
	if c.Else != nil {
		results = append(results, c.Else)
	}
	tmp := &rel{in: r.in}
	for i, e := range results {
		tmp.cols = append(tmp.cols, relCol{name: "r" + strconv.Itoa(i), expr: e})
	}
	nerrs := len(p.errs)
	types, _ := p.typeColumns(tmp, nil, c.At)
	if len(p.errs) > nerrs {
		p.errs = p.errs[:nerrs] // not typed alone: left as it is
		return false
	}
	if types == nil {
		return false
	}
	first := types["r0"].String()
	for i := range results {
		if types["r"+strconv.Itoa(i)].String() != first {
			return false
		}
	}
	return true
}
