package parser

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/internal/sql/ast"
)

// statements are single statements, each a grammar item; every one must
// parse and round-trip.
var statements = []string{
	// CREATE TABLE
	`CREATE TABLE t (a INT)`,
	`CREATE TEMPORARY TABLE IF NOT EXISTS cat.db.t (a INT NOT NULL, b STRING) WITH ('connector' = 'datagen')`,
	`CREATE TABLE t (id BIGINT, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'upsert-kafka')`,
	`CREATE TABLE t (id BIGINT, CONSTRAINT pk PRIMARY KEY (id, id2) NOT ENFORCED)`,
	`CREATE TABLE t (id BIGINT PRIMARY KEY NOT ENFORCED, v STRING)`,
	`CREATE TABLE t (ts TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL, p INT METADATA VIRTUAL, o BIGINT METADATA, h MAP<STRING, BYTES> METADATA FROM 'headers')`,
	`CREATE TABLE t (a INT COMMENT 'the a', b AS a + 1 COMMENT 'computed', WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) COMMENT 'tbl' PARTITIONED BY (a, b)`,
	"CREATE TABLE t (`value` STRING, `timestamp` TIMESTAMP(3), key BYTES, date DATE, `from` INT, select INT)",
	`CREATE TABLE t (a DECIMAL(10, 2), b DOUBLE PRECISION, c CHARACTER VARYING(20), d TIMESTAMP(3) WITH LOCAL TIME ZONE, e TIME(0), f ARRAY<ROW<x INT, y STRING>>, g ROW(x INT, y MAP<STRING, ARRAY<INT NOT NULL>>), h MULTISET<STRING> NOT NULL, i TIMESTAMP WITHOUT TIME ZONE)`,
	`CREATE TABLE t (a INT) WITH ('scan.startup.mode' = 'specific-offsets', 'it''s' = 'quoted ''twice''')`,
	// CREATE VIEW / FUNCTION
	`CREATE VIEW v AS SELECT * FROM t`,
	`CREATE TEMPORARY VIEW IF NOT EXISTS v (a, b) AS SELECT x, y FROM t`,
	`CREATE FUNCTION f AS 'com.example.F'`,
	`CREATE TEMPORARY SYSTEM FUNCTION IF NOT EXISTS db.f AS 'com.example.F' LANGUAGE SCALA`,
	// INSERT
	`INSERT INTO t SELECT * FROM s`,
	`INSERT OVERWRITE t (a, b) SELECT a, b FROM s`,
	`INSERT INTO t (SELECT a FROM s)`,
	`INSERT INTO t WITH x AS (SELECT 1 AS a) SELECT a FROM x`,
	// SET / RESET
	`SET`,
	`SET 'table.exec.state.ttl' = '1 h'`,
	`SET table.exec.mini-batch.enabled = true`,
	`SET parallelism.default = 4`,
	`SET 'pipeline.name' = 'it''s'`,
	`RESET`,
	`RESET 'table.exec.state.ttl'`,
	`RESET table.exec.state.ttl`,
	// EXPLAIN
	`EXPLAIN SELECT 1`,
	`EXPLAIN PLAN FOR INSERT INTO t SELECT * FROM s`,
	// statement sets
	`EXECUTE STATEMENT SET BEGIN INSERT INTO a SELECT * FROM s; INSERT INTO b SELECT * FROM s; END`,
	`EXECUTE STATEMENT SET BEGIN INSERT INTO a SELECT * FROM s END`,
	`BEGIN STATEMENT SET; INSERT INTO a SELECT * FROM s; END`,
	// queries
	`SELECT 1`,
	`SELECT DISTINCT a, b AS c, d e, t.*, cat.db.t.* FROM t`,
	`SELECT ALL * FROM t WHERE a > 1 GROUP BY a, b HAVING COUNT(*) > 1`,
	`SELECT a FROM t ORDER BY a DESC, b ASC NULLS FIRST, c NULLS LAST LIMIT 10`,
	`WITH a AS (SELECT 1 AS x), b (y) AS (SELECT x FROM a) SELECT * FROM b`,
	`SELECT a FROM t UNION ALL SELECT a FROM u UNION ALL SELECT a FROM v`,
	`SELECT a FROM t UNION SELECT a FROM u INTERSECT SELECT a FROM v EXCEPT SELECT a FROM w`,
	`(SELECT a FROM t) UNION (SELECT a FROM u ORDER BY a LIMIT 1) ORDER BY a`,
	`SELECT * FROM (SELECT a FROM t) AS x, (SELECT b FROM u) y, (SELECT c FROM v)`,
	`SELECT * FROM a JOIN b ON a.id = b.id INNER JOIN c ON c.id = a.id LEFT JOIN d USING (id) LEFT OUTER JOIN e ON TRUE RIGHT JOIN f ON f.x = e.x RIGHT OUTER JOIN g USING (x, y) FULL JOIN h ON 1 = 1 FULL OUTER JOIN i ON 1 = 1 CROSS JOIN j`,
	`SELECT * FROM orders AS o JOIN rates FOR SYSTEM_TIME AS OF o.proc_time AS r ON o.currency = r.currency`,
	`SELECT * FROM orders /*+ STATE_TTL('o' = '1d', 'r' = '12h') */ o JOIN rates /*+ BROADCAST, SHUFFLE_HASH(rates), OPTIONS('a' = 'b') */ r ON o.c = r.c`,
	`SELECT * FROM /* not a hint: a comment */ t -- trailing comment`,
	`SELECT /*+ STATE_TTL('o' = '1d', 'r' = '12h') */ DISTINCT o.a FROM orders AS o JOIN rates AS r ON o.c = r.c`,
	`SELECT * FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '10' SECOND)) AS w`,
	`SELECT * FROM TABLE(HOP(TABLE bid, DESCRIPTOR(ts), INTERVAL '5' MINUTE, INTERVAL '10' MINUTE))`,
	`SELECT * FROM TABLE(CUMULATE(TABLE t, DESCRIPTOR(ts), INTERVAL '2' MINUTE, INTERVAL '10' MINUTE))`,
	`SELECT * FROM TABLE(SESSION(TABLE bid PARTITION BY bidder, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))`,
	`SELECT * FROM TABLE(SESSION(TABLE bid PARTITION BY (bidder, auction), DESCRIPTOR(dateTime), INTERVAL '10' SECOND))`,
	`SELECT * FROM TABLE(TUMBLE(DATA => TABLE bid, TIMECOL => DESCRIPTOR(ts), SIZE => INTERVAL '10' MINUTES, OFFSET => INTERVAL '1' MINUTE))`,
	`SELECT * FROM TUMBLE(bid, ts, INTERVAL '10' SECOND) t`,
	`SELECT TUMBLE_START(ts, INTERVAL '1' MINUTE), COUNT(*) FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE), k`,
	"SELECT `value`, `select`, \"double quoted\", `back``tick` FROM `my table`",
	`SELECT value, key, timestamp, date, year, user, data FROM t`,
	`SELECT a FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.a = t.a) AND a IN (SELECT a FROM v) AND b NOT IN (1, 2, 3)`,
	`SELECT (SELECT MAX(a) FROM u) AS m, ((SELECT 1)) FROM t`,
	// expressions
	`SELECT a OR b AND NOT c, NOT NOT d FROM t`,
	`SELECT a = b, a <> b, a != b, a < b, a <= b, a > b, a >= b FROM t`,
	`SELECT a BETWEEN 1 AND 2, a NOT BETWEEN SYMMETRIC 2 AND 1, a BETWEEN ASYMMETRIC 1 AND 2 FROM t`,
	`SELECT a LIKE 'x%', a NOT LIKE 'x!%' ESCAPE '!', a SIMILAR TO '[a-z]+', a NOT SIMILAR TO 'b' FROM t`,
	`SELECT a IS NULL, a IS NOT NULL, a IS TRUE, a IS NOT FALSE, a IS UNKNOWN, a IS DISTINCT FROM b, a IS NOT DISTINCT FROM b FROM t`,
	`SELECT a || b || 'c', a + b - c * d / e % f, -a, +b, - -c, -(-d) FROM t`,
	`SELECT arr[1], m['k'], r.f.g, (r).f, f(x).y, arr[1].z, a.b.c.d FROM t`,
	`SELECT 1, 1.5, .5, 1e3, 2.5E-3, 'it''s', TRUE, FALSE, NULL, TIMESTAMP '2024-01-01 00:00:00', DATE '2024-01-01', TIME '12:00:00'`,
	`SELECT INTERVAL '1' YEAR, INTERVAL '2' MONTHS, INTERVAL '3' DAYS, INTERVAL '4' HOURS, INTERVAL '5' MINUTES, INTERVAL '6' SECONDS`,
	`SELECT INTERVAL '1-2' YEAR TO MONTH, INTERVAL '1 10:00:00.000' DAY TO SECOND(3), INTERVAL '10' SECOND(3), INTERVAL '10' DAY(2), INTERVAL 5 MINUTE`,
	`SELECT CASE WHEN a = 1 THEN 'one' WHEN a = 2 THEN 'two' ELSE 'many' END, CASE a WHEN 1 THEN 'x' END FROM t`,
	`SELECT CAST(a AS STRING), TRY_CAST(b AS DECIMAL(10, 2)), CAST(c AS ROW<x INT>), CAST(d AS INT NOT NULL) FROM t`,
	`SELECT COUNT(*), COUNT(DISTINCT a), SUM(ALL b), COUNT(*) FILTER (WHERE c > 1), COUNT(DISTINCT d) FILTER (WHERE d IS NOT NULL) FROM t`,
	`SELECT ROW_NUMBER() OVER (PARTITION BY a, b ORDER BY c DESC, d), SUM(x) OVER (ORDER BY ts ROWS BETWEEN 10 PRECEDING AND CURRENT ROW), AVG(x) OVER (PARTITION BY k ORDER BY ts RANGE BETWEEN INTERVAL '1' HOUR PRECEDING AND CURRENT ROW), MAX(x) OVER () FROM t`,
	`SELECT CURRENT_TIMESTAMP, LOCALTIMESTAMP, CURRENT_DATE, CURRENT_TIME, LOCALTIME, PROCTIME(), NOW(), CURRENT_ROW_TIMESTAMP()`,
	`SELECT IF(a > 1, 'x', 'y'), LEFT(s, 2), RIGHT(s, 3), MOD(a, 2), md5(concat(cast(a AS STRING), 'x')) FROM t`,
	`SELECT TRIM(s), TRIM(BOTH FROM s), TRIM(LEADING 'x' FROM s), TRIM(TRAILING FROM s), TRIM('y' FROM s) FROM t`,
	`SELECT SUBSTRING(s FROM 2), SUBSTRING(s FROM 2 FOR 3), SUBSTRING(s, 2, 3), SUBSTRING(s, 2) FROM t`,
	`SELECT EXTRACT(YEAR FROM ts), EXTRACT(DAYS FROM ts), EXTRACT(DOW FROM ts), POSITION('a' IN s), POSITION(a || b IN c) FROM t`,
	`SELECT DATE_FORMAT(ts, 'yyyy-MM-dd'), HOUR(ts), REGEXP_EXTRACT(url, '(&|^)id=([^&]*)', 2), SPLIT_INDEX(url, '/', 3), cat.db.udf(x) FROM t`,
	"SELECT `my fn`(x) FROM t",
	`SELECT - -1, -+1, +-1, - (-1), a - -b, a--comment
FROM t`,
	`SELECT a FROM t WHERE NOT EXISTS (SELECT 1) AND a IN ((SELECT 1), 2) AND b IN ((SELECT 1))`,
	`SELECT TRIM(BOTH (SELECT a FROM t) FROM s), x.y[1], CAST(a AS ROW<b INT>).b, f(x).g[2].h FROM t`,
	`SELECT * FROM (SELECT 1) AS x JOIN (SELECT 2) y ON TRUE, ((SELECT 3)) z`,
	`INSERT INTO t (a) (SELECT 1)`,
	`SELECT a FROM t WHERE a = 1 IS NOT TRUE = b BETWEEN 1 AND 2 BETWEEN c AND d`,
	`SELECT 1.a, 2.e3 FROM t`,
	`EXPLAIN EXECUTE STATEMENT SET BEGIN INSERT INTO a SELECT 1; END`,
	`SELECT 'multi
line', "a""b" FROM t`,
	`SELECT ROW(a, b), x FROM t`,
	`SELECT ARRAY[1, 2, a + 1], MAP['k', 1, 'l', 2], ARRAY[1][1], array(1), cardinality(ARRAY['x']) FROM t`,
	`SELECT * FROM t AS x (a, b) JOIN (SELECT 1, 2) AS y (c, d) ON a = c`,
	`INSERT INTO t /*+ OPTIONS('sink.parallelism' = '2') */ (a, b) SELECT a, b FROM s /*+ OPTIONS('scan.startup.mode' = 'earliest-offset') */`,
}

