package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// A pruned join's state across query changes (docs/design.md, "State
// across query changes"): the join's sides write only the columns the
// select after it reads, so the rows it keeps hold only those. A query
// that reads the same columns otherwise goes on from the checkpoint; one
// that reads another column of a side is refused naming the join, not
// run with that column NULL in the joins of the rows kept before; one
// that reads fewer goes on.
func TestSQLJoinStateAcrossPruning(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{})
	for _, topic := range []string{"ta", "tb", "joined"} {
		c.CreateTopic(t, topic, 1)
	}
	produce := func(topic string, from, to int, value func(i int) string) {
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(i)), Value: []byte(value(i))})
		}
		c.ProduceRecords(t, recs...)
	}
	aRows := func(from, to int) {
		produce("ta", from, to, func(i int) string { return fmt.Sprintf(`{"id": %d, "x": "x%d", "y": "y%d"}`, i, i, i) })
	}
	bRows := func(from, to int) {
		produce("tb", from, to, func(i int) string { return fmt.Sprintf(`{"id": %d, "z": "z%d"}`, i, i) })
	}
	// rows are the output's rows.
	rows := func() []map[string]any {
		var out []map[string]any
		for _, r := range c.ReadCommittedRecords(t, "joined") {
			var row map[string]any
			if err := json.Unmarshal(r.Value, &row); err != nil {
				t.Fatalf("row %q: %v", r.Value, err)
			}
			out = append(out, row)
		}
		return out
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "joined.sql")
	// run runs the script with query until the output holds want rows
	// (then stops it, with a final checkpoint), or until it ends by
	// itself (a refused restore); it returns the exit code and stderr.
	run := func(want int, sinkCols, query string) (int, string) {
		t.Helper()
		script := fmt.Sprintf(`SET 'pipeline.name' = 'joined';
SET 'state.checkpoints.dir' = '%[1]s';
SET 'execution.checkpointing.interval' = '100 ms';
SET 'table.exec.state.ttl' = '1 h';
CREATE TABLE a (id BIGINT, x STRING, y STRING)
WITH ('connector' = 'kafka', 'topic' = 'ta', 'properties.bootstrap.servers' = '%[2]s', 'properties.group.id' = 'joined',
      'scan.startup.mode' = 'earliest-offset', 'format' = 'json');
CREATE TABLE b (id BIGINT, z STRING)
WITH ('connector' = 'kafka', 'topic' = 'tb', 'properties.bootstrap.servers' = '%[2]s', 'properties.group.id' = 'joined',
      'scan.startup.mode' = 'earliest-offset', 'format' = 'json');
CREATE TABLE joined (%[3]s)
WITH ('connector' = 'kafka', 'topic' = 'joined', 'properties.bootstrap.servers' = '%[2]s', 'format' = 'json');
INSERT INTO joined %[4]s;
`, filepath.Join(dir, "state"), c.Addr, sinkCols, query)
		if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var errOut bytes.Buffer
		done := make(chan int, 1)
		go func() {
			done <- Main(ctx, []string{"run", "--status-interval", "0", file}, io.Discard, &errOut)
		}()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case code := <-done:
				return code, errOut.String()
			case <-deadline:
				cancel()
				<-done
				t.Fatalf("the output never reached %d rows: %v\n%s", want, rows(), errOut.String())
			case <-time.After(100 * time.Millisecond):
			}
			if len(rows()) >= want {
				cancel()
				return <-done, errOut.String()
			}
		}
	}
	// The rows of a are kept by the join before their partners come.
	aRows(0, 6)
	bRows(0, 3)
	readX := "SELECT a.id, a.x, b.z FROM a JOIN b ON a.id = b.id"
	if code, stderr := run(3, "id BIGINT, x STRING, z STRING", readX); code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, stderr)
	}
	// The same columns read otherwise: the kept rows serve, and a's rows
	// 3 and 4, kept before, join the new rows of b.
	bRows(3, 4)
	if code, stderr := run(4, "id BIGINT, x STRING, z STRING", "SELECT a.id, upper(a.x), b.z FROM a JOIN b ON a.id = b.id"); code != 0 {
		t.Fatalf("run reading the same columns: exit %d\n%s", code, stderr)
	}
	if got := rows(); got[3]["x"] != "X3" || got[3]["z"] != "z3" {
		t.Fatalf("row joined with a row kept before the change: %v, want x X3, z z3", got[3])
	}
	// Reading y too: a's rows 4 and 5 were kept without it; refused
	// rather than joining them with y NULL.
	bRows(4, 6)
	code, stderr := run(6, "id BIGINT, x STRING, y STRING, z STRING", "SELECT a.id, a.x, a.y, b.z FROM a JOIN b ON a.id = b.id")
	if code == 0 || !strings.Contains(stderr, "cannot be read into it") || !strings.Contains(stderr, "left-columns") {
		t.Fatalf("run reading another column of a side: exit %d (rows %v), want the restore refused naming the join and its columns\n%s", code, rows(), stderr)
	}
	t.Logf("refused: %s", stderr[strings.Index(stderr, "checkpoint"):])
	// Reading fewer columns: the kept rows hold more than it needs, and
	// a's rows 4 and 5 join b's.
	if code, stderr := run(6, "id BIGINT, z STRING", "SELECT a.id, b.z FROM a JOIN b ON a.id = b.id"); code != 0 {
		t.Fatalf("run reading fewer columns: exit %d\n%s", code, stderr)
	}
	if got := rows(); len(got) != 6 || got[5]["id"] != float64(5) || got[5]["z"] != "z5" {
		t.Fatalf("rows after the run reading fewer columns: %v, want row 5 joined with z5", got)
	}
}
