package eval

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/onceflow/onceflow/internal/sql/ast"
	"github.com/onceflow/onceflow/internal/sql/types"
	"github.com/onceflow/onceflow/internal/suggest"
)

// Ctx is the state of one evaluation: the row, the record's processing
// time, and the first runtime error. A Ctx is reused record after record
// by one goroutine.
type Ctx struct {
	// Row are the input columns, in the scope's order.
	Row []Value
	// Clock gives processing time (proctime(), current_timestamp); nil:
	// time.Now. It is read at most once per record (Reset).
	Clock func() time.Time
	now   time.Time
	err   error
	// arena and nests back the nested rows the decoder makes, reused
	// from record to record.
	arena []Value
	nests []Nested
	scan  scanner
}

// Reset prepares c for the next record: no error, a new processing time.
func (c *Ctx) Reset() {
	c.err = nil
	c.now = time.Time{}
	c.arena = c.arena[:0]
	c.nests = c.nests[:0]
}

// Err is the first runtime error since Reset.
func (c *Ctx) Err() error { return c.err }

// Fail records a runtime error (the first one is kept).
func (c *Ctx) Fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// Now is the record's processing time: the same for every expression
// of one record.
func (c *Ctx) Now() time.Time {
	if c.now.IsZero() {
		if c.Clock != nil {
			c.now = c.Clock()
		} else {
			c.now = time.Now()
		}
	}
	return c.now
}

// Fn evaluates a compiled expression.
type Fn func(c *Ctx) Value

// Expr is a compiled expression.
type Expr struct {
	Type *types.Type
	Fn   Fn
	// Const: the value is known at compile time (Val).
	Const bool
	Val   Value
	Pos   ast.Pos
}

// Column is a column of a scope: a name and a type.
type Column struct {
	Name string
	Type *types.Type
}

// Scope is what an expression can name: the columns of one row, which
// may also be written qualified by any of Qualifiers (a table's name and
// alias: t.col). Compile marks the columns it uses (Used).
type Scope struct {
	Columns    []Column
	Qualifiers []string
	used       []bool
	// whole: column i is used as a whole, not only some of its ROW
	// fields (fields).
	whole  []bool
	fields []map[string]bool
}

// Used tells whether an expression compiled in s reads column i.
func (s *Scope) Used(i int) bool { return i < len(s.used) && s.used[i] }

// FieldsUsed returns, for a ROW column read only through some of its
// fields (person.id, person.name), the names of those fields; nil when
// the column is unused or used whole.
func (s *Scope) FieldsUsed(i int) map[string]bool {
	if !s.Used(i) || s.whole[i] {
		return nil
	}
	return s.fields[i]
}

// use marks column i read, through its field (a ROW's first-level
// field) or whole (field "").
func (s *Scope) use(i int, field string) {
	s.used[i] = true
	if field == "" {
		s.whole[i] = true
		return
	}
	if s.fields[i] == nil {
		s.fields[i] = map[string]bool{}
	}
	s.fields[i][field] = true
}

// Index returns the index of the column called name, or -1.
func (s *Scope) Index(name string) int {
	for i, c := range s.Columns {
		if c.Name == name {
			return i
		}
	}
	return -1
}

func (s *Scope) names() []string {
	n := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		n[i] = c.Name
	}
	return n
}

// Error is an expression the compiler refuses, at the node that makes
// it wrong.
type Error struct {
	Pos ast.Pos
	Msg string
}

func (e *Error) Error() string {
	if e.Pos.Line == 0 {
		return e.Msg
	}
	return fmt.Sprintf("line %d, column %d: %s", e.Pos.Line, e.Pos.Col, e.Msg)
}

func errorf(pos ast.Pos, format string, args ...any) error {
	return &Error{pos, fmt.Sprintf(format, args...)}
}

type compiler struct {
	scope *Scope
}

// Compile type-checks e over scope and returns its evaluator.
func Compile(e ast.Expr, scope *Scope) (*Expr, error) {
	if n := len(scope.Columns) - len(scope.used); n > 0 {
		scope.used = append(scope.used, make([]bool, n)...)
		scope.whole = append(scope.whole, make([]bool, n)...)
		scope.fields = append(scope.fields, make([]map[string]bool, n)...)
	}
	return (&compiler{scope: scope}).expr(e)
}

// constant makes a constant expression.
func constant(t *types.Type, v Value, pos ast.Pos) *Expr {
	return &Expr{Type: t, Const: true, Val: v, Pos: pos, Fn: func(*Ctx) Value { return v }}
}

