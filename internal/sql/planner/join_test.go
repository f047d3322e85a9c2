package planner

import (
	"strings"
	"testing"

	"github.com/onceflow/onceflow/internal/sql/parser"
)

// TestCompileQueryJoin: the shell's query may join: its columns are the
// join's (a second name of two tables renamed as Flink does), its rows
// appended, and the job has a stream per side and the join step.
func TestCompileQueryJoin(t *testing.T) {
	src := `SET 'table.exec.state.ttl' = '10 min';
CREATE TABLE clicks (user_id STRING, url STRING) WITH ('connector' = 'kafka', 'topic' = 'clicks',
  'properties.bootstrap.servers' = 'localhost:9092', 'properties.group.id' = 'production-job', 'format' = 'json');
CREATE TABLE users (user_id STRING, country STRING) WITH ('connector' = 'kafka', 'topic' = 'users',
  'properties.bootstrap.servers' = 'localhost:9092', 'properties.group.id' = 'production-job', 'format' = 'json');
SELECT * FROM clicks c JOIN users u ON c.user_id = u.user_id WHERE u.country <> 'XX';`
	q, err := CompileQuery("shell.sql", src, QueryOptions{Topic: "shell-out", Group: "shell-group"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(q.Columns, ","); got != "user_id,url,user_id0,country" || q.Updating {
		t.Errorf("columns %s, updating %v; want user_id,url,user_id0,country appended", got, q.Updating)
	}
	y := string(q.YAML)
	for _, want := range []string{"query_rows_left:", "query_rows_right:", "- join:\n          ttl: 10m", `"user_id0": "` + "`right`.user_id" + `"`, `group: "shell-group"`} {
		if !strings.Contains(y, want) {
			t.Errorf("the job has no %q:\n%s", want, y)
		}
	}
	if strings.Contains(y, "production-job") {
		t.Errorf("the job commits to the tables' group:\n%s", y)
	}
}

// TestJoinKeyType: the type both sides of a key equality are cast to.
func TestJoinKeyType(t *testing.T) {
	for _, tc := range []struct{ l, r, want string }{
		{"BIGINT", "BIGINT", "="},
		{"INT", "BIGINT", "BIGINT"},
		{"SMALLINT NOT NULL", "INT", "BIGINT"},
		{"VARCHAR(10)", "STRING", "STRING"},
		{"DOUBLE NOT NULL", "DOUBLE", "DOUBLE"},
		{"TIMESTAMP(3)", "TIMESTAMP(6)", "TIMESTAMP(6)"},
		{"TIMESTAMP(3)", "TIMESTAMP_LTZ(3)", "refused"},
		{"DECIMAL(10, 2)", "DECIMAL(12, 2)", "refused"},
		{"DOUBLE", "STRING", "refused"},
		{"INT", "DOUBLE", "refused"},
	} {
		lt, err := parser.ParseType(tc.l)
		if err != nil {
			t.Fatal(err)
		}
		rt, err := parser.ParseType(tc.r)
		if err != nil {
			t.Fatal(err)
		}
		to, ok := joinKeyType(lt, rt)
		got := "refused"
		switch {
		case ok && to == nil:
			got = "="
		case ok:
			got = to.String()
		}
		if got != tc.want {
			t.Errorf("%s = %s: %s, want %s", tc.l, tc.r, got, tc.want)
		}
	}
}
