package pipeline

import (
	"time"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm/runtime"
)

// A fast path for the expressions the SQL planner writes into job files
// and that run per record: a JSON path (value.t), a constant, ==, != and
// a ternary over them, and to_timestamp of one argument. The source's
// event time of a SQL table with a computed time column is such an
// expression (`value.event_type == 0 ? to_timestamp(value.person.dateTime)
// : …`), as are a window's time and its aggregates' arguments. Running
// them through the VM costs an environment map, boxing and Go's time
// parser per record (a third of the CPU of Nexmark's q8, docs/benchmarks.md).
//
// The fast path computes what the VM computes, with the VM's own
// functions for each step (runtime.Equal, evalCtx.path, the to_timestamp
// function); where it meets a case it does not decide itself (an error,
// a condition that is not a boolean, to_timestamp of something other than
// a string) it gives up and the VM evaluates the expression, so every
// error is still the VM's.

// fastFn evaluates an expression over c's record without the VM; ok is
// false when the VM must evaluate it instead.
type fastFn func(c *evalCtx) (v any, ok bool)

// compileFast returns the fast path of a compiled expression's (patched)
// tree, nil when it has a node the fast path does not know.
func compileFast(n ast.Node) fastFn {
	switch x := n.(type) {
	case *ast.NilNode:
		return func(*evalCtx) (any, bool) { return nil, true }
	case *ast.IntegerNode:
		v := any(x.Value)
		return func(*evalCtx) (any, bool) { return v, true }
	case *ast.StringNode:
		v := any(x.Value)
		return func(*evalCtx) (any, bool) { return v, true }
	case *ast.BoolNode:
		v := any(x.Value)
		return func(*evalCtx) (any, bool) { return v, true }
	case *ast.BinaryNode:
		if x.Operator != "==" && x.Operator != "!=" {
			return nil
		}
		l, r := compileFast(x.Left), compileFast(x.Right)
		if l == nil || r == nil {
			return nil
		}
		neg := x.Operator == "!="
		return func(c *evalCtx) (any, bool) {
			a, ok := l(c)
			if !ok {
				return nil, false
			}
			b, ok := r(c)
			if !ok {
				return nil, false
			}
			return runtime.Equal(a, b) != neg, true
		}
	case *ast.ConditionalNode:
		cond, e1, e2 := compileFast(x.Cond), compileFast(x.Exp1), compileFast(x.Exp2)
		if cond == nil || e1 == nil || e2 == nil {
			return nil
		}
		return func(c *evalCtx) (any, bool) {
			v, ok := cond(c)
			if !ok {
				return nil, false
			}
			b, isBool := v.(bool)
			if !isBool {
				return nil, false
			}
			if b {
				return e1(c)
			}
			return e2(c)
		}
	case *ast.CallNode:
		callee, ok := x.Callee.(*ast.IdentifierNode)
		if !ok {
			return nil
		}
		switch {
		case callee.Value == jsonFunc && len(x.Arguments) == 2:
			rec, ok1 := x.Arguments[0].(*ast.IdentifierNode)
			p, ok2 := x.Arguments[1].(*ast.StringNode)
			if !ok1 || !ok2 || rec.Value != recName {
				return nil
			}
			path := p.Value
			return func(c *evalCtx) (any, bool) {
				v, err := c.path(path)
				return v, err == nil
			}
		case callee.Value == "to_timestamp" && len(x.Arguments) == 1:
			arg := compileFast(x.Arguments[0])
			if arg == nil {
				return nil
			}
			slow := toTimestampFn("to_timestamp")
			return func(c *evalCtx) (any, bool) {
				v, ok := arg(c)
				if !ok {
					return nil, false
				}
				switch s := v.(type) {
				case nil:
					return nil, true
				case string:
					if ms, ok := sqlTimestampMillis(s); ok {
						return ms, true
					}
					out, err := slow(s)
					return out, err == nil
				}
				return nil, false
			}
		}
	}
	return nil
}

// sqlTimestampMillis reads "yyyy-MM-dd HH:mm:ss.SSS" (Flink's JSON
// TIMESTAMP(3), 23 bytes) as milliseconds since the epoch in UTC, what
// to_timestamp's layouts give for it; ok is false for any other text,
// which to_timestamp then parses.
func sqlTimestampMillis(s string) (int64, bool) {
	if len(s) != 23 || s[4] != '-' || s[7] != '-' || s[10] != ' ' || s[13] != ':' || s[16] != ':' || s[19] != '.' {
		return 0, false
	}
	num := func(i, n int) (int, bool) {
		v := 0
		for _, c := range []byte(s[i : i+n]) {
			if c < '0' || c > '9' {
				return 0, false
			}
			v = v*10 + int(c-'0')
		}
		return v, true
	}
	y, ok1 := num(0, 4)
	mo, ok2 := num(5, 2)
	d, ok3 := num(8, 2)
	h, ok4 := num(11, 2)
	mi, ok5 := num(14, 2)
	sec, ok6 := num(17, 2)
	ms, ok7 := num(20, 3)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || !ok7 ||
		mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || sec > 59 {
		return 0, false
	}
	t := time.Date(y, time.Month(mo), d, h, mi, sec, ms*1_000_000, time.UTC)
	if t.Day() != d { // the 31st of a 30-day month and the like: Go's parser refuses them
		return 0, false
	}
	return t.UnixMilli(), true
}
