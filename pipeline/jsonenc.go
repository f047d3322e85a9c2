package pipeline

import (
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// appendJSON appends v as encoding/json.Marshal writes it, byte for byte,
// without reflection: objects with their keys sorted, strings escaped as
// Marshal escapes them (HTML characters, U+2028 and U+2029, invalid UTF-8
// as U+FFFD), floats in Marshal's form. It handles the values expressions
// make (nil, bool, string, int, int64, float64, []any, map[string]any);
// for anything else, or a float JSON cannot hold, ok is false and the
// caller uses encoding/json, which gives the error or the other type's
// form. encoding/json by reflection over a map was 18 % of Nexmark q0's
// CPU (docs/benchmarks.md).
func appendJSON(b []byte, v any) (_ []byte, ok bool) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), true
	case bool:
		return strconv.AppendBool(b, x), true
	case string:
		return appendMarshalString(b, x), true
	case int:
		return strconv.AppendInt(b, int64(x), 10), true
	case int64:
		return strconv.AppendInt(b, x, 10), true
	case float64:
		return appendJSONFloat(b, x)
	case []any:
		if x == nil {
			return append(b, "null"...), true
		}
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			if b, ok = appendJSON(b, e); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	case map[string]any:
		if x == nil {
			return append(b, "null"...), true
		}
		var arr [16]string
		keys := arr[:0]
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendMarshalString(b, k)
			b = append(b, ':')
			if b, ok = appendJSON(b, x[k]); !ok {
				return b, false
			}
		}
		return append(b, '}'), true
	}
	return b, false
}

// appendJSONFloat is encoding/json's floatEncoder for float64.
func appendJSONFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, false
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}

const hexDigits = "0123456789abcdef"

// appendMarshalString is encoding/json's appendString with HTML escaping,
// as Marshal writes strings.
func appendMarshalString(dst []byte, src string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(src); {
		if c := src[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, src[start:i]...)
			switch c {
			case '\\', '"':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				// Control characters and <, >, &.
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(src[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, src[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, src[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, src[start:]...)
	return append(dst, '"')
}
