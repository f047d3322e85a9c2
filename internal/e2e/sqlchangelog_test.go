package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"

	"github.com/onceflow/onceflow/internal/kafkatest"
)

// TestCrashSQLChangelogUpsertKafka runs a query whose result needs
// retractions — a filter over a non-windowed aggregate, an aggregate of
// that, and a HAVING on it — into an upsert-kafka table, crashed at both
// edges of its first commit and SIGKILLed at random moments. Rows enter
// and leave the result as totals change: a retraction is written as a
// tombstone. Folding the topic (each key's last record; a tombstone
// removes the key), read with franz-go and with kcat, must give exactly
// the result computed in Go over the whole input.
func TestCrashSQLChangelogUpsertKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end crash test skipped in -short mode")
	}
	records, kills := e2eSize()
	records /= 10
	kills /= 2
	const users = 300
	rng := seed(t)
	dir := t.TempDir()
	addr := startBroker(t, filepath.Join(dir, "broker"))
	createTopic(t, addr, "in", 4)
	createTopic(t, addr, "out", 4)
	type fig struct{ n, total int64 }
	per := map[string]*fig{}
	var values [][]byte
	for i := 0; i < records; i++ {
		user := "u" + strconv.Itoa(rng.IntN(users))
		amount := rng.Int64N(100)
		f := per[user]
		if f == nil {
			f = &fig{}
			per[user] = f
		}
		f.n++
		f.total += amount
		v, _ := json.Marshal(map[string]any{"user": user, "amount": amount})
		values = append(values, v)
	}
	// SELECT n, COUNT(*), SUM(total) FROM (per user) WHERE MOD(total, 5) < 3
	// GROUP BY n HAVING COUNT(*) > 1
	type row struct{ users, total int64 }
	byN := map[int64]*row{}
	for _, f := range per {
		if f.total%5 < 3 {
			r := byN[f.n]
			if r == nil {
				r = &row{}
				byN[f.n] = r
			}
			r.users++
			r.total += f.total
		}
	}
	want := map[string]string{}
	for n, r := range byN {
		if r.users > 1 {
			want[strconv.FormatInt(n, 10)] = fmt.Sprintf("users %d total %d", r.users, r.total)
		}
	}
	produceJSON(t, addr, "in", values)
	t.Logf("produced %d records of %d users; %d rows in the result; %d kills", records, len(per), len(want), kills)
	script := fmt.Sprintf(`SET 'pipeline.name' = 'sql-changelog';
SET 'execution.checkpointing.interval' = '100ms';
SET 'restart-strategy.type' = 'none';
SET 'state.checkpoints.dir' = '%s';
CREATE TABLE buys (`+"`user`"+` STRING, amount BIGINT)
WITH ('connector' = 'kafka', 'topic' = 'in', 'properties.bootstrap.servers' = '%s', 'properties.group.id' = 'sql-changelog',
      'scan.startup.mode' = 'earliest-offset', 'format' = 'json');
CREATE TABLE spread (n BIGINT, users BIGINT, total BIGINT, PRIMARY KEY (n) NOT ENFORCED)
WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'properties.bootstrap.servers' = '%s', 'key.format' = 'raw');
INSERT INTO spread
SELECT n, COUNT(*), SUM(total)
FROM (SELECT `+"`user`"+`, COUNT(*) AS n, SUM(amount) AS total FROM buys GROUP BY `+"`user`"+`)
WHERE MOD(total, 5) < 3
GROUP BY n HAVING COUNT(*) > 1;
`, filepath.Join(dir, "state"), addr, addr)
	file := filepath.Join(dir, "changelog.sql")
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	lw := &logWriter{t: t, name: "sql-changelog"}
	r := &jobRunner{t: t, bin: binary(t), file: file, log: lw}
	r.crashAtKafkaCommitEdges()
	r.killAtRandom(rng, kills, 150, 500)
	editJob(t, file, "'format' = 'json');\nCREATE TABLE spread", "'format' = 'json', 'scan.bounded.mode' = 'latest-offset');\nCREATE TABLE spread")
	r.runToEnd()
	check := func(client string, out []kafkatest.Record) {
		t.Helper()
		sort.SliceStable(out, func(i, j int) bool {
			if out[i].Partition != out[j].Partition {
				return out[i].Partition < out[j].Partition
			}
			return out[i].Offset < out[j].Offset
		})
		got := map[string]string{}
		tombstones := 0
		for _, rec := range out {
			if rec.Value == "" {
				delete(got, rec.Key)
				tombstones++
				continue
			}
			var v struct{ N, Users, Total int64 }
			if err := json.Unmarshal([]byte(rec.Value), &v); err != nil {
				t.Fatalf("%s: output %q is not a row: %v", client, rec.Value, err)
			}
			if rec.Key != strconv.FormatInt(v.N, 10) {
				t.Fatalf("%s: row %s under key %q, want n", client, rec.Value, rec.Key)
			}
			got[rec.Key] = fmt.Sprintf("users %d total %d", v.Users, v.Total)
		}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("%s: n = %s: %q, want %q", client, k, got[k], w)
			}
		}
		for k, g := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("%s: n = %s: %q, want no row (deleted)", client, k, g)
			}
		}
		if tombstones == 0 {
			t.Errorf("%s: no tombstone in %d records: the query never took a row out, the test proves nothing", client, len(out))
		}
		t.Logf("%s: %d records, %d tombstones, folding to the %d rows of the result", client, len(out), tombstones, len(got))
	}
	check("franz-go", readCommitted(t, addr, "out"))
	check("kcat", kcatRead(t, addr, "out"))
}