// fold turns e into a constant when all of args are (and e may be
// folded: a function of processing time may not).
func fold(e *Expr, args ...*Expr) (*Expr, error) {
	for _, a := range args {
		if !a.Const {
			return e, nil
		}
	}
	var c Ctx
	v := e.Fn(&c)
	if c.err != nil {
		return nil, &Error{e.Pos, c.err.Error()}
	}
	return constant(e.Type, v, e.Pos), nil
}

func (c *compiler) expr(e ast.Expr) (*Expr, error) {
	switch n := e.(type) {
	case *ast.Paren:
		return c.expr(n.X)
	case *ast.ColumnRef:
		return c.column(n)
	case *ast.Literal:
		return literal(n)
	case *ast.Interval:
		return interval(n)
	case *ast.Unary:
		return c.unary(n)
	case *ast.Binary:
		return c.binary(n)
	case *ast.Between:
		return c.between(n)
	case *ast.In:
		return c.in(n)
	case *ast.IsNull:
		x, err := c.expr(n.X)
		if err != nil {
			return nil, err
		}
		not := n.Not
		return fold(&Expr{Type: notNull(types.BooleanT), Pos: n.At, Fn: func(ctx *Ctx) Value {
			return Bool(x.Fn(ctx).IsNull() != not)
		}}, x)
	case *ast.IsBool:
		return c.isBool(n)
	case *ast.Case:
		return c.caseExpr(n)
	case *ast.Cast:
		return c.cast(n)
	case *ast.Call:
		return c.call(n)
	case *ast.Subscript:
		return c.subscript(n)
	case *ast.Field:
		x, err := c.expr(n.X)
		if err != nil {
			return nil, err
		}
		return fieldOf(x, n.Name, n.At)
	case *ast.Subquery:
		return nil, errorf(n.At, "a subquery cannot be used as a value here")
	case nil:
		return nil, &Error{Msg: "no expression"}
	}
	return nil, errorf(e.Position(), "unsupported expression %s", e)
}

func notNull(t *types.Type) *types.Type {
	c := *t
	c.NotNull = true
	return &c
}

func (c *compiler) column(n *ast.ColumnRef) (*Expr, error) {
	parts := n.Name.Parts
	if len(parts) == 0 {
		return nil, errorf(n.Name.At, "empty column name")
	}
	idx := c.scope.Index(parts[0].Name)
	if idx < 0 && len(parts) > 1 {
		for _, q := range c.scope.Qualifiers {
			if q == parts[0].Name {
				parts = parts[1:]
				idx = c.scope.Index(parts[0].Name)
				if idx < 0 {
					return nil, errorf(parts[0].At, "%s has no column %s%s", q, parts[0].Name, suggest.Suggest(parts[0].Name, c.scope.names()))
				}
				break
			}
		}
	}
	if idx < 0 {
		if len(parts) == 1 && !parts[0].Quoted {
			if f, ok := niladic[strings.ToUpper(parts[0].Name)]; ok {
				return f(n.Name.At), nil
			}
		}
		msg := fmt.Sprintf("unknown column %s%s", parts[0].Name, suggest.Suggest(parts[0].Name, c.scope.names()))
		if len(c.scope.Columns) > 0 && suggest.Closest(parts[0].Name, c.scope.names()) == "" {
			msg += "; columns: " + strings.Join(c.scope.names(), ", ")
		}
		return nil, &Error{parts[0].At, msg}
	}
	col := c.scope.Columns[idx]
	if len(parts) > 1 && col.Type.Kind == types.Row && col.Type.FieldIndex(parts[1].Name) >= 0 {
		c.scope.use(idx, parts[1].Name)
	} else {
		c.scope.use(idx, "")
	}
	x := &Expr{Type: col.Type, Pos: parts[0].At, Fn: func(ctx *Ctx) Value { return ctx.Row[idx] }}
	if len(parts) == 2 && col.Type.Kind == types.Row {
		// person.id, the common case, in one closure.
		if i := col.Type.FieldIndex(parts[1].Name); i >= 0 {
			return &Expr{Type: col.Type.Fields[i].Type.Nullable(), Pos: parts[1].At, Fn: func(ctx *Ctx) Value {
				v := ctx.Row[idx]
				if v.K != VRow {
					return Null
				}
				return v.P.Vals[i]
			}}, nil
		}
	}
	for _, p := range parts[1:] {
		var err error
		if x, err = fieldOf(x, p, p.At); err != nil {
			return nil, err
		}
	}
	return x, nil
}

