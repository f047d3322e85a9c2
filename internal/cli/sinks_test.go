package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A sink section naming several sinks: validate says which one is the
// commit point and how each of the others delivers.
func TestValidateSeveralSinks(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PG", "postgres://app:s3cret@db/orders")
	for _, c := range []struct {
		name, sink string
		want       []string
	}{
		{"kafka and tables", `  topic: out
  postgres: {dsn: "${PG}", table: counts, key: [k], columns: {k: record.key, n: record.value}}
  mysql: {dsn: "app:s3cret@tcp(db:3306)/orders", table: counts, columns: {k: record.key}}`, []string{
			"  sinks:      out, delivery exactly-once (the Kafka transaction is the commit point)",
			"              PostgreSQL postgres://app:xxxxx@db/orders, table counts (k=record.key, n=record.value), upsert on key (k), delivery exactly-once (prepared transactions under the kafka commit point), 1000 rows per batch",
			"              MySQL app:xxxxx@tcp(db:3306)/orders, table counts (k=record.key), appended, delivery exactly-once (prepared transactions under the kafka commit point), 1000 rows per batch",
		}},
		{"redis and a table", `  redis: {url: "redis://:s3cret@cache:6379/2", command: hincrby, key: record.key, key-prefix: "c:", field: record.value.day}
  postgres: {dsn: "${PG}", table: events, columns: {v: record.value}}`, []string{
			"  sinks:      PostgreSQL postgres://app:xxxxx@db/orders, table events (v=record.value), appended, delivery exactly-once (prepared transactions under the redis commit point), 1000 rows per batch",
			`              Redis redis://:xxxxx@cache:6379/2, HINCRBY key="c:"+record.key field=record.value.day, delivery exactly-once (Redis is the commit point), 1000 commands per batch`,
		}},
		{"at least once", `  topic: out
  postgres: {dsn: "${PG}", table: counts, key: [k], columns: {k: record.key}}
  redis: {url: "redis://cache:6379/0", command: set, key: record.key, value: record.value}
  delivery: at-least-once`, []string{
			"  sinks:      out, delivery at-least-once",
			"(k=record.key), upsert on key (k), delivery at-least-once (epoch-fenced upserts)",
			"Redis redis://cache:6379/0, SET key=record.key value=record.value, delivery at-least-once (writes fenced per attempt of the job)",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".yaml")
			body := "job: j\nkafka:\n  brokers: [127.0.0.1:9092]\nsource:\n  topics: [in]\nsink:\n" + c.sink + "\ncheckpointing:\n  interval: 1s\n"
			if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := runMain("validate", file)
			if code != 0 {
				t.Fatalf("validate: exit %d\n%s", code, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("validate does not say\n%s\nit says:\n%s", w, stdout)
				}
			}
			if strings.Contains(stdout, "s3cret") {
				t.Errorf("validate shows a password:\n%s", stdout)
			}
		})
	}
}
