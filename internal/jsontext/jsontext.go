// Package jsontext writes JSON text without reflection, for the encoders
// on hot paths (the SQL select step's rows, the Nexmark generator's
// events). Standard library only.
package jsontext

import "unicode/utf8"

// noEscape marks the ASCII bytes a JSON string holds as they are.
var noEscape = func() (t [utf8.RuneSelf]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

const hex = "0123456789abcdef"

// AppendString appends s as a JSON string, as encoding/json writes it
// (without HTML escaping): invalid UTF-8 becomes U+FFFD, and U+2028 and
// U+2029 are escaped.
func AppendString(b []byte, s string) []byte {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		// Eight bytes at a time while none needs a look: none is below
		// 0x20 or above 0x7f, a '"' or a '\\' (the tricks of "Bit
		// Twiddling Hacks" for a byte less than n and a zero byte; the
		// loop is written out so that it stays in this function).
		for ; i+8 <= len(s); i += 8 {
			w := s[i : i+8]
			x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
				uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
			q, bs := x^('"'*ones), x^('\\'*ones)
			if (x|(x-0x20*ones)&^x|(q-ones)&^q|(bs-ones)&^bs)&highs != 0 {
				break
			}
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if noEscape[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, `\u202`...)
			b = append(b, hex[r&0xf])
			i += size
			start = i
		default:
			i += size
		}
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