// fieldOf is the field name of ROW x.
func fieldOf(x *Expr, name ast.Ident, pos ast.Pos) (*Expr, error) {
	if x.Type.Kind != types.Row {
		return nil, errorf(pos, "a value of type %s has no field %s: only a ROW has fields", x.Type, name.Name)
	}
	i := x.Type.FieldIndex(name.Name)
	if i < 0 {
		names := make([]string, len(x.Type.Fields))
		for k, f := range x.Type.Fields {
			names[k] = f.Name
		}
		return nil, errorf(pos, "%s has no field %s%s; fields: %s", x.Type, name.Name, suggest.Suggest(name.Name, names), strings.Join(names, ", "))
	}
	inner := x.Fn
	return &Expr{Type: x.Type.Fields[i].Type.Nullable(), Pos: pos, Fn: func(ctx *Ctx) Value {
		v := inner(ctx)
		if v.K != VRow || i >= len(v.P.Vals) {
			return Null
		}
		return v.P.Vals[i]
	}}, nil
}

func literal(n *ast.Literal) (*Expr, error) {
	switch n.Kind {
	case ast.LitNull:
		return constant(types.NullT, Null, n.At), nil
	case ast.LitBool:
		return constant(notNull(types.BooleanT), Bool(strings.EqualFold(n.Value, "TRUE")), n.At), nil
	case ast.LitString:
		return constant(notNull(types.StringT), Str(n.Value), n.At), nil
	case ast.LitNumber:
		s := n.Value
		if strings.ContainsAny(s, "eE") {
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return nil, errorf(n.At, "bad number %s", s)
			}
			return constant(notNull(types.DoubleT), Float(f), n.At), nil
		}
		if !strings.Contains(s, ".") {
			if i, err := strconv.ParseInt(s, 10, 64); err == nil {
				if i >= math.MinInt32 && i <= math.MaxInt32 {
					return constant(notNull(types.IntT), Int(i), n.At), nil
				}
				return constant(notNull(types.BigIntT), Int(i), n.At), nil
			}
		}
		frac := 0
		if i := strings.IndexByte(s, '.'); i >= 0 {
			frac = len(s) - i - 1
		}
		v, ok := parseDec(s, frac)
		if !ok {
			return nil, errorf(n.At, "bad number %s", s)
		}
		p := max(decDigits(v), frac)
		if p > types.MaxPrecision {
			return nil, errorf(n.At, "the number %s has more than %d digits", s, types.MaxPrecision)
		}
		return constant(notNull(types.DecimalT(p, frac)), v, n.At), nil
	case ast.LitTime:
		sec, ns, ok := parseTimestamp(n.Value)
		if !ok {
			return nil, errorf(n.At, "TIMESTAMP '%s' is not a timestamp: write 'yyyy-MM-dd HH:mm:ss[.fff]'", n.Value)
		}
		p := 0
		if i := strings.IndexByte(n.Value, '.'); i >= 0 {
			p = min(len(strings.TrimSpace(n.Value))-i-1, 9)
		}
		return constant(notNull(types.TimestampT(p)), TimeOf(sec, ns), n.At), nil
	case ast.LitDate:
		sec, _, ok := parseTimestamp(n.Value)
		if !ok || len(strings.TrimSpace(n.Value)) != 10 {
			return nil, errorf(n.At, "DATE '%s' is not a date: write 'yyyy-MM-dd'", n.Value)
		}
		return constant(notNull(types.DateT), Value{K: VTime, I: floorDiv(sec, secondsPerDay)}, n.At), nil
	case ast.LitTimeDay:
		v, p, ok := parseTimeOfDay(n.Value)
		if !ok {
			return nil, errorf(n.At, "TIME '%s' is not a time: write 'HH:mm:ss[.fff]'", n.Value)
		}
		return constant(notNull(&types.Type{Kind: types.Time, Precision: p}), v, n.At), nil
	}
	return nil, errorf(n.At, "unknown literal kind %s", n.Kind)
}

// parseTimeOfDay reads HH:mm[:ss[.fff]].
func parseTimeOfDay(s string) (Value, int, bool) {
	sec, ns, ok := parseTimestamp("1970-01-01 " + strings.TrimSpace(s))
	if !ok {
		return Null, 0, false
	}
	p := 0
	if i := strings.IndexByte(s, '.'); i >= 0 {
		p = min(len(strings.TrimSpace(s))-i-1, 9)
	}
	return Value{K: VTime, I: sec, N: ns}, p, true
}

var unitMillis = map[string]int64{
	"MILLISECOND": 1, "SECOND": 1000, "MINUTE": 60_000, "HOUR": 3_600_000, "DAY": 86_400_000, "WEEK": 7 * 86_400_000,
}

