package planner

import (
	"fmt"
	"strings"
	"testing"
)

// Review finding (review3): a temporal join with a condition of both
// tables panics the planner (join.go, build: the condition of an updating
// side's join is moved into the join step's pair condition, out.pair,
// which a temporal-join relation does not have: nil). `onceflow validate`
// and `onceflow run` crash on FROM o JOIN r FOR SYSTEM_TIME AS OF o.ts
// ON o.k = r.k WHERE o.amount > r.rate, and on the same condition in a
// LEFT JOIN's ON. Want: the inner join's condition filters the joined
// rows (Flink evaluates it against the version at o.ts, an inner join
// drops the row either way); the LEFT JOIN's ON condition of both tables
// compiled into the step or refused with a message, never a panic.
func TestReview3TemporalJoinConditionOfBothTablesPanics(t *testing.T) {
	t.Skip("finding: a temporal join with a condition of both tables (inner WHERE, or LEFT JOIN's ON) panics the planner (join.go:484, nil out.pair)")
	const tables = `CREATE TABLE orders (order_id BIGINT, currency STRING, amount DOUBLE, order_time TIMESTAMP(3), WATERMARK FOR order_time AS order_time - INTERVAL '2' SECOND) WITH ('connector' = 'kafka', 'topic' = 'orders', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE rates (currency STRING, rate DOUBLE, update_time TIMESTAMP_LTZ(3) METADATA FROM 'timestamp', WATERMARK FOR update_time AS update_time - INTERVAL '5' SECOND, PRIMARY KEY (currency) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'rates', 'properties.bootstrap.servers' = 'localhost:9092', 'key.format' = 'raw', 'value.format' = 'json');
CREATE TABLE out_t (order_id BIGINT, rate DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
`
	compile := func(src string) (j *Job, err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("panic: %v", p)
			}
		}()
		return Compile("review3.sql", src)
	}
	cases := []struct {
		name, from  string
		mustCompile bool
	}{
		{"inner WHERE", "orders AS o JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r ON o.currency = r.currency WHERE o.amount > r.rate", true},
		{"inner ON", "orders AS o JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r ON o.currency = r.currency AND o.amount > r.rate", true},
		{"left ON", "orders AS o LEFT JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r ON o.currency = r.currency AND o.amount > r.rate", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j, err := compile(tables + "INSERT INTO out_t SELECT o.order_id, r.rate FROM " + c.from + ";\n")
			switch {
			case err != nil && strings.HasPrefix(err.Error(), "panic: "):
				t.Fatalf("the planner %v", err)
			case err != nil && c.mustCompile:
				t.Fatalf("refused an inner temporal join with a condition of both tables: %v", err)
			case err == nil && !strings.Contains(string(j.YAML), "`left`.amount > `right`.rate"):
				t.Fatalf("compiled without the condition of both tables:\n%s", j.YAML)
			}
		})
	}
}

// Review finding (review3): a temporal join whose probe side is an
// updating result (here a keep-last deduplication; also a GROUP BY, an
// outer join) compiles, and `onceflow validate` passes it, but the
// temporal-join step takes only added rows on its probe side: the
// first -U of the deduplication fails the task ("temporal-join's probe
// side ... takes rows that are only added"), and every restart replays
// it. Flink's event-time temporal join passes the probe row's kind on
// (an update of an order re-joins it). Want: refused with a message (or
// the probe side's changelog joined).
func TestReview3TemporalJoinOfAnUpdatingProbeSide(t *testing.T) {
	t.Skip("finding: a temporal join of an updating probe side (dedup, GROUP BY) compiles; the step fails at its first -U, on every restart")
	src := `CREATE TABLE orders (order_id BIGINT, currency STRING, amount DOUBLE, order_time TIMESTAMP(3), WATERMARK FOR order_time AS order_time - INTERVAL '2' SECOND) WITH ('connector' = 'kafka', 'topic' = 'orders', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE rates (currency STRING, rate DOUBLE, update_time TIMESTAMP_LTZ(3) METADATA FROM 'timestamp', WATERMARK FOR update_time AS update_time - INTERVAL '5' SECOND, PRIMARY KEY (currency) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'rates', 'properties.bootstrap.servers' = 'localhost:9092', 'key.format' = 'raw', 'value.format' = 'json');
CREATE TABLE out_t (order_id BIGINT, rate DOUBLE, PRIMARY KEY (order_id) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'properties.bootstrap.servers' = 'localhost:9092', 'key.format' = 'json', 'value.format' = 'json');
INSERT INTO out_t SELECT o.order_id, r.rate
FROM (SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY order_id ORDER BY order_time DESC) AS rn FROM orders) WHERE rn = 1) AS o
JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r ON o.currency = r.currency;
`
	j, err := Compile("review3.sql", src)
	if err == nil && strings.Contains(string(j.YAML), "temporal-join:") {
		t.Errorf("compiled a temporal join of an updating probe side, which the step fails at run time:\n%s", j.YAML)
	}
}
