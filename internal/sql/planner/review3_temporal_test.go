package planner

import (
	"fmt"
	"strings"
	"testing"
)

// A temporal join with a condition of both tables (found by a review: it
// panicked the planner, join.go's nil pair condition): an inner join's,
// in WHERE or ON, filters the joined rows; a LEFT JOIN's ON is refused
// saying what, never a panic.
func TestReview3TemporalJoinConditionOfBothTablesPanics(t *testing.T) {
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
			case err != nil && !strings.Contains(err.Error(), "LEFT temporal join"):
				t.Fatalf("refused without saying what: %v", err)
			case err == nil && !strings.Contains(string(j.YAML), "`left`.amount > `right`.rate"):
				t.Fatalf("compiled without the condition of both tables:\n%s", j.YAML)
			}
		})
	}
}

// A temporal join whose probe side is an updating result (a keep-last
// deduplication here) is refused at compile time (found by a review: it
// compiled, and the step failed at the first -U on every restart).
func TestReview3TemporalJoinOfAnUpdatingProbeSide(t *testing.T) {
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
	if err != nil && !strings.Contains(err.Error(), "updating result") {
		t.Errorf("refused without saying why: %v", err)
	}
}
