package eval

import (
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/sql/parser"
)

// testSchema is the row the expression tests run on; the n* columns are
// absent from testRow, so NULL.
var testSchema = [][2]string{
	{"i", "INT"}, {"b", "BIGINT"}, {"d", "DOUBLE"}, {"s", "STRING"}, {"dec", "DECIMAL(10, 2)"},
	{"ts", "TIMESTAMP(3)"}, {"flag", "BOOLEAN"}, {"person", "ROW<id BIGINT, name STRING>"},
	{"arr", "ARRAY<STRING>"}, {"m", "MAP<STRING, INT>"}, {"dt", "DATE"}, {"neg", "INT"}, {"z", "INT"},
	{"ni", "INT"}, {"ns", "STRING"}, {"nb", "BOOLEAN"}, {"f", "BOOLEAN"}, {"tb", "BOOLEAN"},
}

const testRow = `{"i": 7, "b": 13015233, "d": 2.5, "s": "Hello World", "dec": 12.34, "ts": "2026-12-01 10:00:00.123",
 "flag": true, "person": {"id": 42, "name": "Ann"}, "arr": ["a", "b"], "m": {"x": 1}, "dt": "2026-12-01",
 "neg": -3, "z": 0, "f": false, "tb": true, "ignored": {"deep": [1, 2, {"x": null}]}}`

func testSchemaCols(t testing.TB) Schema {
	t.Helper()
	var s Schema
	for _, c := range testSchema {
		col, err := ParseSchemaColumn(c[0], c[1])
		if err != nil {
			t.Fatalf("%s %s: %v", c[0], c[1], err)
		}
		s = append(s, col)
	}
	return s
}

// evalSQL compiles src as the only output column over testSchema, runs
// it on row, and returns the column's JSON text and SQL type.
func evalSQL(t testing.TB, src, row string) (string, string, error) {
	t.Helper()
	e, err := parser.ParseExpr(src)
	if err != nil {
		t.Fatalf("%s: parse: %v", src, err)
	}
	sel, err := CompileSelect(testSchemaCols(t), []NamedExpr{{Name: "x", Expr: e}}, nil, nil)
	if err != nil {
		return "", "", err
	}
	ctx := &Ctx{Clock: func() time.Time { return time.Date(2026, 12, 1, 12, 30, 0, 456_789_000, time.UTC) }}
	res, err := sel.Run(ctx, []byte(row), &Meta{}, nil)
	if err != nil {
		return "", "", err
	}
	out := string(res.Value)
	if !strings.HasPrefix(out, `{"x":`) || !strings.HasSuffix(out, "}") {
		t.Fatalf("%s: output %s", src, out)
	}
	return out[5 : len(out)-1], sel.Columns()[0].Type.String(), nil
}

type exprCase struct {
	src  string
	want string // the JSON text of the value, or "ERR: part of the error"
}

