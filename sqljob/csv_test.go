package sqljob_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/sqljob"
)

// A csv table ('format' = 'csv' with Flink's csv options) runs end to
// end: each line's fields are read into the columns by position, quoted
// fields and the null literal included, and written as JSON rows; a line
// that does not fit is skipped and counted with 'csv.ignore-parse-errors'.
func TestRunCSVTable(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{})
	c.CreateTopic(t, "orders_csv", 1)
	c.CreateTopic(t, "orders_json", 1)
	c.Produce(t, "orders_csv",
		"a", "1|widget|12.50|2026-12-01 10:00:00",
		"b", `2|'gadget | deluxe'|7|2026-12-01 10:00:01.250`,
		"c", `3|\N|not a price|2026-12-01 10:00:02`, // a poison line: skipped
		"d", `4|\N||2026-12-01 10:00:03`,
	)
	script := fmt.Sprintf(`
SET 'execution.checkpointing.interval' = '200 ms';
CREATE TABLE orders (id BIGINT, item STRING, price DECIMAL(10, 2), ts TIMESTAMP(3))
WITH ('connector' = 'kafka', 'topic' = 'orders_csv', 'properties.bootstrap.servers' = '%[1]s',
      'scan.bounded.mode' = 'latest-offset', 'format' = 'csv',
      'csv.field-delimiter' = '|', 'csv.quote-character' = '''', 'csv.null-literal' = '\N',
      'csv.ignore-parse-errors' = 'true');
CREATE TABLE out (id BIGINT, item STRING, price DECIMAL(10, 2), ts TIMESTAMP(3))
WITH ('connector' = 'kafka', 'topic' = 'orders_json', 'properties.bootstrap.servers' = '%[1]s');
INSERT INTO out SELECT * FROM orders;
`, c.Addr)
	job, err := sqljob.Compile(filepath.Join(t.TempDir(), "csv.sql"), script)
	if err != nil {
		t.Fatal(err)
	}
	if y := string(job.JobFile()); !strings.Contains(y, "format: csv") || !strings.Contains(y, `csv-field-delimiter: "|"`) {
		t.Errorf("the job file does not read csv:\n%s", y)
	}
	if err := job.Run(kafkatest.ContextTimeout(t, time.Minute)); err != nil {
		t.Fatalf("Run: %v", err)
	}
	got := c.ReadCommitted(t, "orders_json")
	slices.Sort(got)
	want := []string{
		`{"id":1,"item":"widget","price":12.50,"ts":"2026-12-01 10:00:00.000"}`,
		`{"id":2,"item":"gadget | deluxe","price":7.00,"ts":"2026-12-01 10:00:01.250"}`,
		`{"id":4,"item":null,"price":null,"ts":"2026-12-01 10:00:03.000"}`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("committed output:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
