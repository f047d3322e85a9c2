package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

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
	const users = 300
	records, kills, rng, dir, addr := changelogSetup(t, "in")
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
	crashFoldedSQL(t, rng, dir, addr, "sql-changelog", script, "'format' = 'json');\nCREATE TABLE spread", "'format' = 'json', 'scan.bounded.mode' = 'latest-offset');\nCREATE TABLE spread", kills, want, func(key string, v struct{ N, Users, Total int64 }) (string, error) {
		if key != strconv.FormatInt(v.N, 10) {
			return "", fmt.Errorf("row under key %q, want n", key)
		}
		return fmt.Sprintf("users %d total %d", v.Users, v.Total), nil
	})
}

// checkFolded folds an upsert topic read by client (each key's last
// record; a tombstone, an empty value, removes the key) and compares it
// with want, each row's value read as a V and described by describe. It
// also wants at least one tombstone: a changelog test whose query never
// took a row out proves nothing about retractions.
func checkFolded[V any](t *testing.T, client string, out []kafkatest.Record, want map[string]string, describe func(key string, v V) (string, error)) {
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
		var v V
		if err := json.Unmarshal([]byte(rec.Value), &v); err != nil {
			t.Fatalf("%s: output %q is not a row: %v", client, rec.Value, err)
		}
		d, err := describe(rec.Key, v)
		if err != nil {
			t.Fatalf("%s: %s: %v", client, rec.Value, err)
		}
		got[rec.Key] = d
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: key %s: %q, want %q", client, k, got[k], w)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: key %s: %q, want no row (deleted)", client, k, g)
		}
	}
	if tombstones == 0 {
		t.Errorf("%s: no tombstone in %d records: the query never took a row out, the test proves nothing", client, len(out))
	}
	t.Logf("%s: %d records, %d tombstones, folding to the %d rows of the result", client, len(out), tombstones, len(got))
}

