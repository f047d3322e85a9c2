package pipeline

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/expr-lang/expr"
)

// The functions onceflow adds to the expr language's, for what SQL
// streaming jobs (Flink's) write as functions: a dedup key
// md5(concat(...)), a time field parsed or formatted. Times are
// milliseconds since the Unix epoch, as timestamp and event time are,
// and UTC. docs/operators.md lists them (FunctionsDoc) and
// exprfuncs_test.go pins each example.

// FunctionsDoc is the Functions part of the Expressions section of the
// reference docs (docs/operators.md).
const FunctionsDoc = "Besides the language's builtins, onceflow adds these (times are milliseconds since the Unix epoch, in UTC, " +
	"as `timestamp` is):\n\n" +
	"| function | result | example |\n|---|---|---|\n" +
	"| `concat(a, b, ...)` | the arguments as strings, joined; `null` if one is `null` (as Flink's `CONCAT`); given arrays only, expr's array concatenation. A Flink dedup key `MD5(CONCAT(a, b))` is `md5(concat(value.a, value.b))` | `concat(value.user_id, \":\", value.order_id)` → `\"u-42:o-1\"` |\n" +
	"| `concat_ws(sep, a, b, ...)` | the arguments as strings, joined by `sep`, `null`s skipped (as Flink's `CONCAT_WS`) | `concat_ws(\":\", value.user_id, value.none, value.order_id)` → `\"u-42:o-1\"` |\n" +
	"| `md5(s)`, `sha256(s)` | the hex digest of the string (a number is written as in JSON); `null` for `null` | `md5(\"abc\")` → `\"900150983cd24fb0d6963f7d28e17f72\"` |\n" +
	"| `to_timestamp(s)`, `unix_ms(s)` | the time written in `s`, in ms: `2026-12-01 10:00:00`, with an optional fraction (`.123`), a `T` instead of the space, and an optional zone (`Z`, `+01:00`); without a zone, UTC | `to_timestamp(\"2026-12-01 10:00:00.123\")` → `1796119200123` |\n" +
	"| `to_timestamp(s, layout)` | the same with a layout: Java's letters (`yyyy MM dd HH mm ss SSS`, as in Flink) or Go's (`2006-01-02 15:04:05.000`) | `to_timestamp(\"01/12/2026 10:00\", \"dd/MM/yyyy HH:mm\")` → `1796119200000` |\n" +
	"| `date_format(ms)`, `date_format(ms, layout)` | the time as text, by default `yyyy-MM-dd HH:mm:ss.SSS` | `date_format(timestamp, \"yyyy-MM-dd\")` → `\"2026-12-01\"` |\n\n" +
	"Of the language's own, the ones jobs need most: strings `upper`, `lower`, `trim`, `trimPrefix`, `trimSuffix`, `split`, `replace`, " +
	"`repeat`, `indexOf`, `hasPrefix`, `hasSuffix`, and the operators `contains`, `startsWith`, `endsWith`, `matches` (a regular expression); " +
	"numbers `abs`, `ceil`, `floor`, `round`, `int`, `float`, `max`, `min`; conversion `string`, `toJSON`, `fromJSON`, `toBase64`, `fromBase64`; " +
	"arrays `len`, `map`, `filter`, `all`, `any`, `none`, `count`, `sum`, `mean`, `median`, `first`, `last`, `join`, `sort`, `uniq`, `flatten`; " +
	"maps `keys`, `values`; time `now()`, `duration(\"1h\")`, `date(s, layout)` (a Go layout; a time, whose `.UnixMilli()` is ms: " +
	"`date(\"2026-12-01 10:00:00\", \"2006-01-02 15:04:05\").UnixMilli()` → `1796119200000`). The language's reference lists them all.\n"

// exprFunctions are the functions CompileExpr adds.
func exprFunctions() []expr.Option {
	return []expr.Option{
		expr.Function("concat", concatFn),
		expr.Function("concat_ws", concatWSFn),
		expr.Function("md5", digestFn("md5", func(b []byte) []byte { s := md5.Sum(b); return s[:] })),
		expr.Function("sha256", digestFn("sha256", func(b []byte) []byte { s := sha256.Sum256(b); return s[:] })),
		expr.Function("to_timestamp", toTimestampFn("to_timestamp")),
		expr.Function("unix_ms", toTimestampFn("unix_ms")),
		expr.Function("date_format", dateFormatFn),
	}
}

// text is v as concat writes it: strings as they are, numbers as in JSON
// (an integer without a fraction), others as fmt does.
func text(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e15 {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	default:
		return fmt.Sprint(x)
	}
}