// roundTrip checks that st prints as SQL that parses to the same tree,
// which prints the same.
func roundTrip(t testing.TB, st ast.Stmt) {
	t.Helper()
	printed := st.String()
	again, err := Parse(printed)
	if err != nil {
		t.Fatalf("printed statement does not parse: %v\n%s", err, printed)
	}
	if len(again.Stmts) != 1 {
		t.Fatalf("printed statement parses to %d statements:\n%s", len(again.Stmts), printed)
	}
	if reprinted := again.Stmts[0].String(); reprinted != printed {
		t.Fatalf("printing is not stable:\nfirst:  %s\nsecond: %s", printed, reprinted)
	}
	if !sameTree(st, again.Stmts[0]) {
		t.Fatalf("printed statement parses to another tree:\n%s\nfirst:  %#v\nsecond: %#v", printed, st, again.Stmts[0])
	}
}

// sameTree compares two trees without their positions.
func sameTree(a, b ast.Node) bool {
	return reflect.DeepEqual(withoutPos(a), withoutPos(b))
}

var posType = reflect.TypeFor[ast.Pos]()

// withoutPos is a copy of the tree with every Pos zero.
func withoutPos(n ast.Node) any {
	v := reflect.ValueOf(n)
	c := reflect.New(v.Type()).Elem()
	copyZeroPos(c, v)
	return c.Interface()
}

