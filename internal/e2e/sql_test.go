package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/dbtest"
	"github.com/onceflow/onceflow/internal/failpoint"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// produceJSON writes the values to topic, keyed by their index mod 97.
func produceJSON(t *testing.T, addr, topic string, values [][]byte) {
	t.Helper()
	produce(t, addr, topic, len(values), func(i int) (key, value []byte) {
		return []byte("k" + strconv.Itoa(i%97)), values[i]
	})
}

// The seed's job (its section 3.1): actions upserted into a JDBC table by
// an md5 message id, as the user wrote it; only the connection values
// differ. seedRun runs it as `onceflow run job.sql`, SIGKILLed at random
// moments, over an input holding every action once plus a tenth of them
// sent again (a producer's retry); check then reads the table with the
// database's own client.
func seedRun(t *testing.T, jdbcURL, user string, query func(string) (string, error), mdCheck string) {
	records, kills := e2eSize()
	rng := seed(t)
	dir := t.TempDir()
	addr := startBroker(t, filepath.Join(dir, "broker"))
	createTopic(t, addr, "in", 4)
	base := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var values [][]byte
	for i := 0; i < records; i++ {
		v, _ := json.Marshal(map[string]any{
			"user_id":     i % 1000,
			"event_time":  base.Add(time.Duration(i) * time.Millisecond).Format("2006-01-02 15:04:05.000"),
			"action_type": []string{"view", "click", "buy"}[i%3],
		})
		values = append(values, v)
	}
	for i := 0; i < records; i += 10 {
		values = append(values, values[i]) // sent twice
	}
	produceJSON(t, addr, "in", values)
	script := fmt.Sprintf(`-- The seed's job, as a Flink user writes it.
SET 'execution.checkpointing.interval' = '100 ms';
SET 'restart-strategy.type' = 'none';
SET 'state.checkpoints.dir' = '%s';
CREATE TABLE kafka_events (user_id BIGINT, event_time TIMESTAMP(3), action_type STRING)
WITH ('connector' = 'kafka', 'topic' = 'in', 'properties.bootstrap.servers' = '%s', 'properties.group.id' = 'sql-seed', 'scan.startup.mode' = 'earliest-offset', 'format' = 'json');
-- 使用UPSERT代替INSERT的幂等设计
CREATE TABLE user_actions ( message_id STRING PRIMARY KEY, user_id BIGINT, action_time TIMESTAMP(3), action_type STRING )
WITH ( 'connector' = 'jdbc', 'url' = '%s', 'table-name' = 'user_actions', 'username' = '%s', 'password' = '' );
INSERT INTO user_actions
SELECT md5(concat(cast(user_id AS STRING), cast(event_time AS STRING))) as message_id, user_id, event_time, action_type
FROM kafka_events;
`, filepath.Join(dir, "state"), addr, jdbcURL, user)
	path := filepath.Join(dir, "seed.sql")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	lw := &logWriter{t: t, name: "sql-seed"}
	r := &jobRunner{t: t, bin: binary(t), file: path, log: lw}
	start := time.Now()
	r.crashAndFinish(rng, kills, addr, "sql-seed")
	t.Logf("%d kills and the final run took %v", kills, time.Since(start).Round(time.Millisecond))
	got, err := query("SELECT COUNT(*), COUNT(DISTINCT message_id), COUNT(DISTINCT user_id, action_time) FROM user_actions")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d|%d|%d", records, records, records); got != want {
		t.Fatalf("rows, ids, distinct actions = %s, want %s\n%s", got, want, lw)
	}
	// The id is Flink's: md5 of the user id and the time as CAST(… AS
	// STRING) writes a TIMESTAMP(3); and each row has its own action.
	got, err = query(mdCheck)
	if err != nil {
		t.Fatal(err)
	}
	if got != strconv.Itoa(records) {
		t.Fatalf("%s of %d rows have Flink's md5 id and their own action type", got, records)
	}
}

