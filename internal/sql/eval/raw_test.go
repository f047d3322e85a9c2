package eval

import (
	"testing"

	"github.com/onceflow/onceflow/internal/sql/ast"
	"github.com/onceflow/onceflow/internal/sql/parser"
)

// A column read as METADATA FROM 'value' is the whole value as text, not
// JSON: a table in 'format' = 'raw'.
func TestRawValueColumn(t *testing.T) {
	sc, err := ParseSchemaColumn("line", "STRING METADATA FROM 'value'")
	if err != nil {
		t.Fatal(err)
	}
	e, _ := parser.ParseExpr("SPLIT_INDEX(line, ' ', 1)")
	w, _ := parser.ParseExpr("line LIKE '%ERROR%'")
	s, err := CompileSelect(Schema{sc}, []NamedExpr{{Name: "service", Expr: e}, {Name: "line", Expr: lineRef(t)}}, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v, _, _, _ := s.Needs(); !v {
		t.Error("a select of the raw value says it does not read the value")
	}
	for _, tc := range []struct{ in, out string }{
		{"2026-12-01 api ERROR timeout", `{"service":"api","line":"2026-12-01 api ERROR timeout"}`},
		{`{"not": "json for this table"} ERROR`, `{"service":"\"json","line":"{\"not\": \"json for this table\"} ERROR"}`},
		{"2026-12-01 api INFO fine", ""},
	} {
		res, err := s.Run(&Ctx{}, []byte(tc.in), &Meta{}, nil)
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		if got := string(res.Value); res.Keep != (tc.out != "") || res.Keep && got != tc.out {
			t.Errorf("%q: keep %v, %s; want %s", tc.in, res.Keep, got, tc.out)
		}
	}
}

func lineRef(t *testing.T) ast.Expr {
	e, err := parser.ParseExpr("line")
	if err != nil {
		t.Fatal(err)
	}
	return e
}
