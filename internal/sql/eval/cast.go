package eval

import (
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/onceflow/onceflow/internal/sql/ast"
	"github.com/onceflow/onceflow/internal/sql/types"
)

func (c *compiler) cast(n *ast.Cast) (*Expr, error) {
	x, err := c.expr(n.X)
	if err != nil {
		return nil, err
	}
	to, err := types.FromAST(n.To)
	if err != nil {
		return nil, err
	}
	to = to.Nullable()
	if x.Type.Kind == types.Null {
		return constant(to, Null, n.At), nil
	}
	conv, err := castFn(x.Type, to, n.Try)
	if err != nil {
		return nil, &Error{n.At, err.Error()}
	}
	inner := x.Fn
	return fold(&Expr{Type: to, Pos: n.At, Fn: func(ctx *Ctx) Value {
		v := inner(ctx)
		if v.K == VNull {
			return v
		}
		return conv(ctx, v)
	}}, x)
}

// castError is a value CAST cannot convert.
type castError struct {
	v    string
	from *types.Type
	to   *types.Type
}

func (e *castError) Error() string {
	return fmt.Sprintf("CAST(%s AS %s): the %s value cannot be converted", e.v, e.to, e.from)
}

// castFn returns the conversion of a non-NULL value of type from to type
// to; a value it cannot convert fails the record, or is NULL when try
// (TRY_CAST).
func castFn(from, to *types.Type, try bool) (func(*Ctx, Value) Value, error) {
	fail := func(ctx *Ctx, v Value) Value {
		if !try {
			s := quoteValue(v, from)
			ctx.Fail(&castError{s, from, to})
		}
		return Null
	}
	if from.Equal(to) {
		return func(_ *Ctx, v Value) Value { return v }, nil
	}
	switch to.Kind {
	case types.String:
		str, err := toStringFn(from)
		if err != nil {
			return nil, err
		}
		n, fixed := to.Precision, to.Fixed
		if n == 0 {
			return func(_ *Ctx, v Value) Value { return Str(str(v)) }, nil
		}
		return func(_ *Ctx, v Value) Value {
			s := str(v)
			if utf8.RuneCountInString(s) > n {
				s = string([]rune(s)[:n])
			} else if fixed {
				s += strings.Repeat(" ", n-utf8.RuneCountInString(s))
			}
			return Str(s)
		}, nil
	case types.Bytes:
		if from.Kind == types.String {
			return func(_ *Ctx, v Value) Value { return Value{K: VBytes, S: v.S} }, nil
		}
	case types.Boolean:
		switch {
		case from.Kind == types.String:
			return func(ctx *Ctx, v Value) Value {
				switch strings.ToLower(strings.TrimSpace(v.S)) {
				case "true", "t", "yes", "y", "1":
					return Bool(true)
				case "false", "f", "no", "n", "0":
					return Bool(false)
				}
				return fail(ctx, v)
			}, nil
		case from.IsInteger():
			return func(_ *Ctx, v Value) Value { return Bool(v.I != 0) }, nil
		case from.IsFloat():
			return func(_ *Ctx, v Value) Value { return Bool(v.F != 0) }, nil
		case from.Kind == types.Decimal:
			return func(_ *Ctx, v Value) Value { return Bool(decSign(v) != 0) }, nil
		}
	case types.TinyInt, types.SmallInt, types.Int, types.BigInt:
		k := to.Kind
		switch {
		case from.IsInteger():
			return func(_ *Ctx, v Value) Value { return Int(wrap(k, v.I)) }, nil
		case from.Kind == types.Boolean:
			return func(_ *Ctx, v Value) Value { return Int(v.I) }, nil
		case from.IsFloat():
			return func(_ *Ctx, v Value) Value { return Int(wrap(k, floatToInt(v.F))) }, nil
		case from.Kind == types.Decimal:
			return func(ctx *Ctx, v Value) Value {
				i, ok := decTrunc(v)
				if !ok {
					return fail(ctx, v)
				}
				return Int(wrap(k, i))
			}, nil
		case from.Kind == types.String:
			return func(ctx *Ctx, v Value) Value {
				i, ok := parseIntText(v.S, k)
				if !ok {
					return fail(ctx, v)
				}
				return Int(i)
			}, nil
		}
	case types.Float, types.Double:
		single := to.Kind == types.Float
		round := func(f float64) Value {
			if single {
				f = float64(float32(f))
			}
			return Float(f)
		}
		switch {
		case from.IsNumeric():
			toF := floatOf(from)
			return func(_ *Ctx, v Value) Value { return round(toF(v)) }, nil
		case from.Kind == types.Boolean:
			return func(_ *Ctx, v Value) Value { return Float(float64(v.I)) }, nil
		case from.Kind == types.String:
			return func(ctx *Ctx, v Value) Value {
				f, err := strconv.ParseFloat(strings.TrimSpace(v.S), 64)
				if err != nil {
					return fail(ctx, v)
				}
				return round(f)
			}, nil
		}
	case types.Decimal:
		p, s := to.Precision, to.Scale
		check := func(ctx *Ctx, orig, d Value) Value {
			if !decFits(d, p) {
				return fail(ctx, orig)
			}
			return d
		}
		switch {
		case from.IsInteger():
			return func(ctx *Ctx, v Value) Value { return check(ctx, v, decRescale(Dec(v.I, 0), s)) }, nil
		case from.Kind == types.Decimal:
			return func(ctx *Ctx, v Value) Value { return check(ctx, v, decRound(v, s)) }, nil
		case from.IsFloat():
			return func(ctx *Ctx, v Value) Value {
				d, ok := decFromFloat(v.F, s)
				if !ok {
					return fail(ctx, v)
				}
				return check(ctx, v, d)
			}, nil
		case from.Kind == types.String:
			return func(ctx *Ctx, v Value) Value {
				d, ok := parseDec(v.S, s)
				if !ok {
					return fail(ctx, v)
				}
				return check(ctx, v, d)
			}, nil
		case from.Kind == types.Boolean:
			return func(ctx *Ctx, v Value) Value { return check(ctx, v, decRescale(Dec(v.I, 0), s)) }, nil
		}
	case types.Timestamp, types.TimestampLTZ:
		p := to.Precision
		switch {
		case from.IsTimestamp():
			return func(_ *Ctx, v Value) Value { return TimeOf(v.I, truncNanos(v.N, p)) }, nil
		case from.Kind == types.Date:
			return func(_ *Ctx, v Value) Value { return TimeOf(v.I*secondsPerDay, 0) }, nil
		case from.Kind == types.String:
			return func(ctx *Ctx, v Value) Value {
				sec, ns, ok := parseTimestamp(v.S)
				if !ok {
					return fail(ctx, v)
				}
				return TimeOf(sec, truncNanos(ns, p))
			}, nil
		case from.IsNumeric():
			return nil, fmt.Errorf("CAST from %s to %s is not supported: use TO_TIMESTAMP_LTZ(epoch, 3) for epoch milliseconds", from, to)
		}
	case types.Date:
		switch {
		case from.IsTimestamp():
			return func(_ *Ctx, v Value) Value { return Value{K: VTime, I: floorDiv(v.I, secondsPerDay)} }, nil
		case from.Kind == types.String:
			return func(ctx *Ctx, v Value) Value {
				sec, _, ok := parseTimestamp(v.S)
				if !ok {
					return fail(ctx, v)
				}
				return Value{K: VTime, I: floorDiv(sec, secondsPerDay)}
			}, nil
		}
	case types.Time:
		p := to.Precision
		switch {
		case from.IsTimestamp():
			return func(_ *Ctx, v Value) Value {
				_, sod := splitSec(v.I)
				return Value{K: VTime, I: sod, N: truncNanos(v.N, p)}
			}, nil
		case from.Kind == types.String:
			return func(ctx *Ctx, v Value) Value {
				t, _, ok := parseTimeOfDay(v.S)
				if !ok {
					return fail(ctx, v)
				}
				t.N = truncNanos(t.N, p)
				return t
			}, nil
		case from.Kind == types.Time:
			return func(_ *Ctx, v Value) Value { v.N = truncNanos(v.N, p); return v }, nil
		}
	}
	if from.Kind == to.Kind && (from.Kind == types.Bytes || from.Kind == types.Row || from.Kind == types.Array || from.Kind == types.Map) {
		return func(_ *Ctx, v Value) Value { return v }, nil
	}
	return nil, fmt.Errorf("cannot CAST %s to %s", from, to)
}