func interval(n *ast.Interval) (*Expr, error) {
	unit := strings.ToUpper(strings.TrimSuffix(strings.ToUpper(n.Unit), "S"))
	s := strings.TrimSpace(n.Value)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	var v Value
	switch unit {
	case "YEAR", "MONTH":
		var months int64
		if n.ToUnit != "" { // 'y-m' YEAR TO MONTH
			y, m, ok := strings.Cut(s, "-")
			yi, e1 := strconv.ParseInt(y, 10, 64)
			mi, e2 := strconv.ParseInt(m, 10, 64)
			if !ok || e1 != nil || e2 != nil {
				return nil, errorf(n.At, "INTERVAL '%s' YEAR TO MONTH: write 'years-months'", n.Value)
			}
			months = yi*12 + mi
		} else {
			i, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil, errorf(n.At, "INTERVAL '%s' %s: the value must be a whole number", n.Value, n.Unit)
			}
			months = i
			if unit == "YEAR" {
				months *= 12
			}
		}
		if neg {
			months = -months
		}
		return constant(notNull(&types.Type{Kind: types.Interval, Months: true}), Value{K: VInterval, I: months}, n.At), nil
	}
	ms, ok := unitMillis[unit]
	if !ok {
		return nil, errorf(n.At, "unknown interval unit %s: use SECOND, MINUTE, HOUR, DAY, MONTH or YEAR", n.Unit)
	}
	var total int64
	if n.ToUnit != "" {
		// DAY TO SECOND 'd hh:mm:ss.fff', HOUR TO MINUTE 'h:mm', ...
		fields := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ':' })
		units := []string{"DAY", "HOUR", "MINUTE", "SECOND"}
		start := -1
		for i, u := range units {
			if u == unit {
				start = i
			}
		}
		if start < 0 || start+len(fields) > len(units) {
			return nil, errorf(n.At, "INTERVAL '%s' %s TO %s: cannot read the value", n.Value, n.Unit, n.ToUnit)
		}
		for i, f := range fields {
			d, ok := parseDec(f, 3)
			if !ok {
				return nil, errorf(n.At, "INTERVAL '%s': %q is not a number", n.Value, f)
			}
			m, _ := mul64(d.I, unitMillis[units[start+i]])
			total += m / 1000
		}
	} else {
		d, ok := parseDec(s, 3)
		if !ok {
			return nil, errorf(n.At, "INTERVAL '%s' %s: the value must be a number", n.Value, n.Unit)
		}
		m, ok := mul64(d.I, ms)
		if !ok {
			return nil, errorf(n.At, "INTERVAL '%s' %s is too large", n.Value, n.Unit)
		}
		total = m / 1000
	}
	if neg {
		total = -total
	}
	v = Value{K: VInterval, I: total}
	return constant(notNull(types.IntervalT), v, n.At), nil
}

func (c *compiler) unary(n *ast.Unary) (*Expr, error) {
	x, err := c.expr(n.X)
	if err != nil {
		return nil, err
	}
	switch strings.ToUpper(n.Op) {
	case "NOT":
		if err := wantBool(x, "NOT"); err != nil {
			return nil, err
		}
		return fold(&Expr{Type: x.Type, Pos: n.At, Fn: func(ctx *Ctx) Value {
			v := x.Fn(ctx)
			if v.K == VNull {
				return v
			}
			return Bool(v.I == 0)
		}}, x)
	case "+":
		if !x.Type.IsNumeric() && x.Type.Kind != types.Interval {
			return nil, errorf(n.At, "+ needs a number, not %s", x.Type)
		}
		return x, nil
	case "-":
		t := x.Type
		var f Fn
		switch {
		case t.IsInteger():
			f = func(ctx *Ctx) Value {
				v := x.Fn(ctx)
				if v.K != VNull {
					v.I = wrap(t.Kind, -v.I)
				}
				return v
			}
		case t.Kind == types.Decimal:
			f = func(ctx *Ctx) Value {
				v := x.Fn(ctx)
				if v.K == VNull {
					return v
				}
				return decNeg(v)
			}
		case t.IsFloat():
			f = func(ctx *Ctx) Value { v := x.Fn(ctx); v.F = -v.F; return v }
		case t.Kind == types.Interval:
			f = func(ctx *Ctx) Value { v := x.Fn(ctx); v.I = -v.I; return v }
		default:
			return nil, errorf(n.At, "- needs a number, not %s", x.Type)
		}
		return fold(&Expr{Type: t, Pos: n.At, Fn: f}, x)
	}
	return nil, errorf(n.At, "unknown operator %s", n.Op)
}