func copyZeroPos(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Pointer:
		if src.IsNil() {
			return
		}
		p := reflect.New(src.Type().Elem())
		copyZeroPos(p.Elem(), src.Elem())
		dst.Set(p)
	case reflect.Interface:
		if src.IsNil() {
			return
		}
		e := reflect.New(src.Elem().Type()).Elem()
		copyZeroPos(e, src.Elem())
		dst.Set(e)
	case reflect.Struct:
		if src.Type() == posType {
			return
		}
		for i := range src.NumField() {
			copyZeroPos(dst.Field(i), src.Field(i))
		}
	case reflect.Slice:
		if src.IsNil() {
			return
		}
		s := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
		for i := range src.Len() {
			copyZeroPos(s.Index(i), src.Index(i))
		}
		dst.Set(s)
	default:
		dst.Set(src)
	}
}

func TestStatements(t *testing.T) {
	for _, src := range statements {
		s, err := Parse(src)
		if err != nil {
			t.Errorf("%s\n  error: %v", src, err)
			continue
		}
		if len(s.Stmts) != 1 {
			t.Errorf("%s\n  %d statements, want 1", src, len(s.Stmts))
			continue
		}
		roundTrip(t, s.Stmts[0])
	}
}

// testdataScripts reads the scripts of testdata.
func testdataScripts(t testing.TB) map[string]string {
	t.Helper()
	files, err := filepath.Glob("testdata/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	scripts := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		scripts[filepath.Base(f)] = string(b)
	}
	return scripts
}

