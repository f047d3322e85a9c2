package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/dbtest"
	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/sqlsink"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// writeDBJob writes a job file reading topic in and writing to a
// database table (sink is the sink section's body).
func writeDBJob(t *testing.T, dir, name, addr, pipeline, sink string) string {
	t.Helper()
	return writeJobFile(t, dir, name, addr, pipeline, fmt.Sprintf(`sink:
%s
checkpointing:
  interval: 100ms
  mode: exactly-once
  timeout: 1m
state:
  dir: %s
%srestart:
  strategy: none
`, sink, filepath.Join(dir, "state-"+name), backendLine()))
}

// dbCase is a job into a database table and the query that checks it;
// after, when set, checks the job's other outputs.
type dbCase struct {
	name, pipeline, sink, query, want string
	after                             func(t *testing.T, addr string)
}

// runDBCrashes runs each case with `onceflow run`, SIGKILLed at random
// moments, and checks the table with query, a database client.
func runDBCrashes(t *testing.T, records, kills int, cases []dbCase, query func(string) (string, error)) {
	rng := seed(t)
	dir := t.TempDir()
	addr := startBroker(t, filepath.Join(dir, "broker"))
	createTopic(t, addr, "in", 4)
	produceInput(t, addr, "in", records, e2eKeys)
	t.Logf("produced %d records; %d kills per job", records, kills)
	for _, tc := range cases {
		if strings.Contains(tc.sink, "topic: out-"+tc.name) {
			createTopic(t, addr, "out-"+tc.name, 4)
		}
		t.Run(tc.name, func(t *testing.T) {
			lw := &logWriter{t: t, name: tc.name}
			r := &jobRunner{t: t, bin: binary(t), file: writeDBJob(t, dir, tc.name, addr, tc.pipeline, tc.sink), log: lw}
			start := time.Now()
			r.crashAndFinish(rng, kills, addr, tc.name)
			t.Logf("%s: %d kills and the final run took %v", tc.name, kills, time.Since(start).Round(time.Millisecond))
			got, err := query(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("%q = %s, want %s\n%s", tc.query, got, tc.want, lw)
			}
			if tc.after != nil {
				tc.after(t, addr)
			}
		})
	}
}

const e2eKeys = 500

const countPipeline = "pipeline:\n  - count: { key: record.key }"

// TestCrashKafkaToPostgres: `onceflow run` from Kafka into PostgreSQL,
// SIGKILLed at random moments, for each delivery. psql, the database's own
// client, then finds every input record once in the append table (the
// transaction is the commit point), and the exact count of every key in
// the keyed tables (exactly-once upserts, and at-least-once epoch-fenced
// upserts).
func TestCrashKafkaToPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end crash test skipped in -short mode")
	}
	records, kills := e2eSize()
	dsn, srv := dbtest.Postgres(t)
	db := dsn[strings.LastIndex(dsn, "/")+1 : strings.Index(dsn, "?")]
	for _, sql := range []string{
		"CREATE TABLE events (key text, value text NOT NULL, topic text, part integer, off bigint, ts timestamptz)",
		"CREATE TABLE counts (key text PRIMARY KEY, n bigint NOT NULL)",
		"CREATE TABLE fenced (key text PRIMARY KEY, n bigint NOT NULL, onceflow_epoch bigint NOT NULL DEFAULT 0)",
	} {
		if err := srv.Exec(context.Background(), db, sql); err != nil {
			t.Fatal(err)
		}
	}
	// The DSN comes from the environment, as a password would.
	t.Setenv("E2E_PG_DSN", dsn)
	perKey := records / e2eKeys
	runDBCrashes(t, records, kills, []dbCase{
		{"pg-pass", "", `  postgres:
    dsn: ${E2E_PG_DSN}
    table: events
    columns: { key: record.key, value: record.value, topic: record.topic, part: record.partition, off: record.offset, ts: record.timestamp }`,
			"SELECT count(*), count(DISTINCT value), count(DISTINCT (part, off)) FROM events",
			fmt.Sprintf("%d|%d|%d", records, records, records), nil},
		{"pg-count", countPipeline, `  postgres:
    dsn: ${E2E_PG_DSN}
    table: counts
    key: [key]
    columns: { key: record.key, n: record.value }`,
			"SELECT count(*), min(n), max(n) FROM counts",
			fmt.Sprintf("%d|%d|%d", e2eKeys, perKey, perKey), nil},
		{"pg-fenced", countPipeline, `  postgres:
    dsn: ${E2E_PG_DSN}
    table: fenced
    key: [key]
    columns: { key: record.key, n: record.value }
  delivery: at-least-once`,
			"SELECT count(*), min(n), max(n) FROM fenced",
			fmt.Sprintf("%d|%d|%d", e2eKeys, perKey, perKey), nil},
	}, func(q string) (string, error) { return srv.Psql(db, q) })
	if open, _ := srv.Psql(db, "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'onceflow%'"); open != "0" {
		t.Errorf("%s connections of the jobs are still open after they stopped", open)
	}
}