func wantBool(x *Expr, what string) error {
	if x.Type.Kind != types.Boolean && x.Type.Kind != types.Null {
		return errorf(x.Pos, "%s needs a BOOLEAN, not %s", what, x.Type)
	}
	return nil
}

// wrap cuts an integer result to its type's width, as Java's (and
// Flink's) integer arithmetic overflows.
func wrap(k types.Kind, i int64) int64 {
	switch k {
	case types.TinyInt:
		return int64(int8(i))
	case types.SmallInt:
		return int64(int16(i))
	case types.Int:
		return int64(int32(i))
	}
	return i
}

func (c *compiler) binary(n *ast.Binary) (*Expr, error) {
	op := strings.ToUpper(n.Op)
	x, err := c.expr(n.X)
	if err != nil {
		return nil, err
	}
	y, err := c.expr(n.Y)
	if err != nil {
		return nil, err
	}
	switch op {
	case "AND", "OR":
		return logic(op, x, y, n.At)
	case "=", "<>", "!=", "<", "<=", ">", ">=", "IS DISTINCT FROM", "IS NOT DISTINCT FROM":
		return compare(op, x, y, n.At)
	case "+", "-", "*", "/", "%":
		return arith(op, x, y, n.At)
	case "||":
		if err := wantString(x, "||"); err != nil {
			return nil, err
		}
		if err := wantString(y, "||"); err != nil {
			return nil, err
		}
		return fold(&Expr{Type: types.StringT, Pos: n.At, Fn: func(ctx *Ctx) Value {
			a := x.Fn(ctx)
			if a.K == VNull {
				return a
			}
			b := y.Fn(ctx)
			if b.K == VNull {
				return b
			}
			return Str(a.S + b.S)
		}}, x, y)
	case "LIKE", "NOT LIKE":
		return c.like(n, op == "NOT LIKE", x, y)
	case "SIMILAR TO", "NOT SIMILAR TO":
		return nil, errorf(n.At, "SIMILAR TO is not supported: use REGEXP(s, pattern) or LIKE")
	}
	return nil, errorf(n.At, "unknown operator %s", n.Op)
}

func wantString(x *Expr, what string) error {
	if x.Type.Kind != types.String && x.Type.Kind != types.Null {
		return errorf(x.Pos, "%s needs a STRING, not %s (CAST(x AS STRING) converts)", what, x.Type)
	}
	return nil
}

// logic is AND and OR in three-valued logic: FALSE AND NULL is FALSE,
// TRUE OR NULL is TRUE; the right side is not evaluated when the left
// decides.
func logic(op string, x, y *Expr, pos ast.Pos) (*Expr, error) {
	if err := wantBool(x, op); err != nil {
		return nil, err
	}
	if err := wantBool(y, op); err != nil {
		return nil, err
	}
	var f Fn
	if op == "AND" {
		f = func(ctx *Ctx) Value {
			a := x.Fn(ctx)
			if a.K == VBool && a.I == 0 {
				return a
			}
			b := y.Fn(ctx)
			if b.K == VBool && b.I == 0 {
				return b
			}
			if a.K == VNull || b.K == VNull {
				return Null
			}
			return Bool(true)
		}
	} else {
		f = func(ctx *Ctx) Value {
			a := x.Fn(ctx)
			if a.K == VBool && a.I != 0 {
				return a
			}
			b := y.Fn(ctx)
			if b.K == VBool && b.I != 0 {
				return b
			}
			if a.K == VNull || b.K == VNull {
				return Null
			}
			return Bool(false)
		}
	}
	return fold(&Expr{Type: types.BooleanT, Pos: pos, Fn: f}, x, y)
}

// commonType is the type two values are compared or combined in
// (CASE's branches, COALESCE's arguments, IN's list), or nil.
func commonType(a, b *types.Type) *types.Type {
	switch {
	case a.Kind == types.Null:
		return b.Nullable()
	case b.Kind == types.Null:
		return a.Nullable()
	case a.IsNumeric() && b.IsNumeric():
		switch {
		case a.IsFloat() || b.IsFloat():
			if a.Kind == types.Double || b.Kind == types.Double || a.Kind == types.Decimal || b.Kind == types.Decimal {
				return types.DoubleT
			}
			return types.FloatT
		case a.Kind == types.Decimal || b.Kind == types.Decimal:
			pa, sa := decOf(a)
			pb, sb := decOf(b)
			s := max(sa, sb)
			p := min(max(pa-sa, pb-sb)+s, types.MaxPrecision)
			return types.DecimalT(p, s)
		}
		if a.Kind >= b.Kind {
			return a.Nullable()
		}
		return b.Nullable()
	case a.Kind == types.String && b.Kind == types.String:
		return types.StringT
	case a.Kind == b.Kind && (a.Kind == types.Timestamp || a.Kind == types.TimestampLTZ || a.Kind == types.Time):
		return &types.Type{Kind: a.Kind, Precision: max(a.Precision, b.Precision)}
	case a.Kind == types.Bytes && b.Kind == types.Bytes:
		return types.BytesT
	case a.Equal(b):
		return a.Nullable()
	}
	return nil
}