// TestCrashSQLDebeziumUpsertKafka reads a topic of Debezium change events
// of a products table (snapshot reads, inserts, updates moving products
// between categories and changing prices, deletes, the tombstones after
// them, some events inside payload as with schemas), keyed by the row's
// id as Debezium writes them, and keeps the products and the mean price
// per category into an upsert-kafka table, crashed at both edges of its
// first commit and SIGKILLed. The folded topic, read with franz-go and
// kcat, must equal the categories of the table's final rows, computed in
// Go.
func TestCrashSQLDebeziumUpsertKafka(t *testing.T) {
	records, kills, rng, dir, addr := changelogSetup(t, "cdc")
	type product struct {
		ID       int64  `json:"id"`
		Category string `json:"category"`
		Price    int64  `json:"price"`
	}
	table := map[int64]product{}
	var recs []*kgo.Record
	row := func(p product) string { b, _ := json.Marshal(p); return string(b) }
	for i := 0; i < records; i++ {
		id := rng.Int64N(int64(records / 20))
		old, exists := table[id]
		p := product{ID: id, Category: "c" + strconv.Itoa(rng.IntN(150)), Price: 1 + rng.Int64N(1000)}
		var ev string
		switch {
		case !exists:
			op := "c"
			if i < records/10 {
				op = "r" // the snapshot
			}
			ev = fmt.Sprintf(`{"before":null,"after":%s,"op":%q,"ts_ms":%d}`, row(p), op, i)
			table[id] = p
		case rng.IntN(4) == 0:
			ev = fmt.Sprintf(`{"before":%s,"after":null,"op":"d","ts_ms":%d}`, row(old), i)
			delete(table, id)
		default:
			ev = fmt.Sprintf(`{"before":%s,"after":%s,"op":"u","ts_ms":%d}`, row(old), row(p), i)
			table[id] = p
		}
		if rng.IntN(3) == 0 {
			ev = `{"schema":{"type":"struct"},"payload":` + ev + `}`
		}
		key := []byte(fmt.Sprintf(`{"id":%d}`, id))
		recs = append(recs, &kgo.Record{Key: key, Value: []byte(ev)})
		if strings.Contains(ev, `"op":"d"`) {
			recs = append(recs, &kgo.Record{Key: key}) // Debezium's tombstone, for compaction
		}
	}
	cl := client(t, addr, kgo.DefaultProduceTopic("cdc"))
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	type cat struct{ n, sum int64 }
	cats := map[string]*cat{}
	for _, p := range table {
		if cats[p.Category] == nil {
			cats[p.Category] = &cat{}
		}
		cats[p.Category].n++
		cats[p.Category].sum += p.Price
	}
	want := map[string]string{}
	for c, x := range cats {
		want[c] = fmt.Sprintf("products %d mean %d", x.n, x.sum/x.n)
	}
	t.Logf("produced %d change events, %d products left in %d categories; %d kills", records, len(table), len(want), kills)
	script := fmt.Sprintf(`SET 'pipeline.name' = 'sql-cdc';
SET 'execution.checkpointing.interval' = '100ms';
SET 'restart-strategy.type' = 'none';
SET 'state.checkpoints.dir' = '%s';
CREATE TABLE products (id BIGINT, category STRING, price BIGINT, PRIMARY KEY (id) NOT ENFORCED)
WITH ('connector' = 'kafka', 'topic' = 'cdc', 'properties.bootstrap.servers' = '%s', 'properties.group.id' = 'sql-cdc',
      'scan.startup.mode' = 'earliest-offset', 'format' = 'debezium-json');
CREATE TABLE per_category (category STRING, products BIGINT, mean_price BIGINT, PRIMARY KEY (category) NOT ENFORCED)
WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'properties.bootstrap.servers' = '%s', 'key.format' = 'raw');
INSERT INTO per_category SELECT category, COUNT(*), AVG(price) FROM products GROUP BY category;
`, filepath.Join(dir, "state"), addr, addr)
	crashFoldedSQL(t, rng, dir, addr, "sql-cdc", script, "'format' = 'debezium-json');", "'format' = 'debezium-json', 'scan.bounded.mode' = 'latest-offset');", kills, want, func(key string, v struct {
		Category  string
		Products  int64
		MeanPrice int64 `json:"mean_price"`
	}) (string, error) {
		if key != v.Category {
			return "", fmt.Errorf("row under key %q, want its category", key)
		}
		return fmt.Sprintf("products %d mean %d", v.Products, v.MeanPrice), nil
	})
}