// TestCrashSQLSeedIntoPostgres runs the seed's job into PostgreSQL
// (jdbc:postgresql://), checked with psql.
func TestCrashSQLSeedIntoPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end crash test skipped in -short mode")
	}
	dsn, srv := dbtest.Postgres(t)
	db := dsn[strings.LastIndex(dsn, "/")+1 : strings.Index(dsn, "?")]
	if err := srv.Exec(context.Background(), db, "CREATE TABLE user_actions (message_id text PRIMARY KEY, user_id bigint NOT NULL, action_time timestamp(3) NOT NULL, action_type text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	u := strings.TrimPrefix(dsn, "postgres://")
	seedRun(t, "jdbc:postgresql://"+u[strings.Index(u, "@")+1:], u[:strings.Index(u, "@")],
		func(q string) (string, error) {
			return srv.Psql(db, strings.Replace(q, "COUNT(DISTINCT user_id, action_time)", "COUNT(DISTINCT (user_id, action_time))", 1))
		},
		"SELECT count(*) FROM user_actions WHERE message_id = md5(user_id::text || to_char(action_time, 'YYYY-MM-DD HH24:MI:SS.MS')) AND action_type = (ARRAY['view','click','buy'])[1 + ((extract(epoch FROM action_time - timestamp '2026-12-01 10:00:00') * 1000)::bigint % 3)]")
}

// TestCrashSQLSeedIntoMariaDB runs the seed's job into MariaDB
// (jdbc:mysql://), checked with the mariadb client.
func TestCrashSQLSeedIntoMariaDB(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end crash test skipped in -short mode")
	}
	dsn, srv := dbtest.MariaDB(t)
	db := dsn[strings.LastIndex(dsn, "/")+1:]
	if err := srv.Exec(context.Background(), db, "CREATE TABLE user_actions (message_id VARCHAR(32) PRIMARY KEY, user_id BIGINT NOT NULL, action_time DATETIME(3) NOT NULL, action_type VARCHAR(16) NOT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"); err != nil {
		t.Fatal(err)
	}
	host := dsn[strings.Index(dsn, "tcp(")+4 : strings.Index(dsn, ")/")]
	seedRun(t, "jdbc:mysql://"+host+"/"+db, dsn[:strings.Index(dsn, "@")],
		func(q string) (string, error) { return srv.Client(db, q) },
		"SELECT COUNT(*) FROM user_actions WHERE message_id = MD5(CONCAT(user_id, LEFT(DATE_FORMAT(action_time, '%Y-%m-%d %H:%i:%s.%f'), 23))) AND action_type = ELT(1 + MOD(TIMESTAMPDIFF(MICROSECOND, '2026-12-01 10:00:00', action_time) DIV 1000, 3), 'view', 'click', 'buy')")
}

