package mysql

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// column is what the sink knows of a column of the table: enough to refuse
// on the client the values a server in strict mode refuses, so that such a
// record can be skipped or dead-lettered instead of failing its batch.
type column struct {
	name     string
	typ      string // DATA_TYPE, lower case: int, varchar, datetime...
	unsigned bool
	nullable bool
	maxChars int64 // character columns: CHARACTER_MAXIMUM_LENGTH; 0 when none
	// nullFills: NULL gives the column a value (AUTO_INCREMENT, or a
	// TIMESTAMP on servers with explicit_defaults_for_timestamp off).
	nullFills bool
	// precision and scale of a DECIMAL column.
	precision, scale int64
}

// dateLike is the start every date and time the server reads has.
var dateLike = regexp.MustCompile(`^\d{4}-(\d{1,2})-(\d{1,2})(?:$|[ T])`)

// notDate matches text with a letter other than a T after a digit.
var notDate = regexp.MustCompile(`[A-SU-Za-z]|[^0-9]T|^T|T$`)

// newCheck returns the check of a row of values for cols (in the sink's
// column order). It refuses what it is sure the server refuses (text that
// is no number for a numeric column, a number out of an integer type's
// range, text longer than a character column, NULL for a NOT NULL column,
// text that is no date for a date column); anything else, such as an enum
// value, the server checks.
func newCheck(table string, cols []column) func([]any) error {
	return func(row []any) error {
		for i, v := range row {
			if i >= len(cols) {
				break
			}
			if err := cols[i].check(v); err != nil {
				return fmt.Errorf("column %s of table %s is %s, and the record's value %#v (a %T) does not fit it: %v", cols[i].name, table, cols[i].describe(), v, v, err)
			}
		}
		return nil
	}
}

func (c column) describe() string {
	s := c.typ
	if c.maxChars > 0 {
		s += fmt.Sprintf("(%d)", c.maxChars)
	}
	if c.unsigned {
		s += " unsigned"
	}
	if !c.nullable {
		s += " NOT NULL"
	}
	return s
}

// intRanges are the signed ranges of the integer types (bits).
var intBits = map[string]uint{"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "integer": 32, "bigint": 64}

func (c column) check(v any) error {
	if v == nil {
		if !c.nullable && !c.nullFills {
			return fmt.Errorf("the column is NOT NULL")
		}
		return nil
	}
	if b, ok := v.([]byte); ok {
		v = string(b)
	}
	if bits, ok := intBits[c.typ]; ok {
		return c.checkInt(v, bits)
	}
	switch c.typ {
	case "decimal", "float", "double", "real", "numeric":
		var r *big.Rat
		switch x := v.(type) {
		case string:
			var ok bool
			if r, ok = new(big.Rat).SetString(strings.TrimSpace(x)); !ok {
				if _, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil || !errors.Is(err, strconv.ErrRange) {
					return fmt.Errorf("it is not a number")
				}
				return fmt.Errorf("it is out of range")
			}
		case time.Time:
			return fmt.Errorf("it is not a number")
		case float32, float64:
			if f := reflect.ValueOf(x).Float(); !math.IsNaN(f) && !math.IsInf(f, 0) {
				r = new(big.Rat).SetFloat64(f)
			}
		default:
			if rv := reflect.ValueOf(v); rv.CanInt() {
				r = new(big.Rat).SetInt64(rv.Int())
			} else if rv.CanUint() {
				r = new(big.Rat).SetInt(new(big.Int).SetUint64(rv.Uint()))
			}
		}
		// A DECIMAL(p,s) holds what rounds to s digits below 10^(p-s).
		if c.typ == "decimal" && c.precision > 0 && r != nil {
			scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(c.scale), nil)
			units := new(big.Rat).Mul(new(big.Rat).Abs(r), new(big.Rat).SetInt(scale))
			q, m := new(big.Int).QuoRem(units.Num(), units.Denom(), new(big.Int))
			if new(big.Int).Mul(m, big.NewInt(2)).Cmp(units.Denom()) >= 0 {
				q.Add(q, big.NewInt(1)) // half away from zero, as the server rounds
			}
			if q.Cmp(new(big.Int).Exp(big.NewInt(10), big.NewInt(c.precision), nil)) >= 0 {
				return fmt.Errorf("it is out of range")
			}
		}
	case "date", "datetime", "timestamp":
		// Dates the server reads start with a year; digits alone are
		// read as YYYYMMDD and such, which the server checks.
		// The server reads dates with any punctuation and 2- or 4-digit
		// years: refused here are only text with letters (other than the
		// T between date and time) and YYYY-MM-DD with a month or day
		// no calendar has.
		if x, ok := v.(string); ok {
			x = strings.TrimSpace(x)
			if !strings.ContainsAny(x, "0123456789") || notDate.MatchString(x) {
				return fmt.Errorf("it is not a date (YYYY-MM-DD[ hh:mm:ss])")
			}
			if m := dateLike.FindStringSubmatch(x); m != nil {
				if month, _ := strconv.Atoi(m[1]); month > 12 {
					return fmt.Errorf("it has month %d", month)
				}
				if day, _ := strconv.Atoi(m[2]); day > 31 {
					return fmt.Errorf("it has day %d", day)
				}
			}
		}
		switch v.(type) {
		case bool, float32, float64:
			return fmt.Errorf("it is not a date")
		}
	case "char", "varchar":
		// Text longer than the column is refused, except for trailing
		// spaces, which the server drops.
		if c.maxChars == 0 {
			break
		}
		text, ok := v.(string)
		if rv := reflect.ValueOf(v); rv.CanInt() {
			text, ok = strconv.FormatInt(rv.Int(), 10), true
		} else if rv.CanUint() {
			text, ok = strconv.FormatUint(rv.Uint(), 10), true
		}
		if n := utf8.RuneCountInString(strings.TrimRight(text, " ")); ok && int64(n) > c.maxChars {
			return fmt.Errorf("it has %d characters", n)
		}
	}
	return nil
}