// TestCrashSQLUpsertKafkaSource reads an upsert-kafka table (each record
// its key's row now, a tombstone deleting it) as a changelog: the users
// per country with a positive score and their total, into another
// upsert-kafka table, crashed at both edges of its first commit and
// SIGKILLed. The folded output, read with franz-go and kcat, must equal the
// countries of the input table's final rows, computed in Go.
func TestCrashSQLUpsertKafkaSource(t *testing.T) {
	records, kills, rng, dir, addr := changelogSetup(t, "users")
	type user struct {
		UserID  string `json:"user_id"`
		Country string `json:"country"`
		Score   int64  `json:"score"`
	}
	table := map[string]user{}
	var recs []*kgo.Record
	for i := 0; i < records; i++ {
		id := "u" + strconv.Itoa(rng.IntN(records/20))
		if _, ok := table[id]; ok && rng.IntN(5) == 0 {
			delete(table, id)
			recs = append(recs, &kgo.Record{Key: []byte(id)}) // a tombstone
			continue
		}
		u := user{UserID: id, Country: "c" + strconv.Itoa(rng.IntN(60)), Score: rng.Int64N(100) - 20}
		table[id] = u
		v, _ := json.Marshal(u)
		recs = append(recs, &kgo.Record{Key: []byte(id), Value: v})
	}
	cl := client(t, addr, kgo.DefaultProduceTopic("users"))
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	type agg struct{ n, sum int64 }
	per := map[string]*agg{}
	for _, u := range table {
		if u.Score <= 0 {
			continue
		}
		if per[u.Country] == nil {
			per[u.Country] = &agg{}
		}
		per[u.Country].n++
		per[u.Country].sum += u.Score
	}
	want := map[string]string{}
	for c, a := range per {
		want[c] = fmt.Sprintf("users %d total %d", a.n, a.sum)
	}
	t.Logf("produced %d upserts and tombstones, %d users left, %d countries in the result; %d kills", records, len(table), len(want), kills)
	script := fmt.Sprintf(`SET 'pipeline.name' = 'sql-upsert-source';
SET 'execution.checkpointing.interval' = '100ms';
SET 'restart-strategy.type' = 'none';
SET 'state.checkpoints.dir' = '%s';
CREATE TABLE users (user_id STRING, country STRING, score BIGINT, PRIMARY KEY (user_id) NOT ENFORCED)
WITH ('connector' = 'upsert-kafka', 'topic' = 'users', 'properties.bootstrap.servers' = '%s', 'properties.group.id' = 'sql-upsert-source',
      'key.format' = 'raw', 'value.format' = 'json');
CREATE TABLE per_country (country STRING, users BIGINT, total BIGINT, PRIMARY KEY (country) NOT ENFORCED)
WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'properties.bootstrap.servers' = '%s', 'key.format' = 'raw');
INSERT INTO per_country SELECT country, COUNT(*), SUM(score) FROM users WHERE score > 0 GROUP BY country;
`, filepath.Join(dir, "state"), addr, addr)
	crashFoldedSQL(t, rng, dir, addr, "sql-upsert-source", script, "'value.format' = 'json');", "'value.format' = 'json', 'scan.bounded.mode' = 'latest-offset');", kills, want, func(key string, v struct {
		Country      string
		Users, Total int64
	}) (string, error) {
		if key != v.Country {
			return "", fmt.Errorf("row under key %q, want its country", key)
		}
		return fmt.Sprintf("users %d total %d", v.Users, v.Total), nil
	})
}

// crashFoldedSQL runs script (written as name.sql in dir) crashed at both
// edges of its first Kafka commit and SIGKILLed kills times, then to the
// end of its input (bounded by turning from into to in the script), and
// checks the upsert topic "out", read with franz-go and kcat, with
// checkFolded.
func crashFoldedSQL[V any](t *testing.T, rng *rand.Rand, dir, addr, name, script, from, to string, kills int, want map[string]string, describe func(key string, v V) (string, error)) {
	t.Helper()
	file := filepath.Join(dir, name+".sql")
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	lw := &logWriter{t: t, name: name}
	r := &jobRunner{t: t, bin: binary(t), file: file, log: lw}
	r.crashAtKafkaCommitEdges()
	r.killAtRandom(rng, kills, 150, 500)
	editJob(t, file, from, to)
	r.runToEnd()
	checkFolded(t, "franz-go", readCommitted(t, addr, "out"), want, describe)
	checkFolded(t, "kcat", kcatRead(t, addr, "out"), want, describe)
}

// changelogSetup starts what each changelog crash test needs: a tenth of
// the e2e input size and half its kills, the seeded random source, a
// directory, a broker, and the topics in (its input) and out, 4
// partitions each. It skips the test in -short mode.
func changelogSetup(t *testing.T, in string) (records, kills int, rng *rand.Rand, dir, addr string) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end crash test skipped in -short mode")
	}
	records, kills = e2eSize()
	records /= 10
	kills /= 2
	rng = seed(t)
	dir = t.TempDir()
	addr = startBroker(t, filepath.Join(dir, "broker"))
	createTopic(t, addr, in, 4)
	createTopic(t, addr, "out", 4)
	return records, kills, rng, dir, addr
}
