package eval

import (
	"errors"
	"math"
	"math/big"
	"math/bits"
	"strconv"
	"strings"

	"github.com/onceflow/onceflow/internal/sql/types"
)

// DECIMAL arithmetic: an unscaled int64 with the scale in Value.N, and a
// big.Int only when a result does not fit (a DECIMAL(38, s) can hold up
// to 38 digits). The fast paths check overflow with math/bits.

var pow10 = func() [19]int64 {
	var p [19]int64
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

var bigTen = big.NewInt(10)

func bigPow10(n int) *big.Int {
	return new(big.Int).Exp(bigTen, big.NewInt(int64(n)), nil)
}

// decBig returns v's unscaled value as a new big.Int.
func decBig(v Value) *big.Int {
	if v.P != nil && v.P.Big != nil {
		return new(big.Int).Set(v.P.Big)
	}
	return big.NewInt(v.I)
}

// decFromBig makes a DECIMAL of unscaled u and scale s, inline when it
// fits.
func decFromBig(u *big.Int, s int) Value {
	if u.IsInt64() {
		return Dec(u.Int64(), s)
	}
	return Value{K: VDec, N: int32(s), P: &Nested{Big: u}}
}

func isBigDec(v Value) bool { return v.P != nil && v.P.Big != nil }

// mul64 multiplies with an overflow check.
func mul64(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	neg := (a < 0) != (b < 0)
	ua, ub := uabs(a), uabs(b)
	hi, lo := bits.Mul64(ua, ub)
	if hi != 0 || lo > math.MaxInt64 && !(neg && lo == 1<<63) {
		return 0, false
	}
	if neg {
		return -int64(lo), true
	}
	return int64(lo), true
}

func uabs(a int64) uint64 {
	if a < 0 {
		return uint64(-a)
	}
	return uint64(a)
}

func add64(a, b int64) (int64, bool) {
	c := a + b
	return c, (c > a) == (b > 0)
}

// decRescale returns v with scale s (s at least v's scale: exact).
func decRescale(v Value, s int) Value {
	d := s - int(v.N)
	if d == 0 {
		return v
	}
	if d < 0 {
		return decRound(v, s)
	}
	if !isBigDec(v) && d < len(pow10) {
		if u, ok := mul64(v.I, pow10[d]); ok {
			return Dec(u, s)
		}
	}
	u := decBig(v)
	return decFromBig(u.Mul(u, bigPow10(d)), s)
}

// decRound returns v rounded half up (away from zero) to scale s.
func decRound(v Value, s int) Value {
	d := int(v.N) - s
	if d <= 0 {
		return decRescale(v, s)
	}
	if !isBigDec(v) && d < len(pow10) {
		p := pow10[d]
		q, r := v.I/p, v.I%p
		if r >= (p+1)/2 && p > 1 {
			q++
		} else if -r >= (p+1)/2 && p > 1 {
			q--
		}
		return Dec(q, s)
	}
	u := decBig(v)
	p := bigPow10(d)
	q, r := new(big.Int).QuoRem(u, p, new(big.Int))
	r.Abs(r).Mul(r, big.NewInt(2))
	if r.Cmp(p) >= 0 {
		if u.Sign() < 0 {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	return decFromBig(q, s)
}

// decAdd adds two DECIMALs into scale s (at least both scales).
func decAdd(a, b Value, s int) Value {
	a, b = decRescale(a, s), decRescale(b, s)
	if !isBigDec(a) && !isBigDec(b) {
		if c, ok := add64(a.I, b.I); ok {
			return Dec(c, s)
		}
	}
	u := decBig(a)
	return decFromBig(u.Add(u, decBig(b)), s)
}

// decNeg negates a DECIMAL.
func decNeg(a Value) Value {
	if !isBigDec(a) && a.I != math.MinInt64 {
		return Dec(-a.I, int(a.N))
	}
	u := decBig(a)
	return decFromBig(u.Neg(u), int(a.N))
}

// decMul multiplies; the scale is the sum of the scales, then rounded to
// s.
func decMul(a, b Value, s int) Value {
	if !isBigDec(a) && !isBigDec(b) {
		if c, ok := mul64(a.I, b.I); ok {
			return decRound(Dec(c, int(a.N+b.N)), s)
		}
	}
	u := decBig(a)
	return decRound(decFromBig(u.Mul(u, decBig(b)), int(a.N+b.N)), s)
}

var errDivZero = errors.New("division by zero")

// decDiv divides a by b into scale s, rounding half up.
func decDiv(a, b Value, s int) (Value, error) {
	bu := decBig(b)
	if bu.Sign() == 0 {
		return Null, errDivZero
	}
	// a/b at scale s = a.u * 10^(s + b.s - a.s) / b.u, one more digit to
	// round.
	au := decBig(a)
	shift := s + int(b.N) - int(a.N) + 1
	if shift >= 0 {
		au.Mul(au, bigPow10(shift))
	} else {
		bu.Mul(bu, bigPow10(-shift))
	}
	q := au.Quo(au, bu)
	return decRound(decFromBig(q, s+1), s), nil
}

// decCmp compares two DECIMALs.
func decCmp(a, b Value) int {
	s := max(int(a.N), int(b.N))
	a, b = decRescale(a, s), decRescale(b, s)
	if !isBigDec(a) && !isBigDec(b) {
		switch {
		case a.I < b.I:
			return -1
		case a.I > b.I:
			return 1
		}
		return 0
	}
	return decBig(a).Cmp(decBig(b))
}

// decSign is -1, 0 or 1.
func decSign(a Value) int {
	if isBigDec(a) {
		return a.P.Big.Sign()
	}
	switch {
	case a.I < 0:
		return -1
	case a.I > 0:
		return 1
	}
	return 0
}

// decFloat converts a DECIMAL to a float64.
func decFloat(a Value) float64 {
	if !isBigDec(a) {
		if int(a.N) < len(pow10) {
			return float64(a.I) / float64(pow10[a.N])
		}
	}
	f, _ := strconv.ParseFloat(string(appendDec(nil, a)), 64)
	return f
}

// decFromFloat converts a float64 to a DECIMAL of scale s.
func decFromFloat(f float64, s int) (Value, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return Null, false
	}
	return parseDec(strconv.FormatFloat(f, 'f', -1, 64), s)
}

// decDigits counts the digits of the unscaled value.
func decDigits(a Value) int {
	if isBigDec(a) {
		return len(new(big.Int).Abs(a.P.Big).String())
	}
	u := uabs(a.I)
	n := 1
	for u >= 10 {
		u /= 10
		n++
	}
	return n
}

// decFits tells whether a fits DECIMAL(p, its scale).
func decFits(a Value, p int) bool {
	return decSign(a) == 0 || decDigits(a) <= p
}

// decTrunc returns the integer part of a (toward zero), or false when it
// does not fit an int64.
func decTrunc(a Value) (int64, bool) {
	if !isBigDec(a) && int(a.N) < len(pow10) {
		return a.I / pow10[a.N], true
	}
	u := decBig(a)
	u.Quo(u, bigPow10(int(a.N)))
	return u.Int64(), u.IsInt64()
}

// parseDec reads decimal text (digits, a point, an exponent) rounded half
// up to scale s.
func parseDec(text string, s int) (Value, bool) {
	t := strings.TrimSpace(text)
	if t == "" {
		return Null, false
	}
	neg := false
	switch t[0] {
	case '-':
		neg = true
		t = t[1:]
	case '+':
		t = t[1:]
	}
	exp := 0
	if i := strings.IndexAny(t, "eE"); i >= 0 {
		e, err := strconv.Atoi(t[i+1:])
		if err != nil {
			return Null, false
		}
		exp = e
		t = t[:i]
	}
	intPart, frac := t, ""
	if i := strings.IndexByte(t, '.'); i >= 0 {
		intPart, frac = t[:i], t[i+1:]
	}
	if intPart == "" && frac == "" {
		return Null, false
	}
	digits := intPart + frac
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return Null, false
		}
	}
	if digits = strings.TrimLeft(digits, "0"); digits == "" {
		digits = "0"
	}
	scale := len(frac) - exp
	// Guard the work against absurd exponents (1e999999999): beyond 38
	// integer digits nothing fits a DECIMAL, and digits far below the
	// scale round to zero.
	if len(digits)-scale > types.MaxPrecision+1 && digits != "0" {
		return Null, false
	}
	if scale > s+len(digits)+1 {
		return Dec(0, s), true
	}
	var v Value
	if len(digits) <= 18 {
		u, _ := strconv.ParseInt(digits, 10, 64)
		v = Dec(u, 0)
	} else {
		u, _ := new(big.Int).SetString(digits, 10)
		v = decFromBig(u, 0)
	}
	if scale < 0 {
		v = decRescale(v, -scale)
		v.N = 0
		if isBigDec(v) {
			v = decFromBig(v.P.Big, 0)
		}
	} else {
		v.N = int32(scale)
	}
	v = decRound(v, s)
	if neg {
		v = decNeg(v)
	}
	return v, true
}

// appendDec writes a DECIMAL in plain notation with all its scale's
// digits: 11817831.564, -0.050.
func appendDec(b []byte, a Value) []byte {
	var digits []byte
	var buf [24]byte
	neg := false
	if isBigDec(a) {
		digits = a.P.Big.Append(buf[:0], 10)
	} else {
		digits = strconv.AppendInt(buf[:0], a.I, 10)
	}
	if len(digits) > 0 && digits[0] == '-' {
		neg, digits = true, digits[1:]
	}
	if neg {
		b = append(b, '-')
	}
	s := int(a.N)
	if s == 0 {
		return append(b, digits...)
	}
	if len(digits) <= s {
		b = append(b, '0', '.')
		for i := len(digits); i < s; i++ {
			b = append(b, '0')
		}
		return append(b, digits...)
	}
	b = append(b, digits[:len(digits)-s]...)
	b = append(b, '.')
	return append(b, digits[len(digits)-s:]...)
}