func TestScripts(t *testing.T) {
	want := map[string]int{"seed.sql": 2, "nexmark.sql": 30, "features.sql": 17}
	for name, src := range testdataScripts(t) {
		t.Run(name, func(t *testing.T) {
			s, err := Parse(src)
			if err != nil {
				t.Fatal(err)
			}
			if n, ok := want[name]; ok && len(s.Stmts) != n {
				t.Errorf("%d statements, want %d", len(s.Stmts), n)
			}
			for _, st := range s.Stmts {
				roundTrip(t, st)
			}
			// The whole script prints and parses back too.
			again, err := Parse(s.String())
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(withoutPosScript(s), withoutPosScript(again)) {
				t.Error("the printed script parses to another tree")
			}
		})
	}
}

func withoutPosScript(s *ast.Script) []any {
	var out []any
	for _, st := range s.Stmts {
		out = append(out, withoutPos(st))
	}
	return out
}

// TestSeed checks the tree of the user's seed script.
func TestSeed(t *testing.T) {
	s, err := Parse(testdataScripts(t)["seed.sql"])
	if err != nil {
		t.Fatal(err)
	}
	ct := s.Stmts[0].(*ast.CreateTable)
	if ct.Name.Last() != "user_actions" || len(ct.Columns) != 4 || !ct.Columns[0].PrimaryKey || ct.Columns[2].Type.Name != "TIMESTAMP" || ct.Columns[2].Type.Params[0] != 3 {
		t.Errorf("create table: %s", ct)
	}
	if len(ct.Options) != 4 || ct.Options[1].Key != "table-name" || ct.Options[1].Value != "user_actions" || ct.Options[1].ValueAt != (ast.Pos{Line: 1, Col: 167}) {
		t.Errorf("options: %+v at %v", ct.Options[1], ct.Options[1].ValueAt)
	}
	ins := s.Stmts[1].(*ast.Insert)
	sel := ins.Query.Body.(*ast.Select)
	md5 := sel.Items[0].Expr.(*ast.Call)
	if md5.Name.Last() != "md5" || sel.Items[0].Alias.Name != "message_id" || md5.At != (ast.Pos{Line: 2, Col: 33}) {
		t.Errorf("md5: %s at %v", md5, md5.At)
	}
	cast := md5.Args[0].(*ast.Call).Args[1].(*ast.Cast)
	if cast.To.Name != "STRING" || cast.X.(*ast.ColumnRef).Name.Last() != "event_time" {
		t.Errorf("cast: %s", cast)
	}
	if from := sel.From.(*ast.TableRef); from.Name.Last() != "kafka_events" {
		t.Errorf("from: %s", from)
	}
}

