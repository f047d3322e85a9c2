package pipeline

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// One pass over a record's JSON value for all the paths an expression
// reads: the scan checks the whole value is JSON, by exactly the rules of
// gjson.Valid (the validator below is gjson's, v1.18.0, with the paths
// added), and notes where each wanted path's value lies. Reading a path
// then converts only that span. Before, every path was a gjson.Get that
// rescanned the record from its start, after a gjson.Valid scan of its
// own (docs/benchmarks.md, Nexmark: 45 % of q0's CPU).
//
// The answer is the one gjson.Get gives: the first match in document
// order, so with duplicate keys the first one holding the rest of the
// path (gjson goes on past a matching key whose value lacks the rest).
// Paths gjson reads otherwise (escaped characters, a segment that is
// empty, too long an index) and values that are not an object or an
// array at the top (gjson.Get looks for a '{' or '[' anywhere in them)
// still go through gjson.Get.

// pathTrie is the set of plain paths an expression reads, as a tree of
// segments.
type pathTrie struct {
	kids []*pathTrie
	seg  string
	idx  int // the segment as an array index, -1 when not one
	slot int // the path ending here, -1 when none
}

// plainPath splits a gjson path into its segments when every segment is
// a plain name or index that gjson matches literally.
func plainPath(p string) ([]string, bool) {
	if p == "" || strings.ContainsAny(p, "\\|*?#@!=<>%[]{}()\"") {
		return nil, false
	}
	segs := strings.Split(p, ".")
	for _, s := range segs {
		if s == "" || (isDigits(s) && len(s) > 9) {
			return nil, false
		}
	}
	return segs, true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// add adds the path segs as slot.
func (t *pathTrie) add(segs []string, slot int) {
	n := t
	for _, s := range segs {
		var next *pathTrie
		for _, k := range n.kids {
			if k.seg == s {
				next = k
				break
			}
		}
		if next == nil {
			next = &pathTrie{seg: s, idx: -1, slot: -1}
			if isDigits(s) {
				next.idx, _ = strconv.Atoi(s)
			}
			n.kids = append(n.kids, next)
		}
		n = next
	}
	n.slot = slot
}

// textSpan is where a path's value lies in the record value; end 0 when the
// path is absent.
type textSpan struct{ start, end int }

// scanner is one scan's state.
type scanner struct {
	data  []byte
	spans []textSpan
}

// scanPaths checks data is JSON (as gjson.ValidBytes) and fills spans,
// one per slot of t, with where the paths lie.
func scanPaths(data []byte, t *pathTrie, spans []textSpan) bool {
	clear(spans)
	s := scanner{data: data, spans: spans}
	_, ok := s.payload(0, t)
	return ok
}

func (s *scanner) payload(i int, t *pathTrie) (int, bool) {
	data := s.data
	for ; i < len(data); i++ {
		switch data[i] {
		default:
			var ok bool
			i, ok = s.any(i, t)
			if !ok {
				return i, false
			}
			for ; i < len(data); i++ {
				switch data[i] {
				default:
					return i, false
				case ' ', '\t', '\n', '\r':
					continue
				}
			}
			return i, true
		case ' ', '\t', '\n', '\r':
			continue
		}
	}
	return i, false
}

// any reads one value at i; t (nil: no path goes through it) is its node.
func (s *scanner) any(i int, t *pathTrie) (int, bool) {
	data := s.data
	for ; i < len(data); i++ {
		if c := data[i]; c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			continue
		}
		start := i
		end, ok := s.value(i, t)
		if ok && t != nil && t.slot >= 0 && s.spans[t.slot].end == 0 {
			s.spans[t.slot] = textSpan{start, end}
		}
		return end, ok
	}
	return i, false
}

func (s *scanner) value(i int, t *pathTrie) (int, bool) {
	data := s.data
	switch data[i] {
	case '{':
		if t == nil || len(t.kids) == 0 {
			return validobject(data, i+1)
		}
		return s.object(i+1, t)
	case '[':
		if t == nil || len(t.kids) == 0 {
			return validarray(data, i+1)
		}
		return s.array(i+1, t)
	case '"':
		return validstring(data, i+1)
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return validnumber(data, i+1)
	case 't':
		return validtrue(data, i+1)
	case 'f':
		return validfalse(data, i+1)
	case 'n':
		return validnull(data, i+1)
	}
	return i, false
}

