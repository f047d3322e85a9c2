package eval

import (
	"errors"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/internal/sql/ast"
	"github.com/onceflow/onceflow/internal/sql/parser"
)

func mustSchema(t testing.TB, cols ...[2]string) Schema {
	t.Helper()
	var s Schema
	for _, c := range cols {
		col, err := ParseSchemaColumn(c[0], c[1])
		if err != nil {
			t.Fatalf("%s %s: %v", c[0], c[1], err)
		}
		s = append(s, col)
	}
	return s
}

func mustSelect(t testing.TB, s Schema, where string, key []string, cols ...[2]string) *Select {
	t.Helper()
	var named []NamedExpr
	for _, c := range cols {
		e, err := parser.ParseExpr(c[1])
		if err != nil {
			t.Fatalf("%s: %v", c[1], err)
		}
		named = append(named, NamedExpr{Name: c[0], Expr: e})
	}
	var w ast.Expr
	if where != "" {
		var err error
		if w, err = parser.ParseExpr(where); err != nil {
			t.Fatal(err)
		}
	}
	sel, err := CompileSelect(s, named, w, key)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

// The row codec: every column written back unchanged (columns nil).
func TestDecodeEncodeRoundTrip(t *testing.T) {
	s := mustSchema(t, [2]string{"b", "BIGINT"}, [2]string{"s", "STRING"}, [2]string{"ts", "TIMESTAMP(3)"},
		[2]string{"ltz", "TIMESTAMP_LTZ(3)"}, [2]string{"dec", "DECIMAL(10, 3)"}, [2]string{"d", "DOUBLE"},
		[2]string{"f", "FLOAT"}, [2]string{"flag", "BOOLEAN"}, [2]string{"by", "BYTES"}, [2]string{"dt", "DATE"},
		[2]string{"tm", "TIME(3)"}, [2]string{"p", "ROW<id BIGINT, tags ARRAY<STRING>, inner ROW<x INT>>"},
		[2]string{"m", "MAP<STRING, DOUBLE>"}, [2]string{"missing", "INT"})
	sel, err := CompileSelect(s, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ in, want string }{
		{
			`{"b": 1, "s": "a\"b\\c\u00e9\n\u0001", "ts": "2026-12-01 10:00:00.1", "ltz": "2026-12-01T10:00:00.123Z",
			  "dec": 1.5, "d": 1e21, "f": 0.1, "flag": false, "by": "AQID", "dt": "2026-02-28", "tm": "23:59:59.5",
			  "p": {"inner": {"x": 3}, "id": 9, "tags": ["x", null], "other": 1}, "m": {"a": 1.5, "b": null}}`,
			`{"b":1,"s":"a\"b\\cé\n\u0001","ts":"2026-12-01 10:00:00.100","ltz":"2026-12-01 10:00:00.123Z",` +
				`"dec":1.500,"d":1.0E21,"f":0.1,"flag":false,"by":"AQID","dt":"2026-02-28","tm":"23:59:59.500",` +
				`"p":{"id":9,"tags":["x",null],"inner":{"x":3}},"m":{"a":1.5,"b":null},"missing":null}`,
		},
		{ // JSON null, strings for numbers, epoch milliseconds for a timestamp, ISO with an offset
			`{"b": "42", "s": null, "ts": 1700000000123, "ltz": "2026-12-01T12:00:00+02:00", "dec": "2.0005",
			  "d": "NaN", "p": null, "m": {}}`,
			`{"b":42,"s":null,"ts":"2023-11-14 22:13:20.123","ltz":"2026-12-01 10:00:00.000Z","dec":2.001,` +
				`"d":"NaN","f":null,"flag":null,"by":null,"dt":null,"tm":null,"p":null,"m":{},"missing":null}`,
		},
		{ // a STRING column takes any JSON value as its text
			`{"s": {"a": [1, 2]}}`,
			`{"b":null,"s":"{\"a\": [1, 2]}","ts":null,"ltz":null,"dec":null,"d":null,"f":null,"flag":null,"by":null,"dt":null,"tm":null,"p":null,"m":null,"missing":null}`,
		},
	} {
		res, err := sel.Run(&Ctx{}, []byte(tc.in), &Meta{}, nil)
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if got := string(res.Value); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
}

// A value that does not fit the schema is an error naming the column,
// the type and the value.
func TestDecodeErrors(t *testing.T) {
	s := mustSchema(t, [2]string{"b", "BIGINT"}, [2]string{"ts", "TIMESTAMP(3)"}, [2]string{"p", "ROW<id BIGINT>"},
		[2]string{"i", "INT"}, [2]string{"dec", "DECIMAL(4, 2)"}, [2]string{"flag", "BOOLEAN"})
	sel, err := CompileSelect(s, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		`{"b": "abc"}`:                       `column b: expected BIGINT, got "abc"`,
		`{"b": 1.5}`:                         `column b: expected BIGINT, got 1.5`,
		`{"b": [1]}`:                         `column b: expected BIGINT, got [1]`,
		`{"ts": "yesterday"}`:                `column ts: expected TIMESTAMP(3), got "yesterday"`,
		`{"ts": "2026-02-30 10:00:00"}`:      `column ts: expected TIMESTAMP(3), got "2026-02-30 10:00:00"`,
		`{"p": {"id": "x"}}`:                 `column p.id: expected BIGINT, got "x"`,
		`{"p": 5}`:                           "column p: expected ROW<`id` BIGINT>, got 5",
		`{"i": 3000000000}`:                  `column i: expected INT, got 3000000000`,
		`{"dec": 123.4}`:                     `column dec: expected DECIMAL(4, 2), got 123.4`,
		`{"flag": 1}`:                        `column flag: expected BOOLEAN, got 1`,
		`{"b": 1`:                            "the value is not a JSON object",
		`{"b": 1} x`:                         "the value is not a JSON object: at byte 9: unexpected text after the JSON object",
		`not json`:                           "the value is not a JSON object",
		`[1, 2]`:                             "the value is not a JSON object",
		`null`:                               "the value is JSON null, not an object",
		``:                                   "the value is empty",
		`{"x": tru}`:                         "the value is not a JSON object",
		`{"x": "a\q"}`:                       "bad escape",
		`{"x": 1.2.3}`:                       "expected , or }",
		`{"x": 01}`:                          "bad number",
		`{"x": -}`:                           "bad number",
		`{"x": ` + strings.Repeat("[", 2000): "nested more than 1000 levels deep",
	} {
		_, err := sel.Run(&Ctx{}, []byte(in), &Meta{}, nil)
		var de *DecodeError
		if err == nil || !strings.Contains(err.Error(), want) || !errors.As(err, &de) {
			t.Errorf("%s: %v, want a DecodeError with %q", in, err, want)
		}
	}
}

// Only the columns the expressions use are decoded: a wrong value in
// another one is not an error, and is never read.
func TestDecodeOnlyUsedColumns(t *testing.T) {
	s := mustSchema(t, [2]string{"a", "BIGINT"}, [2]string{"b", "BIGINT"})
	sel := mustSelect(t, s, "", nil, [2]string{"x", "a + 1"})
	res, err := sel.Run(&Ctx{}, []byte(`{"a": 1, "b": "not a number"}`), &Meta{}, nil)
	if err != nil || string(res.Value) != `{"x":2}` {
		t.Errorf("got %s, %v", res.Value, err)
	}
	if v, _, _, _ := sel.Needs(); !v {
		t.Error("Needs: the value is read")
	}
	// The same for the fields of a ROW read only through some of them,
	// unless it is also read whole.
	s = mustSchema(t, [2]string{"p", "ROW<a BIGINT, b BIGINT, c ROW<d INT>>"})
	in := []byte(`{"p": {"a": 1, "b": "not a number", "c": {"d": 4}}}`)
	sel = mustSelect(t, s, "", nil, [2]string{"x", "p.a + p.c.d"})
	if res, err := sel.Run(&Ctx{}, in, &Meta{}, nil); err != nil || string(res.Value) != `{"x":5}` {
		t.Errorf("p.a + p.c.d: got %s, %v", res.Value, err)
	}
	sel = mustSelect(t, s, "", nil, [2]string{"x", "p.a"}, [2]string{"y", "p"})
	if _, err := sel.Run(&Ctx{}, in, &Meta{}, nil); err == nil || err.Error() != `column p.b: expected BIGINT, got "not a number"` {
		t.Errorf("p read whole: %v", err)
	}
}

func TestMetadataColumns(t *testing.T) {
	s := mustSchema(t, [2]string{"k", "STRING METADATA FROM 'key'"}, [2]string{"ts", "TIMESTAMP_LTZ(3) METADATA FROM 'timestamp'"},
		[2]string{"partition", "INT METADATA"}, [2]string{"off", "BIGINT METADATA FROM 'offset'"},
		[2]string{"topic", "STRING METADATA VIRTUAL"}, [2]string{"h", "MAP<STRING, BYTES> METADATA FROM 'headers'"},
		[2]string{"v", "INT"})
	sel := mustSelect(t, s, "", nil, [2]string{"k", "k"}, [2]string{"ts", "ts"}, [2]string{"p", "partition"},
		[2]string{"o", "off"}, [2]string{"t", "topic"}, [2]string{"h", "CAST(h['trace'] AS STRING)"}, [2]string{"v", "v"})
	m := &Meta{Key: "user-1", Timestamp: 1700000000123, Partition: 3, Offset: 42, Topic: "orders", Headers: map[string]string{"trace": "abc"}}
	res, err := sel.Run(&Ctx{}, []byte(`{"v": 5}`), m, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"k":"user-1","ts":"2023-11-14 22:13:20.123Z","p":3,"o":42,"t":"orders","h":"abc","v":5}`
	if string(res.Value) != want {
		t.Errorf("got  %s\nwant %s", res.Value, want)
	}
	// Metadata alone: the value is not read (it may be anything).
	sel = mustSelect(t, s, "", nil, [2]string{"k", "k"})
	if v, k, h, md := sel.Needs(); v || !k || h || md {
		t.Errorf("Needs() = %v %v %v %v, want the key alone", v, k, h, md)
	}
	if res, err := sel.Run(&Ctx{}, []byte(`not json`), m, nil); err != nil || string(res.Value) != `{"k":"user-1"}` {
		t.Errorf("got %s, %v", res.Value, err)
	}
	for _, bad := range [][2]string{{"x", "STRING METADATA FROM 'nosuch'"}, {"x", "BOOLEAN METADATA FROM 'timestamp'"}, {"x", "INT GARBAGE"}} {
		if _, err := ParseSchemaColumn(bad[0], bad[1]); err == nil {
			t.Errorf("%s: no error", bad[1])
		}
	}
}

func TestWhereAndKey(t *testing.T) {
	s := mustSchema(t, [2]string{"u", "BIGINT"}, [2]string{"a", "STRING"})
	sel := mustSelect(t, s, "a <> 'view'", []string{"u"}, [2]string{"u", "u"}, [2]string{"a", "upper(a)"})
	for in, want := range map[string]string{
		`{"u": 1, "a": "buy"}`:  `{"u":1,"a":"BUY"} key 1`,
		`{"u": 1, "a": "view"}`: "dropped",
		`{"u": 1}`:              "dropped", // NULL <> 'view' is NULL
		`{"a": "buy"}`:          `{"u":null,"a":"BUY"} key <nil>`,
	} {
		res, err := sel.Run(&Ctx{}, []byte(in), &Meta{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := "dropped"
		if res.Keep {
			key := "<nil>"
			if res.Key != nil {
				key = string(res.Key)
			}
			got = string(res.Value) + " key " + key
		}
		if got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
	sel = mustSelect(t, s, "", []string{"a", "u"}, [2]string{"u", "u"}, [2]string{"a", "a"})
	res, err := sel.Run(&Ctx{}, []byte(`{"u": 7, "a": "x\"y"}`), &Meta{}, nil)
	if err != nil || string(res.Key) != `["x\"y",7]` {
		t.Errorf("key of two columns = %s, %v", res.Key, err)
	}
	for _, tc := range []struct {
		where string
		key   []string
		want  string
	}{
		{"u + 1", nil, "where: line 1, column 1: the condition is a BIGINT, not a BOOLEAN"},
		{"", []string{"nosuch"}, "key: nosuch is not an output column; output columns: u"},
		{"nosuch = 1", nil, "where: line 1, column 1: unknown column nosuch"},
	} {
		var w ast.Expr
		if tc.where != "" {
			w, _ = parser.ParseExpr(tc.where)
		}
		e, _ := parser.ParseExpr("u")
		_, err := CompileSelect(s, []NamedExpr{{Name: "u", Expr: e}}, w, tc.key)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("where %q key %q: %v, want %q", tc.where, tc.key, err, tc.want)
		}
	}
}

// ColumnTypes (and CompileSelect's Columns) tell the planner the output
// columns' types.
func TestOutputTypes(t *testing.T) {
	s := mustSchema(t, [2]string{"bid", "ROW<auction BIGINT, price BIGINT, dateTime TIMESTAMP(3), extra STRING>"})
	var cols []NamedExpr
	for _, c := range [][2]string{{"auction", "bid.auction"}, {"price", "0.908 * bid.price"}, {"dateTime", "bid.dateTime"},
		{"n", "char_length(bid.extra)"}, {"ok", "bid.price > 10"}} {
		e, err := parser.ParseExpr(c[1])
		if err != nil {
			t.Fatal(err)
		}
		cols = append(cols, NamedExpr{Name: c[0], Expr: e})
	}
	out, err := ColumnTypes(s, cols)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range out {
		got = append(got, c.Name+" "+c.Type.String())
	}
	want := "auction BIGINT, price DECIMAL(23, 3), dateTime TIMESTAMP(3), n INT, ok BOOLEAN"
	if strings.Join(got, ", ") != want {
		t.Errorf("columns %s, want %s", strings.Join(got, ", "), want)
	}
	if all, err := ColumnTypes(s, nil); err != nil || len(all) != 1 || all[0].Type.String() != s[0].Type.String() {
		t.Errorf("the schema's columns: %v, %v", all, err)
	}
}

// Runtime errors name the output column.
func TestRuntimeErrorNamesColumn(t *testing.T) {
	s := mustSchema(t, [2]string{"a", "STRING"})
	sel := mustSelect(t, s, "", nil, [2]string{"ok", "a"}, [2]string{"n", "CAST(a AS INT)"})
	_, err := sel.Run(&Ctx{}, []byte(`{"a": "x1"}`), &Meta{}, nil)
	if err == nil || err.Error() != "column n: CAST('x1' AS INT): the STRING value cannot be converted" {
		t.Errorf("error %v", err)
	}
	// The Ctx is reused: the next record starts without the error.
	res, err := sel.Run(&Ctx{}, []byte(`{"a": "12"}`), &Meta{}, nil)
	if err != nil || string(res.Value) != `{"ok":"12","n":12}` {
		t.Errorf("got %s, %v", res.Value, err)
	}
}

// A reused Ctx carries nothing from one record to the next.
func TestCtxReuse(t *testing.T) {
	s := mustSchema(t, [2]string{"p", "ROW<a INT, b ARRAY<INT>>"}, [2]string{"q", "INT"})
	sel, _ := CompileSelect(s, nil, nil, nil)
	ctx := &Ctx{}
	var buf []byte
	for i, tc := range [][2]string{
		{`{"p": {"a": 1, "b": [1, 2]}, "q": 5}`, `{"p":{"a":1,"b":[1,2]},"q":5}`},
		{`{"p": {"b": [3]}}`, `{"p":{"a":null,"b":[3]},"q":null}`},
		{`{"q": "x"}`, "error"},
		{`{}`, `{"p":null,"q":null}`},
	} {
		res, err := sel.Run(ctx, []byte(tc[0]), &Meta{}, buf[:0])
		got := "error"
		if err == nil {
			got = string(res.Value)
			buf = res.Value
		}
		if got != tc[1] {
			t.Errorf("record %d: %s, want %s", i, got, tc[1])
		}
	}
}

func TestJavaDouble(t *testing.T) {
	for f, want := range map[float64]string{1: "1.0", 0.001: "0.001", 0.0001: "1.0E-4", 1e7: "1.0E7", 9999999: "9999999.0",
		123456789.5: "1.234567895E8", -2.5: "-2.5", 0: "0.0", 1.0 / 3: "0.3333333333333333"} {
		if got := string(appendJavaDouble(nil, f, 64)); got != want {
			t.Errorf("%v: %s, want %s", f, got, want)
		}
	}
	if got := string(appendJavaDouble(nil, float64(float32(0.1)), 32)); got != "0.1" {
		t.Errorf("FLOAT 0.1: %s", got)
	}
}

func TestDecimalEdges(t *testing.T) {
	for _, tc := range []struct {
		text  string
		scale int
		want  string
	}{
		{"1.005", 2, "1.01"}, {"-1.005", 2, "-1.01"}, {"1e3", 0, "1000"}, {"1.5e-1", 2, "0.15"}, {"0.0001", 2, "0.00"},
		{"123456789012345678901234567890.5", 0, "123456789012345678901234567891"}, {"-0.5", 0, "-1"},
		{"1e-999999999", 2, "0.00"}, {"000012.5", 1, "12.5"},
	} {
		v, ok := parseDec(tc.text, tc.scale)
		if !ok {
			t.Errorf("%s: not read", tc.text)
			continue
		}
		if got := string(appendDec(nil, v)); got != tc.want {
			t.Errorf("%s at scale %d: %s, want %s", tc.text, tc.scale, got, tc.want)
		}
	}
	if _, ok := parseDec("1e999999999", 0); ok {
		t.Error("1e999999999 read as a DECIMAL")
	}
	// Overflowing int64 moves to big.Int and back.
	big := decMul(Dec(9_000_000_000_000_000_000/10, 0), Dec(100, 0), 0)
	if !isBigDec(big) || string(appendDec(nil, big)) != "90000000000000000000" {
		t.Errorf("big product %s", appendDec(nil, big))
	}
	small := decAdd(big, decNeg(decMul(Dec(899_999_999_999_999_999, 0), Dec(100, 0), 0)), 0)
	if isBigDec(small) || string(appendDec(nil, small)) != "100" {
		t.Errorf("%s should fit an int64 again", appendDec(nil, small))
	}
}