func isArray(v any) bool {
	if v == nil {
		return false
	}
	k := reflect.TypeOf(v).Kind()
	return k == reflect.Slice || k == reflect.Array
}

func concatFn(params ...any) (any, error) {
	if len(params) > 0 && isArray(params[0]) {
		// expr's concat of arrays, which this name replaces.
		var out []any
		for i, p := range params {
			if !isArray(p) {
				return nil, fmt.Errorf("concat: argument %d is not an array like the first: concatenate strings or arrays, not both", i+1)
			}
			v := reflect.ValueOf(p)
			for j := 0; j < v.Len(); j++ {
				out = append(out, v.Index(j).Interface())
			}
		}
		return out, nil
	}
	var b strings.Builder
	for _, p := range params {
		if p == nil {
			return nil, nil
		}
		b.WriteString(text(p))
	}
	return b.String(), nil
}

func concatWSFn(params ...any) (any, error) {
	if len(params) == 0 {
		return nil, errors.New("concat_ws: give the separator first, then the values")
	}
	if params[0] == nil {
		return nil, nil
	}
	sep := text(params[0])
	parts := make([]string, 0, len(params)-1)
	for _, p := range params[1:] {
		if p != nil {
			parts = append(parts, text(p))
		}
	}
	return strings.Join(parts, sep), nil
}

func digestFn(name string, sum func([]byte) []byte) func(params ...any) (any, error) {
	return func(params ...any) (any, error) {
		if len(params) != 1 {
			return nil, fmt.Errorf("%s takes one argument, got %d", name, len(params))
		}
		if params[0] == nil {
			return nil, nil
		}
		return hex.EncodeToString(sum([]byte(text(params[0])))), nil
	}
}

// The layouts to_timestamp tries without one given.
var timestampLayouts = []string{
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999Z07:00",
	"2006-01-02T15:04:05.999999999",
}

// goLayout turns a layout with Java's letters (Flink's, SQL's) into Go's;
// a Go layout passes unchanged.
func goLayout(l string) string {
	if !strings.ContainsAny(l, "yMdHmsS") {
		return l
	}
	return strings.NewReplacer("yyyy", "2006", "yy", "06", "MM", "01", "dd", "02", "HH", "15", "mm", "04", "ss", "05",
		"SSSSSSSSS", "000000000", "SSSSSS", "000000", "SSS", "000").Replace(l)
}

func toTimestampFn(name string) func(params ...any) (any, error) {
	return func(params ...any) (any, error) {
		if len(params) < 1 || len(params) > 2 {
			return nil, fmt.Errorf("%s takes the time as a string and, optionally, its layout", name)
		}
		if params[0] == nil {
			return nil, nil
		}
		s, ok := params[0].(string)
		if !ok {
			return nil, fmt.Errorf("%s: %v is not a string: it parses text (a number is already milliseconds)", name, params[0])
		}
		layouts := timestampLayouts
		if len(params) == 2 {
			l, ok := params[1].(string)
			if !ok {
				return nil, fmt.Errorf("%s: the layout %v is not a string", name, params[1])
			}
			layouts = []string{goLayout(l)}
		}
		for _, l := range layouts {
			if t, err := time.ParseInLocation(l, s, time.UTC); err == nil {
				return t.UnixMilli(), nil
			}
		}
		if len(params) == 2 {
			return nil, fmt.Errorf("%s: %q is not a time in the layout %q", name, s, params[1])
		}
		return nil, fmt.Errorf("%s: %q is not a time such as 2026-12-01 10:00:00.123 (give the layout as the second argument)", name, s)
	}
}

func dateFormatFn(params ...any) (any, error) {
	if len(params) < 1 || len(params) > 2 {
		return nil, errors.New("date_format takes the time in milliseconds since the epoch and, optionally, a layout")
	}
	if params[0] == nil {
		return nil, nil
	}
	var ms int64
	switch x := params[0].(type) {
	case int:
		ms = int64(x)
	case int64:
		ms = x
	case float64:
		ms = int64(x)
	default:
		return nil, fmt.Errorf("date_format: the time must be milliseconds since the epoch, not %v (parse text with to_timestamp first)", params[0])
	}
	layout := "2006-01-02 15:04:05.000"
	if len(params) == 2 {
		l, ok := params[1].(string)
		if !ok {
			return nil, fmt.Errorf("date_format: the layout %v is not a string", params[1])
		}
		layout = goLayout(l)
	}
	return time.UnixMilli(ms).UTC().Format(layout), nil
}
