package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// A SQL job writes a 'kafka' table in 'csv' (a line per row, the
// delimiter and NULL text its options give) and in 'raw' (one column's
// text), read back committed.
func TestSQLSinkFormats(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{})
	for _, topic := range []string{"orders", "lines", "names"} {
		c.CreateTopic(t, topic, 1)
	}
	c.ProduceRecords(t,
		&kgo.Record{Topic: "orders", Value: []byte(`{"id": 1, "customer": "ann, \"the\" first", "amount": 9.5}`)},
		&kgo.Record{Topic: "orders", Value: []byte(`{"id": 2, "customer": "bob", "amount": null}`)},
		&kgo.Record{Topic: "orders", Value: []byte(`{"id": 3, "customer": "cy", "amount": -1}`)},
	)
	dir := t.TempDir()
	for _, tc := range []struct {
		table, with, query, topic string
		want                      []string
	}{
		{"lines (id BIGINT, customer STRING, amount DOUBLE)", "'format' = 'csv', 'csv.field-delimiter' = ';', 'csv.null-literal' = 'NULL'",
			"SELECT id, customer, amount FROM orders WHERE id < 3", "lines", []string{`1;"ann, ""the"" first";9.5`, `2;bob;NULL`}},
		{"names (customer STRING)", "'format' = 'raw'", "SELECT upper(customer) FROM orders", "names", []string{`ANN, "THE" FIRST`, "BOB", "CY"}},
	} {
		file := filepath.Join(dir, tc.topic+".sql")
		script := fmt.Sprintf(`SET 'state.checkpoints.dir' = '%s';
CREATE TABLE orders (id BIGINT, customer STRING, amount DOUBLE)
WITH ('connector' = 'kafka', 'topic' = 'orders', 'properties.bootstrap.servers' = '%s', 'scan.bounded.mode' = 'latest-offset', 'format' = 'json');
CREATE TABLE %s WITH ('connector' = 'kafka', 'topic' = '%s', 'properties.bootstrap.servers' = '%s', %s);
INSERT INTO %s %s;
`, filepath.Join(dir, "state-"+tc.topic), c.Addr, tc.table, tc.topic, c.Addr, tc.with, tc.topic, tc.query)
		if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
			t.Fatal(err)
		}
		if code, _, stderr := runMain("run", "--status-interval", "0", file); code != 0 {
			t.Fatalf("%s: exit %d\n%s", tc.topic, code, stderr)
		}
		var got []string
		for _, r := range c.ReadCommittedRecords(t, tc.topic) {
			got = append(got, string(r.Value))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.topic, got, tc.want)
		}
	}
}
