package types

import (
	"strings"
	"testing"

	"github.com/onceflow/onceflow/internal/sql/parser"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]string{
		"BIGINT":                            "BIGINT",
		"integer":                           "INT",
		"REAL":                              "FLOAT",
		"DOUBLE PRECISION":                  "DOUBLE",
		"DECIMAL":                           "DECIMAL(10, 0)",
		"decimal(23,3)":                     "DECIMAL(23, 3)",
		"VARCHAR(20)":                       "VARCHAR(20)",
		"CHAR(3)":                           "CHAR(3)",
		"STRING NOT NULL":                   "STRING NOT NULL",
		"VARBINARY":                         "BYTES",
		"TIMESTAMP":                         "TIMESTAMP(6)",
		"TIMESTAMP(3)":                      "TIMESTAMP(3)",
		"TIMESTAMP(3) WITH LOCAL TIME ZONE": "TIMESTAMP_LTZ(3)",
		"TIMESTAMP_LTZ(3)":                  "TIMESTAMP_LTZ(3)",
		"ROW<id BIGINT, `my name` STRING>":  "ROW<`id` BIGINT, `my name` STRING>",
		"ROW(a INT, b ROW<c ARRAY<DATE>>)":  "ROW<`a` INT, `b` ROW<`c` ARRAY<DATE>>>",
		"MAP<STRING, BYTES>":                "MAP<STRING, BYTES>",
		"ARRAY<DECIMAL(5, 2)>":              "ARRAY<DECIMAL(5, 2)>",
	} {
		typ, rest, err := Parse(in)
		if err != nil || rest != "" {
			t.Errorf("%s: %v, rest %q", in, err, rest)
			continue
		}
		if typ.String() != want {
			t.Errorf("%s: %s, want %s", in, typ, want)
		}
		// The parser's ParseType reads the same type.
		a, err := parser.ParseType(in)
		if err != nil {
			t.Errorf("parser.ParseType(%s): %v", in, err)
			continue
		}
		if pt, err := FromAST(a); err != nil || !pt.Equal(typ) || pt.NotNull != typ.NotNull {
			t.Errorf("%s: from the parser %v, %v; Parse %s", in, pt, err, typ)
		}
	}
	if _, rest, err := Parse("TIMESTAMP_LTZ(3) METADATA FROM 'timestamp'"); err != nil || rest != "METADATA FROM 'timestamp'" {
		t.Errorf("rest %q, %v", rest, err)
	}
	for in, want := range map[string]string{
		"BIGNIT":            "line 1, column 1: unknown type BIGNIT; did you mean BIGINT?",
		"DECIMAL(40, 2)":    "the precision must be 1 to 38",
		"DECIMAL(5, 6)":     "the scale 0 to the precision",
		"TIMESTAMP(12)":     "the precision must be 0 to 9",
		"ROW<a INT, a INT>": "ROW field a is declared twice",
		"ARRAY<INT":         `expected '>'`,
		"MAP<STRING>":       `expected ','`,
		"":                  "expected a type",
	} {
		if _, _, err := Parse(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
}

func TestEqualAndKinds(t *testing.T) {
	a, _, _ := Parse("ROW<a INT, b ARRAY<STRING>>")
	b, _, _ := Parse("ROW<a INT, b ARRAY<STRING>>")
	c, _, _ := Parse("ROW<a INT, b ARRAY<INT>>")
	if !a.Equal(b) || a.Equal(c) {
		t.Error("Equal compares nested types")
	}
	if !BigIntT.IsInteger() || DoubleT.IsInteger() || !DecimalT(5, 2).IsNumeric() || StringT.IsNumeric() || !TimestampLTZT(3).IsTimestamp() {
		t.Error("kind predicates")
	}
	if IntT.IntDigits() != 10 || BigIntT.IntDigits() != 19 {
		t.Error("IntDigits")
	}
}
