package planner

import (
	"fmt"
	"slices"
	"strings"

	"github.com/onceflow/onceflow/internal/sql/ast"
)

// JOIN … USING (c, …) (docs/design.md, "### SQL") is an inner join ON
// left.c = right.c AND …: the conditions join the pool of conjuncts as an
// ON's do. As in Flink, each USING column appears once: SELECT * lists
// the USING columns first (the left side's), then the left's other
// columns, then the right's; an unqualified c is the left side's, and
// the right's is still there as right.c.

// usingCol is a column of a JOIN … USING: the qualifiers of the side's
// table it comes from.
type usingCol struct {
	name        string
	left, right string
	join        int // which USING join, innermost 0
}

// usingOn returns the ON condition of the USING join jn, and notes its
// columns in jp.using; nil after an error (reported).
func (jp *joinPlan) usingOn(jn *ast.Join) ast.Expr {
	p := jp.p
	var on ast.Expr
	seen := map[string]bool{}
	join := 0
	if n := len(jp.using); n > 0 {
		join = jp.using[n-1].join + 1
	}
	for _, id := range jn.Using {
		if seen[strings.ToLower(id.Name)] {
			p.errorf(id.At, "USING names %s twice", id.Name)
			return nil
		}
		seen[strings.ToLower(id.Name)] = true
		lq, ok := jp.usingSide(jn.Left, id, "left")
		if !ok {
			return nil
		}
		rq, ok := jp.usingSide(jn.Right, id, "right")
		if !ok {
			return nil
		}
		jp.using = append(jp.using, usingCol{name: id.Name, left: lq, right: rq, join: join})
		eq := &ast.Binary{At: id.At, Op: "=", X: qualRef(lq, id), Y: qualRef(rq, id)}
		if on == nil {
			on = eq
		} else {
			on = &ast.Binary{At: id.At, Op: "AND", X: on, Y: eq}
		}
	}
	return on
}

// qualRef is q.col written at col's place in the script.
func qualRef(q string, col ast.Ident) *ast.ColumnRef {
	return &ast.ColumnRef{Name: ast.Name{At: col.At, Parts: []ast.Ident{{At: col.At, Name: q, Quoted: true}, {At: col.At, Name: col.Name, Quoted: col.Quoted}}}}
}

// usingSide finds the table of the join side te that has the column id
// (of a side that is itself a join, the first, not counting the right
// sides of its own USING columns) and returns its qualifier.
func (jp *joinPlan) usingSide(te ast.TableExpr, id ast.Ident, side string) (string, bool) {
	p := jp.p
	var leaves []*joinLeaf
	var collect func(te ast.TableExpr)
	collect = func(te ast.TableExpr) {
		if jn, ok := te.(*ast.Join); ok {
			collect(jn.Left)
			collect(jn.Right)
			return
		}
		for _, l := range jp.leaves {
			if l.te == te {
				leaves = append(leaves, l)
			}
		}
	}
	collect(te)
	for _, l := range leaves {
		if len(l.r.quals) == 0 {
			continue
		}
		q := l.r.quals[len(l.r.quals)-1]
		if slices.ContainsFunc(jp.using, func(u usingCol) bool { return strings.EqualFold(u.right, q) && strings.EqualFold(u.name, id.Name) }) {
			continue
		}
		for _, c := range l.r.cols {
			if strings.EqualFold(c.name, id.Name) {
				return q, true
			}
		}
	}
	var names []string
	for _, l := range leaves {
		names = append(names, l.r.colNames()...)
	}
	p.errorf(id.At, "USING (%s): %s is not a column of the %s side, %s%s; USING names columns both sides have, else write ON", id.Name, id.Name, side, tableText(te), didYouMean(id.Name, names))
	return "", false
}

// qualifyUsing writes an unqualified USING column of e as the left
// side's, q.col, so that it is no column of two tables.
func (jp *joinPlan) qualifyUsing(e ast.Expr) ast.Expr {
	if len(jp.using) == 0 {
		return e
	}
	return rewrite(e, func(x ast.Expr) (ast.Expr, bool) {
		cr, ok := x.(*ast.ColumnRef)
		if !ok || len(cr.Name.Parts) != 1 {
			return nil, false
		}
		for _, u := range jp.using {
			if strings.EqualFold(u.name, cr.Name.Parts[0].Name) {
				return qualRef(u.left, cr.Name.Parts[0]), true
			}
		}
		return x, true
	})
}

// mergeUsing marks r's right-side USING columns merged and puts the left
// side's first: the outermost join's, in USING's order, then the next
// join's, as SELECT * lists them.
func (jp *joinPlan) mergeUsing(r *rel) {
	if len(jp.using) == 0 {
		return
	}
	order := slices.Clone(jp.using)
	slices.SortStableFunc(order, func(a, b usingCol) int { return b.join - a.join })
	first := make([]int, 0, len(order))
	for _, u := range order {
		at := -1
		for i, c := range r.cols {
			switch {
			case !strings.EqualFold(c.name, u.name):
			case r.colQualifiedBy(c, u.right):
				r.cols[i].merged = true
			case r.colQualifiedBy(c, u.left) && !c.merged && at < 0:
				at = i
			}
		}
		if at < 0 {
			panic(fmt.Sprintf("planner: USING column %s of %s is not in the join's columns", u.name, u.left))
		}
		first = append(first, at)
	}
	cols := make([]relCol, 0, len(r.cols))
	for _, i := range first {
		cols = append(cols, r.cols[i])
	}
	for i, c := range r.cols {
		if !slices.Contains(first, i) {
			cols = append(cols, c)
		}
	}
	r.cols = cols
}
