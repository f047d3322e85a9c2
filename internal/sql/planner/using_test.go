package planner

import (
	"strings"
	"testing"
)

// JOIN … USING: SELECT * has each USING column once, first; an
// unqualified USING column is the left side's (no ambiguity), and each
// side's is still there qualified.
func TestJoinUsingColumns(t *testing.T) {
	ddl := `SET 'table.exec.state.ttl' = '1 h';
CREATE TABLE clicks (user_id STRING, region STRING, url STRING) WITH ('connector' = 'kafka', 'topic' = 'clicks', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE sessions (region STRING, device STRING, user_id STRING) WITH ('connector' = 'kafka', 'topic' = 'sessions', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
`
	for _, tc := range []struct{ query, cols string }{
		{"SELECT * FROM clicks JOIN sessions USING (user_id)", "user_id,region,url,region0,device"},
		{"SELECT * FROM clicks c JOIN sessions s USING (region, user_id)", "region,user_id,url,device"},
		{"SELECT s.*, c.url FROM clicks c JOIN sessions s USING (user_id)", "region,device,user_id,url"},
		{"SELECT user_id, c.user_id AS cu, s.user_id AS su FROM clicks c JOIN sessions s USING (user_id) WHERE user_id <> 'x'", "user_id,cu,su"},
	} {
		q, err := CompileQuery("shell.sql", ddl+tc.query+";", QueryOptions{Topic: "out", Group: "g"})
		if err != nil {
			t.Errorf("%s: %v", tc.query, err)
			continue
		}
		if got := strings.Join(q.Columns, ","); got != tc.cols {
			t.Errorf("%s: columns %s, want %s", tc.query, got, tc.cols)
		}
	}
	// Without USING the same unqualified name is ambiguous.
	_, err := CompileQuery("shell.sql", ddl+"SELECT user_id FROM clicks c JOIN sessions s ON c.user_id = s.user_id;", QueryOptions{Topic: "out", Group: "g"})
	if err == nil || !strings.Contains(err.Error(), "ambiguous") {
		t.Errorf("ON: %v, want the unqualified user_id ambiguous", err)
	}
}
