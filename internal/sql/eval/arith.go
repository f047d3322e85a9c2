package eval

import (
	"errors"
	"math"
	"regexp"
	"strings"

	"github.com/onceflow/onceflow/internal/civil"
	"github.com/onceflow/onceflow/internal/sql/ast"
	"github.com/onceflow/onceflow/internal/sql/types"
)

// arithType is the type of x op y for numbers, as Flink types it: the
// wider integer; DECIMAL by Flink's precision rules when one side is a
// DECIMAL (an integer counts as DECIMAL(digits, 0)); DOUBLE when one is
// approximate (FLOAT when both are FLOAT or integers).
func arithType(op string, a, b *types.Type) *types.Type {
	switch {
	case a.IsFloat() || b.IsFloat():
		if a.Kind == types.Double || b.Kind == types.Double || a.Kind == types.Decimal || b.Kind == types.Decimal {
			return types.DoubleT
		}
		return types.FloatT
	case a.Kind == types.Decimal || b.Kind == types.Decimal:
		p1, s1 := decOf(a)
		p2, s2 := decOf(b)
		var p, s int
		switch op {
		case "+", "-":
			s = max(s1, s2)
			p = max(p1-s1, p2-s2) + s + 1
		case "*":
			s = s1 + s2
			p = p1 + p2 + 1
		case "/":
			s = max(6, s1+p2+1)
			p = p1 - s1 + s2 + s
		case "%":
			s = max(s1, s2)
			p = min(p1-s1, p2-s2) + s
		}
		if p > types.MaxPrecision {
			// Keep the integer digits, give up scale down to 6 (Flink's
			// adjustment for results beyond 38 digits).
			intDigits := p - s
			s = max(types.MaxPrecision-intDigits, min(s, 6))
			p = types.MaxPrecision
		}
		return types.DecimalT(p, s)
	}
	if a.Kind >= b.Kind {
		return &types.Type{Kind: a.Kind}
	}
	return &types.Type{Kind: b.Kind}
}

func arith(op string, x, y *Expr, pos ast.Pos) (*Expr, error) {
	// Time and intervals.
	if x.Type.Kind == types.Interval || y.Type.Kind == types.Interval {
		return timeArith(op, x, y, pos)
	}
	if x.Type.Kind == types.Null && y.Type.Kind == types.Null {
		return constant(types.NullT, Null, pos), nil
	}
	xt, yt := x.Type, y.Type
	if xt.Kind == types.Null {
		xt = yt
	}
	if yt.Kind == types.Null {
		yt = xt
	}
	if !xt.IsNumeric() || !yt.IsNumeric() {
		bad := x
		if xt.IsNumeric() {
			bad = y
		}
		return nil, errorf(bad.Pos, "%s needs numbers, not %s (CAST(x AS BIGINT) or DOUBLE converts a string)", op, bad.Type)
	}
	t := arithType(op, xt, yt)
	xf, yf := x.Fn, y.Fn
	var f Fn
	switch {
	case t.IsInteger():
		k := t.Kind
		var calc func(a, b int64) (int64, error)
		switch op {
		case "+":
			calc = func(a, b int64) (int64, error) { return wrap(k, a+b), nil }
		case "-":
			calc = func(a, b int64) (int64, error) { return wrap(k, a-b), nil }
		case "*":
			calc = func(a, b int64) (int64, error) { return wrap(k, a*b), nil }
		case "/":
			calc = func(a, b int64) (int64, error) {
				if b == 0 {
					return 0, errDivZero
				}
				if b == -1 {
					return wrap(k, -a), nil
				}
				return a / b, nil
			}
		case "%":
			calc = func(a, b int64) (int64, error) {
				if b == 0 {
					return 0, errDivZero
				}
				if b == -1 {
					return 0, nil
				}
				return a % b, nil
			}
		}
		f = func(ctx *Ctx) Value {
			a := xf(ctx)
			if a.K == VNull {
				return a
			}
			b := yf(ctx)
			if b.K == VNull {
				return b
			}
			r, err := calc(a.I, b.I)
			if err != nil {
				ctx.Fail(err)
				return Null
			}
			return Int(r)
		}
	case t.IsFloat():
		toF := floatOf(xt)
		toG := floatOf(yt)
		single := t.Kind == types.Float
		var calc func(a, b float64) (float64, error)
		switch op {
		case "+":
			calc = func(a, b float64) (float64, error) { return a + b, nil }
		case "-":
			calc = func(a, b float64) (float64, error) { return a - b, nil }
		case "*":
			calc = func(a, b float64) (float64, error) { return a * b, nil }
		case "/":
			calc = func(a, b float64) (float64, error) {
				if b == 0 {
					return 0, errDivZero
				}
				return a / b, nil
			}
		case "%":
			calc = func(a, b float64) (float64, error) {
				if b == 0 {
					return 0, errDivZero
				}
				return math.Mod(a, b), nil
			}
		}
		f = func(ctx *Ctx) Value {
			a := xf(ctx)
			if a.K == VNull {
				return a
			}
			b := yf(ctx)
			if b.K == VNull {
				return b
			}
			r, err := calc(toF(a), toG(b))
			if err != nil {
				ctx.Fail(err)
				return Null
			}
			if single {
				r = float64(float32(r))
			}
			return Float(r)
		}
	default: // DECIMAL
		s := t.Scale
		toA, toB := decConv(xt), decConv(yt)
		var calc func(a, b Value) (Value, error)
		switch op {
		case "+":
			calc = func(a, b Value) (Value, error) { return decAdd(a, b, s), nil }
		case "-":
			calc = func(a, b Value) (Value, error) { return decAdd(a, decNeg(b), s), nil }
		case "*":
			calc = func(a, b Value) (Value, error) { return decMul(a, b, s), nil }
		case "/":
			calc = func(a, b Value) (Value, error) { return decDiv(a, b, s) }
		case "%":
			calc = func(a, b Value) (Value, error) {
				if decSign(b) == 0 {
					return Null, errDivZero
				}
				sc := max(int(a.N), int(b.N))
				a, b = decRescale(a, sc), decRescale(b, sc)
				ua, ub := decBig(a), decBig(b)
				return decRound(decFromBig(ua.Rem(ua, ub), sc), s), nil
			}
		}
		// 0.908 * price: the constant's unscaled value times the
		// integer, without conversions per record.
		if op == "*" && x.Const && x.Val.K == VDec && !isBigDec(x.Val) && yt.IsInteger() && int(x.Val.N) == s {
			k := x.Val.I
			return &Expr{Type: t, Pos: pos, Fn: func(ctx *Ctx) Value {
				b := yf(ctx)
				if b.K == VNull {
					return b
				}
				if r, ok := mul64(k, b.I); ok {
					return Dec(r, s)
				}
				return decMul(Dec(k, s), Dec(b.I, 0), s)
			}}, nil
		}
		f = func(ctx *Ctx) Value {
			a := xf(ctx)
			if a.K == VNull {
				return a
			}
			b := yf(ctx)
			if b.K == VNull {
				return b
			}
			r, err := calc(toA(a), toB(b))
			if err != nil {
				ctx.Fail(err)
				return Null
			}
			return r
		}
	}
	return fold(&Expr{Type: t, Pos: pos, Fn: f}, x, y)
}

