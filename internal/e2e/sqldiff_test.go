package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/dbtest"
	"github.com/onceflow/onceflow/internal/failpoint"
)

// A query of the differential corpus: the streaming job writes into
// table out_<name> (created by ddl); the same query as PostgreSQL runs
// it over table src (pg) must give the same rows. Both sides are read
// with cols (a select list over the table, formatted alike), sorted.
type diffQuery struct {
	name string
	// ddl is the PostgreSQL table the job writes; sinkSQL its CREATE
	// TABLE columns for the script; query the streaming SELECT.
	ddl, sinkSQL, query string
	// pg is the batch query over src, giving the table's columns.
	pg   string
	cols string
}

// TestSQLDifferentialPostgres: for a corpus of queries (filters and
// projections with functions and NULLs, a tumbling window aggregate (and one with an OFFSET),
// the legacy GROUP BY TUMBLE(…) with HAVING and AVG, a non-windowed
// aggregate (an updating result, upserted), COUNT
// DISTINCT with FILTER, a keep-first deduplication, SELECT DISTINCT of two
// columns and of one, a CUMULATE window aggregate, a Top-N upserted by
// partition and rank; and changelogs with retractions: HAVING and a WHERE
// over a non-windowed aggregate, whose rows enter and leave the table, and
// an aggregate of an aggregate), the streaming job's
// final table over a bounded input — crashed by failpoints just before
// and just after its first commit, SIGKILLed at random moments, then run
// to the end of its input — equals PostgreSQL's batch result of the same query over
// the same rows (windows with date_bin).
func TestSQLDifferentialPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end crash test skipped in -short mode")
	}
	rows, kills := 3000, 3
	if os.Getenv("ONCEFLOW_LONG") != "" {
		rows, kills = 30000, 10
	}
	rng := seed(t)
	dsn, srv, db, exec := diffDatabase(t)
	dir := t.TempDir()
	addr := startBroker(t, filepath.Join(dir, "broker"))
	createTopic(t, addr, "src", 4)

	// The input: ids sent more than once, NULL users and amounts, event
	// times up to 1 s out of order (the watermark allows 2 s).
	base := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var recs []*kgo.Record
	var values []string
	nullable := func(v int, pct int) any { return nullablePct(rng, v, pct) }
	for i := 0; i < rows; i++ {
		id := "o" + strconv.Itoa(rng.IntN(rows*4/5))
		user, amount := nullable(rng.IntN(20), 10), nullable(rng.IntN(100), 10)
		item := "i" + strconv.Itoa(rng.IntN(30))
		ts := base.Add(time.Duration(i*7-rng.IntN(1000)) * time.Millisecond).Format("2006-01-02 15:04:05.000")
		v, _ := json.Marshal(map[string]any{"seq": i, "id": id, "user_id": user, "amount": amount, "item": item, "ts": ts})
		recs = append(recs, &kgo.Record{Key: []byte(id), Value: v})
		values = append(values, fmt.Sprintf("(%d, '%s', %s, %s, '%s', '%s')", i, id, sqlLiteral(user), sqlLiteral(amount), item, ts))
	}
	cl := client(t, addr, kgo.DefaultProduceTopic("src"))
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil { // in order: the first of an id is the first produced
		t.Fatal(err)
	}
	exec("CREATE TABLE src (seq int, id text, user_id bigint, amount bigint, item text, ts timestamp(3))")
	exec("INSERT INTO src VALUES " + strings.Join(values, ", "))

	corpus := []diffQuery{
		{
			name:    "project",
			ddl:     "(id text, item text, twice bigint, u bigint, size text, label text, h text)",
			sinkSQL: "(id STRING, item STRING, twice BIGINT, u BIGINT, size STRING, label STRING, h STRING)",
			query: "SELECT id, upper(item), amount * 2 + 1, COALESCE(user_id, -1), CASE WHEN amount > 50 THEN 'big' WHEN amount IS NULL THEN 'none' ELSE 'small' END, " +
				"concat(item, '-', CAST(user_id AS STRING)), substring(md5(id), 1, 8) FROM src WHERE item LIKE 'i1%' OR amount BETWEEN 10 AND 20",
			pg: "SELECT id, upper(item), amount * 2 + 1, COALESCE(user_id, -1), CASE WHEN amount > 50 THEN 'big' WHEN amount IS NULL THEN 'none' ELSE 'small' END, " +
				"item || '-' || user_id::text, substring(md5(id), 1, 8) FROM src WHERE item LIKE 'i1%' OR amount BETWEEN 10 AND 20",
			cols: "id, item, twice, u, size, label, h",
		},
		{
			name:    "tumble",
			ddl:     "(user_id bigint, ws timestamp(3), n bigint, total bigint, top bigint, items bigint, amounts bigint)",
			sinkSQL: "(user_id BIGINT, ws TIMESTAMP(3), n BIGINT, total BIGINT, top BIGINT, items BIGINT, amounts BIGINT)",
			query: "SELECT user_id, window_start, COUNT(*), SUM(amount), MAX(amount), COUNT(DISTINCT item), COUNT(amount) " +
				"FROM TABLE(TUMBLE(TABLE src, DESCRIPTOR(ts), INTERVAL '10' SECOND)) WHERE item <> 'i7' GROUP BY user_id, window_start, window_end",
			pg: "SELECT user_id, date_bin('10 seconds', ts, timestamp '1970-01-01'), COUNT(*), SUM(amount), MAX(amount), COUNT(DISTINCT item), COUNT(amount) " +
				"FROM src WHERE item <> 'i7' GROUP BY user_id, date_bin('10 seconds', ts, timestamp '1970-01-01')",
			cols: "user_id, to_char(ws, 'YYYY-MM-DD HH24:MI:SS.MS'), n, total, top, items, amounts",
		},
		{
			// TUMBLE's OFFSET: 10 s windows from 3 s past.
			name:    "tumble_offset",
			ddl:     "(user_id bigint, ws timestamp(3), we timestamp(3), n bigint)",
			sinkSQL: "(user_id BIGINT, ws TIMESTAMP(3), we TIMESTAMP(3), n BIGINT)",
			query: "SELECT user_id, window_start, window_end, COUNT(*) " +
				"FROM TABLE(TUMBLE(TABLE src, DESCRIPTOR(ts), INTERVAL '10' SECOND, INTERVAL '3' SECOND)) GROUP BY user_id, window_start, window_end",
			pg: "SELECT user_id, date_bin('10 seconds', ts, timestamp '1970-01-01 00:00:03'), date_bin('10 seconds', ts, timestamp '1970-01-01 00:00:03') + interval '10 seconds', COUNT(*) " +
				"FROM src GROUP BY user_id, date_bin('10 seconds', ts, timestamp '1970-01-01 00:00:03')",
			cols: "user_id, to_char(ws, 'YYYY-MM-DD HH24:MI:SS.MS'), to_char(we, 'HH24:MI:SS.MS'), n",
		},
		{
			name:    "legacy",
			ddl:     "(item text, ws timestamp(3), we timestamp(3), n bigint, mean bigint)",
			sinkSQL: "(item STRING, ws TIMESTAMP(3), we TIMESTAMP(3), n BIGINT, mean BIGINT)",
			query: "SELECT item, TUMBLE_START(ts, INTERVAL '5' SECOND), TUMBLE_END(ts, INTERVAL '5' SECOND), COUNT(*), AVG(amount) " +
				"FROM src GROUP BY TUMBLE(ts, INTERVAL '5' SECOND), item HAVING COUNT(*) > 3",
			pg: "SELECT item, date_bin('5 seconds', ts, timestamp '1970-01-01'), date_bin('5 seconds', ts, timestamp '1970-01-01') + interval '5 seconds', COUNT(*), trunc(AVG(amount)) " +
				"FROM src GROUP BY date_bin('5 seconds', ts, timestamp '1970-01-01'), item HAVING COUNT(*) > 3",
			cols: "item, to_char(ws, 'YYYY-MM-DD HH24:MI:SS.MS'), to_char(we, 'HH24:MI:SS.MS'), n, mean",
		},
		{
			name:    "groupby",
			ddl:     "(item text PRIMARY KEY, n bigint, total bigint, counted bigint, low bigint)",
			sinkSQL: "(item STRING, n BIGINT, total BIGINT, counted BIGINT, low BIGINT, PRIMARY KEY (item) NOT ENFORCED)",
			query:   "SELECT item, COUNT(*), SUM(amount), COUNT(amount), MIN(amount) FROM src GROUP BY item",
			pg:      "SELECT item, COUNT(*), SUM(amount), COUNT(amount), MIN(amount) FROM src GROUP BY item",
			cols:    "item, n, total, counted, low",
		},
		{
			name:    "distinct",
			ddl:     "(user_id bigint PRIMARY KEY, big_items bigint, all_items bigint)",
			sinkSQL: "(user_id BIGINT, big_items BIGINT, all_items BIGINT, PRIMARY KEY (user_id) NOT ENFORCED)",
			query:   "SELECT user_id, COUNT(DISTINCT item) FILTER (WHERE amount > 50), COUNT(DISTINCT item) FROM src WHERE user_id IS NOT NULL GROUP BY user_id",
			pg:      "SELECT user_id, COUNT(DISTINCT item) FILTER (WHERE amount > 50), COUNT(DISTINCT item) FROM src WHERE user_id IS NOT NULL GROUP BY user_id",
			cols:    "user_id, big_items, all_items",
		},
		{
			name:    "dedup",
			ddl:     "(id text, seq int, amount bigint)",
			sinkSQL: "(id STRING, seq INT, amount BIGINT)",
			query:   "SELECT id, seq, amount FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY id ORDER BY proc ASC) AS rn FROM src) WHERE rn = 1",
			pg:      "SELECT DISTINCT ON (id) id, seq, amount FROM src ORDER BY id, seq",
			cols:    "id, seq, amount",
		},
		{
			// SELECT DISTINCT: the first row of each (user_id, item)
			// passes; NULL users are one value, as in PostgreSQL.
			name:    "select_distinct",
			ddl:     "(user_id bigint, item text)",
			sinkSQL: "(user_id BIGINT, item STRING)",
			query:   "SELECT DISTINCT user_id, item FROM src WHERE amount > 30",
			pg:      "SELECT DISTINCT user_id, item FROM src WHERE amount > 30",
			cols:    "user_id, item",
		},
		{
			// One column: NULL is one row of its own.
			name:    "select_distinct_one",
			ddl:     "(amount bigint)",
			sinkSQL: "(amount BIGINT)",
			query:   "SELECT DISTINCT amount FROM src WHERE item LIKE 'i1%'",
			pg:      "SELECT DISTINCT amount FROM src WHERE item LIKE 'i1%'",
			cols:    "amount",
		},
		{
			// Each row is in the cumulate windows [10 s bin, bin + k·2 s)
			// that end after it: PostgreSQL expands it into them.
			name:    "cumulate",
			ddl:     "(user_id bigint, ws timestamp(3), we timestamp(3), wt timestamp(3), n bigint, total bigint, top bigint, items bigint)",
			sinkSQL: "(user_id BIGINT, ws TIMESTAMP(3), we TIMESTAMP(3), wt TIMESTAMP(3), n BIGINT, total BIGINT, top BIGINT, items BIGINT)",
			query: "SELECT user_id, window_start, window_end, window_time, COUNT(*), SUM(amount), MAX(amount), COUNT(DISTINCT item) " +
				"FROM TABLE(CUMULATE(TABLE src, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '10' SECOND)) WHERE item <> 'i3' GROUP BY user_id, window_start, window_end",
			pg: "SELECT user_id, ws, we, we - interval '1 millisecond', COUNT(*), SUM(amount), MAX(amount), COUNT(DISTINCT item) " +
				"FROM (SELECT src.*, date_bin('10 seconds', ts, timestamp '1970-01-01') AS ws, date_bin('10 seconds', ts, timestamp '1970-01-01') + k * interval '2 seconds' AS we " +
				"FROM src, generate_series(1, 5) AS k) x WHERE we > ts AND item <> 'i3' GROUP BY user_id, ws, we",
			cols: "user_id, to_char(ws, 'YYYY-MM-DD HH24:MI:SS.MS'), to_char(we, 'HH24:MI:SS.MS'), to_char(wt, 'HH24:MI:SS.MS'), n, total, top, items",
		},
		{
			// Top-N, upserted by (item, rn): seq breaks the ties of amount,
			// so the order is PostgreSQL's too; NULL amounts rank last
			// descending, as NULLS LAST says on PostgreSQL's side.
			name:    "topn",
			ddl:     "(item text, rn bigint, seq int, amount bigint, UNIQUE (item, rn))",
			sinkSQL: "(item STRING, rn BIGINT, seq INT, amount BIGINT, PRIMARY KEY (item, rn) NOT ENFORCED)",
			query: "SELECT item, rn, seq, amount FROM (SELECT item, seq, amount, ROW_NUMBER() OVER (PARTITION BY item ORDER BY amount DESC, seq) AS rn " +
				"FROM src WHERE user_id IS NOT NULL) WHERE rn <= 3",
			pg: "SELECT item, rn, seq, amount FROM (SELECT item, seq, amount, ROW_NUMBER() OVER (PARTITION BY item ORDER BY amount DESC NULLS LAST, seq) AS rn " +
				"FROM src WHERE user_id IS NOT NULL) t WHERE rn <= 3",
			cols: "item, rn, seq, amount",
		},
		{
			// A Top-N without PARTITION BY: one ranking of every row.
			name:    "topn_global",
			ddl:     "(rn bigint PRIMARY KEY, seq int, amount bigint)",
			sinkSQL: "(rn BIGINT, seq INT, amount BIGINT, PRIMARY KEY (rn) NOT ENFORCED)",
			query:   "SELECT rn, seq, amount FROM (SELECT seq, amount, ROW_NUMBER() OVER (ORDER BY amount DESC, seq) AS rn FROM src WHERE amount IS NOT NULL) WHERE rn <= 5",
			pg:      "SELECT rn, seq, amount FROM (SELECT seq, amount, ROW_NUMBER() OVER (ORDER BY amount DESC, seq) AS rn FROM src WHERE amount IS NOT NULL) t WHERE rn <= 5",
			cols:    "rn, seq, amount",
		},
		{
			// A Top-N read by a filter and an aggregate: each rank's old
			// row is retracted (changelog-normalize) as a better one
			// takes the rank.
			name:    "topn_sum",
			ddl:     "(item text PRIMARY KEY, total bigint, n bigint)",
			sinkSQL: "(item STRING, total BIGINT, n BIGINT, PRIMARY KEY (item) NOT ENFORCED)",
			query: "SELECT item, SUM(amount), COUNT(*) FROM (SELECT item, rn, amount FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY item ORDER BY amount DESC, seq) AS rn " +
				"FROM src WHERE amount IS NOT NULL) WHERE rn <= 3) WHERE amount < 97 GROUP BY item",
			pg: "SELECT item, SUM(amount), COUNT(*) FROM (SELECT item, rn, amount FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY item ORDER BY amount DESC, seq) AS rn " +
				"FROM src WHERE amount IS NOT NULL) t1 WHERE rn <= 3) t2 WHERE amount < 97 GROUP BY item",
			cols: "item, total, n",
		},
		{
			// HAVING on an updating result: a group whose count becomes a
			// multiple of 3 enters, the next row takes it out again (a
			// delete in the table), over and over.
			name:    "having",
			ddl:     "(item text PRIMARY KEY, n bigint, total bigint)",
			sinkSQL: "(item STRING, n BIGINT, total BIGINT, PRIMARY KEY (item) NOT ENFORCED)",
			query:   "SELECT item, COUNT(*), SUM(amount) FROM src GROUP BY item HAVING MOD(COUNT(*), 3) = 0",
			pg:      "SELECT item, COUNT(*), SUM(amount) FROM src GROUP BY item HAVING mod(COUNT(*), 3) = 0",
			cols:    "item, n, total",
		},
		{
			// A filter over an updating result: rows enter and leave as the
			// totals change.
			name:    "filtered",
			ddl:     "(user_id bigint PRIMARY KEY, total bigint)",
			sinkSQL: "(user_id BIGINT, total BIGINT, PRIMARY KEY (user_id) NOT ENFORCED)",
			query:   "SELECT user_id, total FROM (SELECT user_id, SUM(amount) AS total FROM src WHERE user_id IS NOT NULL GROUP BY user_id) WHERE MOD(total, 7) < 3",
			pg:      "SELECT user_id, total FROM (SELECT user_id, SUM(amount) AS total FROM src WHERE user_id IS NOT NULL GROUP BY user_id) t WHERE mod(total, 7) < 3",
			cols:    "user_id, total",
		},
		{
			// A keep-last deduplication read by an aggregate: each id's
			// previous row is retracted from its item's count when a newer
			// one comes (a changelog-normalize step keeps the last rows).
			name:    "lastrow",
			ddl:     "(item text PRIMARY KEY, ids bigint, total bigint)",
			sinkSQL: "(item STRING, ids BIGINT, total BIGINT, PRIMARY KEY (item) NOT ENFORCED)",
			query: "SELECT item, COUNT(*), SUM(amount) FROM (SELECT id, item, amount FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY id ORDER BY proc DESC) AS rn FROM src) " +
				"WHERE rn = 1) GROUP BY item",
			pg:   "SELECT item, COUNT(*), SUM(amount) FROM (SELECT DISTINCT ON (id) id, item, amount FROM src ORDER BY id, seq DESC) t GROUP BY item",
			cols: "item, ids, total",
		},
		{
			// MIN, MAX and COUNT(DISTINCT) of an updating result: each
			// bucket counts its items' totals, to find the next min or max
			// when one is retracted.
			name:    "nested_minmax",
			ddl:     "(n bigint PRIMARY KEY, lo bigint, hi bigint, totals bigint)",
			sinkSQL: "(n BIGINT, lo BIGINT, hi BIGINT, totals BIGINT, PRIMARY KEY (n) NOT ENFORCED)",
			query:   "SELECT n, MIN(total), MAX(total), COUNT(DISTINCT total) FROM (SELECT item, COUNT(*) AS n, SUM(amount) AS total FROM src GROUP BY item) GROUP BY n",
			pg:      "SELECT n, MIN(total), MAX(total), COUNT(DISTINCT total) FROM (SELECT item, COUNT(*) AS n, SUM(amount) AS total FROM src GROUP BY item) t GROUP BY n",
			cols:    "n, lo, hi, totals",
		},
		{
			// An aggregate of an aggregate: each item's old count is
			// retracted from its old bucket, and a bucket left empty is
			// deleted.
			name:    "nested",
			ddl:     "(n bigint PRIMARY KEY, items bigint, total bigint, mean bigint)",
			sinkSQL: "(n BIGINT, items BIGINT, total BIGINT, mean BIGINT, PRIMARY KEY (n) NOT ENFORCED)",
			query:   "SELECT n, COUNT(*), SUM(total), AVG(total) FROM (SELECT item, COUNT(*) AS n, SUM(amount) AS total FROM src GROUP BY item) GROUP BY n",
			pg:      "SELECT n, COUNT(*), SUM(total), trunc(AVG(total)) FROM (SELECT item, COUNT(*) AS n, SUM(amount) AS total FROM src GROUP BY item) t GROUP BY n",
			cols:    "n, items, total, mean",
		},
	}
	u := strings.TrimPrefix(dsn, "postgres://")
	for _, qy := range corpus {
		t.Run(qy.name, func(t *testing.T) {
			exec("CREATE TABLE out_" + qy.name + " " + qy.ddl)
			script := fmt.Sprintf(`SET 'pipeline.name' = 'diff-%[1]s';
SET 'execution.checkpointing.interval' = '100 ms';
SET 'restart-strategy.type' = 'none';
SET 'state.checkpoints.dir' = '%[2]s';
CREATE TABLE src (seq INT, id STRING, user_id BIGINT, amount BIGINT, item STRING, ts TIMESTAMP(3), proc AS PROCTIME(),
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
WITH ('connector' = 'kafka', 'topic' = 'src', 'properties.bootstrap.servers' = '%[3]s', 'properties.group.id' = 'diff-%[1]s',
      'scan.startup.mode' = 'earliest-offset', 'format' = 'json');
CREATE TABLE out_%[1]s %[4]s
WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://%[5]s', 'table-name' = 'out_%[1]s', 'username' = '%[6]s');
INSERT INTO out_%[1]s %[7]s;
`, qy.name, filepath.Join(dir, "state-"+qy.name), addr, qy.sinkSQL, u[strings.Index(u, "@")+1:], u[:strings.Index(u, "@")], qy.query)
			file := filepath.Join(dir, qy.name+".sql")
			if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
				t.Fatal(err)
			}
			lw := &logWriter{t: t, name: qy.name}
			r := &jobRunner{t: t, bin: binary(t), file: file, log: lw}
			r.crashAtCommitEdges()
			r.killAtRandom(rng, kills, 200, 600)
			// The last run reads to the end and ends, closing the windows.
			editJob(t, file, "'format' = 'json');\nCREATE TABLE out_", "'format' = 'json', 'scan.bounded.mode' = 'latest-offset');\nCREATE TABLE out_")
			r.runToEnd()
			order, depth := []string{"1"}, 0
			for _, c := range qy.cols { // a column per comma outside parentheses
				switch c {
				case '(':
					depth++
				case ')':
					depth--
				case ',':
					if depth == 0 {
						order = append(order, strconv.Itoa(len(order)+1))
					}
				}
			}
			orderBy := strings.Join(order, ", ")
			got, err := srv.Psql(db, fmt.Sprintf("SELECT %s FROM out_%s ORDER BY %s", qy.cols, qy.name, orderBy))
			if err != nil {
				t.Fatal(err)
			}
			want, err := srv.Psql(db, fmt.Sprintf("CREATE TEMP TABLE want %s; INSERT INTO want %s; SELECT %s FROM want ORDER BY %s", strings.Replace(qy.ddl, "PRIMARY KEY", "", 1), qy.pg, qy.cols, orderBy))
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
				t.Fatalf("the streaming result (%d rows) differs from PostgreSQL's (%d rows):\n%s\n%s", len(g), len(w), rowDiff(g, w), lw)
			}
			t.Logf("%s: %d rows, equal to PostgreSQL's", qy.name, strings.Count(got, "\n")+1)
		})
	}
}

