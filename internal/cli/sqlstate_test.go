package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// A SQL job's state across changes to its query (docs/design.md, "State
// across query changes"): a column added to the final projection keeps
// the aggregate's state (the counts go on from the checkpoint); an
// aggregate added to the GROUP BY changes the state's layout, and the
// restore is refused naming the operator, until --allow-non-restored-state
// starts that operator empty.
func TestSQLStateAcrossQueryChanges(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{})
	c.CreateTopic(t, "clicks", 2)
	c.CreateTopic(t, "counts", 2)
	produce := func(n int) {
		var recs []*kgo.Record
		for i := 0; i < n; i++ {
			recs = append(recs, &kgo.Record{Topic: "clicks", Key: []byte(fmt.Sprint(i % 3)), Value: []byte(fmt.Sprintf(`{"user_id": "u%d", "ms": %d}`, i%3, i))})
		}
		c.ProduceRecords(t, recs...)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "counts.sql")
	// run runs the script with query until the output's last counts are
	// want (then stops it, with a final checkpoint), or until it ends by
	// itself (a refused restore); it returns the exit code and stderr.
	var lastN func() map[string]int
	run := func(want map[string]int, sinkCols, query string, extra ...string) (int, string) {
		t.Helper()
		script := fmt.Sprintf(`SET 'pipeline.name' = 'counts';
SET 'state.checkpoints.dir' = '%s';
SET 'execution.checkpointing.interval' = '100 ms';
CREATE TABLE clicks (user_id STRING, ms BIGINT)
WITH ('connector' = 'kafka', 'topic' = 'clicks', 'properties.bootstrap.servers' = '%s', 'properties.group.id' = 'counts',
      'scan.startup.mode' = 'earliest-offset', 'format' = 'json');
CREATE TABLE counts (%s, PRIMARY KEY (user_id) NOT ENFORCED)
WITH ('connector' = 'upsert-kafka', 'topic' = 'counts', 'properties.bootstrap.servers' = '%s', 'key.format' = 'raw');
INSERT INTO counts %s;
`, filepath.Join(dir, "state"), c.Addr, sinkCols, c.Addr, query)
		if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var errOut bytes.Buffer
		done := make(chan int, 1)
		go func() {
			done <- Main(ctx, append(append([]string{"run", "--status-interval", "0"}, extra...), file), io.Discard, &errOut)
		}()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case code := <-done:
				return code, errOut.String()
			case <-deadline:
				cancel()
				<-done
				t.Fatalf("the output never reached %v: %v\n%s", want, lastN(), errOut.String())
			case <-time.After(100 * time.Millisecond):
			}
			if maps.Equal(lastN(), want) {
				cancel()
				return <-done, errOut.String()
			}
		}
	}
	// lastN is each user's last count in the output topic.
	lastN = func() map[string]int {
		got := map[string]int{}
		for _, r := range c.ReadCommittedRecords(t, "counts") {
			var row struct{ N int }
			if err := json.Unmarshal(r.Value, &row); r.Value != nil && err != nil {
				t.Fatalf("row %q: %v", r.Value, err)
			}
			got[string(r.Key)] = row.N
			if r.Value == nil {
				delete(got, string(r.Key))
			}
		}
		return got
	}
	each := func(n int) map[string]int { return map[string]int{"u0": n, "u1": n, "u2": n} }
	produce(30)
	if code, stderr := run(each(10), "user_id STRING, n BIGINT", "SELECT user_id, COUNT(*) FROM clicks GROUP BY user_id"); code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, stderr)
	}
	// Another column in the final projection: the aggregate is the same.
	produce(30)
	if code, stderr := run(each(20), "user_id STRING, n BIGINT, tag STRING", "SELECT user_id, COUNT(*), 'v2' FROM clicks GROUP BY user_id"); code != 0 {
		t.Fatalf("run with a column added: exit %d\n%s", code, stderr)
	}
	// Another grouping: lower(user_id) happens to make the same keys
	// here, but one grouping's state read as another's is wrong in
	// general (the aggregate's key-of differs), so it is refused.
	regrouped := "SELECT lower(user_id), COUNT(*) FROM clicks GROUP BY lower(user_id)"
	code, stderr := run(nil, "user_id STRING, n BIGINT", regrouped)
	if code == 0 || !strings.Contains(stderr, "cannot be read into it") || !strings.Contains(stderr, "lower(user_id)") {
		t.Fatalf("run grouped by another expression: exit %d, want the restore refused naming the grouping\n%s", code, stderr)
	}
	// Another aggregate: its state would be read as the count's.
	produce(30)
	changed := "SELECT user_id, SUM(ms), COUNT(*) FROM clicks GROUP BY user_id"
	code, stderr = run(nil, "user_id STRING, total BIGINT, n BIGINT", changed)
	if code == 0 || !strings.Contains(stderr, "cannot be read into it") || !strings.Contains(stderr, "--allow-non-restored-state") {
		t.Fatalf("run with an aggregate added: exit %d, want the restore refused saying why and what to do\n%s", code, stderr)
	}
	t.Logf("refused: %s", stderr[strings.Index(stderr, "checkpoint"):])
	// The aggregate starts empty, from the input after the checkpoint:
	// the 30 new clicks only.
	if code, stderr := run(each(10), "user_id STRING, total BIGINT, n BIGINT", changed, "--allow-non-restored-state"); code != 0 {
		t.Fatalf("run with --allow-non-restored-state: exit %d\n%s", code, stderr)
	}
}
