package eval

import (
	"encoding/binary"
	"encoding/json"
	"math/rand"
	"strings"
	"testing"
)

// TestSpecialByte: the eight-byte test finds a quote, a backslash or a
// control character exactly when a byte of the word is one.
func TestSpecialByte(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	interesting := []byte{0, 1, 0x1f, 0x20, 0x21, '"', '\\', 0x7f, 0x80, 0xff, 'a', '#', ']', 0x5b, 0x5d}
	var b [8]byte
	for n := 0; n < 200000; n++ {
		want := false
		for i := range b {
			if rng.Intn(2) == 0 {
				b[i] = interesting[rng.Intn(len(interesting))]
			} else {
				b[i] = byte(rng.Intn(256))
			}
			if b[i] < 0x20 || b[i] == '"' || b[i] == '\\' {
				want = true
			}
		}
		if got := specialByte(binary.LittleEndian.Uint64(b[:])); got != want {
			t.Fatalf("% x: specialByte %v, want %v", b, got, want)
		}
	}
}

// TestScannerStringAtEveryOffset: a string's end, an escape or a control
// character is found wherever it falls in the eight-byte steps.
func TestScannerStringAtEveryOffset(t *testing.T) {
	for n := 0; n < 40; n++ {
		body := strings.Repeat("x", n)
		for _, c := range []struct{ json, want string }{
			{`"` + body + `"`, body},
			{`"` + body + `\n"`, body + "\n"},
			{`"` + body + `\"yz"`, body + `"yz`},
		} {
			p := scanner{s: c.json + ` tail`}
			got, err := p.str()
			if err != nil || got != c.want || p.s[p.i:] != " tail" {
				t.Fatalf("%q: got %q, %v, rest %q", c.json, got, err, p.s[p.i:])
			}
		}
		for _, bad := range []string{`"` + body + "\x01" + `yyyyyyyyy"`, `"` + body} {
			p := scanner{s: bad}
			if _, err := p.str(); err == nil {
				t.Fatalf("%q: no error", bad)
			}
		}
	}
}

// TestValidJSON: ValidJSON agrees with encoding/json.Valid on documents
// and on every one-byte change and cut of them.
func TestValidJSON(t *testing.T) {
	docs := []string{
		`{"event_type":2,"person":null,"auction":null,"bid":{"auction":1000,"bidder":1001,"price":13015233,"channel":"Facebook","url":"https://x/y?q=1","dateTime":"2026-01-01 00:00:00.000","extra":"ab\"c\\u00e9\n"}}`,
		` [1, -0.5e+3, 0, -0, true, false, null, "x\u00e9", {}, [], {"a":[{"b":1E9}]}] `,
		`"just a string"`, `12`, `-0.0`, `1.`, `01`, `-`, `+1`, `.5`, `1e`, `1e+`, `tru`, `nul`, `{"a" 1}`, `{"a":1,}`, `[1,]`, `{,}`,
		`"\x"`, `"\u12"`, `"\u12zz"`, "\"a\x01\"", "\"\xff\xfe\"", `{"a":1}x`, `{"a":1} {}`, ``, ` `, `[`, `]`, `}`, `{"a":[1,2}`,
	}
	check := func(s string) {
		t.Helper()
		if got, want := ValidJSON([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Fatalf("%q: ValidJSON %v, json.Valid %v", s, got, want)
		}
	}
	alphabet := []byte("{}[]\":,\\ \t\n0123456789-+.eEtrufalsn\x01\x7f\xc3")
	for _, d := range docs {
		check(d)
		for i := 0; i <= len(d); i++ {
			check(d[:i])
			for _, c := range alphabet {
				if i < len(d) {
					check(d[:i] + string(c) + d[i+1:])
				}
				check(d[:i] + string(c) + d[i:])
			}
		}
	}
}

func BenchmarkValidJSON(b *testing.B) {
	v := []byte(`{"event_type":2,"person":null,"auction":null,"bid":{"auction":1000,"bidder":1001,"price":13015233,"channel":"Facebook","url":"https://www.nexmark.com/hszk/nmop/kak/item.htm?query=1","dateTime":"2026-01-01 00:00:00.000","extra":"onayzqxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}`)
	b.Run("eval", func(b *testing.B) {
		for b.Loop() {
			ValidJSON(v)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			json.Valid(v)
		}
	})
}

// FuzzValidJSON: ValidJSON (the scanner's skip) agrees with
// encoding/json.Valid on any input (`go test -fuzz FuzzValidJSON`).
func FuzzValidJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"b":"c\u00e9"}],"d":null}`, `[[[]]]`, `{"a":{}}`, `"x\"y"`, `-1.5e3`, `{"a":1,"a":2}`, "[1,\x01]"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := ValidJSON(b), json.Valid(b); got != want && !(want && deeperThan(b, maxDepth)) {
			t.Fatalf("%q: ValidJSON %v, json.Valid %v", b, got, want)
		}
	})
}

// deeperThan reports whether b opens more than n brackets at once
// (strings not considered: a bound, for the one documented difference).
func deeperThan(b []byte, n int) bool {
	d := 0
	for _, c := range b {
		switch c {
		case '{', '[':
			if d++; d > n {
				return true
			}
		case '}', ']':
			d--
		}
	}
	return false
}