// floatToInt truncates toward zero, saturating as Java's (long) cast.
func floatToInt(f float64) int64 {
	switch {
	case math.IsNaN(f):
		return 0
	case f >= math.MaxInt64:
		return math.MaxInt64
	case f <= math.MinInt64:
		return math.MinInt64
	}
	return int64(f)
}

// parseIntText reads an integer of kind k, refusing what does not fit.
func parseIntText(s string, k types.Kind) (int64, bool) {
	bitSize := 64
	switch k {
	case types.TinyInt:
		bitSize = 8
	case types.SmallInt:
		bitSize = 16
	case types.Int:
		bitSize = 32
	}
	if len(s) > 0 && (s[0] == ' ' || s[len(s)-1] == ' ') {
		s = strings.TrimSpace(s)
	}
	i, err := strconv.ParseInt(s, 10, bitSize)
	return i, err == nil
}

// toStringFn returns how a non-NULL value of type t prints as a STRING,
// as Flink's CAST(x AS STRING) does.
func toStringFn(t *types.Type) (func(Value) string, error) {
	switch {
	case t.Kind == types.String:
		return func(v Value) string { return v.S }, nil
	case t.Kind == types.Bytes:
		return func(v Value) string { return strings.ToValidUTF8(v.S, "\uFFFD") }, nil
	case t.Kind == types.Boolean:
		return func(v Value) string {
			if v.I != 0 {
				return "TRUE"
			}
			return "FALSE"
		}, nil
	case t.IsInteger():
		return func(v Value) string { return strconv.FormatInt(v.I, 10) }, nil
	case t.Kind == types.Decimal:
		return func(v Value) string { return string(appendDec(nil, v)) }, nil
	case t.Kind == types.Double:
		return func(v Value) string { return string(appendJavaDouble(nil, v.F, 64)) }, nil
	case t.Kind == types.Float:
		return func(v Value) string { return string(appendJavaDouble(nil, v.F, 32)) }, nil
	case t.IsTimestamp():
		p := t.Precision
		return func(v Value) string { return string(appendTimestamp(nil, v.I, v.N, p)) }, nil
	case t.Kind == types.Date:
		return func(v Value) string { return string(appendDate(nil, v.I)) }, nil
	case t.Kind == types.Time:
		p := t.Precision
		return func(v Value) string { return string(appendClock(nil, v.I, v.N, p)) }, nil
	case t.Kind == types.Row, t.Kind == types.Array, t.Kind == types.Map:
		app, err := appendStringFn(t)
		if err != nil {
			return nil, err
		}
		return func(v Value) string { return string(app(nil, v)) }, nil
	}
	return nil, fmt.Errorf("cannot CAST %s to STRING", t)
}

