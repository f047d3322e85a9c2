// Package types is the SQL data types of onceflow's Flink SQL dialect:
// what a column or an expression holds, as the compiler checks it and the
// row codec reads and writes it.
//
// A Type is a small tree (ROW, ARRAY and MAP have children); types are
// compared with Equal, printed as Flink prints them (String), and made
// from the parser's ast.Type (FromAST) or from text (Parse, which the
// pipeline's select step uses for its schema: "TIMESTAMP(3)",
// "ROW<id BIGINT, name STRING>").
package types

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/onceflow/onceflow/internal/sql/ast"
)

// Kind is a type's family.
type Kind uint8

// The kinds. The integer kinds are ordered by width, and the numeric
// kinds from TinyInt to Double by SQL's promotion order.
const (
	Invalid Kind = iota
	// Null is the type of the NULL literal before it meets another type.
	Null
	Boolean
	TinyInt
	SmallInt
	Int
	BigInt
	Decimal
	Float
	Double
	String
	Bytes
	Date
	Time
	Timestamp
	TimestampLTZ
	// Interval is a day-time interval (INTERVAL '4' SECOND), held in
	// milliseconds; a year-month interval (INTERVAL '1' MONTH) has
	// Months set.
	Interval
	Row
	Array
	Map
)

var kindNames = [...]string{Invalid: "INVALID", Null: "NULL", Boolean: "BOOLEAN", TinyInt: "TINYINT", SmallInt: "SMALLINT",
	Int: "INT", BigInt: "BIGINT", Decimal: "DECIMAL", Float: "FLOAT", Double: "DOUBLE", String: "STRING", Bytes: "BYTES",
	Date: "DATE", Time: "TIME", Timestamp: "TIMESTAMP", TimestampLTZ: "TIMESTAMP_LTZ", Interval: "INTERVAL", Row: "ROW",
	Array: "ARRAY", Map: "MAP"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// MaxPrecision is the largest DECIMAL precision (Flink's).
const MaxPrecision = 38

// Type is a SQL data type.
type Type struct {
	Kind Kind
	// Precision is DECIMAL's digits, TIMESTAMP's and TIME's fractional
	// second digits, VARCHAR's and CHAR's length (0: STRING, no limit).
	Precision int
	// Scale is DECIMAL's digits after the point.
	Scale int
	// Fixed: CHAR(n) or BINARY(n) rather than VARCHAR/VARBINARY.
	Fixed bool
	// Months: a year-month interval.
	Months bool
	// NotNull: the type excludes NULL (NOT NULL).
	NotNull bool
	// Fields are a ROW's fields.
	Fields []Field
	// Elem is an ARRAY's element type, a MAP's value type; Key a MAP's
	// key type.
	Elem, Key *Type
}

// Field is one field of a ROW.
type Field struct {
	Name string
	Type *Type
}

// Shared types of the kinds without parameters.
var (
	NullT     = &Type{Kind: Null}
	BooleanT  = &Type{Kind: Boolean}
	TinyIntT  = &Type{Kind: TinyInt}
	SmallIntT = &Type{Kind: SmallInt}
	IntT      = &Type{Kind: Int}
	BigIntT   = &Type{Kind: BigInt}
	FloatT    = &Type{Kind: Float}
	DoubleT   = &Type{Kind: Double}
	StringT   = &Type{Kind: String}
	BytesT    = &Type{Kind: Bytes}
	DateT     = &Type{Kind: Date}
	IntervalT = &Type{Kind: Interval}
)

// TimestampT is TIMESTAMP(p).
func TimestampT(p int) *Type { return &Type{Kind: Timestamp, Precision: p} }

// TimestampLTZT is TIMESTAMP_LTZ(p).
func TimestampLTZT(p int) *Type { return &Type{Kind: TimestampLTZ, Precision: p} }

// DecimalT is DECIMAL(p, s).
func DecimalT(p, s int) *Type { return &Type{Kind: Decimal, Precision: p, Scale: s} }

// ArrayT is ARRAY<elem>.
func ArrayT(elem *Type) *Type { return &Type{Kind: Array, Elem: elem} }

// MapT is MAP<key, elem>.
func MapT(key, elem *Type) *Type { return &Type{Kind: Map, Key: key, Elem: elem} }

// IsInteger tells whether t is TINYINT, SMALLINT, INT or BIGINT.
func (t *Type) IsInteger() bool { return t.Kind >= TinyInt && t.Kind <= BigInt }

// IsNumeric tells whether t is an integer, DECIMAL, FLOAT or DOUBLE.
func (t *Type) IsNumeric() bool { return t.Kind >= TinyInt && t.Kind <= Double }

// IsFloat tells whether t is FLOAT or DOUBLE.
func (t *Type) IsFloat() bool { return t.Kind == Float || t.Kind == Double }

// IsTimestamp tells whether t is TIMESTAMP or TIMESTAMP_LTZ.
func (t *Type) IsTimestamp() bool { return t.Kind == Timestamp || t.Kind == TimestampLTZ }

// IsString tells whether t is a character string (or the NULL type, which
// fits anywhere).
func (t *Type) IsString() bool { return t.Kind == String }

// IntDigits is the decimal precision an integer type needs (Flink's
// DECIMAL of an integer: TINYINT 3, SMALLINT 5, INT 10, BIGINT 19).
func (t *Type) IntDigits() int {
	switch t.Kind {
	case TinyInt:
		return 3
	case SmallInt:
		return 5
	case Int:
		return 10
	}
	return 19
}

// Nullable returns t without NOT NULL.
func (t *Type) Nullable() *Type {
	if !t.NotNull {
		return t
	}
	c := *t
	c.NotNull = false
	return &c
}

// Equal tells whether t and u are the same type (NOT NULL aside).
func (t *Type) Equal(u *Type) bool {
	if t.Kind != u.Kind || t.Precision != u.Precision || t.Scale != u.Scale || t.Fixed != u.Fixed || t.Months != u.Months ||
		len(t.Fields) != len(u.Fields) {
		return false
	}
	for i := range t.Fields {
		if t.Fields[i].Name != u.Fields[i].Name || !t.Fields[i].Type.Equal(u.Fields[i].Type) {
			return false
		}
	}
	if (t.Elem == nil) != (u.Elem == nil) || t.Elem != nil && !t.Elem.Equal(u.Elem) {
		return false
	}
	return (t.Key == nil) == (u.Key == nil) && (t.Key == nil || t.Key.Equal(u.Key))
}

// String prints t as Flink does: BIGINT, DECIMAL(23, 3), TIMESTAMP(3),
// ROW<`id` BIGINT, `name` STRING>.
func (t *Type) String() string {
	var b strings.Builder
	t.write(&b)
	return b.String()
}

func (t *Type) write(b *strings.Builder) {
	switch t.Kind {
	case Decimal:
		fmt.Fprintf(b, "DECIMAL(%d, %d)", t.Precision, t.Scale)
	case String:
		switch {
		case t.Fixed:
			fmt.Fprintf(b, "CHAR(%d)", t.Precision)
		case t.Precision > 0:
			fmt.Fprintf(b, "VARCHAR(%d)", t.Precision)
		default:
			b.WriteString("STRING")
		}
	case Bytes:
		switch {
		case t.Fixed:
			fmt.Fprintf(b, "BINARY(%d)", t.Precision)
		case t.Precision > 0:
			fmt.Fprintf(b, "VARBINARY(%d)", t.Precision)
		default:
			b.WriteString("BYTES")
		}
	case Timestamp, TimestampLTZ, Time:
		fmt.Fprintf(b, "%s(%d)", t.Kind, t.Precision)
	case Interval:
		if t.Months {
			b.WriteString("INTERVAL MONTH")
		} else {
			b.WriteString("INTERVAL SECOND")
		}
	case Row:
		b.WriteString("ROW<")
		for i, f := range t.Fields {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("`" + f.Name + "` ")
			f.Type.write(b)
		}
		b.WriteString(">")
	case Array:
		b.WriteString("ARRAY<")
		t.Elem.write(b)
		b.WriteString(">")
	case Map:
		b.WriteString("MAP<")
		t.Key.write(b)
		b.WriteString(", ")
		t.Elem.write(b)
		b.WriteString(">")
	default:
		b.WriteString(t.Kind.String())
	}
	if t.NotNull {
		b.WriteString(" NOT NULL")
	}
}

// FieldIndex returns the index of a ROW's field called name, or -1.
func (t *Type) FieldIndex(name string) int {
	for i, f := range t.Fields {
		if f.Name == name {
			return i
		}
	}
	return -1
}

// Error is a type that cannot be made, at its place in the text.
type Error struct {
	Pos ast.Pos
	Msg string
}

func (e *Error) Error() string {
	return fmt.Sprintf("line %d, column %d: %s", e.Pos.Line, e.Pos.Col, e.Msg)
}

// FromAST makes the type the parser read.
func FromAST(a *ast.Type) (*Type, error) {
	param := func(i, def int) int {
		if i < len(a.Params) {
			return a.Params[i]
		}
		return def
	}
	bad := func(format string, args ...any) (*Type, error) {
		return nil, &Error{a.At, fmt.Sprintf(format, args...)}
	}
	var t *Type
	switch a.Name {
	case "BOOLEAN", "BOOL":
		t = &Type{Kind: Boolean}
	case "TINYINT":
		t = &Type{Kind: TinyInt}
	case "SMALLINT":
		t = &Type{Kind: SmallInt}
	case "INT", "INTEGER":
		t = &Type{Kind: Int}
	case "BIGINT":
		t = &Type{Kind: BigInt}
	case "FLOAT", "REAL":
		t = &Type{Kind: Float}
	case "DOUBLE", "DOUBLE PRECISION":
		t = &Type{Kind: Double}
	case "DECIMAL", "DEC", "NUMERIC":
		t = &Type{Kind: Decimal, Precision: param(0, 10), Scale: param(1, 0)}
		if t.Precision < 1 || t.Precision > MaxPrecision || t.Scale < 0 || t.Scale > t.Precision {
			return bad("DECIMAL(%d, %d): the precision must be 1 to %d and the scale 0 to the precision", t.Precision, t.Scale, MaxPrecision)
		}
	case "STRING":
		t = &Type{Kind: String}
	case "VARCHAR", "CHAR", "CHARACTER", "CHAR VARYING", "CHARACTER VARYING":
		t = &Type{Kind: String, Precision: param(0, 1), Fixed: a.Name == "CHAR" || a.Name == "CHARACTER"}
		if !t.Fixed && len(a.Params) == 0 {
			t.Precision = 0
		}
	case "BYTES":
		t = &Type{Kind: Bytes}
	case "VARBINARY", "BINARY":
		t = &Type{Kind: Bytes, Precision: param(0, 1), Fixed: a.Name == "BINARY"}
		if a.Name == "VARBINARY" && len(a.Params) == 0 {
			t.Precision = 0
		}
	case "DATE":
		t = &Type{Kind: Date}
	case "TIME":
		t = &Type{Kind: Time, Precision: param(0, 0)}
	case "TIMESTAMP", "TIMESTAMP_LTZ":
		t = &Type{Kind: Timestamp, Precision: param(0, 6)}
		if a.Name == "TIMESTAMP_LTZ" || a.WithLocalTimeZone {
			t.Kind = TimestampLTZ
		}
		if t.Precision < 0 || t.Precision > 9 {
			return bad("%s(%d): the precision must be 0 to 9", t.Kind, t.Precision)
		}
	case "ROW":
		t = &Type{Kind: Row}
		for _, f := range a.Fields {
			ft, err := FromAST(f.Type)
			if err != nil {
				return nil, err
			}
			if t.FieldIndex(f.Name.Name) >= 0 {
				return nil, &Error{f.Name.At, fmt.Sprintf("ROW field %s is declared twice", f.Name.Name)}
			}
			t.Fields = append(t.Fields, Field{Name: f.Name.Name, Type: ft})
		}
	case "ARRAY", "MULTISET":
		if a.Elem == nil {
			return bad("%s needs an element type: %s<STRING>", a.Name, a.Name)
		}
		e, err := FromAST(a.Elem)
		if err != nil {
			return nil, err
		}
		t = ArrayT(e)
	case "MAP":
		if a.Elem == nil || a.Key == nil {
			return bad("MAP needs a key and a value type: MAP<STRING, BIGINT>")
		}
		k, err := FromAST(a.Key)
		if err != nil {
			return nil, err
		}
		e, err := FromAST(a.Elem)
		if err != nil {
			return nil, err
		}
		t = MapT(k, e)
	default:
		return bad("unknown type %s%s", a.Name, suggestType(a.Name))
	}
	t.NotNull = a.NotNull
	return t, nil
}

var typeNames = []string{"BOOLEAN", "TINYINT", "SMALLINT", "INT", "INTEGER", "BIGINT", "FLOAT", "REAL", "DOUBLE", "DECIMAL",
	"STRING", "VARCHAR", "CHAR", "BYTES", "VARBINARY", "BINARY", "DATE", "TIME", "TIMESTAMP", "TIMESTAMP_LTZ", "ROW", "ARRAY", "MAP"}

func suggestType(name string) string {
	best, bestD := "", 3
	for _, n := range typeNames {
		if d := distance(name, n); d < bestD {
			best, bestD = n, d
		}
	}
	if best == "" {
		return "; known types: " + strings.Join(typeNames, ", ")
	}
	return "; did you mean " + best + "?"
}

func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev = cur
	}
	return prev[len(b)]
}

