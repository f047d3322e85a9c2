package pipeline

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// gjsonPath is how a path was read before the one-pass scan: a gjson
// validity check, then gjson.Get. The scan must give the same.
func gjsonPath(raw []byte, p string) (any, error) {
	if !gjson.ValidBytes(raw) {
		return nil, fmt.Errorf("the value is not JSON")
	}
	return resultValue(gjson.GetBytes(raw, p)), nil
}

// Keys the random documents use; the paths read some of them. "\u0061"
// is a escaped, "é" is written raw and escaped.
var scanKeys = []struct{ json, name string }{
	{`"a"`, "a"}, {`"\u0061"`, "a"}, {`"b"`, "b"}, {`"0"`, "0"}, {`"1"`, "1"},
	{`"é"`, "é"}, {`"\u00e9"`, "é"}, {`"a b"`, "a b"}, {`"x.y"`, "x.y"}, {`"q\"r"`, `q"r`}, {`""`, ""},
}

var scanScalars = []string{
	`0`, `-0`, `1`, `-17`, `123456789012345678`, `1234567890123456789`, `99999999999999999999`,
	`1.5`, `-0.25`, `1e3`, `1E-2`, `2.5e+10`, `1.0`, `true`, `false`, `null`,
	`""`, `"s"`, `"a\"b"`, `"\u00e9t\u00e9"`, `"\ud83d\ude00"`, `"\ud800"`, `"日本"`, `"tab\there"`, `"\/"`,
}

var scanSpace = []string{"", "", "", " ", "\n\t", "\r "}

func randJSON(r *rand.Rand, depth int) string {
	ws := func() string { return scanSpace[r.IntN(len(scanSpace))] }
	if depth == 0 || r.IntN(3) == 0 {
		return scanScalars[r.IntN(len(scanScalars))]
	}
	var b strings.Builder
	n := r.IntN(5)
	if r.IntN(2) == 0 {
		b.WriteString("{" + ws())
		for i := range n {
			if i > 0 {
				b.WriteString("," + ws())
			}
			b.WriteString(scanKeys[r.IntN(len(scanKeys))].json + ws() + ":" + ws() + randJSON(r, depth-1) + ws())
		}
		b.WriteString("}")
	} else {
		b.WriteString("[" + ws())
		for i := range n {
			if i > 0 {
				b.WriteString("," + ws())
			}
			b.WriteString(randJSON(r, depth-1) + ws())
		}
		b.WriteString("]")
	}
	return b.String()
}

const junk = "{}[],:\"\\ x0-e.\x01\x1f\t"

// mutate sometimes breaks a document: cuts it, changes a byte, adds text.
func mutate(r *rand.Rand, s string) string {
	switch r.IntN(8) {
	case 0:
		if len(s) > 0 {
			return s[:r.IntN(len(s))]
		}
	case 1:
		if len(s) > 0 {
			i := r.IntN(len(s))
			return s[:i] + string(junk[r.IntN(len(junk))]) + s[i+1:]
		}
	case 2:
		return s + " x"
	case 3:
		return "  " + s + "\n"
	}
	return s
}

// scanExprs are expressions whose paths share prefixes, overlap and
// index arrays, with their paths as gjsonPath reads them.
var scanExprs = []struct {
	src   string
	paths []string
}{
	{`[value.a, value.a.b, value.a[0], value.a["1"].a, value.b, value["é"], value["0"]]`, []string{"a", "a.b", "a.0", "a.1.a", "b", "é", "0"}},
	{`[value[0], value[1].a, value[0][1], value.a.a.a]`, []string{"0", "1.a", "0.1", "a.a.a"}},
	{`[value["a b"], value["q\"r"], value.b.b, value.b[0].b, value["x.y"]]`, []string{"a b", `q"r`, "b.b", "b.0.b", `x\.y`}},
	{`[value.a, value[""]]`, []string{"a", ""}},
}

