package eval

import (
	"strings"
	"testing"

	"github.com/onceflow/onceflow/internal/sql/ast"
	"github.com/onceflow/onceflow/internal/sql/parser"
)

func csvSelect(t *testing.T, f CSV, schema string, cols ...string) *Select {
	t.Helper()
	var s Schema
	for _, c := range strings.Split(schema, ";") {
		name, typ, _ := strings.Cut(strings.TrimSpace(c), " ")
		sc, err := ParseSchemaColumn(name, typ)
		if err != nil {
			t.Fatal(err)
		}
		s = append(s, sc)
	}
	var out []NamedExpr
	for _, c := range cols {
		e, err := parser.ParseExpr(c)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, NamedExpr{Name: strings.ToLower(strings.Fields(c)[0]), Expr: e})
	}
	sel, err := CompileSelectOf(s, Format{CSV: &f}, out, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

// A csv value is read by position into the schema's physical columns:
// quotes, doubled quotes, empty fields (NULL but for STRING), a null
// literal, metadata columns beside the physical ones, and only the
// columns used are converted.
func TestCSVValues(t *testing.T) {
	sel := csvSelect(t, DefaultCSV, "id BIGINT; name STRING; ts TIMESTAMP(3); ok BOOLEAN; amount DECIMAL(10, 2); p INT METADATA FROM 'partition'",
		"id", "name", "ts", "ok", "amount", "p")
	for _, tc := range []struct{ in, out string }{
		{"1,ann,2026-12-01 10:00:00.123,true,12.5\n", `{"id":1,"name":"ann","ts":"2026-12-01 10:00:00.123","ok":true,"amount":12.50,"p":3}`},
		{`2,"b, ""bob""",2026-12-01 10:00:01,false,-1`, `{"id":2,"name":"b, \"bob\"","ts":"2026-12-01 10:00:01.000","ok":false,"amount":-1.00,"p":3}`},
		{"3,,,,", `{"id":3,"name":"","ts":null,"ok":null,"amount":null,"p":3}`},
		{`4,"",,,` + "\r\n", `{"id":4,"name":"","ts":null,"ok":null,"amount":null,"p":3}`},
	} {
		res, err := sel.Run(&Ctx{}, []byte(tc.in), &Meta{Partition: 3}, nil)
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		if got := string(res.Value); got != tc.out {
			t.Errorf("%q:\n got %s\nwant %s", tc.in, got, tc.out)
		}
	}
	// Another delimiter and quote, and a null literal.
	sel = csvSelect(t, CSV{Delimiter: '|', Quote: '\'', NullLiteral: "\\N"}, "a STRING; b BIGINT", "a", "b")
	res, err := sel.Run(&Ctx{}, []byte(`'x|''y'''|\N`), &Meta{}, nil)
	if err != nil || string(res.Value) != `{"a":"x|'y'","b":null}` {
		t.Errorf("| and ': %s, %v", res.Value, err)
	}
	res, err = sel.Run(&Ctx{}, []byte(`\N|7`), &Meta{}, nil)
	if err != nil || string(res.Value) != `{"a":null,"b":7}` {
		t.Errorf("null literal for a STRING: %s, %v", res.Value, err)
	}
	// Unused columns are not converted: a bad field there is no error.
	sel = csvSelect(t, DefaultCSV, "a STRING; b BIGINT", "a")
	if res, err := sel.Run(&Ctx{}, []byte("x,not a number"), &Meta{}, nil); err != nil || string(res.Value) != `{"a":"x"}` {
		t.Errorf("an unused bad field: %s, %v", res.Value, err)
	}
}

// A line that does not fit is a poison record with a DecodeError naming
// what is wrong.
func TestCSVErrors(t *testing.T) {
	sel := csvSelect(t, DefaultCSV, "id BIGINT; name STRING", "id", "name")
	for in, want := range map[string]string{
		"x,ann":       "column id: expected BIGINT, got 'x'",
		"1":           "the csv line has 1 fields, the table 2 columns",
		"1,ann,extra": "the csv line has 3 fields, the table 2 columns",
		`1,"ann`:      "no closing quote",
		`1,"ann"x`:    "text after the closing quote",
	} {
		_, err := sel.Run(&Ctx{}, []byte(in), &Meta{}, nil)
		if _, ok := err.(*DecodeError); !ok || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want a DecodeError saying %q", in, err, want)
		}
	}
	// Nested types have no csv form: refused when the select compiles.
	sc, _ := ParseSchemaColumn("r", "ROW<a INT>")
	_, err := CompileSelectOf(Schema{sc}, Format{CSV: &DefaultCSV}, []NamedExpr{{Name: "r", Expr: &ast.ColumnRef{Name: ast.Name{Parts: []ast.Ident{{Name: "r"}}}}}}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "no csv form") {
		t.Errorf("a ROW column in csv: %v", err)
	}
	if _, err := CompileSelectOf(Schema{}, Format{CSV: &CSV{Delimiter: '"', Quote: '"'}}, nil, nil, nil); err == nil {
		t.Error("a delimiter equal to the quote was accepted")
	}
}
