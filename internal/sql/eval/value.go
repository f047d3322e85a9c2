// Package eval compiles SQL scalar expressions over typed rows into Go
// closures, and reads and writes the rows as JSON, as Flink's json
// format does. It is the per-record hot path of SQL jobs: the pipeline's
// select step (pipeline/select.go) decodes a record's JSON value into a
// row once, evaluates its compiled columns and condition on it, and
// encodes the result.
//
// # Values
//
// A Value is a small struct, not an interface: a kind byte, an int64, a
// float64, a string and one pointer for what does not fit (nested rows,
// arrays, maps, a DECIMAL too large for an int64). Every scalar type
// lives in the inline fields (integers and booleans in I; DECIMAL as an
// unscaled int64 in I with its scale in N; DOUBLE and FLOAT in F; STRING
// and BYTES in S; TIMESTAMP as seconds since the epoch in I and
// nanoseconds in N; DATE as days since the epoch in I), so evaluating an
// expression moves values by copy and allocates nothing for scalars: an
// interface would box every int64 and float64 it holds. Strings read
// from a record's JSON are substrings of the record's value (no copy)
// unless they carry escapes. The zero Value is SQL NULL.
//
// The compiler knows every expression's type (package types), so a
// Value need not say it: K only separates NULL from a value and the few
// representations (a DECIMAL held in a big.Int, say).
//
// # Evaluation
//
// Compile type-checks an ast.Expr against a Scope (the row's columns and
// the qualifiers naming it) and returns a closure per node; constants
// (literals, functions of literals, regular expressions and date
// patterns) are computed once at compile time. A runtime error (a
// division by zero, a bad CAST) is recorded in the Ctx and the
// expression's value is NULL: the caller checks Ctx.Err after the
// expressions it evaluated and makes the record a poison record.
//
// Processing time (proctime(), current_timestamp, now()) is read once
// per record from Ctx.Clock: a replay after a crash evaluates it again
// and gets the time of the replay, as Flink does; the functions that
// would make a replay write other values than the first run for the same
// record (uuid(), rand()) are refused at compile time, since exactly-once
// output depends on deterministic replays. The session time zone is UTC:
// a TIMESTAMP_LTZ prints as its UTC wall-clock time.
//
// # Rows
//
// A select (CompileSelect) reads a record's JSON value in one pass with
// its own scanner (row.go) rather than gjson, which does not validate (a
// malformed value would read as NULLs instead of a poison record) and
// would take a pass per field: the fields no expression uses are skipped
// and validated, not decoded; nested ROW fields decode into nested rows
// whose Values come from an arena in the Ctx, reused record after record,
// so a select of scalars and ROWs allocates nothing per record once warm
// (ARRAY and MAP values do allocate). Output rows are appended to a
// caller's buffer as Flink's json format writes them.
package eval

import (
	"math/big"
)

// VKind is a Value's representation.
type VKind uint8

// The representations.
const (
	// VNull is SQL NULL (the zero Value).
	VNull VKind = iota
	// VBool: I is 1 for TRUE, 0 for FALSE.
	VBool
	// VInt: I holds any integer type.
	VInt
	// VDec: DECIMAL, I unscaled and N the scale; P.Big set when the
	// unscaled value does not fit an int64 (I is then unused).
	VDec
	// VFloat: F holds a DOUBLE or FLOAT.
	VFloat
	// VStr: S holds a STRING; VBytes: S holds BYTES.
	VStr
	VBytes
	// VTime: TIMESTAMP and TIMESTAMP_LTZ (I seconds since the epoch, N
	// nanoseconds), DATE (I days since the epoch) and TIME (I seconds of
	// the day, N nanoseconds).
	VTime
	// VInterval: I is milliseconds, or months for a year-month interval.
	VInterval
	// VRow, VArray: P.Vals are the fields or elements. VMap: P.Keys and
	// P.Vals.
	VRow
	VArray
	VMap
)

// Value is one SQL value (see the package doc).
type Value struct {
	K VKind
	N int32
	I int64
	F float64
	S string
	P *Nested
}

// Nested is the part of a Value that does not fit inline.
type Nested struct {
	Vals []Value
	Keys []Value
	Big  *big.Int
}

// Null is SQL NULL.
var Null = Value{}

// IsNull tells whether v is NULL.
func (v Value) IsNull() bool { return v.K == VNull }

// Bool makes a BOOLEAN.
func Bool(b bool) Value {
	if b {
		return Value{K: VBool, I: 1}
	}
	return Value{K: VBool}
}

// Int makes an integer of any integer type.
func Int(i int64) Value { return Value{K: VInt, I: i} }

// Float makes a DOUBLE or FLOAT.
func Float(f float64) Value { return Value{K: VFloat, F: f} }

// Str makes a STRING.
func Str(s string) Value { return Value{K: VStr, S: s} }

// Bytes makes BYTES.
func Bytes(b []byte) Value { return Value{K: VBytes, S: string(b)} }

// Dec makes a DECIMAL of unscaled value u and scale s.
func Dec(u int64, s int) Value { return Value{K: VDec, I: u, N: int32(s)} }

// TimeOf makes a TIMESTAMP (sec since the epoch, nanoseconds).
func TimeOf(sec int64, nsec int32) Value { return Value{K: VTime, I: sec, N: nsec} }

// RowOf makes a ROW of the field values.
func RowOf(vals ...Value) Value { return Value{K: VRow, P: &Nested{Vals: vals}} }

// ArrayOf makes an ARRAY.
func ArrayOf(vals ...Value) Value { return Value{K: VArray, P: &Nested{Vals: vals}} }

// True tells whether v is TRUE (not FALSE, not NULL).
func (v Value) True() bool { return v.K == VBool && v.I != 0 }