// diffDatabase starts the PostgreSQL of a differential test and returns
// its DSN, the server, the database's name and an exec of a statement in
// it that fails t.
func diffDatabase(t *testing.T) (dsn string, srv *dbtest.PostgresServer, db string, exec func(q string)) {
	t.Helper()
	dsn, srv = dbtest.Postgres(t)
	db = dsn[strings.LastIndex(dsn, "/")+1 : strings.Index(dsn, "?")]
	exec = func(q string) {
		t.Helper()
		if err := srv.Exec(context.Background(), db, q); err != nil {
			t.Fatalf("%.200s: %v", q, err)
		}
	}
	return dsn, srv, db, exec
}

// nullablePct is v, or nil pct times in 100.
func nullablePct[V any](rng *rand.Rand, v V, pct int) any {
	if rng.IntN(100) < pct {
		return nil
	}
	return v
}

// sqlLiteral writes v as a PostgreSQL literal: NULL, a quoted string
// (with no quote inside) or a number.
func sqlLiteral(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case string:
		return "'" + x + "'"
	}
	return fmt.Sprint(v)
}

// rowDiff lists the first five rows where the stream's sorted rows g and
// the batch's w differ.
func rowDiff(g, w []string) string {
	var diff []string
	for i := 0; (i < len(g) || i < len(w)) && len(diff) < 5; i++ {
		var gi, wi string
		if i < len(g) {
			gi = g[i]
		}
		if i < len(w) {
			wi = w[i]
		}
		if gi != wi {
			diff = append(diff, fmt.Sprintf("row %d: stream %q, batch %q", i+1, gi, wi))
		}
	}
	return strings.Join(diff, "\n")
}

// crashAtCommitEdges runs the job twice, each run crashed by a failpoint
// at one edge of its first database commit: with the rows in the open
// transaction, and right after it committed.
func (r *jobRunner) crashAtCommitEdges() { r.crashAtEdges(failpoint.BeforeDBCommit) }

// crashAtKafkaCommitEdges is crashAtCommitEdges for a job whose commit
// point is a Kafka transaction.
func (r *jobRunner) crashAtKafkaCommitEdges() { r.crashAtEdges(failpoint.BeforeEndTxn) }

func (r *jobRunner) crashAtEdges(before string) {
	r.t.Helper()
	for _, fp := range []string{before + "=crash@1", failpoint.AfterCommitPoint + "=crash@1"} {
		cmd := osexec.Command(r.bin, "run", r.file)
		cmd.Env = append(os.Environ(), failpoint.EnvVar+"="+fp)
		cmd.Stderr = r.log
		err := cmd.Run()
		if ee, ok := err.(*osexec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			r.t.Fatalf("the job with failpoint %s ended with %v, want killed by its failpoint\n%s", fp, err, r.log)
		}
	}
}
