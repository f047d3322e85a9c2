package pipeline

import (
	"strconv"
	"strings"
	"time"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm/runtime"

	"github.com/onceflow/onceflow/internal/sql/eval"
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

// fastPaths are the JSON paths of a fast expression, read together in
// one pass over the value (eval.ReadPaths) when they are all plain
// member names; otherwise, or when ReadPaths declines a value, each is
// read as the VM reads it (evalCtx.path, gjson).
type fastPaths struct {
	segs  [][]string
	plain bool
}

func (fp *fastPaths) add(path string) int {
	segs := strings.Split(path, ".")
	for _, seg := range segs {
		if seg == "" || strings.Trim(seg, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != "" {
			fp.plain = false // an escape, a wildcard or another gjson construct
		}
	}
	fp.segs = append(fp.segs, segs)
	return len(fp.segs) - 1
}

// pathValue is path i of c's record read by eval.ReadPaths; ok false when
// ReadPaths declines the value (or the paths are not plain).
func (c *evalCtx) pathValue(fp *fastPaths, i int) (eval.PathValue, bool) {
	if !fp.plain {
		return eval.PathValue{}, false
	}
	if c.pvRead == 0 {
		c.pvs = append(c.pvs[:0], make([]eval.PathValue, len(fp.segs))...)
		c.pvRead = -1
		if eval.ReadPaths(c.rec.Value(), fp.segs, c.pvs) {
			c.pvRead = 1
		}
	}
	if c.pvRead < 0 {
		return eval.PathValue{}, false
	}
	return c.pvs[i], true
}

// pathAny is what evalCtx.path gives for the value v.
func pathAny(v eval.PathValue) any {
	if !v.Found {
		return nil
	}
	switch v.Kind {
	case 'n':
		return nil
	case 't':
		return true
	case 'f':
		return false
	case '"':
		return strings.Clone(v.Text) // v.Text is in the record's buffer
	case '{', '[':
		x, err := ParseJSON([]byte(v.Text))
		if err != nil {
			return nil // unreachable: the value was checked
		}
		return x
	}
	f, _ := strconv.ParseFloat(v.Text, 64)
	return number(v.Text, f)
}

// jsonCall is the path of a __json(__rec, "path") call node.
func jsonCall(n ast.Node) (string, bool) {
	x, ok := n.(*ast.CallNode)
	if !ok || len(x.Arguments) != 2 {
		return "", false
	}
	callee, ok0 := x.Callee.(*ast.IdentifierNode)
	rec, ok1 := x.Arguments[0].(*ast.IdentifierNode)
	p, ok2 := x.Arguments[1].(*ast.StringNode)
	if !ok0 || !ok1 || !ok2 || callee.Value != jsonFunc || rec.Value != recName {
		return "", false
	}
	return p.Value, true
}

// compileFast returns the fast path of a compiled expression's (patched)
// tree, nil when it has a node the fast path does not know; fp collects
// its paths.
func compileFast(n ast.Node, fp *fastPaths) fastFn {
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
		l, r := compileFast(x.Left, fp), compileFast(x.Right, fp)
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
		cond, e1, e2 := compileFast(x.Cond, fp), compileFast(x.Exp1, fp), compileFast(x.Exp2, fp)
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
		if path, ok := jsonCall(x); ok {
			i := fp.add(path)
			return func(c *evalCtx) (any, bool) {
				if v, ok := c.pathValue(fp, i); ok {
					return pathAny(v), true
				}
				v, err := c.path(path)
				return v, err == nil
			}
		}
		switch {
		case callee.Value == "to_timestamp" && len(x.Arguments) == 1:
			arg := compileFast(x.Arguments[0], fp)
			if arg == nil {
				return nil
			}
			leaf := -1 // the argument's path, when it is one: its text is parsed where it lies
			if _, ok := jsonCall(x.Arguments[0]); ok {
				leaf = len(fp.segs) - 1
			}
			slow := toTimestampFn("to_timestamp")
			return func(c *evalCtx) (any, bool) {
				if leaf >= 0 {
					if pv, ok := c.pathValue(fp, leaf); ok && pv.Found && pv.Kind == '"' {
						if ms, ok := sqlTimestampMillis(pv.Text); ok {
							return ms, true
						}
					}
				}
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
