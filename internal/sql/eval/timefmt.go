package eval

import (
	"fmt"
	"strings"
	"time"

	"github.com/onceflow/onceflow/internal/civil"
)

// Dates and times. A TIMESTAMP is a wall-clock time without a zone, held
// as if it were UTC; a TIMESTAMP_LTZ is an instant, shown in the
// session's time zone, which is UTC in onceflow (Flink's
// table.local-time-zone = 'UTC'). Both are seconds since the epoch and
// nanoseconds.

const secondsPerDay = 86400

// floorDiv is a/b rounded down.
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// splitSec splits seconds since the epoch into days and seconds of the
// day.
func splitSec(sec int64) (days, sod int64) {
	days = floorDiv(sec, secondsPerDay)
	return days, sec - days*secondsPerDay
}

func digitsAt(s string, i, n int) (int64, bool) {
	if i+n > len(s) {
		return 0, false
	}
	var v int64
	for j := i; j < i+n; j++ {
		c := s[j]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, true
}

// parseTimestamp reads yyyy-MM-dd[( |T)HH:mm[:ss[.fffffffff]]] with an
// optional zone (Z, +hh:mm, -hhmm) that is applied: the result is the UTC
// wall-clock time. A date alone is midnight.
func parseTimestamp(s string) (sec int64, nsec int32, ok bool) {
	s = strings.TrimSpace(s)
	y, ok1 := digitsAt(s, 0, 4)
	if !ok1 || len(s) < 10 || s[4] != '-' || s[7] != '-' {
		return 0, 0, false
	}
	mo, ok2 := digitsAt(s, 5, 2)
	d, ok3 := digitsAt(s, 8, 2)
	if !ok2 || !ok3 || mo < 1 || mo > 12 || d < 1 || d > civil.DaysIn(y, mo) {
		return 0, 0, false
	}
	days := civil.Days(y, mo, d)
	i := 10
	var h, mi, se int64
	var ns int64
	if i < len(s) && (s[i] == ' ' || s[i] == 'T') {
		var okh, okm bool
		h, okh = digitsAt(s, i+1, 2)
		if !okh || i+3 >= len(s) || s[i+3] != ':' {
			return 0, 0, false
		}
		mi, okm = digitsAt(s, i+4, 2)
		if !okm || h > 23 || mi > 59 {
			return 0, 0, false
		}
		i += 6
		if i < len(s) && s[i] == ':' {
			var oks bool
			se, oks = digitsAt(s, i+1, 2)
			if !oks || se > 59 {
				return 0, 0, false
			}
			i += 3
			if i < len(s) && s[i] == '.' {
				i++
				start := i
				for i < len(s) && s[i] >= '0' && s[i] <= '9' {
					if i-start < 9 {
						ns = ns*10 + int64(s[i]-'0')
					}
					i++
				}
				n := i - start
				if n == 0 {
					return 0, 0, false
				}
				for ; n < 9; n++ {
					ns *= 10
				}
			}
		}
	}
	sec = days*secondsPerDay + h*3600 + mi*60 + se
	if i < len(s) {
		switch s[i] {
		case 'Z', 'z':
			i++
		case '+', '-':
			sign := int64(1)
			if s[i] == '-' {
				sign = -1
			}
			oh, okh := digitsAt(s, i+1, 2)
			if !okh {
				return 0, 0, false
			}
			i += 3
			if i < len(s) && s[i] == ':' {
				i++
			}
			om, okm := digitsAt(s, i, 2)
			if okm {
				i += 2
			}
			sec -= sign * (oh*3600 + om*60)
		}
	}
	if i != len(s) {
		return 0, 0, false
	}
	return sec, int32(ns), true
}

func append2(b []byte, v int64) []byte { return append(b, byte('0'+v/10), byte('0'+v%10)) }

func appendDate(b []byte, days int64) []byte {
	y, m, d := civil.Date(days)
	if y < 0 {
		b = append(b, '-')
		y = -y
	}
	b = append(b, byte('0'+y/1000%10), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10), '-')
	b = append2(b, m)
	b = append(b, '-')
	return append2(b, d)
}

func appendClock(b []byte, sod int64, nsec int32, precision int) []byte {
	b = append2(b, sod/3600)
	b = append(b, ':')
	b = append2(b, sod/60%60)
	b = append(b, ':')
	b = append2(b, sod%60)
	if precision > 0 {
		b = append(b, '.')
		n := int64(nsec)
		div := int64(100_000_000)
		for i := 0; i < precision; i++ {
			b = append(b, byte('0'+n/div%10))
			div /= 10
		}
	}
	return b
}

// appendTimestamp writes yyyy-MM-dd HH:mm:ss with precision fractional
// digits.
func appendTimestamp(b []byte, sec int64, nsec int32, precision int) []byte {
	days, sod := splitSec(sec)
	b = appendDate(b, days)
	b = append(b, ' ')
	return appendClock(b, sod, nsec, precision)
}

// truncNanos cuts nsec to precision digits.
func truncNanos(nsec int32, precision int) int32 {
	if precision >= 9 {
		return nsec
	}
	p := int32(pow10[9-precision])
	return nsec / p * p
}

// A datePattern is a Java DateTimeFormatter / SimpleDateFormat pattern
// (yyyy-MM-dd HH:mm:ss.SSS) compiled to parts.
type datePattern struct {
	parts []patPart
	src   string
}

type patPart struct {
	letter byte // 0: literal text
	n      int
	text   string
}