// tree prints an expression with every operation in brackets, to check
// the precedence.
func tree(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Binary:
		s := "[" + tree(e.X) + " " + e.Op + " " + tree(e.Y)
		if e.Escape != nil {
			s += " ESCAPE " + tree(e.Escape)
		}
		return s + "]"
	case *ast.Unary:
		return "[" + e.Op + " " + tree(e.X) + "]"
	case *ast.Between:
		return "[" + tree(e.X) + " BETWEEN " + tree(e.Lo) + " " + tree(e.Hi) + "]"
	case *ast.IsNull:
		return "[" + tree(e.X) + " IS NULL]"
	case *ast.In:
		return "[" + tree(e.X) + " IN …]"
	case *ast.Subscript:
		return "[" + tree(e.X) + "[" + tree(e.Index) + "]]"
	case *ast.Field:
		return "[" + tree(e.X) + "." + e.Name.Name + "]"
	case *ast.Paren:
		return "(" + tree(e.X) + ")"
	}
	return e.String()
}

func TestPrecedence(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{`a OR b AND c`, `[a OR [b AND c]]`},
		{`NOT a = b AND c`, `[[NOT [a = b]] AND c]`},
		{`a = b || c`, `[a = [b || c]]`},
		{`a || b + c`, `[a || [b + c]]`},
		{`a + b * c - d`, `[[a + [b * c]] - d]`},
		{`a - b - c`, `[[a - b] - c]`},
		{`-a * b`, `[[- a] * b]`},
		{`-a.b[1].c`, `[- [[a.b[1]].c]]`},
		{`a BETWEEN b + 1 AND c AND d`, `[[a BETWEEN [b + 1] c] AND d]`},
		{`a NOT LIKE b || 'x' ESCAPE '!' OR c`, `[[a NOT LIKE [b || 'x'] ESCAPE '!'] OR c]`},
		{`a IS NULL AND b IN (1) = c`, `[[a IS NULL] AND [[b IN …] = c]]`},
		{`(a OR b) AND c`, `[([a OR b]) AND c]`},
		{`dateTime - INTERVAL '4' SECOND`, `[dateTime - INTERVAL '4' SECOND]`},
		{`0.908 * price > 1000000 AND 0.908 * price < 50000000`, `[[[0.908 * price] > 1000000] AND [[0.908 * price] < 50000000]]`},
	} {
		e, err := ParseExpr(c.src)
		if err != nil {
			t.Errorf("%s: %v", c.src, err)
			continue
		}
		if got := tree(e); got != c.want {
			t.Errorf("%s\n  got  %s\n  want %s", c.src, got, c.want)
		}
	}
}

