package eval

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/onceflow/onceflow/internal/civil"
	"github.com/onceflow/onceflow/internal/sql/ast"
	"github.com/onceflow/onceflow/internal/sql/types"
	"github.com/onceflow/onceflow/internal/suggest"
)

// The scalar functions, by Flink's names in upper case.

// maxResult bounds the strings LPAD, RPAD and REPEAT make, so that one
// record cannot make the job allocate without limit.
const maxResult = 1 << 26

type builder func(c *compiler, n *ast.Call, args []*Expr) (*Expr, error)

// refused are functions a job may not use, with the reason.
var refused = map[string]string{
	"UUID":         "UUID() is not deterministic: a replay after a crash would write different values; exactly-once output depends on replays writing what the first run wrote, so derive an id from the record instead, such as md5(concat(...)) of its fields",
	"RAND":         "RAND() is not deterministic: a replay after a crash would write different values; exactly-once output depends on replays writing what the first run wrote, so derive a number from the record instead (a hash of its fields)",
	"RAND_INTEGER": "RAND_INTEGER() is not deterministic: a replay after a crash would write different values; exactly-once output depends on replays writing what the first run wrote, so derive a number from the record instead (a hash of its fields)",
}

// niladic are the functions written without parentheses.
var niladic = map[string]func(ast.Pos) *Expr{
	"CURRENT_TIMESTAMP": func(p ast.Pos) *Expr { return nowExpr(types.TimestampLTZT(3), p) },
	"LOCALTIMESTAMP":    func(p ast.Pos) *Expr { return nowExpr(types.TimestampT(3), p) },
	"CURRENT_DATE": func(p ast.Pos) *Expr {
		return &Expr{Type: types.DateT, Pos: p, Fn: func(ctx *Ctx) Value {
			return Value{K: VTime, I: floorDiv(ctx.Now().Unix(), secondsPerDay)}
		}}
	},
	"CURRENT_TIME": func(p ast.Pos) *Expr {
		return &Expr{Type: &types.Type{Kind: types.Time}, Pos: p, Fn: func(ctx *Ctx) Value {
			_, sod := splitSec(ctx.Now().Unix())
			return Value{K: VTime, I: sod}
		}}
	},
}

// nowExpr is the record's processing time, in milliseconds. It is never
// folded: a replay evaluates it again, at the time of the replay.
func nowExpr(t *types.Type, p ast.Pos) *Expr {
	return &Expr{Type: t, Pos: p, Fn: func(ctx *Ctx) Value {
		n := ctx.Now()
		return TimeOf(n.Unix(), int32(n.Nanosecond()/1e6*1e6))
	}}
}

// function is a scalar function of the registry: how a call is
// compiled, and what docs/sql.md says of it (generated from here).
type function struct {
	build builder
	// sig is the call as written, with its argument and result types.
	sig string
	// doc says what it does, in one sentence.
	doc string
}

var funcs map[string]function