// Parse reads a type written as SQL: BIGINT, DECIMAL(10, 2),
// TIMESTAMP(3) WITH LOCAL TIME ZONE, ROW<id BIGINT, name STRING>,
// ARRAY<STRING>, MAP<STRING, INT>, with an optional NOT NULL. Positions in
// errors are columns of s on line 1. Rest is what follows the type (the
// select step's schema reads METADATA FROM 'key' there).
func Parse(s string) (t *Type, rest string, err error) {
	p := &typeParser{src: []rune(s)}
	a, err := p.typ()
	if err != nil {
		return nil, "", err
	}
	t, err = FromAST(a)
	if err != nil {
		return nil, "", err
	}
	p.space()
	return t, string(p.src[p.i:]), nil
}

type typeParser struct {
	src []rune
	i   int
}

func (p *typeParser) pos() ast.Pos { return ast.Pos{Line: 1, Col: p.i + 1} }

func (p *typeParser) space() {
	for p.i < len(p.src) && unicode.IsSpace(p.src[p.i]) {
		p.i++
	}
}

// word reads an identifier (or a backquoted one).
func (p *typeParser) word() string {
	p.space()
	if p.i < len(p.src) && p.src[p.i] == '`' {
		end := p.i + 1
		for end < len(p.src) && p.src[end] != '`' {
			end++
		}
		w := string(p.src[p.i+1 : min(end, len(p.src))])
		p.i = min(end+1, len(p.src))
		return w
	}
	start := p.i
	for p.i < len(p.src) && (unicode.IsLetter(p.src[p.i]) || unicode.IsDigit(p.src[p.i]) || p.src[p.i] == '_') {
		p.i++
	}
	return string(p.src[start:p.i])
}

