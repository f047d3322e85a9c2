package planner

import (
	"strings"
	"testing"
)

// Review finding: a window join of TUMBLE(…, size, OFFSET) compiles to a
// window-join step without the offset (the step has none): the windows
// are the epoch-aligned ones, so rows 3 s apart across an offset window's
// boundary are paired (and others missed), and window_start is wrong.
// Likewise TUMBLE over a PROCTIME() column compiles to an event-time
// window-join on the PROCTIME() value, with the watermarks of the Kafka
// timestamp. Want: compiled faithfully, or refused with a message.
func TestReviewWindowJoinDropsOffsetAndProctime(t *testing.T) {
	tables := func(timeCol string) string {
		return `CREATE TABLE bids (auction BIGINT, price BIGINT, ` + timeCol + `) WITH ('connector' = 'kafka', 'topic' = 'bids', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE asks (auction BIGINT, price BIGINT, ` + timeCol + `) WITH ('connector' = 'kafka', 'topic' = 'asks', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE out1 (auction BIGINT, b BIGINT, a BIGINT, ws TIMESTAMP(3)) WITH ('connector' = 'kafka', 'topic' = 'out1', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
`
	}
	join := func(col, extra string) string {
		return `INSERT INTO out1 SELECT x.auction, x.price, y.price, x.window_start FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(` + col + `), INTERVAL '10' SECOND` + extra + `)) x JOIN TABLE(TUMBLE(TABLE asks, DESCRIPTOR(` + col + `), INTERVAL '10' SECOND` + extra + `)) y ON x.window_start = y.window_start AND x.window_end = y.window_end AND x.auction = y.auction;`
	}
	cases := []struct{ name, src, want string }{
		{"offset", tables("ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND") + join("ts", ", INTERVAL '3' SECOND"), "offset: 3s"},
		{"proctime", tables("pt AS PROCTIME()") + join("pt", ""), "time: processing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j, err := Compile("review.sql", c.src)
			if err != nil {
				return // refused: fine
			}
			if !strings.Contains(string(j.YAML), c.want) {
				t.Errorf("compiled without %q (and not refused):\n%s", c.want, j.YAML)
			}
		})
	}
}

// Review finding: an updating result that retracts (here a HAVING turns
// update-before on) into an upsert table whose PRIMARY KEY is not the
// group key compiles with a note only. Each -U then deletes the sink's
// row of that primary key, which another group may have written since:
// with groups (r1, u1) and (r1, u2) both passing, an update of (r1, u1)
// deletes r1 and writes u1's row, and a later -U of (r1, u1) that fails
// the HAVING deletes r1 though (r1, u2) still passes. Flink keeps such a
// sink consistent (it materializes the rows per primary key); here
// nothing does. Want: refused when the result retracts (as keyless
// results are), or the rows per sink key materialized.
func TestReviewRetractingIntoOtherSinkKey(t *testing.T) {
	src := `CREATE TABLE orders (region STRING, customer STRING, amount BIGINT) WITH ('connector' = 'kafka', 'topic' = 'orders', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE big (region STRING, customer STRING, total BIGINT, PRIMARY KEY (region) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'big', 'properties.bootstrap.servers' = 'localhost:9092');
INSERT INTO big SELECT region, customer, SUM(amount) FROM orders GROUP BY region, customer HAVING SUM(amount) > 100;
`
	j, err := Compile("review.sql", src)
	if err != nil {
		return // refused: fine
	}
	if strings.Contains(string(j.YAML), "update-before: true") {
		t.Errorf("compiled a retracting result into an upsert table keyed otherwise; notes: %q", j.Notes)
	}
}

// Review finding (minor): the check that an updating GROUP BY result
// selects every grouped column counts the select items that are group
// columns, not the distinct group columns: selecting k1 twice and not k2
// passes for GROUP BY k1, k2, and the sink upserts (and, with the
// HAVING, deletes) the rows of different k2 under one key.
func TestReviewKeylessByDuplicateGroupColumn(t *testing.T) {
	src := `CREATE TABLE t (k1 STRING, k2 STRING, n BIGINT) WITH ('connector' = 'kafka', 'topic' = 't', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE o (a STRING, b STRING, c BIGINT, PRIMARY KEY (a, b) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'o', 'properties.bootstrap.servers' = 'localhost:9092');
INSERT INTO o SELECT k1 AS a, k1 AS b, SUM(n) AS c FROM t GROUP BY k1, k2 HAVING SUM(n) > 1;
`
	if _, err := Compile("review.sql", src); err == nil {
		t.Errorf("compiled an updating result without k2 (k1 selected twice) into an upsert table")
	}
}
