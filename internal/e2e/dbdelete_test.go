package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/dbtest"
	"github.com/onceflow/onceflow/pipeline"
)

// TestCrashChangelogToDatabases: `onceflow run` of a pass-through job
// whose input is a changelog (records of the row-kind header -D and -U
// retracting their key's row, the others adding it) into keyed tables of
// PostgreSQL, MariaDB (exactly-once, at-least-once, two-phase) and Redis
// (SET and HSET, exactly-once and at-least-once), SIGKILLed at
// random moments. Each table then holds exactly the keys whose last
// record added its row, with that row's value (docs/design.md, "Database
// sinks": a retraction deletes the row of its key), read with psql, the
// mariadb client and redis-cli.
func TestCrashChangelogToDatabases(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end crash test skipped in -short mode")
	}
	records, kills := e2eSize()
	records /= 4
	const keys = 300
	// Record i is key k<i%keys>, value i; a key's occurrences 2, 5, 8, ...
	// retract its row (alternately -U and -D), the last occurrence of
	// every tenth key as well.
	kind := func(i int) pipeline.RowKind {
		j := i / keys
		last := i+keys >= records
		switch {
		case j%3 == 2 || (last && i%keys%10 == 0):
			if j%2 == 0 {
				return pipeline.RowUpdateBefore
			}
			return pipeline.RowDelete
		}
		return pipeline.RowAdd
	}
	final := map[int]int{}
	for i := range records {
		if kind(i).Retracts() {
			delete(final, i%keys)
		} else {
			final[i%keys] = i
		}
	}
	sum := 0
	for _, v := range final {
		sum += v
	}
	want := fmt.Sprintf("%d|%d", len(final), sum)
	t.Logf("%d records over %d keys; %d keys end with a row, values summing to %d", records, keys, len(final), sum)

	dir := t.TempDir()
	addr := startBroker(t, filepath.Join(dir, "broker"))
	createTopic(t, addr, "in", 4)
	produceChangelog(t, addr, "in", records, func(i int) (key, value []byte, k pipeline.RowKind) {
		return []byte("k" + strconv.Itoa(i%keys)), []byte(strconv.Itoa(i)), kind(i)
	})

	pgDSN, pg := dbtest.Postgres(t, dbtest.PostgresOptions{MaxPreparedTransactions: 64})
	pgDB := pgDSN[strings.LastIndex(pgDSN, "/")+1 : strings.Index(pgDSN, "?")]
	myDSN, my := dbtest.MariaDB(t)
	myDB := myDSN[strings.LastIndex(myDSN, "/")+1:]
	for _, q := range []string{
		"CREATE TABLE latest (key text PRIMARY KEY, n bigint NOT NULL)",
		"CREATE TABLE fenced (key text PRIMARY KEY, n bigint NOT NULL, onceflow_epoch bigint NOT NULL DEFAULT 0)",
		"CREATE TABLE twophase (key text PRIMARY KEY, n bigint NOT NULL)",
	} {
		if err := pg.Exec(context.Background(), pgDB, q); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{
		"CREATE TABLE latest (k VARCHAR(32) PRIMARY KEY, n BIGINT NOT NULL) ENGINE=InnoDB",
		"CREATE TABLE fenced (k VARCHAR(32) PRIMARY KEY, n BIGINT NOT NULL, onceflow_epoch BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB",
		"CREATE TABLE twophase (k VARCHAR(32) PRIMARY KEY, n BIGINT NOT NULL) ENGINE=InnoDB",
	} {
		if err := my.Exec(context.Background(), myDB, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("E2E_PG_DSN", pgDSN)
	t.Setenv("E2E_MYSQL_DSN", myDSN)
	rdURL, rd, rdDB := dbtest.Redis(t)
	t.Setenv("E2E_REDIS_URL", rdURL)
	// rdQuery answers "<n>|<sum>" of the string keys matching a pattern
	// ("set x:*") or of a hash's fields ("hash h:in"), with redis-cli.
	rdQuery := func(q string) (string, error) {
		kind, arg, _ := strings.Cut(q, " ")
		script := `local n, s = 0, 0
for _, k in ipairs(redis.call('KEYS', ARGV[1])) do n = n + 1; s = s + tonumber(redis.call('GET', k)) end
return {n, s}`
		if kind == "hash" {
			script = `local vs = redis.call('HVALS', ARGV[1]); local s = 0
for _, v in ipairs(vs) do s = s + tonumber(v) end
return {#vs, s}`
		}
		out, err := rd.Client(rdDB, "EVAL", script, "0", arg)
		return strings.ReplaceAll(out, "\n", "|"), err
	}
	pgQuery := func(q string) (string, error) { return pg.Psql(pgDB, q) }
	myQuery := func(q string) (string, error) { return my.Client(myDB, q) }
	rng := seed(t)
	for _, tc := range []struct {
		name, sink string
		query      func(string) (string, error)
		table      string // Redis: rdQuery's question
	}{
		{"pg-changelog", "  postgres:\n    dsn: ${E2E_PG_DSN}\n    table: latest\n    key: [key]\n    columns: { key: record.key, n: record.value }", pgQuery, "latest"},
		{"pg-changelog-fenced", "  postgres:\n    dsn: ${E2E_PG_DSN}\n    table: fenced\n    key: [key]\n    columns: { key: record.key, n: record.value }\n  delivery: at-least-once", pgQuery, "fenced"},
		{"my-changelog", "  mysql:\n    dsn: ${E2E_MYSQL_DSN}\n    table: latest\n    key: [k]\n    columns: { k: record.key, n: record.value }", myQuery, "latest"},
		{"my-changelog-fenced", "  mysql:\n    dsn: ${E2E_MYSQL_DSN}\n    table: fenced\n    key: [k]\n    columns: { k: record.key, n: record.value }\n  delivery: at-least-once", myQuery, "fenced"},
		// Beside a Kafka sink, whose transaction is the commit point, the
		// tables take part with prepared (XA) transactions.
		{"pg-changelog-2pc", "  topic: out-pg-changelog-2pc\n  postgres:\n    dsn: ${E2E_PG_DSN}\n    table: twophase\n    key: [key]\n    columns: { key: record.key, n: record.value }", pgQuery, "twophase"},
		{"rd-changelog", "  redis:\n    url: ${E2E_REDIS_URL}\n    command: set\n    key: record.key\n    key-prefix: \"x:\"\n    value: record.value", rdQuery, "set x:*"},
		{"rd-changelog-fenced", "  redis:\n    url: ${E2E_REDIS_URL}\n    command: set\n    key: record.key\n    key-prefix: \"y:\"\n    value: record.value\n  delivery: at-least-once", rdQuery, "set y:*"},
		{"rd-changelog-hset", "  redis:\n    url: ${E2E_REDIS_URL}\n    command: hset\n    key: record.topic\n    key-prefix: \"h:\"\n    field: record.key\n    value: record.value", rdQuery, "hash h:in"},
		{"my-changelog-2pc", "  topic: out-my-changelog-2pc\n  mysql:\n    dsn: ${E2E_MYSQL_DSN}\n    table: twophase\n    key: [k]\n    columns: { k: record.key, n: record.value }", myQuery, "twophase"},
	} {
		if strings.Contains(tc.sink, "topic: out-"+tc.name) {
			createTopic(t, addr, "out-"+tc.name, 4)
		}
		t.Run(tc.name, func(t *testing.T) {
			lw := &logWriter{t: t, name: tc.name}
			r := &jobRunner{t: t, bin: binary(t), file: writeDBJob(t, dir, tc.name, addr, "", tc.sink), log: lw}
			start := time.Now()
			r.crashAndFinish(rng, kills, addr, tc.name)
			t.Logf("%s: %d kills and the final run took %v", tc.name, kills, time.Since(start).Round(time.Millisecond))
			q := "SELECT COUNT(*), COALESCE(SUM(n), 0) FROM " + tc.table
			if strings.HasPrefix(tc.name, "rd-") {
				q = tc.table
			}
			got, err := tc.query(q)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("the table holds (rows, sum of n) %s, want %s\n%s", got, want, lw)
			}
			if strings.HasSuffix(tc.name, "-2pc") {
				q := "SELECT count(*) FROM pg_prepared_xacts WHERE database = current_database()"
				if strings.HasPrefix(tc.name, "my-") {
					q = myOpenInDB
					if xids, err := myPrepared(my, tc.name, "sink-mysql"); err != nil || xids != "" {
						t.Errorf("XA transactions are left prepared (%v): %s", err, xids)
					}
				}
				if left, err := tc.query(q); err != nil || left != "0" {
					t.Errorf("%s transactions are left prepared or open (%v)", left, err)
				}
			}
		})
	}
}

// produceChangelog writes n records to topic, record i made by rec with
// its row kind in pipeline.RowKindHeader (none for an add), and waits
// until every one is acknowledged. Records of one key go to one
// partition in the order written.
func produceChangelog(t *testing.T, addr, topic string, n int, rec func(i int) (key, value []byte, kind pipeline.RowKind)) {
	t.Helper()
	cl := client(t, addr, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i := range n {
		k, v, kind := rec(i)
		r := &kgo.Record{Key: k, Value: v}
		if h := kind.Header(); h != nil {
			r.Headers = []kgo.RecordHeader{{Key: pipeline.RowKindHeader, Value: h}}
		}
		wg.Add(1)
		cl.Produce(context.Background(), r, func(_ *kgo.Record, err error) {
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