func init() {
	funcs = map[string]function{
		"MD5":       {hashFn(func(s string) string { h := md5.Sum([]byte(s)); return hex.EncodeToString(h[:]) }), "MD5(s STRING|BYTES) → STRING", "The MD5 digest of s as 32 lower-case hex digits."},
		"SHA1":      {hashFn(func(s string) string { h := sha1.Sum([]byte(s)); return hex.EncodeToString(h[:]) }), "SHA1(s STRING|BYTES) → STRING", "The SHA-1 digest of s as 40 lower-case hex digits."},
		"SHA256":    {hashFn(func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }), "SHA256(s STRING|BYTES) → STRING", "The SHA-256 digest of s as 64 lower-case hex digits."},
		"CONCAT":    {concat, "CONCAT(s1 STRING, s2 STRING, …) → STRING", "The strings joined; NULL if any is NULL (CAST(x AS STRING) converts other types)."},
		"CONCAT_WS": {concatWS, "CONCAT_WS(sep STRING, s1 STRING, …) → STRING", "The strings joined by sep, skipping NULL ones; NULL only if sep is."},
		"UPPER":     {strFn(strings.ToUpper), "UPPER(s STRING) → STRING", "s in upper case."},
		"LOWER":     {strFn(strings.ToLower), "LOWER(s STRING) → STRING", "s in lower case."},
		"INITCAP":   {strFn(initcap), "INITCAP(s STRING) → STRING", "s in lower case with the first letter of each word in upper case."},
		"REVERSE": {strFn(func(s string) string {
			r := []rune(s)
			for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
				r[i], r[j] = r[j], r[i]
			}
			return string(r)
		}), "REVERSE(s STRING) → STRING", "The characters of s in reverse order."},
		"TRIM":                  {trimFn(func(s, cut string) string { return strings.Trim(s, cut) }), "TRIM([BOTH|LEADING|TRAILING] [chars] FROM s) → STRING, TRIM(s)", "s without the given characters (spaces by default) at both ends, the start or the end."},
		"LTRIM":                 {trimFn(func(s, cut string) string { return strings.TrimLeft(s, cut) }), "LTRIM(s STRING[, chars STRING]) → STRING", "s without the given characters (spaces by default) at its start."},
		"RTRIM":                 {trimFn(func(s, cut string) string { return strings.TrimRight(s, cut) }), "RTRIM(s STRING[, chars STRING]) → STRING", "s without the given characters (spaces by default) at its end."},
		"CHAR_LENGTH":           {charLength, "CHAR_LENGTH(s STRING) → INT", "The number of characters (not bytes) of s."},
		"CHARACTER_LENGTH":      {charLength, "CHARACTER_LENGTH(s STRING) → INT", "The same as CHAR_LENGTH."},
		"SUBSTRING":             {substring, "SUBSTRING(s STRING, start INT[, length INT]) → STRING, SUBSTRING(s FROM start [FOR length])", "The characters of s from start (the first is 1; a negative start counts from the end), length of them or all the rest."},
		"SUBSTR":                {substring, "SUBSTR(s STRING, start INT[, length INT]) → STRING", "The same as SUBSTRING."},
		"REPLACE":               {replace, "REPLACE(s STRING, from STRING, to STRING) → STRING", "s with every occurrence of from replaced by to."},
		"REGEXP_EXTRACT":        {regexpExtract, "REGEXP_EXTRACT(s STRING, regex STRING[, group INT]) → STRING", "The text of the group (1 by default; 0 the whole match) of regex's first match in s; NULL without a match."},
		"REGEXP_REPLACE":        {regexpReplace, "REGEXP_REPLACE(s STRING, regex STRING, replacement STRING) → STRING", "s with every match of regex replaced ($1 names a group in the replacement)."},
		"REGEXP":                {regexpMatch, "REGEXP(s STRING, regex STRING) → BOOLEAN", "Whether regex matches a part of s."},
		"SPLIT_INDEX":           {splitIndex, "SPLIT_INDEX(s STRING, sep STRING, index INT) → STRING", "The index-th (from 0) part of s split at sep; NULL when there is no such part."},
		"POSITION":              {position, "POSITION(needle IN s) → INT", "Where needle first occurs in s, from 1; 0 when it does not."},
		"LOCATE":                {locate, "LOCATE(needle STRING, s STRING[, from INT]) → INT", "Where needle first occurs in s at or after character from (1 by default), from 1; 0 when it does not."},
		"LPAD":                  {padFn(true), "LPAD(s STRING, length INT, pad STRING) → STRING", "s padded on the left with pad, or cut, to length characters."},
		"RPAD":                  {padFn(false), "RPAD(s STRING, length INT, pad STRING) → STRING", "s padded on the right with pad, or cut, to length characters."},
		"LEFT":                  {leftRight(true), "LEFT(s STRING, n INT) → STRING", "The first n characters of s."},
		"RIGHT":                 {leftRight(false), "RIGHT(s STRING, n INT) → STRING", "The last n characters of s."},
		"REPEAT":                {repeat, "REPEAT(s STRING, n INT) → STRING", "s repeated n times."},
		"DATE_FORMAT":           {dateFormat, "DATE_FORMAT(ts TIMESTAMP|DATE|STRING, format STRING) → STRING", "ts written with a Java-style date pattern such as 'yyyy-MM-dd HH:mm:ss'."},
		"TO_TIMESTAMP":          {toTimestamp, "TO_TIMESTAMP(s STRING[, format STRING]) → TIMESTAMP(3)", "s read as a timestamp (without format: 'yyyy-MM-dd[ HH:mm[:ss[.SSS]]]', an offset such as Z or +02:00 applied); NULL when it cannot be read."},
		"TO_TIMESTAMP_LTZ":      {toTimestampLTZ, "TO_TIMESTAMP_LTZ(n NUMERIC[, precision 0|3]) → TIMESTAMP_LTZ(3)", "The instant n seconds (precision 0) or milliseconds (3, the default) after the epoch."},
		"UNIX_TIMESTAMP":        {unixTimestamp, "UNIX_TIMESTAMP([s STRING[, format STRING]]) → BIGINT", "s read with format ('yyyy-MM-dd HH:mm:ss' by default) as seconds since the epoch; without arguments, the current time."},
		"FROM_UNIXTIME":         {fromUnixtime, "FROM_UNIXTIME(seconds BIGINT[, format STRING]) → STRING", "seconds since the epoch written with format ('yyyy-MM-dd HH:mm:ss' by default), in UTC."},
		"YEAR":                  {partFn("YEAR"), "YEAR(ts TIMESTAMP|DATE) → BIGINT", "The year of ts."},
		"QUARTER":               {partFn("QUARTER"), "QUARTER(ts TIMESTAMP|DATE) → BIGINT", "The quarter of ts, 1 to 4."},
		"MONTH":                 {partFn("MONTH"), "MONTH(ts TIMESTAMP|DATE) → BIGINT", "The month of ts, 1 to 12."},
		"WEEK":                  {partFn("WEEK"), "WEEK(ts TIMESTAMP|DATE) → BIGINT", "The ISO week of the year of ts, 1 to 53."},
		"DAYOFYEAR":             {partFn("DOY"), "DAYOFYEAR(ts TIMESTAMP|DATE) → BIGINT", "The day of the year of ts, 1 to 366."},
		"DAYOFMONTH":            {partFn("DAY"), "DAYOFMONTH(ts TIMESTAMP|DATE) → BIGINT", "The day of the month of ts, 1 to 31."},
		"DAYOFWEEK":             {partFn("DOW"), "DAYOFWEEK(ts TIMESTAMP|DATE) → BIGINT", "The day of the week of ts, 1 (Sunday) to 7."},
		"HOUR":                  {partFn("HOUR"), "HOUR(ts TIMESTAMP) → BIGINT", "The hour of ts, 0 to 23."},
		"MINUTE":                {partFn("MINUTE"), "MINUTE(ts TIMESTAMP) → BIGINT", "The minute of ts, 0 to 59."},
		"SECOND":                {partFn("SECOND"), "SECOND(ts TIMESTAMP) → BIGINT", "The second of ts, 0 to 59."},
		"EXTRACT":               {extract, "EXTRACT(unit FROM ts) → BIGINT", "A part of ts: YEAR, QUARTER, MONTH, WEEK, DAY, HOUR, MINUTE, SECOND, MILLISECOND, DOW, DOY or EPOCH."},
		"PROCTIME":              {nowFn(types.TimestampLTZT(3)), "PROCTIME() → TIMESTAMP_LTZ(3)", "The time the record is processed (a replay after a crash sees a later one)."},
		"NOW":                   {nowFn(types.TimestampLTZT(3)), "NOW() → TIMESTAMP_LTZ(3)", "The time the record is processed, as PROCTIME()."},
		"CURRENT_ROW_TIMESTAMP": {nowFn(types.TimestampLTZT(3)), "CURRENT_ROW_TIMESTAMP() → TIMESTAMP_LTZ(3)", "The time the record is processed, as PROCTIME()."},
		"CURRENT_TIMESTAMP":     {nowFn(types.TimestampLTZT(3)), "CURRENT_TIMESTAMP → TIMESTAMP_LTZ(3)", "The time the record is processed, as PROCTIME()."},
		"LOCALTIMESTAMP":        {nowFn(types.TimestampT(3)), "LOCALTIMESTAMP → TIMESTAMP(3)", "The time the record is processed, as a TIMESTAMP in UTC."},
		"CURRENT_DATE":          {niladicFn("CURRENT_DATE"), "CURRENT_DATE → DATE", "The date (UTC) the record is processed."},
		"CURRENT_TIME":          {niladicFn("CURRENT_TIME"), "CURRENT_TIME → TIME", "The time of day (UTC) the record is processed."},
		"LOCALTIME":             {niladicFn("CURRENT_TIME"), "LOCALTIME → TIME", "The same as CURRENT_TIME."},
		"JSON_VALUE":            {jsonValue, "JSON_VALUE(json STRING, path STRING) → STRING", "The value at a constant path such as '$.a.b[0]' of the JSON text, a string unquoted and anything else as its JSON text; NULL when absent or null."},
		"COALESCE":              {coalesce, "COALESCE(x1, x2, …) → common type", "The first argument that is not NULL."},
		"IFNULL":                {coalesce, "IFNULL(x, y) → common type", "x, or y when x is NULL."},
		"IF":                    {ifFn, "IF(cond BOOLEAN, a, b) → common type", "a when cond is TRUE, else b (also when cond is NULL)."},
		"NULLIF":                {nullif, "NULLIF(a, b) → type of a", "NULL when a = b, else a."},
		"MOD":                   {func(c *compiler, n *ast.Call, a []*Expr) (*Expr, error) { return binFn(n, a, "%") }, "MOD(a NUMERIC, b NUMERIC) → NUMERIC", "The remainder of a divided by b (the % operator)."},
		"ABS":                   {abs, "ABS(x NUMERIC) → type of x", "The absolute value of x."},
		"POWER":                 {mathFn2(math.Pow), "POWER(x NUMERIC, y NUMERIC) → DOUBLE", "x to the power y."},
		"SQRT":                  {mathFn1(math.Sqrt), "SQRT(x NUMERIC) → DOUBLE", "The square root of x."},
		"LN":                    {mathFn1(math.Log), "LN(x NUMERIC) → DOUBLE", "The natural logarithm of x."},
		"LOG10":                 {mathFn1(math.Log10), "LOG10(x NUMERIC) → DOUBLE", "The base-10 logarithm of x."},
		"EXP":                   {mathFn1(math.Exp), "EXP(x NUMERIC) → DOUBLE", "e to the power x."},
		"ROUND":                 {round, "ROUND(x NUMERIC[, d INT]) → type of x", "x rounded half away from zero to d decimal places (0 by default); a DECIMAL's scale becomes d."},
		"FLOOR":                 {floorCeil(true), "FLOOR(x NUMERIC) → type of x, FLOOR(ts TO unit) → TIMESTAMP", "The largest whole number not above x; a timestamp rounded down to a unit (SECOND to YEAR)."},
		"CEIL":                  {floorCeil(false), "CEIL(x NUMERIC) → type of x, CEIL(ts TO unit) → TIMESTAMP", "The smallest whole number not below x; a timestamp rounded up to a unit (SECOND to YEAR)."},
		"CEILING":               {floorCeil(false), "CEILING(x NUMERIC) → type of x", "The same as CEIL."},
		"ARRAY":                 {arrayCtor, "ARRAY[x1, x2, …] → ARRAY<common type>", "An array of the values."},
		"MAP":                   {mapCtor, "MAP[k1, v1, k2, v2, …] → MAP<K, V>", "A map of the keys to the values."},
		"CARDINALITY":           {cardinality, "CARDINALITY(a ARRAY|MAP) → INT", "The number of elements of an array or entries of a map."},
		"GREATEST":              {extreme(1), "GREATEST(x1, x2, …) → common type", "The greatest argument; NULL if any is NULL."},
		"LEAST":                 {extreme(-1), "LEAST(x1, x2, …) → common type", "The least argument; NULL if any is NULL."},
	}
}