// compilePattern reads a Java date pattern: y, M, d, H, h, m, s, S, a, E,
// D and literal text in single quotes; other letters are refused.
func compilePattern(p string) (*datePattern, error) {
	dp := &datePattern{src: p}
	for i := 0; i < len(p); {
		c := p[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(p[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("date pattern %q: unclosed quote", p)
			}
			lit := p[i+1 : i+1+j]
			if lit == "" {
				lit = "'"
			}
			dp.parts = append(dp.parts, patPart{text: lit})
			i += j + 2
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i
			for j < len(p) && p[j] == c {
				j++
			}
			if !strings.ContainsRune("yMdHhmsSaED", rune(c)) {
				return nil, fmt.Errorf("date pattern %q: the letter %c is not supported (use y M d H h m s S a E D)", p, c)
			}
			dp.parts = append(dp.parts, patPart{letter: c, n: j - i})
			i = j
		default:
			dp.parts = append(dp.parts, patPart{text: string(c)})
			i++
		}
	}
	return dp, nil
}

func appendPadded(b []byte, v int64, n int) []byte {
	var buf [20]byte
	i := len(buf)
	for v > 0 || i == len(buf) {
		i--
		buf[i] = byte('0' + v%10)
		v /= 10
	}
	for k := len(buf) - i; k < n; k++ {
		b = append(b, '0')
	}
	return append(b, buf[i:]...)
}

// format writes the timestamp (sec, nsec) by the pattern.
func (dp *datePattern) format(b []byte, sec int64, nsec int32) []byte {
	days, sod := splitSec(sec)
	y, mo, d := civil.Date(days)
	for _, p := range dp.parts {
		switch p.letter {
		case 0:
			b = append(b, p.text...)
		case 'y':
			if p.n == 2 {
				b = appendPadded(b, y%100, 2)
			} else {
				b = appendPadded(b, y, p.n)
			}
		case 'M':
			switch {
			case p.n >= 4:
				b = append(b, time.Month(mo).String()...)
			case p.n == 3:
				b = append(b, time.Month(mo).String()[:3]...)
			default:
				b = appendPadded(b, mo, p.n)
			}
		case 'd':
			b = appendPadded(b, d, p.n)
		case 'D':
			b = appendPadded(b, days-civil.Days(y, 1, 1)+1, p.n)
		case 'H':
			b = appendPadded(b, sod/3600, p.n)
		case 'h':
			h := sod / 3600 % 12
			if h == 0 {
				h = 12
			}
			b = appendPadded(b, h, p.n)
		case 'm':
			b = appendPadded(b, sod/60%60, p.n)
		case 's':
			b = appendPadded(b, sod%60, p.n)
		case 'S':
			ns := int64(nsec)
			for i := 0; i < p.n; i++ {
				div := int64(100_000_000)
				if i < 9 {
					div = pow10[8-i]
					b = append(b, byte('0'+ns/div%10))
				} else {
					b = append(b, '0')
				}
			}
		case 'a':
			if sod < 12*3600 {
				b = append(b, "AM"...)
			} else {
				b = append(b, "PM"...)
			}
		case 'E':
			wd := time.Weekday((days%7 + 7 + 4) % 7) // 1970-01-01 was a Thursday
			if p.n >= 4 {
				b = append(b, wd.String()...)
			} else {
				b = append(b, wd.String()[:3]...)
			}
		}
	}
	return b
}

// parse reads s by the pattern; false when it does not match.
func (dp *datePattern) parse(s string) (sec int64, nsec int32, ok bool) {
	y, mo, d := int64(1970), int64(1), int64(1)
	var h, mi, se, ns int64
	pm, h12 := false, false
	i := 0
	for k, p := range dp.parts {
		if p.letter == 0 {
			if !strings.HasPrefix(s[i:], p.text) {
				return 0, 0, false
			}
			i += len(p.text)
			continue
		}
		// A field runs for its width when the next part is a field too
		// (yyyyMMdd), else over all its digits.
		maxw := 18
		if k+1 < len(dp.parts) && dp.parts[k+1].letter != 0 {
			maxw = p.n
		}
		if p.letter == 'a' {
			switch {
			case strings.HasPrefix(s[i:], "AM"):
			case strings.HasPrefix(s[i:], "PM"):
				pm = true
			default:
				return 0, 0, false
			}
			i += 2
			continue
		}
		if p.letter == 'E' || p.letter == 'M' && p.n >= 3 {
			return 0, 0, false
		}
		start := i
		for i < len(s) && i-start < maxw && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == start {
			return 0, 0, false
		}
		v, _ := digitsAt(s, start, min(i-start, 18))
		switch p.letter {
		case 'y':
			y = v
			if p.n == 2 && i-start == 2 {
				y += 2000
			}
		case 'M':
			mo = v
		case 'd':
			d = v
		case 'D':
			mo, d = 1, v
		case 'H':
			h = v
		case 'h':
			h, h12 = v, true
		case 'm':
			mi = v
		case 's':
			se = v
		case 'S':
			n := i - start
			ns = v
			for ; n < 9; n++ {
				ns *= 10
			}
			for ; n > 9; n-- {
				ns /= 10
			}
		}
	}
	if i != len(s) {
		return 0, 0, false
	}
	if h12 {
		h %= 12
		if pm {
			h += 12
		}
	}
	if mo < 1 || mo > 12 || d < 1 || (d > civil.DaysIn(y, mo) && d > 0 && mo != 1) || h > 23 || mi > 59 || se > 59 {
		return 0, 0, false
	}
	return civil.Days(y, mo, 1)*secondsPerDay + (d-1)*secondsPerDay + h*3600 + mi*60 + se, int32(ns), true
}