// object is validobject, following the keys in t.
func (s *scanner) object(i int, t *pathTrie) (int, bool) {
	data := s.data
	var ok bool
	for ; i < len(data); i++ {
		switch data[i] {
		default:
			return i, false
		case ' ', '\t', '\n', '\r':
			continue
		case '}':
			return i + 1, true
		case '"':
		key:
			ks := i + 1
			if i, ok = validstring(data, i+1); !ok {
				return i, false
			}
			kid := matchKey(t, data[ks:i-1])
			if i, ok = validcolon(data, i); !ok {
				return i, false
			}
			if i, ok = s.any(i, kid); !ok {
				return i, false
			}
			if i, ok = validcomma(data, i, '}'); !ok {
				return i, false
			}
			if data[i] == '}' {
				return i + 1, true
			}
			i++
			for ; i < len(data); i++ {
				switch data[i] {
				default:
					return i, false
				case ' ', '\t', '\n', '\r':
					continue
				case '"':
					goto key
				}
			}
			return i, false
		}
	}
	return i, false
}

// matchKey is the child of t named key (the text between the quotes), as
// gjson compares: unescaped when it has escapes.
func matchKey(t *pathTrie, key []byte) *pathTrie {
	for _, b := range key {
		if b == '\\' {
			k := gjson.Parse(`"` + string(key) + `"`).Str
			for _, c := range t.kids {
				if c.seg == k {
					return c
				}
			}
			return nil
		}
	}
	for _, c := range t.kids {
		if c.seg == string(key) {
			return c
		}
	}
	return nil
}

// array is validarray, following the indexes in t.
func (s *scanner) array(i int, t *pathTrie) (int, bool) {
	data := s.data
	var ok bool
	for ; i < len(data); i++ {
		switch data[i] {
		default:
			for h := 0; i < len(data); i, h = i+1, h+1 {
				var kid *pathTrie
				for _, c := range t.kids {
					if c.idx == h {
						kid = c
						break
					}
				}
				if i, ok = s.any(i, kid); !ok {
					return i, false
				}
				if i, ok = validcomma(data, i, ']'); !ok {
					return i, false
				}
				if data[i] == ']' {
					return i + 1, true
				}
			}
		case ' ', '\t', '\n', '\r':
			continue
		case ']':
			return i + 1, true
		}
	}
	return i, false
}

// spanValue converts the JSON text of one value (valid) as resultValue
// converts what gjson found there.
func spanValue(b []byte) any {
	switch b[0] {
	case '"':
		for _, c := range b[1 : len(b)-1] {
			if c == '\\' {
				return gjson.Parse(string(b)).Str
			}
		}
		return string(b[1 : len(b)-1])
	case 't':
		return true
	case 'f':
		return false
	case 'n':
		return nil
	case '{', '[':
		v, err := ParseJSON(b)
		if err != nil {
			return nil // unreachable: the document was valid
		}
		return v
	}
	// A number: an integer of up to 18 digits without a fraction or an
	// exponent is that int, as number gives.
	neg := b[0] == '-'
	d := b
	if neg {
		d = b[1:]
	}
	if len(d) <= 18 {
		n := 0
		ok := true
		for _, c := range d {
			if c < '0' || c > '9' {
				ok = false
				break
			}
			n = n*10 + int(c-'0')
		}
		if ok {
			if neg {
				n = -n
			}
			return n
		}
	}
	raw := string(b)
	f, _ := strconv.ParseFloat(raw, 64)
	return number(raw, f)
}

// The validator of gjson v1.18.0 (github.com/tidwall/gjson, MIT licence),
// as it is: scanPaths must accept exactly what gjson.ValidBytes accepts.

func validobject(data []byte, i int) (outi int, ok bool) {
	for ; i < len(data); i++ {
		switch data[i] {
		default:
			return i, false
		case ' ', '\t', '\n', '\r':
			continue
		case '}':
			return i + 1, true
		case '"':
		key:
			if i, ok = validstring(data, i+1); !ok {
				return i, false
			}
			if i, ok = validcolon(data, i); !ok {
				return i, false
			}
			if i, ok = validany(data, i); !ok {
				return i, false
			}
			if i, ok = validcomma(data, i, '}'); !ok {
				return i, false
			}
			if data[i] == '}' {
				return i + 1, true
			}
			i++
			for ; i < len(data); i++ {
				switch data[i] {
				default:
					return i, false
				case ' ', '\t', '\n', '\r':
					continue
				case '"':
					goto key
				}
			}
			return i, false
		}
	}
	return i, false
}