// TestScanMatchesGjson compares reading paths by one scan with the gjson
// reads it replaces, over random documents (duplicate and escaped keys,
// unicode, nested objects and arrays, numbers of every form, values that
// are not JSON or not an object).
func TestScanMatchesGjson(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var exprs []*Expr
	for _, x := range scanExprs {
		e, err := CompileExpr(x.src, AnyResult)
		if err != nil {
			t.Fatal(err)
		}
		if len(e.paths) == 0 {
			t.Fatalf("%s: no paths collected", x.src)
		}
		exprs = append(exprs, e)
	}
	found, bad := 0, 0
	for n := 0; n < 20000; n++ {
		doc := mutate(r, randJSON(r, 4))
		for i, e := range exprs {
			got, err := e.Eval(&handle[krec]{acc: &kAccess, rec: krec{Value: doc}})
			for j, p := range scanExprs[i].paths {
				want, werr := gjsonPath([]byte(doc), p)
				if (err != nil) != (werr != nil) {
					t.Fatalf("%s on %q: error %v, gjson's %v", e.src, doc, err, werr)
				}
				if err != nil {
					bad++
					break
				}
				g := got.([]any)[j]
				if !reflect.DeepEqual(g, want) {
					t.Fatalf("%s on %q: path %s is %#v, gjson's %#v", e.src, doc, p, g, want)
				}
				if want != nil {
					found++
				}
			}
		}
	}
	// The test means something only if it met both kinds.
	if found < 10000 || bad < 1000 {
		t.Fatalf("found %d values, %d records not JSON: the generator misses cases", found, bad)
	}
}

// TestScanEdgeCases pins cases by name, against gjson.
func TestScanEdgeCases(t *testing.T) {
	for _, tc := range []struct{ doc, path string }{
		{`{"a":1,"a":2}`, "a"},                     // duplicate: the first
		{`{"a":{"x":1},"a":{"b":2}}`, "a.b"},       // duplicate: the first holding the rest
		{`{"a":{"b":1},"a":{"b":2}}`, "a.b"},       // both hold it: the first
		{`{"a":[1,{"b":3}],"a":{"b":2}}`, "a.1.b"}, // through an array
		{`{"\u0061":5}`, "a"},                      // escaped key
		{`{"é":"\u00e9"}`, "é"},                    // unicode key and value
		{`{"a":123456789012345678}`, "a"},          // int
		{`{"a":1234567890123456789}`, "a"},         // int, 19 digits
		{`{"a":12345678901234567890}`, "a"},        // beyond int64: float
		{`{"a":-0}`, "a"},                          // int zero
		{`{"a":1.0}`, "a"},                         // float
		{`{"a":1e2}`, "a"},                         // exponent: float
		{`{"a":null}`, "a"},                        // null
		{`{"b":1}`, "a"},                           // absent
		{`{"a":{"b":[1,2,{"c":"d"}]}}`, "a"},       // object value
		{`[10,20,30]`, "1"},                        // top-level array
		{`"x{\"a\":1}"`, "a"},                      // a string at the top: gjson's own answer
		{`{"a":1`, "a"},                            // not JSON
		{`{"a":1} x`, "a"},                         // text after
		{`{"a":"\ud800"}`, "a"},                    // lone surrogate
	} {
		e, err := CompileExpr("value."+strings.ReplaceAll(tc.path, ".", "."), AnyResult)
		if err != nil {
			// value.1 is not an expression: index it.
			segs := strings.Split(tc.path, ".")
			src := "value"
			for _, s := range segs {
				src += "[" + strconv.Quote(s) + "]"
			}
			if e, err = CompileExpr(src, AnyResult); err != nil {
				t.Fatal(err)
			}
		}
		got, err := e.Eval(&handle[krec]{acc: &kAccess, rec: krec{Value: tc.doc}})
		want, werr := gjsonPath([]byte(tc.doc), tc.path)
		if (err != nil) != (werr != nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("%s on %s: %#v, %v; gjson %#v, %v", e.src, tc.doc, got, err, want, werr)
		}
	}
}