// decOf is the DECIMAL precision and scale of a numeric type.
func decOf(t *types.Type) (p, s int) {
	if t.Kind == types.Decimal {
		return t.Precision, t.Scale
	}
	if t.IsInteger() {
		return t.IntDigits(), 0
	}
	return types.MaxPrecision, 6
}

// coerce converts x to type t (implicitly: numeric widening, a string
// constant read as a timestamp or date).
func coerce(x *Expr, t *types.Type) (*Expr, error) {
	if x.Type.Equal(t) || t.Kind == types.Null || x.Type.Kind == types.Null {
		if x.Type.Kind == types.Null {
			return &Expr{Type: t.Nullable(), Const: x.Const, Val: x.Val, Pos: x.Pos, Fn: x.Fn}, nil
		}
		return x, nil
	}
	conv, err := castFn(x.Type, t, false)
	if err != nil {
		return nil, &Error{x.Pos, err.Error()}
	}
	inner := x.Fn
	return fold(&Expr{Type: t, Pos: x.Pos, Fn: func(ctx *Ctx) Value {
		v := inner(ctx)
		if v.K == VNull {
			return v
		}
		return conv(ctx, v)
	}}, x)
}

// unify coerces x and y to their common type (what comparing them
// needs); a string constant against a timestamp, date or number is read
// as one.
func unify(x, y *Expr, what string, pos ast.Pos) (*Expr, *Expr, *types.Type, error) {
	t := commonType(x.Type, y.Type)
	if t == nil {
		switch {
		case x.Const && x.Type.Kind == types.String:
			t = y.Type.Nullable()
		case y.Const && y.Type.Kind == types.String:
			t = x.Type.Nullable()
		default:
			return nil, nil, nil, errorf(pos, "%s: cannot combine %s and %s (CAST one to the other's type)", what, x.Type, y.Type)
		}
	}
	var err error
	if x, err = coerce(x, t); err != nil {
		return nil, nil, nil, err
	}
	if y, err = coerce(y, t); err != nil {
		return nil, nil, nil, err
	}
	return x, y, t, nil
}