// floatOf returns the conversion of a non-NULL value of numeric type t
// to float64.
func floatOf(t *types.Type) func(Value) float64 {
	switch {
	case t.IsInteger():
		return func(v Value) float64 { return float64(v.I) }
	case t.Kind == types.Decimal:
		return decFloat
	}
	return func(v Value) float64 { return v.F }
}

// decConv returns the conversion of a non-NULL value of integer or
// DECIMAL type t to a DECIMAL value.
func decConv(t *types.Type) func(Value) Value {
	if t.IsInteger() {
		return func(v Value) Value { return Dec(v.I, 0) }
	}
	return func(v Value) Value { return v }
}

// timeArith is timestamp ± interval, date ± interval, interval ± interval
// and interval * number.
func timeArith(op string, x, y *Expr, pos ast.Pos) (*Expr, error) {
	xt, yt := x.Type, y.Type
	xf, yf := x.Fn, y.Fn
	strict := func(t *types.Type, calc func(a, b Value) Value) (*Expr, error) {
		return fold(&Expr{Type: t, Pos: pos, Fn: func(ctx *Ctx) Value {
			a := xf(ctx)
			if a.K == VNull {
				return a
			}
			b := yf(ctx)
			if b.K == VNull {
				return b
			}
			return calc(a, b)
		}}, x, y)
	}
	if yt.Kind == types.Interval && xt.Kind == types.Interval && (op == "+" || op == "-") && xt.Months == yt.Months {
		sign := int64(1)
		if op == "-" {
			sign = -1
		}
		return strict(xt, func(a, b Value) Value { return Value{K: VInterval, I: a.I + sign*b.I} })
	}
	if (op == "+" || op == "-") && yt.Kind == types.Interval && (xt.IsTimestamp() || xt.Kind == types.Date) ||
		op == "+" && xt.Kind == types.Interval && (yt.IsTimestamp() || yt.Kind == types.Date) {
		ts, iv := x, y
		if xt.Kind == types.Interval {
			ts, iv = y, x
			xf, yf = yf, xf
		}
		sign := int64(1)
		if op == "-" {
			sign = -1
		}
		isDate := ts.Type.Kind == types.Date
		if iv.Type.Months {
			return strict(ts.Type, func(a, b Value) Value { return addMonths(a, sign*b.I, isDate) })
		}
		if isDate {
			return strict(ts.Type, func(a, b Value) Value { return Value{K: VTime, I: a.I + sign*b.I/86_400_000} })
		}
		return strict(ts.Type, func(a, b Value) Value { return addMillis(a, sign*b.I) })
	}
	if op == "*" && xt.Kind == types.Interval && yt.IsInteger() {
		return strict(xt, func(a, b Value) Value { return Value{K: VInterval, I: a.I * b.I} })
	}
	return nil, errorf(pos, "%s cannot combine %s and %s", op, xt, yt)
}