func TestParseExprAndType(t *testing.T) {
	e, err := ParseExpr("EXTRACT(hours FROM ts)")
	if err != nil {
		t.Fatal(err)
	}
	c := e.(*ast.Call)
	if l := c.Args[0].(*ast.Literal); l.Kind != ast.LitString || l.Value != "HOUR" {
		t.Errorf("EXTRACT's unit: %#v", l)
	}
	e, err = ParseExpr("TRIM(LEADING 'x' FROM s)")
	if err != nil {
		t.Fatal(err)
	}
	if c := e.(*ast.Call); len(c.Args) != 3 || c.Args[0].(*ast.Literal).Value != "LEADING" {
		t.Errorf("TRIM: %#v", c.Args)
	}
	e, err = ParseExpr("INTERVAL '10' SECONDS")
	if err != nil {
		t.Fatal(err)
	}
	if iv := e.(*ast.Interval); iv.Unit != "SECOND" || iv.Value != "10" {
		t.Errorf("interval: %#v", iv)
	}
	ty, err := ParseType("ROW<id BIGINT, ts TIMESTAMP(3) WITH LOCAL TIME ZONE, m MAP<STRING, ARRAY<DECIMAL(10, 2)>>> NOT NULL")
	if err != nil {
		t.Fatal(err)
	}
	if ty.Name != "ROW" || !ty.NotNull || len(ty.Fields) != 3 || !ty.Fields[1].Type.WithLocalTimeZone ||
		ty.Fields[2].Type.Key.Name != "STRING" || ty.Fields[2].Type.Elem.Elem.Params[1] != 2 {
		t.Errorf("type: %s", ty)
	}
	if ty, err := ParseType("varchar(20)"); err != nil || ty.Name != "VARCHAR" || ty.Params[0] != 20 {
		t.Errorf("varchar: %v %v", ty, err)
	}
	q, err := ParseQuery("SELECT a FROM t;")
	if err != nil || q.Body.(*ast.Select).Items[0].Expr.String() != "a" {
		t.Errorf("query: %v %v", q, err)
	}
}

func TestHintsAndPositions(t *testing.T) {
	s, err := Parse("SELECT *\nFROM orders /*+ STATE_TTL('o' = '1d') */ o")
	if err != nil {
		t.Fatal(err)
	}
	ref := s.Stmts[0].(*ast.QueryStmt).Query.Body.(*ast.Select).From.(*ast.TableRef)
	if len(ref.Hints) != 1 || ref.Hints[0].Name != "STATE_TTL" || ref.Hints[0].Options[0].Key != "o" || ref.Hints[0].Options[0].Value != "1d" {
		t.Fatalf("hints: %#v", ref.Hints)
	}
	if ref.At != (ast.Pos{Line: 2, Col: 6}) || ref.Hints[0].At != (ast.Pos{Line: 2, Col: 17}) || ref.Alias.Name != "o" {
		t.Errorf("positions: ref %v hint %v", ref.At, ref.Hints[0].At)
	}
	s, err = Parse("INSERT INTO t /*+ OPTIONS('sink.parallelism' = '2') */ SELECT * FROM u AS x (a, b)")
	if err != nil {
		t.Fatal(err)
	}
	ins := s.Stmts[0].(*ast.Insert)
	if len(ins.Hints) != 1 || ins.Hints[0].Name != "OPTIONS" || ins.Hints[0].Options[0].Value != "2" {
		t.Errorf("insert hints: %v", ins.Hints)
	}
	if ref := ins.Query.Body.(*ast.Select).From.(*ast.TableRef); ref.Alias.Name != "x" || len(ref.AliasColumns) != 2 {
		t.Errorf("alias columns: %s", ref)
	}
	// Right after SELECT: the query's hints.
	s, err = Parse("SELECT /*+ STATE_TTL('o' = '1h', 'c' = '2h') */ o.a FROM o JOIN c ON o.k = c.k")
	if err != nil {
		t.Fatal(err)
	}
	sel := s.Stmts[0].(*ast.QueryStmt).Query.Body.(*ast.Select)
	if len(sel.Hints) != 1 || sel.Hints[0].Name != "STATE_TTL" || len(sel.Hints[0].Options) != 2 || sel.Hints[0].Options[1].Key != "c" || sel.Hints[0].Options[1].Value != "2h" {
		t.Errorf("select hints: %v", sel.Hints)
	}
	// A hint anywhere else is a comment.
	if _, err := Parse("SELECT a /*+ NOT A HINT ( */ FROM t"); err != nil {
		t.Error(err)
	}
}

