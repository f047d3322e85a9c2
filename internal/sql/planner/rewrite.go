package planner

import "github.com/onceflow/onceflow/internal/sql/ast"

// rewrite returns e with every node f replaces replaced: f is called on
// each node top-down and returns (replacement, true) to replace it (its
// children are then not visited), or (nil, false) to descend. The input
// is never modified; unchanged subtrees are shared.
func rewrite(e ast.Expr, f func(ast.Expr) (ast.Expr, bool)) ast.Expr {
	if e == nil {
		return nil
	}
	if r, ok := f(e); ok {
		return r
	}
	rw := func(x ast.Expr) ast.Expr { return rewrite(x, f) }
	rws := func(xs []ast.Expr) []ast.Expr {
		if xs == nil {
			return nil
		}
		out := make([]ast.Expr, len(xs))
		for i, x := range xs {
			out[i] = rw(x)
		}
		return out
	}
	switch n := e.(type) {
	case *ast.Unary:
		c := *n
		c.X = rw(n.X)
		return &c
	case *ast.Binary:
		c := *n
		c.X, c.Y, c.Escape = rw(n.X), rw(n.Y), rw(n.Escape)
		return &c
	case *ast.Between:
		c := *n
		c.X, c.Lo, c.Hi = rw(n.X), rw(n.Lo), rw(n.Hi)
		return &c
	case *ast.In:
		c := *n
		c.X, c.List = rw(n.X), rws(n.List)
		return &c
	case *ast.IsNull:
		c := *n
		c.X = rw(n.X)
		return &c
	case *ast.IsBool:
		c := *n
		c.X = rw(n.X)
		return &c
	case *ast.Case:
		c := *n
		c.Operand, c.Else = rw(n.Operand), rw(n.Else)
		c.Whens = make([]*ast.When, len(n.Whens))
		for i, w := range n.Whens {
			c.Whens[i] = &ast.When{Cond: rw(w.Cond), Result: rw(w.Result)}
		}
		return &c
	case *ast.Cast:
		c := *n
		c.X = rw(n.X)
		return &c
	case *ast.Call:
		c := *n
		c.Args, c.Filter = rws(n.Args), rw(n.Filter)
		return &c
	case *ast.Subscript:
		c := *n
		c.X, c.Index = rw(n.X), rw(n.Index)
		return &c
	case *ast.Field:
		c := *n
		c.X = rw(n.X)
		return &c
	case *ast.Paren:
		c := *n
		c.X = rw(n.X)
		return &c
	}
	return e // leaves: ColumnRef, Literal, Interval, Subquery
}

// visit calls f on every node of e, top-down; f returns false to skip a
// node's children.
func visit(e ast.Expr, f func(ast.Expr) bool) {
	rewrite(e, func(x ast.Expr) (ast.Expr, bool) {
		if !f(x) {
			return x, true
		}
		return nil, false
	})
}