// comparator returns the function ordering two non-NULL values of t.
func comparator(t *types.Type) func(a, b Value) int {
	switch {
	case t.IsInteger(), t.Kind == types.Boolean, t.Kind == types.Date, t.Kind == types.Interval:
		return func(a, b Value) int { return cmpInt(a.I, b.I) }
	case t.IsFloat():
		return func(a, b Value) int {
			switch {
			case a.F < b.F:
				return -1
			case a.F > b.F:
				return 1
			}
			return 0
		}
	case t.Kind == types.Decimal:
		return decCmp
	case t.Kind == types.String, t.Kind == types.Bytes:
		return func(a, b Value) int { return strings.Compare(a.S, b.S) }
	case t.IsTimestamp(), t.Kind == types.Time:
		return func(a, b Value) int {
			if c := cmpInt(a.I, b.I); c != 0 {
				return c
			}
			return cmpInt(int64(a.N), int64(b.N))
		}
	}
	return nil
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func compare(op string, x, y *Expr, pos ast.Pos) (*Expr, error) {
	x, y, t, err := unify(x, y, op, pos)
	if err != nil {
		return nil, err
	}
	cmp := comparator(t)
	if cmp == nil {
		if t.Kind == types.Null {
			cmp = func(a, b Value) int { return 0 }
		} else {
			return nil, errorf(pos, "%s: values of type %s cannot be compared", op, t)
		}
	}
	var test func(int) bool
	switch op {
	case "=", "IS NOT DISTINCT FROM":
		test = func(c int) bool { return c == 0 }
	case "<>", "!=", "IS DISTINCT FROM":
		test = func(c int) bool { return c != 0 }
	case "<":
		test = func(c int) bool { return c < 0 }
	case "<=":
		test = func(c int) bool { return c <= 0 }
	case ">":
		test = func(c int) bool { return c > 0 }
	case ">=":
		test = func(c int) bool { return c >= 0 }
	}
	if strings.Contains(op, "DISTINCT") {
		distinct := op == "IS DISTINCT FROM"
		return fold(&Expr{Type: notNull(types.BooleanT), Pos: pos, Fn: func(ctx *Ctx) Value {
			a, b := x.Fn(ctx), y.Fn(ctx)
			switch {
			case a.K == VNull && b.K == VNull:
				return Bool(!distinct)
			case a.K == VNull || b.K == VNull:
				return Bool(distinct)
			}
			return Bool(cmp(a, b) != 0 == distinct)
		}}, x, y)
	}
	// The common case of an integer column against a constant, without
	// the comparator's indirection.
	if t.IsInteger() && y.Const && y.Val.K != VNull && op == "=" {
		k := y.Val.I
		xf := x.Fn
		return &Expr{Type: types.BooleanT, Pos: pos, Fn: func(ctx *Ctx) Value {
			a := xf(ctx)
			if a.K == VNull {
				return a
			}
			return Bool(a.I == k)
		}}, nil
	}
	return fold(&Expr{Type: types.BooleanT, Pos: pos, Fn: func(ctx *Ctx) Value {
		a := x.Fn(ctx)
		if a.K == VNull {
			return a
		}
		b := y.Fn(ctx)
		if b.K == VNull {
			return b
		}
		return Bool(test(cmp(a, b)))
	}}, x, y)
}

// exprs compiles the expressions in order, stopping at the first error.
func (c *compiler) exprs(es ...ast.Expr) ([]*Expr, error) {
	out := make([]*Expr, len(es))
	for i, e := range es {
		x, err := c.expr(e)
		if err != nil {
			return nil, err
		}
		out[i] = x
	}
	return out, nil
}

func (c *compiler) between(n *ast.Between) (*Expr, error) {
	xs, err := c.exprs(n.X, n.Lo, n.Hi)
	if err != nil {
		return nil, err
	}
	x, lo, hi := xs[0], xs[1], xs[2]
	ge, err := compare(">=", x, lo, n.At)
	if err != nil {
		return nil, err
	}
	le, err := compare("<=", x, hi, n.At)
	if err != nil {
		return nil, err
	}
	if n.Symmetric {
		// Either order of the bounds: (lo <= x <= hi) OR (hi <= x <= lo).
		ge2, err := compare(">=", x, hi, n.At)
		if err != nil {
			return nil, err
		}
		le2, err := compare("<=", x, lo, n.At)
		if err != nil {
			return nil, err
		}
		a, _ := logic("AND", ge, le, n.At)
		b, _ := logic("AND", ge2, le2, n.At)
		ge, _ = logic("OR", a, b, n.At)
		le = constant(types.BooleanT, Bool(true), n.At)
	}
	both, err := logic("AND", ge, le, n.At)
	if err != nil || !n.Not {
		return both, err
	}
	return fold(&Expr{Type: types.BooleanT, Pos: n.At, Fn: func(ctx *Ctx) Value {
		v := both.Fn(ctx)
		if v.K == VNull {
			return v
		}
		return Bool(v.I == 0)
	}}, both)
}

func (c *compiler) in(n *ast.In) (*Expr, error) {
	if n.Query != nil {
		return nil, errorf(n.At, "IN (subquery) is not supported; write the values: IN (1, 2, 3)")
	}
	x, err := c.expr(n.X)
	if err != nil {
		return nil, err
	}
	t := x.Type
	list := make([]*Expr, len(n.List))
	for i, e := range n.List {
		if list[i], err = c.expr(e); err != nil {
			return nil, err
		}
		nt := commonType(t, list[i].Type)
		if nt == nil {
			if list[i].Const && list[i].Type.Kind == types.String {
				continue
			}
			return nil, errorf(list[i].Pos, "IN: cannot compare %s with %s", x.Type, list[i].Type)
		}
		t = nt
	}
	if x, err = coerce(x, t); err != nil {
		return nil, err
	}
	for i := range list {
		if list[i], err = coerce(list[i], t); err != nil {
			return nil, err
		}
	}
	cmp := comparator(t)
	if cmp == nil {
		return nil, errorf(n.At, "IN: values of type %s cannot be compared", t)
	}
	not := n.Not
	args := append([]*Expr{x}, list...)
	return fold(&Expr{Type: types.BooleanT, Pos: n.At, Fn: func(ctx *Ctx) Value {
		v := x.Fn(ctx)
		if v.K == VNull {
			return v
		}
		sawNull := false
		for _, e := range list {
			w := e.Fn(ctx)
			if w.K == VNull {
				sawNull = true
			} else if cmp(v, w) == 0 {
				return Bool(!not)
			}
		}
		if sawNull {
			return Null
		}
		return Bool(not)
	}}, args...)
}

func (c *compiler) isBool(n *ast.IsBool) (*Expr, error) {
	x, err := c.expr(n.X)
	if err != nil {
		return nil, err
	}
	if err := wantBool(x, "IS "+n.Value); err != nil {
		return nil, err
	}
	var test func(Value) bool
	switch strings.ToUpper(n.Value) {
	case "TRUE":
		test = func(v Value) bool { return v.K == VBool && v.I != 0 }
	case "FALSE":
		test = func(v Value) bool { return v.K == VBool && v.I == 0 }
	case "UNKNOWN":
		test = func(v Value) bool { return v.K == VNull }
	default:
		return nil, errorf(n.At, "IS %s: expected TRUE, FALSE or UNKNOWN", n.Value)
	}
	not := n.Not
	return fold(&Expr{Type: notNull(types.BooleanT), Pos: n.At, Fn: func(ctx *Ctx) Value {
		return Bool(test(x.Fn(ctx)) != not)
	}}, x)
}

func (c *compiler) caseExpr(n *ast.Case) (*Expr, error) {
	var operand *Expr
	var err error
	if n.Operand != nil {
		if operand, err = c.expr(n.Operand); err != nil {
			return nil, err
		}
	}
	conds := make([]*Expr, len(n.Whens))
	results := make([]*Expr, len(n.Whens)+1)
	t := types.NullT
	for i, w := range n.Whens {
		cond, err := c.expr(w.Cond)
		if err != nil {
			return nil, err
		}
		if operand != nil {
			if cond, err = compare("=", operand, cond, cond.Pos); err != nil {
				return nil, err
			}
		} else if err := wantBool(cond, "WHEN"); err != nil {
			return nil, err
		}
		conds[i] = cond
		if results[i], err = c.expr(w.Result); err != nil {
			return nil, err
		}
	}
	if n.Else != nil {
		if results[len(n.Whens)], err = c.expr(n.Else); err != nil {
			return nil, err
		}
	} else {
		results[len(n.Whens)] = constant(types.NullT, Null, n.At)
	}
	for _, r := range results {
		nt := commonType(t, r.Type)
		if nt == nil {
			return nil, errorf(r.Pos, "CASE: a result of type %s does not go with the others' %s", r.Type, t)
		}
		t = nt
	}
	for i := range results {
		if results[i], err = coerce(results[i], t); err != nil {
			return nil, err
		}
	}
	return &Expr{Type: t, Pos: n.At, Fn: func(ctx *Ctx) Value {
		for i, cond := range conds {
			if cond.Fn(ctx).True() {
				return results[i].Fn(ctx)
			}
		}
		return results[len(conds)].Fn(ctx)
	}}, nil
}

func (c *compiler) subscript(n *ast.Subscript) (*Expr, error) {
	xs, err := c.exprs(n.X, n.Index)
	if err != nil {
		return nil, err
	}
	x, idx := xs[0], xs[1]
	switch x.Type.Kind {
	case types.Array:
		if !idx.Type.IsInteger() {
			return nil, errorf(idx.Pos, "an ARRAY index must be an integer (from 1), not %s", idx.Type)
		}
		return &Expr{Type: x.Type.Elem.Nullable(), Pos: n.At, Fn: func(ctx *Ctx) Value {
			a, i := x.Fn(ctx), idx.Fn(ctx)
			if a.K == VNull || i.K == VNull || i.I < 1 || i.I > int64(len(a.P.Vals)) {
				return Null
			}
			return a.P.Vals[i.I-1]
		}}, nil
	case types.Map:
		if idx, err = coerce(idx, x.Type.Key); err != nil {
			return nil, err
		}
		cmp := comparator(x.Type.Key)
		if cmp == nil {
			return nil, errorf(n.At, "a MAP with %s keys cannot be looked up", x.Type.Key)
		}
		return &Expr{Type: x.Type.Elem.Nullable(), Pos: n.At, Fn: func(ctx *Ctx) Value {
			m, k := x.Fn(ctx), idx.Fn(ctx)
			if m.K == VNull || k.K == VNull {
				return Null
			}
			for i, mk := range m.P.Keys {
				if mk.K != VNull && cmp(mk, k) == 0 {
					return m.P.Vals[i]
				}
			}
			return Null
		}}, nil
	}
	return nil, errorf(n.At, "[ ] needs an ARRAY or a MAP, not %s", x.Type)
}