// errorCases are malformed inputs and their exact errors.
var errorCases = []struct{ src, want string }{
	{`SELECT (a + b FROM t`, `line 1, column 15: expected ")", found "FROM"`},
	{`SELECT f(a, b FROM t`, `line 1, column 15: expected ")", found "FROM"`},
	{`SELCT a FROM t`, `line 1, column 1: unknown statement "SELCT"; did you mean SELECT?`},
	{`INSRT INTO t SELECT 1`, `line 1, column 1: unknown statement "INSRT"; did you mean INSERT?`},
	{`FOO bar`, `line 1, column 1: expected a statement (CREATE, INSERT, SELECT, SET, …), found "FOO"`},
	{"SELECT 'abc FROM t", `line 1, column 8: unterminated string: ' without its closing '`},
	{"CREATE TABLE t (a INT) WITH (connector = kafka)", `line 1, column 30: WITH option keys and values must be quoted strings: 'connector' = 'kafka'`},
	{"CREATE TABLE t (a INT) WITH ('connector' = kafka)", `line 1, column 44: WITH option values must be quoted strings: 'connector' = 'kafka'`},
	{"CREATE TABLE t (a INT) WITH (\n  'scan.startup.mode' = earliest-offset)", `line 2, column 25: WITH option values must be quoted strings: 'scan.startup.mode' = 'earliest-offset'`},
	{`SELECT a FROM t garbage more`, `line 1, column 25: expected ";" or the end of the script after the statement, found "more"`},
	{`SELECT 1; SELECT 2 )`, `line 1, column 20: expected ";" or the end of the script after the statement, found ")"`},
	{`SELECT CAST(a STRING) FROM t`, `line 1, column 15: expected AS in CAST(value AS type), found "STRING"`},
	{`SELECT a FROM`, `line 1, column 14: expected a table name, found end of input`},
	{`SELECT FROM t`, `line 1, column 8: expected an expression, found the reserved word FROM`},
	{"SELECT a\nFROM t\nWHERE a = ", `line 3, column 11: expected an expression, found end of input`},
	{`SELECT * FROM a JOIN b WHERE x`, `line 1, column 24: expected ON or USING after the table of the INNER JOIN, found "WHERE"`},
	{`SELECT CASE WHEN a THEN b FROM t`, `line 1, column 27: expected WHEN, ELSE or END in CASE, found "FROM"`},
	{`SELECT INTERVAL '1' WEEKS`, `line 1, column 21: expected an interval unit (YEAR, MONTH, DAY, HOUR, MINUTE or SECOND), found "WEEKS"`},
	{`SELECT INTERVAL 'x'`, `line 1, column 20: expected an interval unit (YEAR, MONTH, DAY, HOUR, MINUTE or SECOND), found end of input`},
	{"CREATE TABLE t (a VARCHAR(x))", `line 1, column 27: expected an integer, found "x"`},
	{"CREATE TABLE t (a ROW<b INT)", `line 1, column 28: expected ">", found ")"`},
	{"CREATE TABLE t (a INT b INT)", `line 1, column 23: expected "," or ")" after the column (a column is name type [constraints]), found "b"`},
	{"CREATE VIEW v SELECT 1", `line 1, column 15: expected AS, found "SELECT"`},
	{"CREATE INDEX i", `line 1, column 8: expected TABLE, VIEW or FUNCTION after CREATE, found "INDEX"`},
	{"SELECT * FROM t, LATERAL TABLE(f(x))", `line 1, column 18: LATERAL TABLE(…) (a table function per row) is not supported`},
	{"SELECT `a FROM t", "line 1, column 8: unterminated quoted identifier: ` without its closing `"},
	{"SELECT a /* never closed", `line 1, column 10: unterminated comment: /* without */`},
	{"SELECT a # b", `line 1, column 10: unexpected character "#"`},
	{"SELECT a IS 5", `line 1, column 13: expected NULL, TRUE, FALSE, UNKNOWN or DISTINCT FROM after IS, found "5"`},
	{"SELECT * FROM t /*+ STATE_TTL('o' = 1d) */", `line 1, column 37: expected the hint option's value as a quoted string, found "1"`},
	{"INSERT t SELECT 1", `line 1, column 8: expected INTO or OVERWRITE after INSERT, found "t"`},
	{"INSERT INTO t VALUES (1)", `line 1, column 15: INSERT … VALUES is not supported; insert a query`},
	{"EXECUTE STATEMENT SET BEGIN SELECT 1; END", `line 1, column 29: expected INSERT or END in the statement set, found "SELECT"`},
	{"SELECT a AS FROM t", `line 1, column 13: expected an alias after AS, found the reserved word FROM (quote it in backticks: ` + "`FROM`)"},
	{"SELECT 1 +", `line 1, column 11: expected an expression, found end of input`},
	{"DROP TABLE t", `line 1, column 1: the DROP statement is not supported`},
	{"SELECT 'ünïcödé', `ß` # x", `line 1, column 23: unexpected character "#"`},
	{"SELECT\r\n  a,\n\tb c d", `line 3, column 6: expected ";" or the end of the script after the statement, found "d"`},
}

