package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// TestSQLShell runs `onceflow sql --file` over a bounded topic: the
// CREATE TABLE is taken into the session, a projection prints each row
// once, a GROUP BY prints upserts whose last per group is the group's
// count, a mistake is reported and the session goes on, and the query's
// own topic is removed afterwards.
func TestSQLShell(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{})
	c.CreateTopic(t, "clicks", 2)
	var recs []*kgo.Record
	for i := 0; i < 30; i++ {
		recs = append(recs, &kgo.Record{Topic: "clicks", Key: []byte(fmt.Sprint(i % 3)), Value: []byte(fmt.Sprintf(`{"user_id": "u%d", "url": "/p/%d"}`, i%3, i))})
	}
	c.ProduceRecords(t, recs...)
	file := filepath.Join(t.TempDir(), "session.sql")
	script := fmt.Sprintf(`CREATE TABLE clicks (user_id STRING, url STRING)
WITH ('connector' = 'kafka', 'topic' = 'clicks', 'properties.bootstrap.servers' = '%s', 'properties.group.id' = 'real-job',
      'scan.startup.mode' = 'earliest-offset', 'scan.bounded.mode' = 'latest-offset', 'format' = 'json');
SELECT user_id, upper(url) AS page FROM clicks WHERE url LIKE '/p/1%%';
SELECT usr FROM clicks;
SELECT user_id, COUNT(*) AS n
FROM clicks GROUP BY user_id;
EXPLAIN SELECT user_id, COUNT(*) AS n FROM clicks GROUP BY user_id;
EXPLAIN INSERT INTO clicks SELECT * FROM clicks;
`, c.Addr)
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runMain("sql", "--file", file)
	t.Logf("output:\n%s", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"ok\n", "user_id | page\n", "u1 | /P/1\n", "u1 | /P/10\n", "(11 rows)\n",
		"column usr is not a column of clicks", "op | user_id | n\n", "+U | u0 | 10\n", "+U | u1 | 10\n", "+U | u2 | 10\n",
		// EXPLAIN prints the plan validate prints: each operator and the
		// state it keeps, here the count's, unbounded.
		"aggregate by record.key: a0 = count()", "unbounded:  aggregate:record.key keeps state for every key",
		"error: the shell explains a SELECT; for a job's INSERT INTO: onceflow validate FILE.sql"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output has no %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "+U | "); n != 30 {
		t.Errorf("%d upserts printed, want 30 (one per click)\n%s", n, out)
	}
	topics, err := c.Admin(t).ListTopics(kafkatest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range topics.Names() {
		if strings.HasPrefix(tp, "onceflow-sql-") {
			t.Errorf("the query's topic %s is left behind", tp)
		}
	}
}