// addMillis adds ms milliseconds to a timestamp.
func addMillis(v Value, ms int64) Value {
	sec := v.I + ms/1000
	ns := int64(v.N) + (ms%1000)*1_000_000
	if ns < 0 {
		ns += 1_000_000_000
		sec--
	} else if ns >= 1_000_000_000 {
		ns -= 1_000_000_000
		sec++
	}
	return TimeOf(sec, int32(ns))
}

// addMonths adds months to a timestamp or date, clamping the day to the
// month's last (Jan 31 + 1 month is Feb 28/29).
func addMonths(v Value, months int64, isDate bool) Value {
	days, sod := v.I, int64(0)
	if !isDate {
		days, sod = splitSec(v.I)
	}
	y, m, d := civil.Date(days)
	total := y*12 + (m - 1) + months
	y, m = floorDiv(total, 12), total-floorDiv(total, 12)*12+1
	d = min(d, civil.DaysIn(y, m))
	nd := civil.Days(y, m, d)
	if isDate {
		return Value{K: VTime, I: nd}
	}
	return TimeOf(nd*secondsPerDay+sod, v.N)
}

// like compiles x [NOT] LIKE pattern [ESCAPE e] to a regular expression
// (once, when the pattern is a constant).
func (c *compiler) like(n *ast.Binary, not bool, x, y *Expr) (*Expr, error) {
	if err := wantString(x, "LIKE"); err != nil {
		return nil, err
	}
	if err := wantString(y, "LIKE"); err != nil {
		return nil, err
	}
	esc := byte(0)
	if n.Escape != nil {
		e, err := c.expr(n.Escape)
		if err != nil {
			return nil, err
		}
		if !e.Const || e.Type.Kind != types.String || len(e.Val.S) != 1 {
			return nil, errorf(e.Pos, "ESCAPE must be a constant of one character")
		}
		esc = e.Val.S[0]
	}
	match := func(pattern string) (func(string) bool, error) { return likeMatcher(pattern, esc) }
	xf := x.Fn
	result := func(ok bool) Value { return Bool(ok != not) }
	if y.Const {
		if y.Val.K == VNull {
			return constant(types.BooleanT, Null, n.At), nil
		}
		m, err := match(y.Val.S)
		if err != nil {
			return nil, errorf(y.Pos, "%v", err)
		}
		return fold(&Expr{Type: types.BooleanT, Pos: n.At, Fn: func(ctx *Ctx) Value {
			a := xf(ctx)
			if a.K == VNull {
				return a
			}
			return result(m(a.S))
		}}, x)
	}
	yf := y.Fn
	return &Expr{Type: types.BooleanT, Pos: n.At, Fn: func(ctx *Ctx) Value {
		a, b := xf(ctx), yf(ctx)
		if a.K == VNull || b.K == VNull {
			return Null
		}
		m, err := match(b.S)
		if err != nil {
			ctx.Fail(err)
			return Null
		}
		return result(m(a.S))
	}}, nil
}

// likeMatcher matches SQL LIKE patterns: % any run, _ one character,
// esc the escape character (0: none). Simple patterns (abc, abc%, %abc,
// %abc%) are matched without a regular expression.
func likeMatcher(pattern string, esc byte) (func(string) bool, error) {
	var b strings.Builder
	b.WriteString("(?s)^")
	literal := true
	var lit strings.Builder
	for i := 0; i < len(pattern); i++ {
		ch := pattern[i]
		switch {
		case esc != 0 && ch == esc:
			if i+1 >= len(pattern) {
				return nil, errors.New("LIKE pattern ends with the escape character")
			}
			i++
			b.WriteString(regexp.QuoteMeta(pattern[i : i+1]))
			lit.WriteByte(pattern[i])
		case ch == '%':
			b.WriteString(".*")
			literal = false
		case ch == '_':
			b.WriteString(".")
			literal = false
		default:
			b.WriteString(regexp.QuoteMeta(pattern[i : i+1]))
			lit.WriteByte(ch)
		}
	}
	if literal {
		s := lit.String()
		return func(v string) bool { return v == s }, nil
	}
	if esc == 0 && !strings.Contains(pattern, "_") {
		inner := strings.Trim(pattern, "%")
		if !strings.Contains(inner, "%") {
			pre, suf := strings.HasPrefix(pattern, "%"), strings.HasSuffix(pattern, "%")
			switch {
			case pre && suf:
				return func(v string) bool { return strings.Contains(v, inner) }, nil
			case pre:
				return func(v string) bool { return strings.HasSuffix(v, inner) }, nil
			case suf:
				return func(v string) bool { return strings.HasPrefix(v, inner) }, nil
			}
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, err
	}
	return re.MatchString, nil
}
