package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/dbtest"
)

// produceJSON writes the values to topic, keyed by their index mod keys.
func produceJSON(t *testing.T, addr, topic string, values [][]byte) {
	t.Helper()
	cl := client(t, addr, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i, v := range values {
		wg.Add(1)
		cl.Produce(context.Background(), &kgo.Record{Key: []byte("k" + strconv.Itoa(i%97)), Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
}

// TestCrashSQLSeedIntoPostgres runs the user's own Flink SQL (the
// seed's section 3.1: actions upserted into a JDBC table by an md5
// message id) as `onceflow run job.sql`, SIGKILLed at random moments.
// The input holds every action once plus a tenth of them sent again (a
// producer's retry): psql must find each distinct action exactly once,
// with its md5 id computed as Flink computes it.
func TestCrashSQLSeedIntoPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end crash test skipped in -short mode")
	}
	records, kills := e2eSize()
	rng := seed(t)
	dsn, srv := dbtest.Postgres(t)
	db := dsn[strings.LastIndex(dsn, "/")+1 : strings.Index(dsn, "?")]
	if err := srv.Exec(context.Background(), db, "CREATE TABLE user_actions (message_id text PRIMARY KEY, user_id bigint NOT NULL, action_time timestamp(3) NOT NULL, action_type text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
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
	u := strings.TrimPrefix(dsn, "postgres://")
	user := u[:strings.Index(u, "@")]
	hostDB := u[strings.Index(u, "@")+1:]
	script := fmt.Sprintf(`-- The seed's job, as a Flink user writes it.
SET 'execution.checkpointing.interval' = '100 ms';
SET 'restart-strategy.type' = 'none';
SET 'state.checkpoints.dir' = '%s';
CREATE TABLE kafka_events (user_id BIGINT, event_time TIMESTAMP(3), action_type STRING)
WITH ('connector' = 'kafka', 'topic' = 'in', 'properties.bootstrap.servers' = '%s', 'properties.group.id' = 'sql-seed', 'scan.startup.mode' = 'earliest-offset', 'format' = 'json');
-- 使用UPSERT代替INSERT的幂等设计
CREATE TABLE user_actions ( message_id STRING PRIMARY KEY, user_id BIGINT, action_time TIMESTAMP(3), action_type STRING )
WITH ( 'connector' = 'jdbc', 'url' = 'jdbc:postgresql://%s', 'table-name' = 'user_actions', 'username' = '%s', 'password' = '' );
INSERT INTO user_actions
SELECT md5(concat(cast(user_id AS STRING), cast(event_time AS STRING))) as message_id, user_id, event_time, action_type
FROM kafka_events;
`, filepath.Join(dir, "state"), addr, hostDB, user)
	path := filepath.Join(dir, "seed.sql")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	lw := &logWriter{t: t, name: "sql-seed"}
	r := &jobRunner{t: t, bin: binary(t), file: path, log: lw}
	start := time.Now()
	r.crashAndFinish(rng, kills, addr, "sql-seed")
	t.Logf("%d kills and the final run took %v", kills, time.Since(start).Round(time.Millisecond))
	got, err := srv.Psql(db, "SELECT count(*), count(DISTINCT message_id), count(DISTINCT (user_id, action_time)) FROM user_actions")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d|%d|%d", records, records, records); got != want {
		t.Fatalf("rows, ids, distinct actions = %s, want %s\n%s", got, want, lw)
	}
	// The id is Flink's: md5 of the user id and the time as CAST(… AS
	// STRING) writes a TIMESTAMP(3).
	got, err = srv.Psql(db, "SELECT count(*) FROM user_actions WHERE message_id = md5(user_id::text || to_char(action_time, 'YYYY-MM-DD HH24:MI:SS.MS')) AND action_type = (ARRAY['view','click','buy'])[1 + ((extract(epoch FROM action_time - timestamp '2026-12-01 10:00:00') * 1000)::bigint % 3)]")
	if err != nil {
		t.Fatal(err)
	}
	if got != strconv.Itoa(records) {
		t.Fatalf("%s of %d rows have Flink's md5 id and their own action type", got, records)
	}
}