func (p *typeParser) peek(c rune) bool {
	p.space()
	return p.i < len(p.src) && p.src[p.i] == c
}

func (p *typeParser) expect(c rune) error {
	if !p.peek(c) {
		return &Error{p.pos(), fmt.Sprintf("expected %q", c)}
	}
	p.i++
	return nil
}

// keywords reads the words ws if they come next, case-insensitively.
func (p *typeParser) keywords(ws ...string) bool {
	save := p.i
	for _, w := range ws {
		if !strings.EqualFold(p.word(), w) {
			p.i = save
			return false
		}
	}
	return true
}

func (p *typeParser) typ() (*ast.Type, error) {
	p.space()
	a := &ast.Type{At: p.pos()}
	a.Name = strings.ToUpper(p.word())
	if a.Name == "" {
		return nil, &Error{a.At, "expected a type, such as BIGINT or STRING"}
	}
	if p.peek('(') && a.Name != "ROW" {
		p.i++
		for {
			p.space()
			start := p.i
			for p.i < len(p.src) && p.src[p.i] >= '0' && p.src[p.i] <= '9' {
				p.i++
			}
			n, err := strconv.Atoi(string(p.src[start:p.i]))
			if err != nil {
				return nil, &Error{p.pos(), "expected a number"}
			}
			a.Params = append(a.Params, n)
			if p.peek(',') {
				p.i++
				continue
			}
			if err := p.expect(')'); err != nil {
				return nil, err
			}
			break
		}
	}
	switch a.Name {
	case "ROW":
		open, close := '<', '>'
		if p.peek('(') {
			open, close = '(', ')'
		}
		if err := p.expect(open); err != nil {
			return nil, err
		}
		for !p.peek(close) {
			p.space()
			at := p.pos()
			name := p.word()
			if name == "" {
				return nil, &Error{at, "expected a field name"}
			}
			ft, err := p.typ()
			if err != nil {
				return nil, err
			}
			a.Fields = append(a.Fields, &ast.RowField{Name: ast.Ident{At: at, Name: name}, Type: ft})
			if !p.peek(',') {
				break
			}
			p.i++
		}
		if err := p.expect(close); err != nil {
			return nil, err
		}
	case "ARRAY", "MULTISET":
		if err := p.expect('<'); err != nil {
			return nil, err
		}
		e, err := p.typ()
		if err != nil {
			return nil, err
		}
		a.Elem = e
		if err := p.expect('>'); err != nil {
			return nil, err
		}
	case "MAP":
		if err := p.expect('<'); err != nil {
			return nil, err
		}
		k, err := p.typ()
		if err != nil {
			return nil, err
		}
		if err := p.expect(','); err != nil {
			return nil, err
		}
		e, err := p.typ()
		if err != nil {
			return nil, err
		}
		a.Key, a.Elem = k, e
		if err := p.expect('>'); err != nil {
			return nil, err
		}
	case "TIMESTAMP":
		if p.keywords("WITH", "LOCAL", "TIME", "ZONE") {
			a.WithLocalTimeZone = true
		}
	case "DOUBLE":
		p.keywords("PRECISION")
	}
	if p.keywords("NOT", "NULL") {
		a.NotNull = true
	}
	return a, nil
}