func validany(data []byte, i int) (outi int, ok bool) {
	for ; i < len(data); i++ {
		switch data[i] {
		default:
			return i, false
		case ' ', '\t', '\n', '\r':
			continue
		case '{':
			return validobject(data, i+1)
		case '[':
			return validarray(data, i+1)
		case '"':
			return validstring(data, i+1)
		case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			return validnumber(data, i+1)
		case 't':
			return validtrue(data, i+1)
		case 'f':
			return validfalse(data, i+1)
		case 'n':
			return validnull(data, i+1)
		}
	}
	return i, false
}

func validcolon(data []byte, i int) (outi int, ok bool) {
	for ; i < len(data); i++ {
		switch data[i] {
		default:
			return i, false
		case ' ', '\t', '\n', '\r':
			continue
		case ':':
			return i + 1, true
		}
	}
	return i, false
}

func validcomma(data []byte, i int, end byte) (outi int, ok bool) {
	for ; i < len(data); i++ {
		switch data[i] {
		default:
			return i, false
		case ' ', '\t', '\n', '\r':
			continue
		case ',':
			return i, true
		case end:
			return i, true
		}
	}
	return i, false
}

func validarray(data []byte, i int) (outi int, ok bool) {
	for ; i < len(data); i++ {
		switch data[i] {
		default:
			for ; i < len(data); i++ {
				if i, ok = validany(data, i); !ok {
					return i, false
				}
				if i, ok = validcomma(data, i, ']'); !ok {
					return i, false
				}
				if data[i] == ']' {
					return i + 1, true
				}
			}
		case ' ', '\t', '\n', '\r':
			continue
		case ']':
			return i + 1, true
		}
	}
	return i, false
}

func validstring(data []byte, i int) (outi int, ok bool) {
	for ; i < len(data); i++ {
		if data[i] < ' ' {
			return i, false
		} else if data[i] == '\\' {
			i++
			if i == len(data) {
				return i, false
			}
			switch data[i] {
			default:
				return i, false
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				for j := 0; j < 4; j++ {
					i++
					if i >= len(data) {
						return i, false
					}
					if !((data[i] >= '0' && data[i] <= '9') ||
						(data[i] >= 'a' && data[i] <= 'f') ||
						(data[i] >= 'A' && data[i] <= 'F')) {
						return i, false
					}
				}
			}
		} else if data[i] == '"' {
			return i + 1, true
		}
	}
	return i, false
}

func validnumber(data []byte, i int) (outi int, ok bool) {
	i--
	// sign
	if data[i] == '-' {
		i++
		if i == len(data) {
			return i, false
		}
		if data[i] < '0' || data[i] > '9' {
			return i, false
		}
	}
	// int
	if i == len(data) {
		return i, false
	}
	if data[i] == '0' {
		i++
	} else {
		for ; i < len(data); i++ {
			if data[i] >= '0' && data[i] <= '9' {
				continue
			}
			break
		}
	}
	// frac
	if i == len(data) {
		return i, true
	}
	if data[i] == '.' {
		i++
		if i == len(data) {
			return i, false
		}
		if data[i] < '0' || data[i] > '9' {
			return i, false
		}
		i++
		for ; i < len(data); i++ {
			if data[i] >= '0' && data[i] <= '9' {
				continue
			}
			break
		}
	}
	// exp
	if i == len(data) {
		return i, true
	}
	if data[i] == 'e' || data[i] == 'E' {
		i++
		if i == len(data) {
			return i, false
		}
		if data[i] == '+' || data[i] == '-' {
			i++
		}
		if i == len(data) {
			return i, false
		}
		if data[i] < '0' || data[i] > '9' {
			return i, false
		}
		i++
		for ; i < len(data); i++ {
			if data[i] >= '0' && data[i] <= '9' {
				continue
			}
			break
		}
	}
	return i, true
}

func validtrue(data []byte, i int) (outi int, ok bool) {
	if i+3 <= len(data) && data[i] == 'r' && data[i+1] == 'u' &&
		data[i+2] == 'e' {
		return i + 3, true
	}
	return i, false
}

func validfalse(data []byte, i int) (outi int, ok bool) {
	if i+4 <= len(data) && data[i] == 'a' && data[i+1] == 'l' &&
		data[i+2] == 's' && data[i+3] == 'e' {
		return i + 4, true
	}
	return i, false
}

func validnull(data []byte, i int) (outi int, ok bool) {
	if i+3 <= len(data) && data[i] == 'u' && data[i+1] == 'l' &&
		data[i+2] == 'l' {
		return i + 3, true
	}
	return i, false
}