// quoteValue prints v for an error message: a string quoted, anything
// else as CAST prints it.
func quoteValue(v Value, t *types.Type) string {
	if t.Kind == types.String {
		return "'" + v.S + "'"
	}
	if t.Kind == types.Bytes {
		return "X'" + fmt.Sprintf("%X", v.S) + "'"
	}
	f, err := toStringFn(t)
	if err != nil {
		return "?"
	}
	return f(v)
}

// appendJavaDouble writes f as Java's Double.toString (bits 64) or
// Float.toString (bits 32) does, which Flink uses for CAST and JSON: 1.0,
// 0.001, 1.0E7, 1.2345E-5, NaN, Infinity.
func appendJavaDouble(b []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, 1):
		return append(b, "Infinity"...)
	case math.IsInf(f, -1):
		return append(b, "-Infinity"...)
	case f == 0:
		if math.Signbit(f) {
			return append(b, "-0.0"...)
		}
		return append(b, "0.0"...)
	}
	abs := math.Abs(f)
	if abs >= 1e-3 && abs < 1e7 {
		start := len(b)
		b = strconv.AppendFloat(b, f, 'f', -1, bits)
		for _, c := range b[start:] {
			if c == '.' {
				return b
			}
		}
		return append(b, ".0"...)
	}
	var buf [32]byte
	s := strconv.AppendFloat(buf[:0], f, 'e', -1, bits) // -1.2345e-05
	mant, exp, _ := strings.Cut(string(s), "e")
	b = append(b, mant...)
	if !strings.Contains(mant, ".") {
		b = append(b, ".0"...)
	}
	b = append(b, 'E')
	e, _ := strconv.Atoi(exp)
	return strconv.AppendInt(b, int64(e), 10)
}

// base64Of is BYTES as JSON writes them.
func base64Of(b []byte, s string) []byte {
	n := base64.StdEncoding.EncodedLen(len(s))
	b = append(b, make([]byte, n)...)
	base64.StdEncoding.Encode(b[len(b)-n:], []byte(s))
	return b
}

// appendStringFn returns how a value of type t prints inside a ROW, ARRAY
// or MAP cast to STRING, as Flink prints them: (1, a), [1, 2], {a=1},
// NULL for a NULL.
func appendStringFn(t *types.Type) (func(b []byte, v Value) []byte, error) {
	var app func(b []byte, v Value) []byte
	switch t.Kind {
	case types.Row, types.Array:
		elems := make([]func([]byte, Value) []byte, 0, len(t.Fields))
		if t.Kind == types.Row {
			for _, f := range t.Fields {
				e, err := appendStringFn(f.Type)
				if err != nil {
					return nil, err
				}
				elems = append(elems, e)
			}
		} else {
			e, err := appendStringFn(t.Elem)
			if err != nil {
				return nil, err
			}
			elems = append(elems, e)
		}
		open, close := byte('('), byte(')')
		if t.Kind == types.Array {
			open, close = '[', ']'
		}
		app = func(b []byte, v Value) []byte {
			b = append(b, open)
			for i, x := range v.P.Vals {
				if i > 0 {
					b = append(b, ", "...)
				}
				b = elems[min(i, len(elems)-1)](b, x)
			}
			return append(b, close)
		}
	case types.Map:
		key, err := appendStringFn(t.Key)
		if err != nil {
			return nil, err
		}
		val, err := appendStringFn(t.Elem)
		if err != nil {
			return nil, err
		}
		app = func(b []byte, v Value) []byte {
			b = append(b, '{')
			for i := range v.P.Keys {
				if i > 0 {
					b = append(b, ", "...)
				}
				b = key(b, v.P.Keys[i])
				b = append(b, '=')
				b = val(b, v.P.Vals[i])
			}
			return append(b, '}')
		}
	default:
		str, err := toStringFn(t)
		if err != nil {
			return nil, err
		}
		app = func(b []byte, v Value) []byte { return append(b, str(v)...) }
	}
	return func(b []byte, v Value) []byte {
		if v.K == VNull {
			return append(b, "NULL"...)
		}
		return app(b, v)
	}, nil
}