func (c column) checkInt(v any, bits uint) error {
	lo, hi := -int64(1)<<(bits-1), int64(1)<<(bits-1)-1
	var uhi uint64 = 1<<bits - 1
	if bits == 64 {
		uhi = math.MaxUint64
	}
	if c.unsigned {
		lo = 0
	}
	var n int64
	var u uint64
	var isU bool
	switch x := v.(type) {
	case string:
		// Text with a fraction is rounded by the server.
		s := strings.TrimSpace(x)
		var err error
		if n, err = strconv.ParseInt(s, 10, 64); err != nil {
			if u, err = strconv.ParseUint(s, 10, 64); err != nil {
				f, ferr := strconv.ParseFloat(s, 64)
				switch {
				case ferr != nil && !errors.Is(ferr, strconv.ErrRange):
					return fmt.Errorf("it is not a number")
				case ferr != nil:
					return fmt.Errorf("it is out of range")
				}
				return c.checkInt(f, bits)
			} else {
				isU = true
			}
		}
	case bool:
		return nil
	case float32, float64:
		f := math.Round(reflect.ValueOf(x).Float())
		switch {
		case math.IsNaN(f) || math.IsInf(f, 0):
			return fmt.Errorf("it is not a number")
		case f >= 1<<63 && c.unsigned:
			if f >= 1<<64 || (bits < 64 && f > float64(uhi)) {
				return fmt.Errorf("it is out of range")
			}
			return nil
		case math.Abs(f) >= 1<<63:
			return fmt.Errorf("it is out of range")
		}
		n = int64(f)
	case time.Time, []byte:
		return fmt.Errorf("it is not a whole number")
	default:
		rv := reflect.ValueOf(v)
		switch rv.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			n = rv.Int()
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			u, isU = rv.Uint(), true
		default:
			return nil // the server decides
		}
	}
	if isU {
		if (c.unsigned && u > uhi) || (!c.unsigned && u > uint64(hi)) {
			return fmt.Errorf("it is out of range")
		}
		return nil
	}
	if n < lo || (!c.unsigned && n > hi) || (c.unsigned && n >= 0 && uint64(n) > uhi) {
		return fmt.Errorf("it is out of range")
	}
	return nil
}