func TestErrors(t *testing.T) {
	for _, c := range errorCases {
		_, err := Parse(c.src)
		if err == nil {
			t.Errorf("%s: no error, want %s", c.src, c.want)
			continue
		}
		var pe *Error
		if !errors.As(err, &pe) {
			t.Errorf("%s: error %T, want *Error", c.src, err)
		}
		if err.Error() != c.want {
			t.Errorf("%s\n  got  %s\n  want %s", c.src, err, c.want)
		}
	}
}

func TestErrorEntryPoints(t *testing.T) {
	for _, c := range []struct {
		parse func(string) error
		src   string
		want  string
	}{
		{func(s string) error { _, err := ParseExpr(s); return err }, "a + b c", `line 1, column 7: unexpected "c" after the expression`},
		{func(s string) error { _, err := ParseType(s); return err }, "MAP<STRING>", `line 1, column 11: expected ",", found ">"`},
		{func(s string) error { _, err := ParseType(s); return err }, "INT NOT", `line 1, column 5: unexpected "NOT" after the type`},
		{func(s string) error { _, err := ParseQuery(s); return err }, "SELECT 1; SELECT 2", `line 1, column 11: unexpected "SELECT" after the query`},
		{func(s string) error { _, err := ParseExpr(s); return err }, strings.Repeat("(", 300) + "1" + strings.Repeat(")", 300), `line 1, column 201: nested too deeply (more than 200 levels)`},
	} {
		err := c.parse(c.src)
		if err == nil || err.Error() != c.want {
			t.Errorf("%.40s\n  got  %v\n  want %s", c.src, err, c.want)
		}
	}
}

// seeds are the inputs of the tests, as seeds of the fuzzer.
func seeds(t testing.TB) []string {
	out := append([]string(nil), statements...)
	for _, src := range testdataScripts(t) {
		out = append(out, src)
	}
	for _, c := range errorCases {
		out = append(out, c.src)
	}
	return out
}

func FuzzParse(f *testing.F) {
	for _, s := range seeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		s, err := Parse(src)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		for _, st := range s.Stmts {
			roundTrip(t, st)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	src := testdataScripts(b)["nexmark.sql"]
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(src); err != nil {
			b.Fatal(err)
		}
	}
}

func ExampleParseExpr() {
	e, err := ParseExpr("dateTime - INTERVAL '4' seconds")
	if err != nil {
		panic(err)
	}
	fmt.Println(e)
	// Output: dateTime - INTERVAL '4' SECOND
}

// TestLongChain checks that a long flat expression (generated SQL writes
// them) parses and prints without deep recursion in the parser and in
// linear time.
func TestLongChain(t *testing.T) {
	terms := make([]string, 20000)
	for i := range terms {
		terms[i] = fmt.Sprintf("a%d = %d", i, i)
	}
	src := "SELECT * FROM t WHERE " + strings.Join(terms, " OR ")
	s, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Stmts[0].String(); got != "SELECT *\nFROM t\nWHERE "+strings.Join(terms, " OR ") {
		t.Errorf("printed %.80s…", got)
	}
}