// FuncDoc is a built-in scalar function as docs/sql.md lists it.
type FuncDoc struct {
	// Name is the function's name in upper case.
	Name string
	// Signature is the call as written, with its types.
	Signature string
	// Doc says what it does, in one sentence.
	Doc string
}

// Functions lists the built-in scalar functions by name.
func Functions() []FuncDoc {
	out := make([]FuncDoc, 0, len(funcs))
	for name, f := range funcs {
		out = append(out, FuncDoc{Name: name, Signature: f.sig, Doc: f.doc})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Refused lists the functions of Flink a script may not call, with the
// reason, by name.
func Refused() []FuncDoc {
	out := make([]FuncDoc, 0, len(refused))
	for name, why := range refused {
		out = append(out, FuncDoc{Name: name, Doc: why})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func funcNames() []string {
	names := make([]string, 0, len(funcs))
	for k := range funcs {
		names = append(names, strings.ToLower(k))
	}
	sort.Strings(names)
	return names
}

func (c *compiler) call(n *ast.Call) (*Expr, error) {
	name := strings.ToUpper(n.Name.Last())
	if len(n.Name.Parts) > 1 {
		return nil, errorf(n.At, "unknown function %s: catalog functions are not supported", n.Name.String())
	}
	if n.Over != nil {
		return nil, errorf(n.At, "%s(...) OVER (...) is a window aggregate, not a scalar function", n.Name.Last())
	}
	if why, ok := refused[name]; ok {
		return nil, errorf(n.At, "%s", why)
	}
	f, ok := funcs[name]
	if !ok {
		switch name {
		case "COUNT", "SUM", "MIN", "MAX", "AVG", "FIRST_VALUE", "LAST_VALUE", "LISTAGG", "COLLECT":
			return nil, errorf(n.At, "%s is an aggregate function: it needs GROUP BY or a window, not a projection", name)
		}
		return nil, errorf(n.At, "unknown function %s%s", n.Name.Last(), suggest.Suggest(strings.ToLower(n.Name.Last()), funcNames()))
	}
	if n.Distinct || n.Star || n.Filter != nil {
		return nil, errorf(n.At, "%s is a scalar function: DISTINCT, * and FILTER do not apply", name)
	}
	// EXTRACT(unit FROM x), FLOOR(x TO unit) name a unit: leave it as
	// written for the builder.
	args := make([]*Expr, len(n.Args))
	for i, a := range n.Args {
		if unit, ok := unitArg(a); ok && (name == "EXTRACT" && i == 0 || (name == "FLOOR" || name == "CEIL") && i == 1) {
			args[i] = constant(types.StringT, Str(unit), a.Position())
			continue
		}
		x, err := c.expr(a)
		if err != nil {
			return nil, err
		}
		args[i] = x
	}
	return f.build(c, n, args)
}

// unitArg reads a time unit written as a bare word (EXTRACT(YEAR FROM x)).
func unitArg(e ast.Expr) (string, bool) {
	if r, ok := e.(*ast.ColumnRef); ok && len(r.Name.Parts) == 1 {
		u := strings.ToUpper(r.Name.Parts[0].Name)
		switch u {
		case "YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "HOUR", "MINUTE", "SECOND", "MILLISECOND", "DOW", "DOY", "EPOCH":
			return u, true
		}
	}
	return "", false
}

func argCount(n *ast.Call, args []*Expr, lo, hi int) error {
	if len(args) >= lo && len(args) <= hi {
		return nil
	}
	want := strconv.Itoa(lo)
	switch {
	case hi > 100:
		want = "at least " + want
	case hi != lo:
		want += " to " + strconv.Itoa(hi)
	}
	return errorf(n.At, "%s takes %s arguments, not %d", strings.ToUpper(n.Name.Last()), want, len(args))
}

// wantArg checks that args[i] is of a type ok accepts.
func wantArg(n *ast.Call, args []*Expr, i int, what string, ok func(*types.Type) bool) error {
	if t := args[i].Type; t.Kind != types.Null && !ok(t) {
		return errorf(args[i].Pos, "%s: argument %d must be %s, not %s", strings.ToUpper(n.Name.Last()), i+1, what, t)
	}
	return nil
}

// stringArgs checks that the call has lo to hi arguments, all STRING.
func stringArgs(n *ast.Call, args []*Expr, lo, hi int) error {
	if err := argCount(n, args, lo, hi); err != nil {
		return err
	}
	for i := range args {
		if err := wantArg(n, args, i, "a STRING", isStr); err != nil {
			return err
		}
	}
	return nil
}

func isStr(t *types.Type) bool    { return t.Kind == types.String }
func isInt(t *types.Type) bool    { return t.IsInteger() }
func isNum(t *types.Type) bool    { return t.IsNumeric() }
func isTime(t *types.Type) bool   { return t.IsTimestamp() || t.Kind == types.Date }
func isStrTS(t *types.Type) bool  { return t.Kind == types.String || t.IsTimestamp() }
func isStrOrB(t *types.Type) bool { return t.Kind == types.String || t.Kind == types.Bytes }

// strict makes a function of args that is NULL when any of them is, and
// folds it when they are constants.
func strict(n *ast.Call, t *types.Type, args []*Expr, f func(ctx *Ctx, v []Value) Value) (*Expr, error) {
	fns := make([]Fn, len(args))
	for i, a := range args {
		fns[i] = a.Fn
	}
	var e *Expr
	switch len(args) {
	case 1:
		a := fns[0]
		e = &Expr{Type: t, Pos: n.At, Fn: func(ctx *Ctx) Value {
			var v [1]Value
			if v[0] = a(ctx); v[0].K == VNull {
				return Null
			}
			return f(ctx, v[:])
		}}
	case 2:
		a, b := fns[0], fns[1]
		e = &Expr{Type: t, Pos: n.At, Fn: func(ctx *Ctx) Value {
			var v [2]Value
			if v[0] = a(ctx); v[0].K == VNull {
				return Null
			}
			if v[1] = b(ctx); v[1].K == VNull {
				return Null
			}
			return f(ctx, v[:])
		}}
	case 3:
		a, b, d := fns[0], fns[1], fns[2]
		e = &Expr{Type: t, Pos: n.At, Fn: func(ctx *Ctx) Value {
			var v [3]Value
			if v[0] = a(ctx); v[0].K == VNull {
				return Null
			}
			if v[1] = b(ctx); v[1].K == VNull {
				return Null
			}
			if v[2] = d(ctx); v[2].K == VNull {
				return Null
			}
			return f(ctx, v[:])
		}}
	default:
		e = &Expr{Type: t, Pos: n.At, Fn: func(ctx *Ctx) Value {
			v := make([]Value, len(fns))
			for i, a := range fns {
				if v[i] = a(ctx); v[i].K == VNull {
					return Null
				}
			}
			return f(ctx, v)
		}}
	}
	return fold(e, args...)
}

func hashFn(h func(string) string) builder {
	return func(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
		if err := argCount(n, args, 1, 1); err != nil {
			return nil, err
		}
		if err := wantArg(n, args, 0, "a STRING or BYTES", isStrOrB); err != nil {
			return nil, err
		}
		return strict(n, types.StringT, args, func(_ *Ctx, v []Value) Value { return Str(h(v[0].S)) })
	}
}

func strFn(f func(string) string) builder {
	return func(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
		if err := argCount(n, args, 1, 1); err != nil {
			return nil, err
		}
		if err := wantArg(n, args, 0, "a STRING", isStr); err != nil {
			return nil, err
		}
		return strict(n, types.StringT, args, func(_ *Ctx, v []Value) Value { return Str(f(v[0].S)) })
	}
}

func initcap(s string) string {
	b := []rune(strings.ToLower(s))
	start := true
	for i, r := range b {
		if start && unicode.IsLetter(r) {
			b[i] = unicode.ToUpper(r)
		}
		start = !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}
	return string(b)
}

// trimFn is TRIM(s), and TRIM([BOTH|LEADING|TRAILING] chars FROM s) as
// the parser gives it: TRIM('BOTH', chars, s). LTRIM and RTRIM take (s)
// or (s, chars).
func trimFn(f func(s, cut string) string) builder {
	return func(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
		if err := argCount(n, args, 1, 3); err != nil {
			return nil, err
		}
		for i := range args {
			if err := wantArg(n, args, i, "a STRING", isStr); err != nil {
				return nil, err
			}
		}
		if len(args) == 3 {
			if !args[0].Const {
				return nil, errorf(args[0].Pos, "TRIM: expected BOTH, LEADING or TRAILING")
			}
			switch strings.ToUpper(args[0].Val.S) {
			case "LEADING":
				f = strings.TrimLeft
			case "TRAILING":
				f = strings.TrimRight
			case "BOTH":
				f = strings.Trim
			default:
				return nil, errorf(args[0].Pos, "TRIM: expected BOTH, LEADING or TRAILING")
			}
			args = []*Expr{args[2], args[1]}
		}
		return strict(n, types.StringT, args, func(_ *Ctx, v []Value) Value {
			cut := " "
			if len(v) > 1 {
				cut = v[1].S
			}
			return Str(f(v[0].S, cut))
		})
	}
}

func concat(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
	if err := argCount(n, args, 1, 1<<30); err != nil {
		return nil, err
	}
	for i := range args {
		if err := wantArg(n, args, i, "a STRING (CAST(x AS STRING) converts)", isStr); err != nil {
			return nil, err
		}
	}
	fns := make([]Fn, len(args))
	for i, a := range args {
		fns[i] = a.Fn
	}
	return fold(&Expr{Type: types.StringT, Pos: n.At, Fn: func(ctx *Ctx) Value {
		var parts [8]string
		ps := parts[:0]
		size := 0
		for _, f := range fns {
			v := f(ctx)
			if v.K == VNull {
				return Null
			}
			ps = append(ps, v.S)
			size += len(v.S)
		}
		var b strings.Builder
		b.Grow(size)
		for _, p := range ps {
			b.WriteString(p)
		}
		return Str(b.String())
	}}, args...)
}

func concatWS(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
	if err := argCount(n, args, 2, 1<<30); err != nil {
		return nil, err
	}
	for i := range args {
		if err := wantArg(n, args, i, "a STRING (CAST(x AS STRING) converts)", isStr); err != nil {
			return nil, err
		}
	}
	return fold(&Expr{Type: types.StringT, Pos: n.At, Fn: func(ctx *Ctx) Value {
		sep := args[0].Fn(ctx)
		if sep.K == VNull {
			return Null
		}
		var b strings.Builder
		first := true
		for _, a := range args[1:] {
			v := a.Fn(ctx)
			if v.K == VNull {
				continue
			}
			if !first {
				b.WriteString(sep.S)
			}
			first = false
			b.WriteString(v.S)
		}
		return Str(b.String())
	}}, args...)
}

func charLength(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
	if err := argCount(n, args, 1, 1); err != nil {
		return nil, err
	}
	if err := wantArg(n, args, 0, "a STRING", isStr); err != nil {
		return nil, err
	}
	return strict(n, types.IntT, args, func(_ *Ctx, v []Value) Value { return Int(int64(utf8.RuneCountInString(v[0].S))) })
}

// substring is SUBSTRING(s, start[, length]): start from 1; 0 is the
// first character too; a negative start counts from the end.
func substring(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
	if err := argCount(n, args, 2, 3); err != nil {
		return nil, err
	}
	if err := wantArg(n, args, 0, "a STRING", isStr); err != nil {
		return nil, err
	}
	for i := 1; i < len(args); i++ {
		if err := wantArg(n, args, i, "an integer", isInt); err != nil {
			return nil, err
		}
	}
	return strict(n, types.StringT, args, func(_ *Ctx, v []Value) Value {
		s := v[0].S
		r := []rune(s)
		start := v[1].I
		switch {
		case start > 0:
			start--
		case start < 0:
			start += int64(len(r))
			if start < 0 {
				start = 0
			}
		}
		end := int64(len(r))
		if len(v) > 2 {
			if v[2].I < 0 {
				return Null
			}
			end = min(end, start+v[2].I)
		}
		if start >= int64(len(r)) || end <= start {
			return Str("")
		}
		return Str(string(r[start:end]))
	})
}

func replace(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
	if err := stringArgs(n, args, 3, 3); err != nil {
		return nil, err
	}
	return strict(n, types.StringT, args, func(_ *Ctx, v []Value) Value { return Str(strings.ReplaceAll(v[0].S, v[1].S, v[2].S)) })
}

// regexOf compiles a constant pattern once, or each call otherwise.
func regexOf(n *ast.Call, pat *Expr) (func(ctx *Ctx, v Value) *regexp.Regexp, error) {
	if pat.Const && pat.Val.K != VNull {
		re, err := regexp.Compile(pat.Val.S)
		if err != nil {
			return nil, errorf(pat.Pos, "%s: bad regular expression %q: %v", strings.ToUpper(n.Name.Last()), pat.Val.S, err)
		}
		return func(*Ctx, Value) *regexp.Regexp { return re }, nil
	}
	return func(ctx *Ctx, v Value) *regexp.Regexp {
		re, err := regexp.Compile(v.S)
		if err != nil {
			ctx.Fail(fmt.Errorf("bad regular expression %q: %v", v.S, err))
		}
		return re
	}, nil
}

func regexpExtract(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
	if err := argCount(n, args, 2, 3); err != nil {
		return nil, err
	}
	if err := wantArg(n, args, 0, "a STRING", isStr); err != nil {
		return nil, err
	}
	if err := wantArg(n, args, 1, "a STRING", isStr); err != nil {
		return nil, err
	}
	if len(args) > 2 {
		if err := wantArg(n, args, 2, "an integer", isInt); err != nil {
			return nil, err
		}
	}
	re, err := regexOf(n, args[1])
	if err != nil {
		return nil, err
	}
	return strict(n, types.StringT, args, func(ctx *Ctx, v []Value) Value {
		r := re(ctx, v[1])
		if r == nil {
			return Null
		}
		group := int64(1)
		if len(v) > 2 {
			group = v[2].I
		}
		m := r.FindStringSubmatchIndex(v[0].S)
		if m == nil || group < 0 || int(group) > r.NumSubexp() || m[2*group] < 0 {
			return Null
		}
		return Str(v[0].S[m[2*group]:m[2*group+1]])
	})
}

func regexpReplace(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
	if err := stringArgs(n, args, 3, 3); err != nil {
		return nil, err
	}
	re, err := regexOf(n, args[1])
	if err != nil {
		return nil, err
	}
	return strict(n, types.StringT, args, func(ctx *Ctx, v []Value) Value {
		r := re(ctx, v[1])
		if r == nil {
			return Null
		}
		return Str(r.ReplaceAllString(v[0].S, v[2].S))
	})
}

func regexpMatch(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
	if err := stringArgs(n, args, 2, 2); err != nil {
		return nil, err
	}
	re, err := regexOf(n, args[1])
	if err != nil {
		return nil, err
	}
	return strict(n, types.BooleanT, args, func(ctx *Ctx, v []Value) Value {
		r := re(ctx, v[1])
		if r == nil {
			return Null
		}
		return Bool(r.MatchString(v[0].S))
	})
}

func splitIndex(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
	if err := argCount(n, args, 3, 3); err != nil {
		return nil, err
	}
	if err := wantArg(n, args, 0, "a STRING", isStr); err != nil {
		return nil, err
	}
	if err := wantArg(n, args, 1, "a STRING", isStr); err != nil {
		return nil, err
	}
	if err := wantArg(n, args, 2, "an integer", isInt); err != nil {
		return nil, err
	}
	return strict(n, types.StringT, args, func(_ *Ctx, v []Value) Value {
		if v[2].I < 0 || v[1].S == "" {
			return Null
		}
		s, sep := v[0].S, v[1].S
		for i := int64(0); ; i++ {
			j := strings.Index(s, sep)
			if i == v[2].I {
				if j < 0 {
					return Str(s)
				}
				return Str(s[:j])
			}
			if j < 0 {
				return Null
			}
			s = s[j+len(sep):]
		}
	})
}

// position is POSITION(needle IN s): from 1, 0 when absent.
func position(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
	if err := stringArgs(n, args, 2, 2); err != nil {
		return nil, err
	}
	return strict(n, types.IntT, args, func(_ *Ctx, v []Value) Value {
		i := strings.Index(v[1].S, v[0].S)
		if i < 0 {
			return Int(0)
		}
		return Int(int64(utf8.RuneCountInString(v[1].S[:i])) + 1)
	})
}

// locate is LOCATE(needle, s[, from]).
func locate(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
	if err := argCount(n, args, 2, 3); err != nil {
		return nil, err
	}
	if len(args) == 2 {
		return position(c, n, args)
	}
	if err := wantArg(n, args, 2, "an integer", isInt); err != nil {
		return nil, err
	}
	return strict(n, types.IntT, args, func(_ *Ctx, v []Value) Value {
		r := []rune(v[1].S)
		from := max(v[2].I-1, 0)
		if from > int64(len(r)) {
			return Int(0)
		}
		i := strings.Index(string(r[from:]), v[0].S)
		if i < 0 {
			return Int(0)
		}
		return Int(from + int64(utf8.RuneCountInString(string(r[from:])[:i])) + 1)
	})
}

func padFn(left bool) builder {
	return func(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
		if err := argCount(n, args, 3, 3); err != nil {
			return nil, err
		}
		if err := wantArg(n, args, 0, "a STRING", isStr); err != nil {
			return nil, err
		}
		if err := wantArg(n, args, 1, "an integer", isInt); err != nil {
			return nil, err
		}
		if err := wantArg(n, args, 2, "a STRING", isStr); err != nil {
			return nil, err
		}
		return strict(n, types.StringT, args, func(ctx *Ctx, v []Value) Value {
			r, l, pad := []rune(v[0].S), v[1].I, []rune(v[2].S)
			if l < 0 {
				return Null
			}
			if l > maxResult {
				ctx.Fail(fmt.Errorf("%s: a length of %d is over the limit of %d characters", strings.ToUpper(n.Name.Last()), l, maxResult))
				return Null
			}
			if int64(len(r)) >= l {
				return Str(string(r[:l]))
			}
			if len(pad) == 0 {
				return Null
			}
			fill := make([]rune, 0, l-int64(len(r)))
			for i := 0; int64(len(fill)) < l-int64(len(r)); i++ {
				fill = append(fill, pad[i%len(pad)])
			}
			if left {
				return Str(string(fill) + string(r))
			}
			return Str(string(r) + string(fill))
		})
	}
}

func leftRight(left bool) builder {
	return func(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
		if err := argCount(n, args, 2, 2); err != nil {
			return nil, err
		}
		if err := wantArg(n, args, 0, "a STRING", isStr); err != nil {
			return nil, err
		}
		if err := wantArg(n, args, 1, "an integer", isInt); err != nil {
			return nil, err
		}
		return strict(n, types.StringT, args, func(_ *Ctx, v []Value) Value {
			r, k := []rune(v[0].S), v[1].I
			if k <= 0 {
				return Str("")
			}
			if k >= int64(len(r)) {
				return v[0]
			}
			if left {
				return Str(string(r[:k]))
			}
			return Str(string(r[int64(len(r))-k:]))
		})
	}
}

func repeat(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
	if err := argCount(n, args, 2, 2); err != nil {
		return nil, err
	}
	if err := wantArg(n, args, 0, "a STRING", isStr); err != nil {
		return nil, err
	}
	if err := wantArg(n, args, 1, "an integer", isInt); err != nil {
		return nil, err
	}
	return strict(n, types.StringT, args, func(ctx *Ctx, v []Value) Value {
		if v[1].I <= 0 {
			return Str("")
		}
		if v[1].I > maxResult || int64(len(v[0].S))*v[1].I > maxResult {
			ctx.Fail(fmt.Errorf("REPEAT: the result would be over %d bytes", maxResult))
			return Null
		}
		return Str(strings.Repeat(v[0].S, int(v[1].I)))
	})
}

// patternOf compiles a constant date pattern once.
func patternOf(arg *Expr, def string) (func(ctx *Ctx, v []Value, i int) *datePattern, error) {
	if arg == nil {
		dp, _ := compilePattern(def)
		return func(*Ctx, []Value, int) *datePattern { return dp }, nil
	}
	if arg.Const && arg.Val.K != VNull {
		dp, err := compilePattern(arg.Val.S)
		if err != nil {
			return nil, &Error{arg.Pos, err.Error()}
		}
		return func(*Ctx, []Value, int) *datePattern { return dp }, nil
	}
	return func(ctx *Ctx, v []Value, i int) *datePattern {
		dp, err := compilePattern(v[i].S)
		if err != nil {
			ctx.Fail(err)
		}
		return dp
	}, nil
}

// toTime returns the conversion of a timestamp or a STRING (read as a
// timestamp) to a timestamp value; ok false for an unreadable string.
func toTime(t *types.Type) func(v Value) (Value, bool) {
	switch t.Kind {
	case types.String:
		return func(v Value) (Value, bool) {
			sec, ns, ok := parseTimestamp(v.S)
			return TimeOf(sec, ns), ok
		}
	case types.Date:
		return func(v Value) (Value, bool) { return TimeOf(v.I*secondsPerDay, 0), true }
	}
	return func(v Value) (Value, bool) { return v, true }
}

func dateFormat(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
	if err := argCount(n, args, 2, 2); err != nil {
		return nil, err
	}
	if err := wantArg(n, args, 0, "a TIMESTAMP or STRING", func(t *types.Type) bool { return isStrTS(t) || t.Kind == types.Date }); err != nil {
		return nil, err
	}
	if err := wantArg(n, args, 1, "a STRING", isStr); err != nil {
		return nil, err
	}
	pat, err := patternOf(args[1], "")
	if err != nil {
		return nil, err
	}
	conv := toTime(args[0].Type)
	return strict(n, types.StringT, args, func(ctx *Ctx, v []Value) Value {
		ts, ok := conv(v[0])
		dp := pat(ctx, v, 1)
		if !ok || dp == nil {
			return Null
		}
		return Str(string(dp.format(nil, ts.I, ts.N)))
	})
}

func toTimestamp(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
	if err := stringArgs(n, args, 1, 2); err != nil {
		return nil, err
	}
	if len(args) == 1 {
		return strict(n, types.TimestampT(3), args, func(_ *Ctx, v []Value) Value {
			sec, ns, ok := parseTimestamp(v[0].S)
			if !ok {
				return Null
			}
			return TimeOf(sec, truncNanos(ns, 3))
		})
	}
	pat, err := patternOf(args[1], "")
	if err != nil {
		return nil, err
	}
	return strict(n, types.TimestampT(3), args, func(ctx *Ctx, v []Value) Value {
		dp := pat(ctx, v, 1)
		if dp == nil {
			return Null
		}
		sec, ns, ok := dp.parse(v[0].S)
		if !ok {
			return Null
		}
		return TimeOf(sec, truncNanos(ns, 3))
	})
}

func toTimestampLTZ(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
	if err := argCount(n, args, 1, 2); err != nil {
		return nil, err
	}
	if err := wantArg(n, args, 0, "a number", isNum); err != nil {
		return nil, err
	}
	unit := int64(3)
	if len(args) == 2 {
		if !args[1].Const || !args[1].Type.IsInteger() || args[1].Val.I != 0 && args[1].Val.I != 3 {
			return nil, errorf(args[1].Pos, "TO_TIMESTAMP_LTZ: the precision must be 0 (epoch seconds) or 3 (epoch milliseconds)")
		}
		unit = args[1].Val.I
	}
	toF := floatOf(args[0].Type)
	isInt := args[0].Type.IsInteger()
	return strict(n, types.TimestampLTZT(3), args[:1], func(_ *Ctx, v []Value) Value {
		var ms int64
		switch {
		case isInt && unit == 3:
			ms = v[0].I
		case isInt:
			ms = v[0].I * 1000
		case unit == 3:
			ms = int64(math.Floor(toF(v[0])))
		default:
			ms = int64(math.Floor(toF(v[0]) * 1000))
		}
		return addMillis(TimeOf(0, 0), ms)
	})
}

func unixTimestamp(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
	if err := argCount(n, args, 0, 2); err != nil {
		return nil, err
	}
	if len(args) == 0 {
		return &Expr{Type: types.BigIntT, Pos: n.At, Fn: func(ctx *Ctx) Value { return Int(ctx.Now().Unix()) }}, nil
	}
	for i := range args {
		if err := wantArg(n, args, i, "a STRING", isStr); err != nil {
			return nil, err
		}
	}
	var pa *Expr
	if len(args) > 1 {
		pa = args[1]
	}
	pat, err := patternOf(pa, "yyyy-MM-dd HH:mm:ss")
	if err != nil {
		return nil, err
	}
	return strict(n, types.BigIntT, args, func(ctx *Ctx, v []Value) Value {
		dp := pat(ctx, v, 1)
		if dp == nil {
			return Null
		}
		sec, _, ok := dp.parse(v[0].S)
		if !ok {
			return Null
		}
		return Int(sec)
	})
}

func fromUnixtime(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
	if err := argCount(n, args, 1, 2); err != nil {
		return nil, err
	}
	if err := wantArg(n, args, 0, "an integer", isInt); err != nil {
		return nil, err
	}
	var pa *Expr
	if len(args) > 1 {
		if err := wantArg(n, args, 1, "a STRING", isStr); err != nil {
			return nil, err
		}
		pa = args[1]
	}
	pat, err := patternOf(pa, "yyyy-MM-dd HH:mm:ss")
	if err != nil {
		return nil, err
	}
	return strict(n, types.StringT, args, func(ctx *Ctx, v []Value) Value {
		dp := pat(ctx, v, 1)
		if dp == nil {
			return Null
		}
		return Str(string(dp.format(nil, v[0].I, 0)))
	})
}

// timePart extracts unit from a timestamp or date value.
func timePart(unit string, v Value, isDate bool) (int64, bool) {
	days, sod := v.I, int64(0)
	if !isDate {
		days, sod = splitSec(v.I)
	}
	y, m, d := civil.Date(days)
	switch unit {
	case "YEAR":
		return y, true
	case "QUARTER":
		return (m-1)/3 + 1, true
	case "MONTH":
		return m, true
	case "DAY":
		return d, true
	case "DOY":
		return days - civil.Days(y, 1, 1) + 1, true
	case "DOW": // Sunday 1 … Saturday 7
		return (days%7+11)%7 + 1, true
	case "WEEK": // ISO week
		_, w := time.Unix(days*secondsPerDay, 0).UTC().ISOWeek()
		return int64(w), true
	case "HOUR":
		return sod / 3600, true
	case "MINUTE":
		return sod / 60 % 60, true
	case "SECOND":
		return sod % 60, true
	case "MILLISECOND":
		return int64(v.N) / 1e6, true
	case "EPOCH":
		if isDate {
			return v.I * secondsPerDay, true
		}
		return v.I, true
	}
	return 0, false
}

func partFn(unit string) builder {
	return func(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
		if err := argCount(n, args, 1, 1); err != nil {
			return nil, err
		}
		if err := wantArg(n, args, 0, "a TIMESTAMP or DATE", isTime); err != nil {
			return nil, err
		}
		isDate := args[0].Type.Kind == types.Date
		if isDate && (unit == "HOUR" || unit == "MINUTE" || unit == "SECOND") {
			return nil, errorf(args[0].Pos, "%s of a DATE: a DATE has no time of day", unit)
		}
		return strict(n, types.BigIntT, args, func(_ *Ctx, v []Value) Value {
			p, _ := timePart(unit, v[0], isDate)
			return Int(p)
		})
	}
}

func extract(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
	if err := argCount(n, args, 2, 2); err != nil {
		return nil, err
	}
	if !args[0].Const || args[0].Type.Kind != types.String {
		return nil, errorf(args[0].Pos, "EXTRACT needs a unit: EXTRACT(HOUR FROM ts)")
	}
	unit := strings.ToUpper(args[0].Val.S)
	if _, ok := timePart(unit, Value{}, false); !ok {
		return nil, errorf(args[0].Pos, "EXTRACT: unknown unit %s (YEAR, QUARTER, MONTH, WEEK, DAY, HOUR, MINUTE, SECOND, MILLISECOND, DOW, DOY, EPOCH)", unit)
	}
	return partFn(unit)(c, n, args[1:])
}

func niladicFn(name string) builder {
	return func(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
		if err := argCount(n, args, 0, 0); err != nil {
			return nil, err
		}
		return niladic[name](n.At), nil
	}
}

func nowFn(t *types.Type) builder {
	return func(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
		if err := argCount(n, args, 0, 0); err != nil {
			return nil, err
		}
		return nowExpr(t, n.At), nil
	}
}

// jsonValue is JSON_VALUE(s, '$.a.b'): the value at the path as a
// STRING (a string unquoted, anything else as its JSON text), NULL when
// absent or null.
func jsonValue(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
	if err := stringArgs(n, args, 2, 2); err != nil {
		return nil, err
	}
	if !args[1].Const || args[1].Val.K == VNull {
		return nil, errorf(args[1].Pos, "JSON_VALUE: the path must be a constant, such as '$.a.b'")
	}
	path, err := gjsonPath(args[1].Val.S)
	if err != nil {
		return nil, &Error{args[1].Pos, "JSON_VALUE: " + err.Error()}
	}
	return strict(n, types.StringT, args[:1], func(_ *Ctx, v []Value) Value {
		r := gjson.Get(v[0].S, path)
		switch r.Type {
		case gjson.Null:
			return Null
		case gjson.String:
			return Str(r.Str)
		case gjson.JSON:
			return Null // JSON_VALUE gives scalars; JSON_QUERY would give these
		}
		return Str(r.Raw)
	})
}

// gjsonPath turns a JSON path ($.a.b[0].c) into gjson's (a.b.0.c).
func gjsonPath(p string) (string, error) {
	if !strings.HasPrefix(p, "$") {
		return "", fmt.Errorf("the path %q must start with $", p)
	}
	var out []string
	rest := p[1:]
	for rest != "" {
		switch rest[0] {
		case '.':
			rest = rest[1:]
			end := strings.IndexAny(rest, ".[")
			if end < 0 {
				end = len(rest)
			}
			if end == 0 {
				return "", fmt.Errorf("the path %q has an empty name", p)
			}
			name := rest[:end]
			out = append(out, escapeGJSON(name))
			rest = rest[end:]
		case '[':
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return "", fmt.Errorf("the path %q has an unclosed [", p)
			}
			inner := strings.Trim(rest[1:end], `'"`)
			out = append(out, escapeGJSON(inner))
			rest = rest[end+1:]
		default:
			return "", fmt.Errorf("cannot read the path %q", p)
		}
	}
	if len(out) == 0 {
		return "@this", nil
	}
	return strings.Join(out, "."), nil
}

func escapeGJSON(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`.*?|#@\!=<>%`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// unifyArgs coerces args to their common type.
func unifyArgs(n *ast.Call, args []*Expr) ([]*Expr, *types.Type, error) {
	t := types.NullT
	for _, a := range args {
		nt := commonType(t, a.Type)
		if nt == nil {
			return nil, nil, errorf(a.Pos, "%s: an argument of type %s does not go with the others' %s", strings.ToUpper(n.Name.Last()), a.Type, t)
		}
		t = nt
	}
	out := make([]*Expr, len(args))
	for i, a := range args {
		var err error
		if out[i], err = coerce(a, t); err != nil {
			return nil, nil, err
		}
	}
	return out, t, nil
}

func coalesce(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
	lo, hi := 1, 1<<30
	if strings.EqualFold(n.Name.Last(), "IFNULL") {
		lo, hi = 2, 2
	}
	if err := argCount(n, args, lo, hi); err != nil {
		return nil, err
	}
	args, t, err := unifyArgs(n, args)
	if err != nil {
		return nil, err
	}
	return fold(&Expr{Type: t, Pos: n.At, Fn: func(ctx *Ctx) Value {
		for _, a := range args {
			if v := a.Fn(ctx); v.K != VNull {
				return v
			}
		}
		return Null
	}}, args...)
}

func ifFn(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
	if err := argCount(n, args, 3, 3); err != nil {
		return nil, err
	}
	if err := wantBool(args[0], "IF"); err != nil {
		return nil, err
	}
	rs, t, err := unifyArgs(n, args[1:])
	if err != nil {
		return nil, err
	}
	cond := args[0]
	return fold(&Expr{Type: t, Pos: n.At, Fn: func(ctx *Ctx) Value {
		if cond.Fn(ctx).True() {
			return rs[0].Fn(ctx)
		}
		return rs[1].Fn(ctx)
	}}, args...)
}

func nullif(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
	if err := argCount(n, args, 2, 2); err != nil {
		return nil, err
	}
	eq, err := compare("=", args[0], args[1], n.At)
	if err != nil {
		return nil, err
	}
	a := args[0]
	return fold(&Expr{Type: a.Type.Nullable(), Pos: n.At, Fn: func(ctx *Ctx) Value {
		if eq.Fn(ctx).True() {
			return Null
		}
		return a.Fn(ctx)
	}}, args...)
}

func binFn(n *ast.Call, args []*Expr, op string) (*Expr, error) {
	if err := argCount(n, args, 2, 2); err != nil {
		return nil, err
	}
	return arith(op, args[0], args[1], n.At)
}

func abs(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
	if err := argCount(n, args, 1, 1); err != nil {
		return nil, err
	}
	if err := wantArg(n, args, 0, "a number", isNum); err != nil {
		return nil, err
	}
	t := args[0].Type
	return strict(n, t, args, func(_ *Ctx, v []Value) Value {
		switch {
		case t.IsInteger():
			if v[0].I < 0 {
				return Int(wrap(t.Kind, -v[0].I))
			}
		case t.Kind == types.Decimal:
			if decSign(v[0]) < 0 {
				return decNeg(v[0])
			}
		default:
			return Float(math.Abs(v[0].F))
		}
		return v[0]
	})
}

func mathFn1(f func(float64) float64) builder {
	return func(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
		if err := argCount(n, args, 1, 1); err != nil {
			return nil, err
		}
		if err := wantArg(n, args, 0, "a number", isNum); err != nil {
			return nil, err
		}
		toF := floatOf(args[0].Type)
		return strict(n, types.DoubleT, args, func(_ *Ctx, v []Value) Value { return Float(f(toF(v[0]))) })
	}
}

func mathFn2(f func(a, b float64) float64) builder {
	return func(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
		if err := argCount(n, args, 2, 2); err != nil {
			return nil, err
		}
		for i := range args {
			if err := wantArg(n, args, i, "a number", isNum); err != nil {
				return nil, err
			}
		}
		toF, toG := floatOf(args[0].Type), floatOf(args[1].Type)
		return strict(n, types.DoubleT, args, func(_ *Ctx, v []Value) Value { return Float(f(toF(v[0]), toG(v[1]))) })
	}
}

// round is ROUND(x[, d]): half away from zero; a DECIMAL keeps d digits
// (its type's scale becomes d).
func round(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
	if err := argCount(n, args, 1, 2); err != nil {
		return nil, err
	}
	if err := wantArg(n, args, 0, "a number", isNum); err != nil {
		return nil, err
	}
	d := int64(0)
	if len(args) == 2 {
		if !args[1].Const || !args[1].Type.IsInteger() {
			return nil, errorf(args[1].Pos, "ROUND: the digits must be an integer constant")
		}
		d = args[1].Val.I
	}
	t := args[0].Type
	switch {
	case t.Kind == types.Decimal:
		s := int(max(0, min(d, int64(t.Scale))))
		rt := types.DecimalT(min(t.Precision-t.Scale+s+1, types.MaxPrecision), s)
		return strict(n, rt, args[:1], func(_ *Ctx, v []Value) Value {
			if d < 0 {
				// Round the integer part to a multiple of 10^-d: read it
				// as having scale -d, round to scale 0, scale it back.
				u := decBig(decRound(v[0], 0))
				r := decRescale(decRound(decFromBig(u, int(-d)), 0), int(-d))
				return decFromBig(decBig(r), 0)
			}
			return decRound(v[0], s)
		})
	case t.IsInteger():
		return strict(n, t, args[:1], func(_ *Ctx, v []Value) Value {
			if d >= 0 {
				return v[0]
			}
			if d < -18 {
				return Int(0)
			}
			p := pow10[-d]
			q := v[0].I / p
			if r := v[0].I % p; r*2 >= p {
				q++
			} else if r*2 <= -p {
				q--
			}
			return Int(q * p)
		})
	}
	return strict(n, t, args[:1], func(_ *Ctx, v []Value) Value {
		p := math.Pow10(int(d))
		return Float(math.Round(v[0].F*p) / p)
	})
}

// floorCeil is FLOOR(x) / CEIL(x) of a number, and FLOOR(ts TO unit).
func floorCeil(floor bool) builder {
	return func(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
		if err := argCount(n, args, 1, 2); err != nil {
			return nil, err
		}
		if len(args) == 2 {
			return floorTime(n, args, floor)
		}
		if err := wantArg(n, args, 0, "a number", isNum); err != nil {
			return nil, err
		}
		t := args[0].Type
		switch {
		case t.IsInteger():
			return args[0], nil
		case t.Kind == types.Decimal:
			rt := types.DecimalT(min(t.Precision-t.Scale+1, types.MaxPrecision), 0)
			return strict(n, rt, args, func(_ *Ctx, v []Value) Value {
				r := decRound(v[0], 0)
				if c := decCmp(r, v[0]); floor && c > 0 {
					r = decAdd(r, Dec(-1, 0), 0)
				} else if !floor && c < 0 {
					r = decAdd(r, Dec(1, 0), 0)
				}
				return r
			})
		}
		return strict(n, t, args, func(_ *Ctx, v []Value) Value {
			if floor {
				return Float(math.Floor(v[0].F))
			}
			return Float(math.Ceil(v[0].F))
		})
	}
}

func floorTime(n *ast.Call, args []*Expr, floor bool) (*Expr, error) {
	if err := wantArg(n, args, 0, "a TIMESTAMP", func(t *types.Type) bool { return t.IsTimestamp() }); err != nil {
		return nil, err
	}
	if !args[1].Const || args[1].Type.Kind != types.String {
		return nil, errorf(args[1].Pos, "FLOOR(ts TO unit): give a unit such as HOUR")
	}
	unit := strings.ToUpper(args[1].Val.S)
	return strict(n, args[0].Type, args[:1], func(_ *Ctx, v []Value) Value {
		days, sod := splitSec(v[0].I)
		var r Value
		switch unit {
		case "SECOND":
			r = TimeOf(v[0].I, 0)
		case "MINUTE":
			r = TimeOf(days*secondsPerDay+sod/60*60, 0)
		case "HOUR":
			r = TimeOf(days*secondsPerDay+sod/3600*3600, 0)
		case "DAY":
			r = TimeOf(days*secondsPerDay, 0)
		case "MONTH", "YEAR":
			y, m, _ := civil.Date(days)
			if unit == "YEAR" {
				m = 1
			}
			r = TimeOf(civil.Days(y, m, 1)*secondsPerDay, 0)
			if !floor && (r.I != v[0].I || v[0].N != 0) {
				return addMonths(r, map[bool]int64{true: 12, false: 1}[unit == "YEAR"], false)
			}
			return r
		default:
			return Null
		}
		if !floor && (r.I != v[0].I || v[0].N != 0) {
			step := map[string]int64{"SECOND": 1, "MINUTE": 60, "HOUR": 3600, "DAY": secondsPerDay}[unit]
			r.I += step
		}
		return r
	})
}

// extreme is GREATEST (sign 1) and LEAST (-1): NULL if any argument is.
func extreme(sign int) builder {
	return func(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
		if err := argCount(n, args, 1, 1<<30); err != nil {
			return nil, err
		}
		args, t, err := unifyArgs(n, args)
		if err != nil {
			return nil, err
		}
		cmp := comparator(t)
		if cmp == nil {
			return nil, errorf(n.At, "%s: values of type %s cannot be compared", strings.ToUpper(n.Name.Last()), t)
		}
		return fold(&Expr{Type: t, Pos: n.At, Fn: func(ctx *Ctx) Value {
			var best Value
			for i, a := range args {
				v := a.Fn(ctx)
				if v.K == VNull {
					return Null
				}
				if i == 0 || cmp(v, best)*sign > 0 {
					best = v
				}
			}
			return best
		}}, args...)
	}
}

// arrayCtor is ARRAY[a, b, …] (the parser's ARRAY(a, b, …)).
func arrayCtor(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
	if err := argCount(n, args, 1, 1<<30); err != nil {
		return nil, err
	}
	args, t, err := unifyArgs(n, args)
	if err != nil {
		return nil, err
	}
	return &Expr{Type: types.ArrayT(t), Pos: n.At, Fn: func(ctx *Ctx) Value {
		vals := make([]Value, len(args))
		for i, a := range args {
			vals[i] = a.Fn(ctx)
		}
		return ArrayOf(vals...)
	}}, nil
}

// mapCtor is MAP[k1, v1, k2, v2, …] (the parser's MAP(k1, v1, …)).
func mapCtor(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
	if len(args) == 0 || len(args)%2 != 0 {
		return nil, errorf(n.At, "MAP[…] takes keys and values in pairs, not %d values", len(args))
	}
	var keys, vals []*Expr
	for i := 0; i < len(args); i += 2 {
		keys, vals = append(keys, args[i]), append(vals, args[i+1])
	}
	keys, kt, err := unifyArgs(n, keys)
	if err != nil {
		return nil, err
	}
	vals, vt, err := unifyArgs(n, vals)
	if err != nil {
		return nil, err
	}
	return &Expr{Type: types.MapT(kt, vt), Pos: n.At, Fn: func(ctx *Ctx) Value {
		m := &Nested{Keys: make([]Value, len(keys)), Vals: make([]Value, len(vals))}
		for i := range keys {
			m.Keys[i], m.Vals[i] = keys[i].Fn(ctx), vals[i].Fn(ctx)
		}
		return Value{K: VMap, P: m}
	}}, nil
}

// cardinality is the number of elements of an ARRAY or entries of a MAP.
func cardinality(c *compiler, n *ast.Call, args []*Expr) (*Expr, error) {
	if err := argCount(n, args, 1, 1); err != nil {
		return nil, err
	}
	if err := wantArg(n, args, 0, "an ARRAY or a MAP", func(t *types.Type) bool { return t.Kind == types.Array || t.Kind == types.Map }); err != nil {
		return nil, err
	}
	return strict(n, types.IntT, args, func(_ *Ctx, v []Value) Value { return Int(int64(len(v[0].P.Vals))) })
}