// TestCrashSQLWindows runs a Flink SQL window aggregate — a TUMBLE table
// function over an event-time column with a WATERMARK, COUNT(*), SUM and
// COUNT(DISTINCT …) FILTER (WHERE …) per user — as `onceflow run
// job.sql`, crashed by a failpoint between firing windows and the
// commit, then SIGKILLed at random moments; a last run bounded by
// 'scan.bounded.mode' fires the windows left open. franz-go and kcat
// must each read every window exactly once with the figures a plain Go
// computation gives.
func TestCrashSQLWindows(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end crash test skipped in -short mode")
	}
	records, kills := e2eSize()
	records /= 4
	kills /= 2
	const users, size = 50, int64(10_000)
	rng := seed(t)
	dir := t.TempDir()
	addr := startBroker(t, filepath.Join(dir, "broker"))
	createTopic(t, addr, "in", 4)
	createTopic(t, addr, "out", 4)
	type figures struct{ n, total, big int64 }
	want := map[string]*figures{}
	distinct := map[string]map[string]bool{}
	base := int64(1_700_000_000_000)
	var values [][]byte
	for i := 0; i < records; i++ {
		ts := base + int64(i)*5 - rng.Int64N(1500) // out of order within the 3 s watermark delay
		user := "u" + strconv.Itoa(rng.IntN(users))
		amount := rng.Int64N(100)
		item := "i" + strconv.Itoa(rng.IntN(20))
		id := user + "@" + time.UnixMilli(ts-ts%size).UTC().Format("2006-01-02 15:04:05.000")
		f := want[id]
		if f == nil {
			f = &figures{}
			want[id] = f
			distinct[id] = map[string]bool{}
		}
		f.n++
		f.total += amount
		if amount > 50 {
			distinct[id][item] = true
		}
		v, _ := json.Marshal(map[string]any{"user": user, "amount": amount, "item": item, "ts": time.UnixMilli(ts).UTC().Format("2006-01-02 15:04:05.000")})
		values = append(values, v)
	}
	for id, f := range want {
		f.big = int64(len(distinct[id]))
	}
	produceJSON(t, addr, "in", values)
	t.Logf("produced %d records, %d windows; %d kills", records, len(want), kills)
	script := fmt.Sprintf(`SET 'pipeline.name' = 'sql-win';
SET 'execution.checkpointing.interval' = '100ms';
SET 'restart-strategy.type' = 'none';
SET 'state.checkpoints.dir' = '%s';
CREATE TABLE sales (
  `+"`user`"+` STRING, amount BIGINT, item STRING, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '3' SECOND
) WITH ('connector' = 'kafka', 'topic' = 'in', 'properties.bootstrap.servers' = '%s', 'properties.group.id' = 'sql-win',
        'scan.startup.mode' = 'earliest-offset', 'format' = 'json');
CREATE TABLE per_window (`+"`user`"+` STRING, window_start TIMESTAMP(3), window_end TIMESTAMP(3), n BIGINT, total BIGINT, big BIGINT)
WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = '%s', 'key.fields' = 'user', 'format' = 'json');
INSERT INTO per_window
SELECT `+"`user`"+`, window_start, window_end, COUNT(*), SUM(amount), COUNT(DISTINCT item) FILTER (WHERE amount > 50)
FROM TABLE(TUMBLE(TABLE sales, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY `+"`user`"+`, window_start, window_end;
`, filepath.Join(dir, "state"), addr, addr)
	file := filepath.Join(dir, "win.sql")
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	lw := &logWriter{t: t, name: "sql-win"}
	r := &jobRunner{t: t, bin: binary(t), file: file, log: lw}
	// A crash between the windows firing and the commit point.
	fp := exec.Command(r.bin, "run", file)
	fp.Env = append(os.Environ(), failpoint.EnvVar+"="+failpoint.BeforeEndTxn+"=crash@"+strconv.Itoa(2+rng.IntN(4)))
	fp.Stderr = lw
	if err := fp.Start(); err != nil {
		t.Fatal(err)
	}
	fpDone := make(chan error, 1)
	go func() { fpDone <- fp.Wait() }()
	select {
	case err := <-fpDone:
		if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("the job with failpoint %s ended with %v, want killed by its failpoint\n%s", failpoint.BeforeEndTxn, err, lw)
		}
	case <-time.After(time.Minute):
		t.Fatalf("failpoint %s never fired\n%s", failpoint.BeforeEndTxn, lw)
	}
	r.killAtRandom(rng, kills, 150, 500)
	// The last run reads to the end offsets and ends, firing every
	// window left open.
	editJob(t, file, "'format' = 'json');\nCREATE TABLE per_window", "'format' = 'json', 'scan.bounded.mode' = 'latest-offset');\nCREATE TABLE per_window")
	r.runToEnd()
	check := func(client string, out []kafkatest.Record) {
		t.Helper()
		got := map[string]bool{}
		for _, rec := range out {
			var w struct {
				User        string `json:"user"`
				WindowStart string `json:"window_start"`
				WindowEnd   string `json:"window_end"`
				N, Total    int64
				Big         int64
			}
			if err := json.Unmarshal([]byte(rec.Value), &w); err != nil {
				t.Fatalf("%s: output %q is not a row: %v", client, rec.Value, err)
			}
			id := w.User + "@" + w.WindowStart
			f := want[id]
			switch {
			case rec.Key != w.User:
				t.Fatalf("%s: row %s under key %q, want the user (key.fields)", client, rec.Value, rec.Key)
			case got[id]:
				t.Fatalf("%s: window %s emitted twice", client, id)
			case f == nil:
				t.Fatalf("%s: window %s was never opened by the input: %s", client, id, rec.Value)
			case w.N != f.n || w.Total != f.total || w.Big != f.big:
				t.Fatalf("%s: window %s = %s, want n %d, total %d, big %d", client, id, rec.Value, f.n, f.total, f.big)
			}
			got[id] = true
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d windows, want %d", client, len(got), len(want))
		}
		t.Logf("%s: %d windows, each once with its figures", client, len(got))
	}
	check("franz-go", readCommitted(t, addr, "out"))
	check("kcat", kcatRead(t, addr, "out"))
}