func runCases(t *testing.T, cases []exprCase) {
	t.Helper()
	for _, tc := range cases {
		got, _, err := evalSQL(t, tc.src, testRow)
		if strings.HasPrefix(tc.want, "ERR: ") {
			if err == nil || !strings.Contains(err.Error(), tc.want[5:]) {
				t.Errorf("%s: got %s, %v; want an error with %q", tc.src, got, err, tc.want[5:])
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.src, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%s = %s, want %s", tc.src, got, tc.want)
		}
	}
}

// Three-valued logic: every combination of TRUE, FALSE and NULL.
func TestThreeValuedLogic(t *testing.T) {
	vals := map[string]int{"tb": 1, "f": 0, "nb": -1} // columns holding TRUE, FALSE, NULL
	and := func(a, b int) int {
		switch {
		case a == 0 || b == 0:
			return 0
		case a == -1 || b == -1:
			return -1
		}
		return 1
	}
	or := func(a, b int) int {
		switch {
		case a == 1 || b == 1:
			return 1
		case a == -1 || b == -1:
			return -1
		}
		return 0
	}
	text := map[int]string{1: "true", 0: "false", -1: "null"}
	var cases []exprCase
	for x, a := range vals {
		cases = append(cases, exprCase{"NOT " + x, text[map[int]int{1: 0, 0: 1, -1: -1}[a]]})
		for y, b := range vals {
			cases = append(cases, exprCase{x + " AND " + y, text[and(a, b)]}, exprCase{x + " OR " + y, text[or(a, b)]})
		}
	}
	cases = append(cases,
		exprCase{"ni = 7", "null"}, exprCase{"ni <> 7", "null"}, exprCase{"ni < 7", "null"},
		exprCase{"ni IS NULL", "true"}, exprCase{"i IS NULL", "false"}, exprCase{"ni IS NOT NULL", "false"},
		exprCase{"ni IS DISTINCT FROM 7", "true"}, exprCase{"ni IS NOT DISTINCT FROM ni", "true"},
		exprCase{"i IS DISTINCT FROM 7", "false"}, exprCase{"i IS NOT DISTINCT FROM 8", "false"},
		exprCase{"nb IS UNKNOWN", "true"}, exprCase{"nb IS TRUE", "false"}, exprCase{"nb IS NOT FALSE", "true"},
		exprCase{"flag IS TRUE", "true"}, exprCase{"f IS FALSE", "true"}, exprCase{"flag IS NOT TRUE", "false"},
		exprCase{"i IN (1, 7)", "true"}, exprCase{"i IN (1, 2)", "false"}, exprCase{"i IN (1, ni)", "null"},
		exprCase{"i IN (7, ni)", "true"}, exprCase{"i NOT IN (1, ni)", "null"}, exprCase{"i NOT IN (1, 2)", "true"},
		exprCase{"ni IN (1, 2)", "null"},
		exprCase{"i BETWEEN 1 AND 10", "true"}, exprCase{"i NOT BETWEEN 1 AND 10", "false"},
		exprCase{"i BETWEEN 10 AND 1", "false"}, exprCase{"i BETWEEN SYMMETRIC 10 AND 1", "true"},
		exprCase{"ni BETWEEN 1 AND 10", "null"}, exprCase{"i BETWEEN ni AND 5", "false"},
		exprCase{"ni + 1", "null"}, exprCase{"-ni", "null"}, exprCase{"ns || 'x'", "null"},
		exprCase{"CASE WHEN nb THEN 1 ELSE 2 END", "2"},
		exprCase{"nb AND 1 / z = 1", "ERR: division by zero"},
		exprCase{"f AND 1 / z = 1", "false"}, // the right side is not evaluated
		exprCase{"tb OR 1 / z = 1", "true"},
	)
	runCases(t, cases)
}

func TestArithmeticAndPromotion(t *testing.T) {
	for _, tc := range []struct{ src, want, typ string }{
		{"0.908 * b", "11817831.564", "DECIMAL(23, 3)"},
		{"b * 0.908", "11817831.564", "DECIMAL(23, 3)"},
		{"0.908 * 13015233", "11817831.564", "DECIMAL(14, 3)"},
		{"dec + 1", "13.34", "DECIMAL(13, 2)"},
		{"dec * dec", "152.2756", "DECIMAL(21, 4)"},
		{"dec - 0.345", "11.995", "DECIMAL(12, 3)"},
		{"1.0 / 3", "0.333333333333", "DECIMAL(13, 12)"},
		{"dec / 4", "3.0850000000000", "DECIMAL(21, 13)"},
		{"dec % 5", "2.34", "DECIMAL(10, 2)"},
		{"i + b", "13015240", "BIGINT"},
		{"i + 1", "8", "INT"},
		{"i + d", "9.5", "DOUBLE"},
		{"dec + d", "14.84", "DOUBLE"},
		{"7 / 2", "3", "INT"},
		{"-7 / 2", "-3", "INT"},
		{"neg % 2", "-1", "INT"},
		{"7 % 3", "1", "INT"},
		{"d / 2", "1.25", "DOUBLE"},
		{"CAST(2147483647 AS INT) + 1", "-2147483648", "INT"},
		{"CAST(1 AS TINYINT) + CAST(1 AS SMALLINT)", "2", "SMALLINT"},
		{"CAST(1.5 AS FLOAT) * 2", "3.0", "FLOAT"},
		{"-dec", "-12.34", "DECIMAL(10, 2)"},
		{"1e7 * 1", "1.0E7", "DOUBLE"},
		{"0.1 + 0.2", "0.3", "DECIMAL(2, 1)"},
		{"99999999999999999999999999999999999.9 * 10", "999999999999999999999999999999999999.0", "DECIMAL(38, 1)"},
	} {
		got, typ, err := evalSQL(t, tc.src, testRow)
		if err != nil {
			t.Errorf("%s: %v", tc.src, err)
			continue
		}
		if got != tc.want || typ != tc.typ {
			t.Errorf("%s = %s %s, want %s %s", tc.src, got, typ, tc.want, tc.typ)
		}
	}
	runCases(t, []exprCase{
		{"i / z", "ERR: division by zero"},
		{"i % z", "ERR: division by zero"},
		{"dec / 0", "ERR: division by zero"},
		{"d / 0", "ERR: division by zero"},
		{"1 / 0", "ERR: division by zero"}, // found at compile time
		{"s + 1", "ERR: + needs numbers, not STRING"},
	})
}

func TestCasts(t *testing.T) {
	runCases(t, []exprCase{
		{"CAST(i AS STRING)", `"7"`},
		{"CAST(b AS STRING)", `"13015233"`},
		{"CAST(d AS STRING)", `"2.5"`},
		{"CAST(1e7 AS STRING)", `"1.0E7"`},
		{"CAST(0.0001e0 AS STRING)", `"1.0E-4"`},
		{"CAST(100.0e0 AS STRING)", `"100.0"`},
		{"CAST(dec AS STRING)", `"12.34"`},
		{"CAST(flag AS STRING)", `"TRUE"`},
		{"CAST(ts AS STRING)", `"2026-12-01 10:00:00.123"`},
		{"CAST(dt AS STRING)", `"2026-12-01"`},
		{"CAST(' 42 ' AS INT)", "42"},
		{"CAST('abc' AS BIGINT)", "ERR: CAST('abc' AS BIGINT)"},
		{"TRY_CAST('abc' AS BIGINT)", "null"},
		{"CAST(ns AS BIGINT)", "null"},
		{"CAST('1.5' AS DOUBLE)", "1.5"},
		{"CAST('12.345' AS DECIMAL(5, 2))", "12.35"},
		{"CAST(2.5 AS DECIMAL(5, 0))", "3"},
		{"CAST(-2.5 AS DECIMAL(5, 0))", "-3"},
		{"CAST(12345.6 AS DECIMAL(4, 1))", "ERR: cannot be converted"},
		{"TRY_CAST(12345.6 AS DECIMAL(4, 1))", "null"},
		{"CAST(dec AS INT)", "12"},
		{"CAST(d AS INT)", "2"},
		{"CAST(300 AS TINYINT)", "44"},
		{"CAST('2026-12-01T10:00:00Z' AS TIMESTAMP(3))", `"2026-12-01 10:00:00.000"`},
		{"CAST('2026-12-01 10:00:00.123456' AS TIMESTAMP(3))", `"2026-12-01 10:00:00.123"`},
		{"CAST('2026-12-01T12:00:00+02:00' AS TIMESTAMP(0))", `"2026-12-01 10:00:00"`},
		{"CAST('not a time' AS TIMESTAMP(3))", "ERR: cannot be converted"},
		{"CAST(ts AS DATE)", `"2026-12-01"`},
		{"CAST(dt AS TIMESTAMP(3))", `"2026-12-01 00:00:00.000"`},
		{"CAST('true' AS BOOLEAN)", "true"},
		{"CAST('maybe' AS BOOLEAN)", "ERR: cannot be converted"},
		{"CAST(i AS BOOLEAN)", "true"},
		{"CAST('abc' AS BYTES)", `"YWJj"`},
		{"CAST('abcdef' AS VARCHAR(3))", `"abc"`},
		{"CAST('ab' AS CHAR(4))", `"ab  "`},
		{"CAST(i AS TIMESTAMP(3))", "ERR: TO_TIMESTAMP_LTZ"},
		{"CAST(NULL AS INT)", "null"},
		{"CAST(person AS STRING)", `"(42, Ann)"`},
		{"CAST(arr AS STRING)", `"[a, b]"`},
		{"CAST(m AS STRING)", `"{x=1}"`},
		{"CAST(ARRAY[1, ni] AS STRING)", `"[1, NULL]"`},
	})
}

func TestComparisonsLikeCase(t *testing.T) {
	runCases(t, []exprCase{
		{"i = 7", "true"}, {"i <> 7", "false"}, {"i != 8", "true"}, {"i < b", "true"}, {"d >= 2.5", "true"},
		{"dec > 12.3", "true"}, {"dec = 12.340", "true"}, {"s = 'Hello World'", "true"}, {"s < 'Z'", "true"},
		{"ts > TIMESTAMP '2026-12-01 09:00:00'", "true"}, {"ts > '2026-12-01 11:00:00'", "false"},
		{"dt = DATE '2026-12-01'", "true"}, {"flag = TRUE", "true"},
		{"s = 1", "ERR: cannot combine STRING and INT"},
		{"s LIKE 'Hello%'", "true"}, {"s LIKE '%World'", "true"}, {"s LIKE '%lo W%'", "true"},
		{"s LIKE 'H_llo World'", "true"}, {"s LIKE 'hello%'", "false"}, {"s LIKE 'Hello'", "false"},
		{"s LIKE 'Hello World'", "true"}, {"s LIKE '%o%o%'", "true"}, {"s LIKE '_'", "false"},
		{"'100%' LIKE '100!%' ESCAPE '!'", "true"}, {"'1000' LIKE '100!%' ESCAPE '!'", "false"},
		{"'a.c' LIKE 'a.c'", "true"}, {"'abc' LIKE 'a.c'", "false"},
		{"ns LIKE 'a'", "null"}, {"s NOT LIKE 'x%'", "true"},
		{"s LIKE concat(substring(s, 1, 2), '%')", "true"}, {"s LIKE ns", "null"}, // a pattern per record
		{"'a_c' LIKE 'a\\_c' ESCAPE '\\'", "true"}, {"'abc' LIKE 'a\\_c' ESCAPE '\\'", "false"},
		{"CASE WHEN i > 5 THEN 'big' ELSE 'small' END", `"big"`},
		{"CASE i WHEN 1 THEN 'one' WHEN 7 THEN 'seven' END", `"seven"`},
		{"CASE i WHEN 1 THEN 'one' END", "null"},
		{"CASE WHEN i > 5 THEN 1 ELSE 2.5 END", "1.0"},
		{"CASE WHEN i > 5 THEN 1 ELSE 'x' END", "ERR: CASE"},
		{"s || '!'", `"Hello World!"`},
		{"person.id", "42"}, {"person.name", `"Ann"`}, {"person", `{"id":42,"name":"Ann"}`},
		{"arr[1]", `"a"`}, {"arr[3]", "null"}, {"arr", `["a","b"]`}, {"m['x']", "1"}, {"m['y']", "null"}, {"m", `{"x":1}`},
		{"dt", `"2026-12-01"`}, {"ts", `"2026-12-01 10:00:00.123"`}, {"d", "2.5"}, {"dec", "12.34"},
	})
}

func TestTimeAndIntervals(t *testing.T) {
	runCases(t, []exprCase{
		{"ts - INTERVAL '4' SECOND", `"2026-12-01 09:59:56.123"`},
		{"ts + INTERVAL '1' DAY", `"2026-12-02 10:00:00.123"`},
		{"ts + INTERVAL '90' MINUTE", `"2026-12-01 11:30:00.123"`},
		{"ts - INTERVAL '0.5' SECOND", `"2026-12-01 09:59:59.623"`},
		{"ts + INTERVAL '1' MONTH", `"2027-01-01 10:00:00.123"`},
		{"TIMESTAMP '2026-01-31 00:00:00' + INTERVAL '1' MONTH", `"2026-02-28 00:00:00"`},
		{"TIMESTAMP '2024-01-31 00:00:00' + INTERVAL '1' MONTH", `"2024-02-29 00:00:00"`},
		{"INTERVAL '1' DAY + ts", `"2026-12-02 10:00:00.123"`},
		{"ts + INTERVAL '1 02:00:00' DAY TO SECOND", `"2026-12-02 12:00:00.123"`},
		{"dt + INTERVAL '2' DAY", `"2026-12-03"`},
		{"ts - INTERVAL '1' YEAR", `"2025-12-01 10:00:00.123"`},
		{"ts + 1", "ERR: + needs numbers, not TIMESTAMP(3)"},
		{"date_format(ts, 'yyyy-MM-dd HH:mm')", `"2026-12-01 10:00"`},
		{"date_format(ts, 'yyyyMMdd''T''HHmmss.SSS')", `"20261201T100000.123"`},
		{"date_format('2026-12-01 10:00:00', 'HH')", `"10"`},
		{"date_format(ts, 'EEE, d MMM yyyy hh a')", `"Tue, 1 Dec 2026 10 AM"`},
		{"date_format(ns, 'yyyy')", "null"},
		{"date_format(ts, concat('yyyy', ''))", `"2026"`},
		{"CAST(ts AS TIME(0))", `"10:00:00"`}, {"CAST('10:30:15.5' AS TIME(1))", `"10:30:15.5"`},
		{"TIME '10:30:00'", `"10:30:00"`},
		{"ts + INTERVAL '1:30' HOUR TO MINUTE", `"2026-12-01 11:30:00.123"`},
		{"date_format(ts, 'yyyy-QQ')", "ERR: not supported"},
		{"hour(ts)", "10"}, {"minute(ts)", "0"}, {"second(ts)", "0"}, {"year(ts)", "2026"}, {"month(ts)", "12"},
		{"dayofmonth(ts)", "1"}, {"year(dt)", "2026"}, {"hour(dt)", "ERR: has no time of day"},
		{"EXTRACT(YEAR FROM ts)", "2026"}, {"EXTRACT(HOUR FROM ts)", "10"}, {"EXTRACT(DOW FROM ts)", "3"},
		{"to_timestamp('2026-12-01 10:00:00')", `"2026-12-01 10:00:00.000"`},
		{"to_timestamp('01/12/2026', 'dd/MM/yyyy')", `"2026-12-01 00:00:00.000"`},
		{"to_timestamp('20261201 103000', 'yyyyMMdd HHmmss')", `"2026-12-01 10:30:00.000"`},
		{"to_timestamp('garbage')", "null"},
		{"to_timestamp(ns)", "null"},
		{"to_timestamp_ltz(1700000000000, 3)", `"2023-11-14 22:13:20.000Z"`},
		{"to_timestamp_ltz(1700000000, 0)", `"2023-11-14 22:13:20.000Z"`},
		{"to_timestamp_ltz(b, 2)", "ERR: precision must be 0"},
		{"from_unixtime(0)", `"1970-01-01 00:00:00"`},
		{"from_unixtime(1796119200, 'yyyy-MM-dd')", `"2026-12-01"`},
		{"unix_timestamp('2026-12-01 10:00:00')", "1796119200"},
		{"unix_timestamp('2026-12-01', 'yyyy-MM-dd')", "1796083200"},
		{"unix_timestamp('x')", "null"},
		// Processing time: the test's clock, 2026-12-01 12:30:00.456789.
		{"proctime()", `"2026-12-01 12:30:00.456Z"`},
		{"now()", `"2026-12-01 12:30:00.456Z"`},
		{"CURRENT_TIMESTAMP", `"2026-12-01 12:30:00.456Z"`},
		{"LOCALTIMESTAMP", `"2026-12-01 12:30:00.456"`},
		{"CURRENT_DATE", `"2026-12-01"`},
		{"unix_timestamp()", "1796128200"},
	})
}

func TestFunctions(t *testing.T) {
	runCases(t, []exprCase{
		{"md5('')", `"d41d8cd98f00b204e9800998ecf8427e"`},
		{"md5(s)", `"b10a8db164e0754105b7a99be72e3fe5"`},
		{"MD5(ns)", "null"},
		{"sha1('abc')", `"a9993e364706816aba3e25717850c26c9cd0d89d"`},
		{"sha256('abc')", `"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"`},
		{"md5(concat(cast(person.id AS STRING), cast(ts AS STRING)))", `"0fa9fe7337ac034845802743f2182d07"`},
		{"md5(i)", "ERR: argument 1 must be a STRING or BYTES, not INT"},
		{"concat('a', s)", `"aHello World"`}, {"concat('a', ns)", "null"}, {"concat('a', 'b', 'c')", `"abc"`},
		{"concat_ws('-', 'a', ns, 'b')", `"a-b"`}, {"concat_ws(ns, 'a')", "null"},
		{"upper(s)", `"HELLO WORLD"`}, {"lower(s)", `"hello world"`}, {"upper(ns)", "null"},
		{"initcap('hello wORLD-foo')", `"Hello World-Foo"`},
		{"substring(s, 1, 5)", `"Hello"`}, {"substring(s, 7)", `"World"`}, {"substring(s, -5)", `"World"`},
		{"substr('héllo', 2, 3)", `"éll"`}, {"SUBSTRING(s FROM 7 FOR 3)", `"Wor"`}, {"substring(s, 20)", `""`},
		{"substring(ns, 1)", "null"},
		{"trim('  a  ')", `"a"`}, {"ltrim('  a ')", `"a "`}, {"rtrim(' a  ')", `" a"`},
		{"TRIM(LEADING 'x' FROM 'xxaxx')", `"axx"`}, {"TRIM(BOTH 'x' FROM 'xxaxx')", `"a"`},
		{"TRIM(TRAILING FROM '  a  ')", `"  a"`},
		{"replace(s, 'o', '0')", `"Hell0 W0rld"`}, {"replace(ns, 'o', '0')", "null"},
		{`regexp_extract('foo123bar', '([a-z]+)(\d+)', 2)`, `"123"`},
		{`regexp_extract('foo123bar', '([a-z]+)(\d+)')`, `"foo"`},
		{`regexp_extract('foo', '(\d+)')`, "null"},
		{`regexp_extract('foo', '(\d+)', 5)`, "null"},
		{"regexp_extract(s, '(')", "ERR: bad regular expression"},
		{`regexp_replace('a1b2', '\d', '#')`, `"a#b#"`},
		{`regexp_replace(s, concat('o', ''), '0')`, `"Hell0 W0rld"`}, // a pattern per record
		{`regexp_extract(s, concat('(', ''), 1)`, "ERR: bad regular expression"},
		{`regexp('abc', '^a.c$')`, "true"},
		{"split_index('a,b,c', ',', 1)", `"b"`}, {"split_index('a,b,c', ',', 0)", `"a"`},
		{"split_index('a,b,c', ',', 2)", `"c"`}, {"split_index('a,b,c', ',', 3)", "null"},
		{"split_index('a,b,c', ',', -1)", "null"},
		{"char_length(s)", "11"}, {"character_length('héllo')", "5"}, {"char_length(ns)", "null"},
		{"position('World' IN s)", "7"}, {"position('x' IN s)", "0"}, {"position('é' IN 'aéb')", "2"},
		{"locate('o', s, 6)", "8"},
		{"lpad('hi', 5, 'xy')", `"xyxhi"`}, {"rpad('hi', 5, 'xy')", `"hixyx"`}, {"lpad('hello', 2, 'x')", `"he"`},
		{"lpad('hi', -1, 'x')", "null"},
		{"left(s, 5)", `"Hello"`}, {"right(s, 5)", `"World"`}, {"left(s, -1)", `""`}, {"right(s, 50)", `"Hello World"`},
		{"reverse('abc')", `"cba"`}, {"repeat('ab', 3)", `"ababab"`}, {"repeat('ab', 0)", `""`},
		{`json_value('{"a":{"b":1}}', '$.a.b')`, `"1"`}, {`json_value('{"a":{"b":"x"}}', '$.a.b')`, `"x"`},
		{`json_value('{"a":[1,2]}', '$.a[1]')`, `"2"`}, {`json_value('{"a":1}', '$.c')`, "null"},
		{`json_value('{"a":null}', '$.a')`, "null"}, {`json_value(ns, '$.a')`, "null"},
		{`json_value('{}', 'a')`, "ERR: must start with $"},
		{"coalesce(ni, 5)", "5"}, {"coalesce(ni, i)", "7"}, {"coalesce(ns, 'd')", `"d"`}, {"coalesce(ni, ni)", "null"},
		{"coalesce(ni, s)", "ERR: COALESCE"},
		{"ifnull(ns, 'd')", `"d"`},
		{"if(flag, 'y', 'n')", `"y"`}, {"if(nb, 'y', 'n')", `"n"`}, {"if(f, 1, 2.5)", "2.5"},
		{"nullif(i, 7)", "null"}, {"nullif(i, 8)", "7"},
		{"mod(7, 3)", "1"}, {"mod(i, z)", "ERR: division by zero"},
		{"abs(neg)", "3"}, {"abs(-2.5)", "2.5"}, {"abs(-d)", "2.5"}, {"abs(ni)", "null"},
		{"power(2, 10)", "1024.0"}, {"sqrt(16)", "4.0"}, {"sqrt(ni)", "null"},
		{"round(2.5)", "3"}, {"round(-2.5)", "-3"}, {"round(1.2345, 2)", "1.23"}, {"round(1.235, 2)", "1.24"},
		{"round(d)", "3.0"}, {"round(1234, -2)", "1200"}, {"round(1250, -2)", "1300"}, {"round(1250.5, -2)", "1300"},
		{"floor(2.7)", "2"}, {"ceil(2.1)", "3"}, {"floor(-2.7)", "-3"}, {"floor(d)", "2.0"}, {"ceil(d)", "3.0"},
		{"floor(i)", "7"},
		{"ARRAY[1, i, ni]", "[1,7,null]"}, {"ARRAY['a', s][2]", `"Hello World"`}, {"cardinality(arr)", "2"},
		{"MAP['a', 1, 'b', i]", `{"a":1,"b":7}`}, {"MAP['a', 1, 'b', i]['b']", "7"}, {"cardinality(m)", "1"},
		{"MAP['a']", "ERR: in pairs"}, {"cardinality(s)", "ERR: must be an ARRAY or a MAP"},
		{"floor(ts, 'HOUR')", `"2026-12-01 10:00:00.000"`}, {"ceil(ts, 'DAY')", `"2026-12-02 00:00:00.000"`},
		{"floor(ts, 'MONTH')", `"2026-12-01 00:00:00.000"`}, {"ceil(ts, 'YEAR')", `"2027-01-01 00:00:00.000"`},
		{"ln(1)", "0.0"}, {"exp(0)", "1.0"}, {"log10(1000)", "3.0"},
		{"greatest(1, 5, 3)", "5"}, {"least(1, 5, 3)", "1"}, {"greatest(1, ni)", "null"}, {"greatest('a', 'b')", `"b"`},
		{"uuid()", "ERR: not deterministic: a replay after a crash would write different values"},
		{"rand()", "ERR: not deterministic"},
		{"RAND_INTEGER(10)", "ERR: not deterministic"},
		{"uppr(s)", `ERR: unknown function uppr (did you mean "upper"?)`},
		{"sum(i)", "ERR: aggregate function"},
		{"upper(i)", "ERR: UPPER: argument 1 must be a STRING, not INT"},
		{"substring(s)", "ERR: SUBSTRING takes 2 to 3 arguments, not 1"},
	})
}

// Compile errors name the line and column of the node at fault, and
// suggest names.
func TestCompileErrors(t *testing.T) {
	runCases(t, []exprCase{
		{"1 + nosuch", "ERR: line 1, column 5: unknown column nosuch"},
		{"persn.id", `ERR: line 1, column 1: unknown column persn (did you mean "person"?)`},
		{"person.nme", "ERR: line 1, column 8: ROW<`id` BIGINT, `name` STRING> has no field nme (did you mean \"name\"?)"},
		{"i.x", "ERR: a value of type INT has no field x: only a ROW has fields"},
		{"s AND flag", "ERR: line 1, column 1: AND needs a BOOLEAN, not STRING"},
		{"upper(s) + 1", "ERR: line 1, column 1: + needs numbers, not STRING"},
		{"CAST(s AS NOSUCH)", "ERR: unknown type NOSUCH"},
		{"arr['x']", "ERR: an ARRAY index must be an integer"},
		{"i IN (SELECT 1)", "ERR: IN (subquery) is not supported"},
	})
}

func TestQualifiers(t *testing.T) {
	scope := &Scope{Columns: []Column{{Name: "a", Type: testSchemaCols(t)[0].Type}}, Qualifiers: []string{"t", "orders"}}
	for _, src := range []string{"a", "t.a", "orders.a"} {
		e, err := parser.ParseExpr(src + " + 1")
		if err != nil {
			t.Fatal(err)
		}
		x, err := Compile(e, scope)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		ctx := &Ctx{Row: []Value{Int(41)}}
		if v := x.Fn(ctx); v.I != 42 {
			t.Errorf("%s + 1 = %+v", src, v)
		}
	}
	e, _ := parser.ParseExpr("t.b")
	if _, err := Compile(e, scope); err == nil || !strings.Contains(err.Error(), "t has no column b") {
		t.Errorf("t.b: %v", err)
	}
	if !scope.Used(0) {
		t.Error("column a is not marked used")
	}
}

// Constants are folded at compile time: a function of constants is a
// constant, processing time never is.
func TestFolding(t *testing.T) {
	scope := &Scope{}
	for src, want := range map[string]bool{"upper('a') || 'b'": true, "1 + 2 * 3": true, "proctime()": false, "CURRENT_TIMESTAMP": false} {
		e, err := parser.ParseExpr(src)
		if err != nil {
			t.Fatal(err)
		}
		x, err := Compile(e, scope)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if x.Const != want {
			t.Errorf("%s: Const %v, want %v", src, x.Const, want)
		}
	}
}
