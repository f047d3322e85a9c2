package sqljob_test

import (
	"crypto/md5"
	"encoding/hex"
	"errors"
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

// A script compiled from Go runs end to end against a broker: a bounded
// Kafka table through a projection and a filter into a Kafka table, read
// back with read_committed. A second Run of the same job resumes from its
// checkpoint and writes nothing again.
func TestRunScript(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{})
	c.CreateTopic(t, "events", 2)
	c.CreateTopic(t, "actions", 1)
	c.Produce(t, "events",
		"a", `{"user_id": 1, "event_time": "2024-05-01 12:00:00.250", "action_type": "click"}`,
		"b", `{"user_id": 2, "event_time": "2024-05-01 12:00:01.000", "action_type": "view"}`,
		"c", `{"user_id": 3, "event_time": "2024-05-01 12:00:02.000", "action_type": "click"}`,
	)
	script := fmt.Sprintf(`
SET 'execution.checkpointing.interval' = '200 ms';
CREATE TABLE events (user_id BIGINT, event_time TIMESTAMP(3), action_type STRING)
WITH ('connector' = 'kafka', 'topic' = 'events', 'properties.bootstrap.servers' = '%[1]s',
      'scan.startup.mode' = 'earliest-offset', 'scan.bounded.mode' = 'latest-offset');
CREATE TABLE actions (message_id STRING, user_id BIGINT, action STRING)
WITH ('connector' = 'kafka', 'topic' = 'actions', 'properties.bootstrap.servers' = '%[1]s');
INSERT INTO actions
SELECT md5(concat(cast(user_id AS STRING), cast(event_time AS STRING))), user_id, upper(action_type)
FROM events WHERE action_type = 'click';
`, c.Addr)
	name := filepath.Join(t.TempDir(), "actions.sql")
	job, err := sqljob.Compile(name, script)
	if err != nil {
		t.Fatal(err)
	}
	if job.Name() != "actions" {
		t.Errorf("Name = %q, want actions (the file's name)", job.Name())
	}
	if y := string(job.JobFile()); !strings.Contains(y, `topics: ["events"]`) || !strings.Contains(y, `topic: "actions"`) {
		t.Errorf("JobFile does not read events and write actions:\n%s", y)
	}
	ctx := kafkatest.ContextTimeout(t, time.Minute)
	if err := job.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := []string{
		`{"message_id":"` + md5hex("12024-05-01 12:00:00.250") + `","user_id":1,"action":"CLICK"}`,
		`{"message_id":"` + md5hex("32024-05-01 12:00:02.000") + `","user_id":3,"action":"CLICK"}`,
	}
	got := c.ReadCommitted(t, "actions")
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("committed output:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The state directory is next to the script: a second run restores
	// the last checkpoint, finds the input read, and writes nothing.
	if err := job.Run(ctx); err != nil {
		t.Fatalf("second Run: %v", err)
	}
	if again := c.ReadCommitted(t, "actions"); len(again) != len(want) {
		t.Errorf("after a second Run the output has %d records, want %d: %v", len(again), len(want), again)
	}
}

// Problems come back as *sqljob.Error at the script's line and column,
// one per problem; a name without .sql is refused.
func TestCompileErrors(t *testing.T) {
	script := `CREATE TABLE t (a INT) WITH ('connector' = 'kafka', 'topic' = 'x', 'properties.bootstrap.servers' = 'h:9092');
CREATE TABLE s (a INT) WITH ('connector' = 'kafka', 'topic' = 'y', 'properties.bootstrap.servers' = 'h:9092');
INSERT INTO s SELECT b FROM t;
INSERT INTO nope SELECT a FROM t;
`
	_, err := sqljob.Compile("bad.sql", script)
	if err == nil {
		t.Fatal("Compile accepted a script with two mistakes")
	}
	var e *sqljob.Error
	if !errors.As(err, &e) || e.File != "bad.sql" || e.Line != 3 || e.Col != 22 {
		t.Errorf("first error = %#v, want bad.sql at 3:22", e)
	}
	if !strings.Contains(err.Error(), "bad.sql:4:") {
		t.Errorf("the error does not report the second mistake at line 4:\n%v", err)
	}
	if _, err := sqljob.Compile("job.yaml", script); err == nil || !strings.Contains(err.Error(), "ends in .sql") {
		t.Errorf("Compile(job.yaml) = %v, want a refusal naming .sql", err)
	}
}

func md5hex(s string) string {
	h := md5.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}

// A key of one STRING column keeps NULL and ” apart: a GROUP BY counts
// them as two groups and a deduplication passes the first row of each
// (a one-column key used to be the column's text, the same for both).
func TestOneColumnKeysKeepNullAndEmptyApart(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{})
	c.CreateTopic(t, "tags", 2)
	c.CreateTopic(t, "tag_counts", 1)
	c.CreateTopic(t, "first_tags", 1)
	c.Produce(t, "tags",
		"1", `{"seq": 1, "tag": null}`, "2", `{"seq": 2, "tag": ""}`, "3", `{"seq": 3, "tag": "x"}`,
		"4", `{"seq": 4, "tag": ""}`, "5", `{"seq": 5}`, "6", `{"seq": 6, "tag": null}`,
	)
	source := fmt.Sprintf(`
SET 'execution.checkpointing.interval' = '200 ms';
CREATE TABLE tags (seq BIGINT, tag STRING, proc AS PROCTIME())
WITH ('connector' = 'kafka', 'topic' = 'tags', 'properties.bootstrap.servers' = '%[1]s',
      'scan.startup.mode' = 'earliest-offset', 'scan.bounded.mode' = 'latest-offset');
`, c.Addr)
	run := func(name, script string) {
		t.Helper()
		job, err := sqljob.Compile(filepath.Join(t.TempDir(), name+".sql"), source+script)
		if err != nil {
			t.Fatal(err)
		}
		if err := job.Run(kafkatest.ContextTimeout(t, time.Minute)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	run("tag_counts", fmt.Sprintf(`
CREATE TABLE tag_counts (tag STRING, n BIGINT, PRIMARY KEY (tag) NOT ENFORCED)
WITH ('connector' = 'upsert-kafka', 'topic' = 'tag_counts', 'properties.bootstrap.servers' = '%s',
      'key.format' = 'json', 'value.format' = 'json');
INSERT INTO tag_counts SELECT COALESCE(tag, '<null>'), n FROM (SELECT tag, COUNT(*) AS n FROM tags GROUP BY tag);
`, c.Addr))
	last := map[string]string{}
	for _, r := range c.ReadCommittedRecords(t, "tag_counts") {
		last[string(r.Key)] = string(r.Value)
	}
	want := map[string]string{
		"<null>": `{"tag":"<null>","n":3}`,
		"":       `{"tag":"","n":2}`,
		"x":      `{"tag":"x","n":1}`,
	}
	if fmt.Sprint(last) != fmt.Sprint(want) {
		t.Errorf("counts by tag, last row per key:\n%v\nwant:\n%v", last, want)
	}

	run("first_tags", fmt.Sprintf(`
CREATE TABLE first_tags (seq BIGINT, tag STRING)
WITH ('connector' = 'kafka', 'topic' = 'first_tags', 'properties.bootstrap.servers' = '%s');
INSERT INTO first_tags SELECT seq, tag FROM (
  SELECT seq, tag, ROW_NUMBER() OVER (PARTITION BY tag ORDER BY proc ASC) AS rn FROM tags) WHERE rn = 1;
`, c.Addr))
	got := c.ReadCommitted(t, "first_tags")
	slices.Sort(got)
	// One row per tag: NULL (seq 1, 5 or 6), '' (2 or 4) and x (3); two
	// partitions give no order between them.
	if len(got) != 3 || !strings.Contains(strings.Join(got, " "), `"tag":""`) || !strings.Contains(strings.Join(got, " "), `"tag":null`) {
		t.Errorf("first row per tag: %q, want three rows: tag null, tag '' and tag x", got)
	}
}