// TestCrashKafkaToMySQL is TestCrashKafkaToPostgres into MariaDB, checked
// with the mariadb client.
func TestCrashKafkaToMySQL(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end crash test skipped in -short mode")
	}
	records, kills := e2eSize()
	dsn, srv := dbtest.MariaDB(t)
	db := dsn[strings.LastIndex(dsn, "/")+1:]
	for _, q := range []string{
		"CREATE TABLE events (k VARCHAR(32), v VARCHAR(64) NOT NULL, topic VARCHAR(64), part INT, off BIGINT, ts DATETIME(3)) ENGINE=InnoDB",
		"CREATE TABLE counts (k VARCHAR(32) PRIMARY KEY, n BIGINT NOT NULL) ENGINE=InnoDB",
		"CREATE TABLE fenced (k VARCHAR(32) PRIMARY KEY, n BIGINT NOT NULL, onceflow_epoch BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB",
	} {
		if err := srv.Exec(context.Background(), db, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("E2E_MYSQL_DSN", dsn)
	perKey := records / e2eKeys
	runDBCrashes(t, records, kills, []dbCase{
		{"my-pass", "", `  mysql:
    dsn: ${E2E_MYSQL_DSN}
    table: events
    columns: { k: record.key, v: record.value, topic: record.topic, part: record.partition, off: record.offset, ts: record.timestamp }`,
			"SELECT COUNT(*), COUNT(DISTINCT v), COUNT(DISTINCT part, off) FROM events",
			fmt.Sprintf("%d|%d|%d", records, records, records), nil},
		{"my-count", countPipeline, `  mysql:
    dsn: ${E2E_MYSQL_DSN}
    table: counts
    key: [k]
    columns: { k: record.key, n: record.value }`,
			"SELECT COUNT(*), MIN(n), MAX(n) FROM counts",
			fmt.Sprintf("%d|%d|%d", e2eKeys, perKey, perKey), nil},
		{"my-fenced", countPipeline, `  mysql:
    dsn: ${E2E_MYSQL_DSN}
    table: fenced
    key: [k]
    columns: { k: record.key, n: record.value }
  delivery: at-least-once`,
			"SELECT COUNT(*), MIN(n), MAX(n) FROM fenced",
			fmt.Sprintf("%d|%d|%d", e2eKeys, perKey, perKey), nil},
	}, func(q string) (string, error) { return srv.Client(db, q) })
	if open, _ := srv.Client(db, myOpenInDB); open != "0" {
		t.Errorf("%s transactions are left open after the jobs stopped", open)
	}
}

// TestCrashKafkaAndPostgresInOneJob: one job file writing every record to
// a topic and to a table, SIGKILLed at random moments. The Kafka
// transaction is the commit point and the table takes part with prepared
// transactions; afterwards the topic (read_committed, franz-go and kcat)
// and the table (psql) each hold every input exactly once, and no prepared
// transaction is left.
func TestCrashKafkaAndPostgresInOneJob(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end crash test skipped in -short mode")
	}
	records, kills := e2eSize()
	dsn, srv := dbtest.Postgres(t, dbtest.PostgresOptions{MaxPreparedTransactions: 64})
	db := dsn[strings.LastIndex(dsn, "/")+1 : strings.Index(dsn, "?")]
	if err := srv.Exec(context.Background(), db, "CREATE TABLE events (value text NOT NULL, part integer, off bigint)"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("E2E_PG_DSN", dsn)
	runDBCrashes(t, records, kills, []dbCase{{
		name: "both", sink: `  topic: out-both
  postgres:
    dsn: ${E2E_PG_DSN}
    table: events
    columns: { value: record.value, part: record.partition, off: record.offset }`,
		query: "SELECT count(*), count(DISTINCT value), count(DISTINCT (part, off)) FROM events",
		want:  fmt.Sprintf("%d|%d|%d", records, records, records),
		after: func(t *testing.T, addr string) {
			for _, c := range []struct {
				client string
				out    []kafkatest.Record
			}{{"franz-go", readCommitted(t, addr, "out-both")}, {"kcat", kcatRead(t, addr, "out-both")}} {
				values := make([]string, len(c.out))
				for i, r := range c.out {
					values[i] = r.Value
				}
				if !kafkatest.CheckExactlyOnce(t, c.client, values, kafkatest.SeqValues("seq-", records)) {
					t.FailNow()
				}
			}
			if left, _ := srv.Psql(db, "SELECT count(*) FROM pg_prepared_xacts WHERE database = current_database()"); left != "0" {
				t.Errorf("%s prepared transactions are left behind", left)
			}
		},
	}}, func(q string) (string, error) { return srv.Psql(db, q) })
}

// TestCrashDeadLettersToPostgres: `onceflow run` with errors.policy
// dead-letter into a bigint column, where every tenth input value is not
// a number, SIGKILLed at random moments. psql then finds every good record
// once in the table and every bad one once in the dead-letter table (it
// is written in the same transaction as the rows), and nothing else.
func TestCrashDeadLettersToPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end crash test skipped in -short mode")
	}
	records, kills := e2eSize()
	records /= 4
	rng := seed(t)
	dir := t.TempDir()
	addr := startBroker(t, filepath.Join(dir, "broker"))
	createTopic(t, addr, "in", 4)
	cl := client(t, addr, kgo.DefaultProduceTopic("in"), kgo.ProducerLinger(5*time.Millisecond))
	rs := make([]*kgo.Record, records)
	for i := range rs {
		v := strconv.Itoa(i)
		if i%10 == 0 {
			v = "bad-" + v
		}
		rs[i] = &kgo.Record{Key: []byte("k" + strconv.Itoa(i%e2eKeys)), Value: []byte(v)}
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	dsn, srv := dbtest.Postgres(t)
	db := dsn[strings.LastIndex(dsn, "/")+1 : strings.Index(dsn, "?")]
	if err := srv.Exec(context.Background(), db, "CREATE TABLE nums (n bigint NOT NULL, part integer, off bigint)"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("E2E_PG_DSN", dsn)
	file := writeDBJob(t, dir, "pg-dead", addr, "errors:\n  policy: dead-letter", `  postgres:
    dsn: ${E2E_PG_DSN}
    table: nums
    columns: { n: record.value, part: record.partition, off: record.offset }`)
	lw := &logWriter{t: t, name: "pg-dead"}
	r := &jobRunner{t: t, bin: binary(t), file: file, log: lw}
	r.crashAndFinish(rng, kills, addr, "pg-dead")
	bad := (records + 9) / 10
	if got, _ := srv.Psql(db, "SELECT count(*), count(DISTINCT n), count(DISTINCT (part, off)), count(*) FILTER (WHERE n % 10 = 0) FROM nums"); got != fmt.Sprintf("%d|%d|%d|0", records-bad, records-bad, records-bad) {
		t.Errorf("nums (rows, distinct values, distinct positions, values that were bad) = %s, want %d rows\n%s", got, records-bad, lw)
	}
	if got, _ := srv.Psql(db, "SELECT count(*), count(DISTINCT id), count(*) FILTER (WHERE convert_from(value, 'UTF8') LIKE 'bad-%'), min(sink), bool_and(error LIKE '%column n of table nums is bigint%') FROM onceflow_dead_letters WHERE job = 'pg-dead'"); got != fmt.Sprintf("%d|%d|%d|sink|t", bad, bad, bad) {
		t.Errorf("dead letters (rows, distinct ids, bad values, sink, errors name the column) = %s, want %d\n%s", got, bad, lw)
	}
}

// myOpenInDB counts the transactions open in sessions of the database the
// query runs in: INNODB_TRX lists the whole server's, and the tests of
// this binary share one MariaDB server and run side by side. A prepared
// XA transaction whose session ended has no session: myPrepared finds it.
const myOpenInDB = "SELECT COUNT(*) FROM information_schema.INNODB_TRX t JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id WHERE p.DB = DATABASE()"

// myPrepared lists, one per line, the XA transactions prepared on srv by
// job's sink uid ("sink" when the table is the job's only sink,
// "sink-mysql" beside a Kafka topic: jobfile.SinkConfig.UID): those whose
// xid has that prefix (sqlsink.GIDPrefix), not other tests'.
func myPrepared(srv *dbtest.MariaDBServer, job, uid string) (string, error) {
	xids, err := srv.PreparedXA(context.Background(), sqlsink.GIDPrefix(job, uid))
	return strings.Join(xids, "\n"), err
}