// TestCrashSQLStatementSet runs a statement set in SQL — a UNION ALL of
// two topics into a third, and a filter of one of them into PostgreSQL —
// as one job (the named form: two sources, three streams, a Kafka and a
// database sink), SIGKILLed at random moments. Every order must come out
// once in the topic (franz-go and kcat) and every big one once in the
// table (psql).
func TestCrashSQLStatementSet(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end crash test skipped in -short mode")
	}
	records, kills := e2eSize()
	records /= 2
	rng := seed(t)
	dsn, srv := dbtest.Postgres(t, dbtest.PostgresOptions{MaxPreparedTransactions: 64}) // the table takes part in the Kafka commit: two-phase
	db := dsn[strings.LastIndex(dsn, "/")+1 : strings.Index(dsn, "?")]
	if err := srv.Exec(context.Background(), db, "CREATE TABLE big_orders (id text PRIMARY KEY, amount bigint NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	addr := startBroker(t, filepath.Join(dir, "broker"))
	createTopic(t, addr, "web", 4)
	createTopic(t, addr, "shop", 2)
	createTopic(t, addr, "all", 4)
	var web, shop [][]byte
	big := 0
	for i := 0; i < records; i++ {
		amount := rng.IntN(2000)
		if amount > 1000 {
			big++
		}
		v, _ := json.Marshal(map[string]any{"id": "w" + strconv.Itoa(i), "amount": amount})
		web = append(web, v)
		v, _ = json.Marshal(map[string]any{"order_id": "s" + strconv.Itoa(i), "total": float64(amount) + 0.25, "store": "s" + strconv.Itoa(i%7)})
		shop = append(shop, v)
	}
	produceJSON(t, addr, "web", web)
	produceJSON(t, addr, "shop", shop)
	u := strings.TrimPrefix(dsn, "postgres://")
	script := fmt.Sprintf(`SET 'pipeline.name' = 'sql-set';
SET 'execution.checkpointing.interval' = '100ms';
SET 'restart-strategy.type' = 'none';
SET 'state.checkpoints.dir' = '%[1]s';
CREATE TABLE web (id STRING, amount BIGINT) WITH ('connector' = 'kafka', 'topic' = 'web', 'properties.bootstrap.servers' = '%[2]s', 'properties.group.id' = 'sql-set', 'format' = 'json');
CREATE TABLE shop (order_id STRING, total DOUBLE, store STRING) WITH ('connector' = 'kafka', 'topic' = 'shop', 'properties.bootstrap.servers' = '%[2]s', 'properties.group.id' = 'sql-set', 'format' = 'json');
CREATE TABLE all_orders (id STRING, amount BIGINT, channel STRING) WITH ('connector' = 'kafka', 'topic' = 'all', 'properties.bootstrap.servers' = '%[2]s', 'key.fields' = 'id', 'format' = 'json');
CREATE TABLE big_orders (id STRING, amount BIGINT, PRIMARY KEY (id) NOT ENFORCED)
WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://%[3]s', 'table-name' = 'big_orders', 'username' = '%[4]s');
EXECUTE STATEMENT SET BEGIN
INSERT INTO all_orders
  SELECT id, amount, 'web' FROM web
  UNION ALL
  SELECT order_id, CAST(total AS BIGINT), store FROM shop WHERE store IS NOT NULL;
INSERT INTO big_orders SELECT id, amount FROM web WHERE amount > 1000;
END;
`, filepath.Join(dir, "state"), addr, u[strings.Index(u, "@")+1:], u[:strings.Index(u, "@")])
	file := filepath.Join(dir, "set.sql")
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	lw := &logWriter{t: t, name: "sql-set"}
	r := &jobRunner{t: t, bin: binary(t), file: file, log: lw, inputs: []string{"web", "shop"}}
	r.crashAndFinish(rng, kills, addr, "sql-set")
	check := func(client string, out []kafkatest.Record) {
		t.Helper()
		seen := map[string]bool{}
		for _, rec := range out {
			var o struct {
				ID      string `json:"id"`
				Amount  int64  `json:"amount"`
				Channel string `json:"channel"`
			}
			if err := json.Unmarshal([]byte(rec.Value), &o); err != nil || o.ID == "" || rec.Key != o.ID {
				t.Fatalf("%s: output %q under key %q is not an order keyed by its id (%v)", client, rec.Value, rec.Key, err)
			}
			if seen[o.ID] {
				t.Fatalf("%s: order %s written twice", client, o.ID)
			}
			seen[o.ID] = true
			if o.ID[0] == 'w' && o.Channel != "web" || o.ID[0] == 's' && !strings.HasPrefix(o.Channel, "s") {
				t.Fatalf("%s: order %s with channel %q", client, o.ID, o.Channel)
			}
		}
		if len(seen) != 2*records {
			t.Fatalf("%s: %d orders, want %d", client, len(seen), 2*records)
		}
		t.Logf("%s: %d orders, each once", client, len(seen))
	}
	check("franz-go", readCommitted(t, addr, "all"))
	check("kcat", kcatRead(t, addr, "all"))
	got, err := srv.Psql(db, "SELECT count(*), count(*) FILTER (WHERE amount > 1000) FROM big_orders")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d|%d", big, big); got != want {
		t.Fatalf("big_orders rows, big rows = %s, want %s\n%s", got, want, lw)
	}
}
