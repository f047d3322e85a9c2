package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/dbtest"
)

// lookupInput makes n random probe rows for the topic probe (and writes
// the same rows to the PostgreSQL table probe through exec, for the
// batch join): seq, k
// (NULL 8 times in 100), region (NULL 4 times in 100) and amount; and
// returns the dimension rows (id, region, name, tier) for keys
// 0..keys-1, about 3 in 10 (id, region) pairs left out so that many
// probes find no row.
func lookupInput(t *testing.T, rng *rand.Rand, n, keys int, exec func(string)) ([]*kgo.Record, [][4]any) {
	t.Helper()
	var recs []*kgo.Record
	var vals []string
	for i := 0; i < n; i++ {
		k, region, amount := nullablePct(rng, rng.IntN(keys+keys/10), 8), nullablePct(rng, []string{"x", "y"}[rng.IntN(2)], 4), rng.IntN(100)
		v, _ := json.Marshal(map[string]any{"seq": i, "k": k, "region": region, "amount": amount})
		recs = append(recs, &kgo.Record{Topic: "probe", Key: fmt.Appendf(nil, "p%d", i), Value: v})
		vals = append(vals, fmt.Sprintf("(%d, %s, %s, %d)", i, sqlLiteral(k), sqlLiteral(region), amount))
	}
	exec("CREATE TABLE probe (seq int, k int, region text, amount int)")
	exec("INSERT INTO probe VALUES " + strings.Join(vals, ", "))
	var dim [][4]any
	for id := 0; id < keys; id++ {
		for _, region := range []string{"x", "y"} {
			if rng.IntN(10) < 3 {
				continue
			}
			dim = append(dim, [4]any{id, region, fmt.Sprintf("n%d-%s", id, region), rng.IntN(4)})
		}
	}
	return recs, dim
}

func produceAll(t *testing.T, addr string, recs []*kgo.Record) {
	t.Helper()
	if err := client(t, addr).ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func dimValues(dim [][4]any) string {
	var vals []string
	for _, d := range dim {
		vals = append(vals, fmt.Sprintf("(%d, '%s', '%s', %d)", d[0], d[1], d[2], d[3]))
	}
	return strings.Join(vals, ", ")
}

// lookupScript is a SQL job reading the probe topic and joining it with
// the dimension table dimDDL (its WITH clause included) into the
// PostgreSQL table out_<name>, keyed by the probe's seq.
func lookupScript(name, dir, addr, pgURL, pgUser, dimDDL, selectList, from, extraSet string) string {
	return fmt.Sprintf(`SET 'pipeline.name' = 'lookup-%[1]s';
SET 'execution.checkpointing.interval' = '100 ms';
SET 'state.checkpoints.dir' = '%[2]s';
%[9]s
CREATE TABLE probe (seq INT, k INT, region STRING, amount INT, proc_time AS PROCTIME())
WITH ('connector' = 'kafka', 'topic' = 'probe', 'properties.bootstrap.servers' = '%[3]s', 'properties.group.id' = 'lookup-%[1]s',
      'scan.startup.mode' = 'earliest-offset', 'format' = 'json');
%[6]s;
CREATE TABLE out_%[1]s (seq INT, name STRING, tier INT, amount INT, PRIMARY KEY (seq) NOT ENFORCED)
WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://%[4]s', 'table-name' = 'out_%[1]s', 'username' = '%[5]s');
INSERT INTO out_%[1]s
SELECT %[7]s
%[8]s;
`, name, filepath.Join(dir, "state-"+name), addr, pgURL, pgUser, dimDDL, selectList, from, extraSet)
}

// lookupQueries are the joins each lookup test runs: the streaming FROM
// (the dimension table d read FOR SYSTEM_TIME AS OF the probe's
// processing time) and the batch FROM PostgreSQL compares it with.
var lookupQueries = []struct {
	name, selectList, from, batchFrom string
}{
	{
		// An inner join on two columns, a condition of the looked-up
		// table in ON (it filters the joined rows) and one of the probe
		// in WHERE (it filters before the lookup).
		name:       "inner",
		selectList: "p.seq, d.name, d.tier, p.amount",
		from:       "FROM probe AS p JOIN dim FOR SYSTEM_TIME AS OF p.proc_time AS d ON p.k = d.id AND d.region = p.region AND d.tier > 0 WHERE p.amount < 95",
		batchFrom:  "FROM probe AS p JOIN dim AS d ON p.k = d.id AND d.region = p.region AND d.tier > 0 WHERE p.amount < 95",
	},
	{
		// A LEFT join with a condition of the probe in ON: a probe
		// failing it, or with a NULL or missing key, is padded.
		name:       "left",
		selectList: "p.seq, d.name, d.tier, p.amount",
		from:       "FROM probe AS p LEFT JOIN dim FOR SYSTEM_TIME AS OF p.proc_time AS d ON p.k = d.id AND d.region = p.region AND p.amount >= 10",
		batchFrom:  "FROM probe AS p LEFT JOIN dim AS d ON p.k = d.id AND d.region = p.region AND p.amount >= 10",
	},
}

// checkLookup compares out_<name> with PostgreSQL's batch join and
// returns how many rows it has and how many are padded.
func checkLookup(t *testing.T, srv *dbtest.PostgresServer, db, name, selectList, batchFrom string, lw *logWriter) (rows, padded int) {
	t.Helper()
	got, err := srv.Psql(db, "SELECT seq, name, tier, amount FROM out_"+name+" ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	want, err := srv.Psql(db, "SELECT "+selectList+" "+batchFrom+" ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for _, row := range w {
		if strings.Contains(row, "||") {
			padded++
		}
	}
	if got != want {
		t.Fatalf("%s: the streaming lookup join (%d rows) differs from PostgreSQL's batch join (%d rows):\n%s\n%s", name, len(g), len(w), rowDiff(g, w), lw)
	}
	return len(w), padded
}

// TestSQLLookupJoinDifferentialPostgres: a Kafka stream of random probe
// rows (NULL keys, keys missing from the table, several probes per key)
// enriched from a PostgreSQL dimension table, static during the run, by
// an inner lookup join (two key columns, filters on both tables, a
// partial cache smaller than the keys) and a LEFT lookup join (a guard
// in ON), into PostgreSQL tables keyed by the probe. Each job is crashed
// by failpoints at both edges of its first commit and SIGKILLed at
// random moments, then run to the end of its input: the sink table equals
// PostgreSQL's batch join of the same rows, so every probe came out
// joined once (docs/design.md, "SQL", lookup joins).
func TestSQLLookupJoinDifferentialPostgres(t *testing.T) {
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
	createTopic(t, addr, "probe", 4)
	recs, dim := lookupInput(t, rng, rows, rows/10, exec)
	produceAll(t, addr, recs)
	exec("CREATE TABLE dim (id bigint, region text, name text, tier int, PRIMARY KEY (id, region))")
	exec("INSERT INTO dim VALUES " + dimValues(dim))
	u := strings.TrimPrefix(dsn, "postgres://")
	pgURL, pgUser := u[strings.Index(u, "@")+1:], u[:strings.Index(u, "@")]
	for _, qy := range lookupQueries {
		t.Run(qy.name, func(t *testing.T) {
			exec("CREATE TABLE out_" + qy.name + " (seq int PRIMARY KEY, name text, tier int, amount int)")
			dimDDL := fmt.Sprintf(`CREATE TABLE dim (id BIGINT, region STRING, name STRING, tier INT, PRIMARY KEY (id, region) NOT ENFORCED)
WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://%s', 'table-name' = 'dim', 'username' = '%s',
      'lookup.cache' = 'PARTIAL', 'lookup.partial-cache.max-rows' = '%d', 'lookup.partial-cache.expire-after-access' = '1 s')`, pgURL, pgUser, rows/40)
			file := filepath.Join(dir, qy.name+".sql")
			if err := os.WriteFile(file, []byte(lookupScript(qy.name, dir, addr, pgURL, pgUser, dimDDL, qy.selectList, qy.from, "")), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := osexec.Command(binary(t), "validate", file).CombinedOutput()
			if err != nil || !strings.Contains(string(out), qy.name+" lookup join of postgres table dim on id = value.__lk0 and region = value.__lk1") {
				t.Fatalf("validate: %v\n%s", err, out)
			}
			lw := &logWriter{t: t, name: qy.name}
			r := &jobRunner{t: t, bin: binary(t), file: file, log: lw}
			r.crashAtCommitEdges()
			r.killAtRandom(rng, kills, 200, 600)
			makeBounded(t, file, 1)
			start := time.Now()
			r.runToEnd()
			n, padded := checkLookup(t, srv, db, qy.name, qy.selectList, qy.batchFrom, lw)
			if n < rows/4 || qy.name == "left" && padded < rows/10 {
				t.Fatalf("the batch join has %d rows, %d padded: too few to prove anything", n, padded)
			}
			t.Logf("%s: %d rows (%d padded) equal to PostgreSQL's batch join; the last run took %v", qy.name, n, padded, time.Since(start).Round(time.Millisecond))
		})
	}
}

// makeBounded makes the script's Kafka tables (want of them) end at the
// offsets their run starts with.
func makeBounded(t *testing.T, file string, want int) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	bounded := strings.ReplaceAll(string(b), "'format' = 'json');", "'format' = 'json', 'scan.bounded.mode' = 'latest-offset');")
	if strings.Count(bounded, "scan.bounded.mode") != want {
		t.Fatalf("the script's Kafka tables were not made bounded:\n%s", bounded)
	}
	if err := os.WriteFile(file, []byte(bounded), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSQLLookupJoinMariaDBAndRedis: the same joins against a MariaDB
// dimension table (a jdbc:mariadb:// table) and, for the single-key
// LEFT join, a Redis one (each row a JSON object at dim:<id>), crashed at
// both edges of a commit, then run to the end: the sink tables equal
// PostgreSQL's batch join of the same rows.
func TestSQLLookupJoinMariaDBAndRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end crash test skipped in -short mode")
	}
	rows := 1500
	rng := seed(t)
	dsn, srv, db, exec := diffDatabase(t)
	mdsn, msrv := dbtest.MariaDB(t)
	mdb := mdsn[strings.LastIndex(mdsn, "/")+1:]
	rurl, rsrv, rdb := dbtest.Redis(t)
	dir := t.TempDir()
	addr := startBroker(t, filepath.Join(dir, "broker"))
	createTopic(t, addr, "probe", 2)
	recs, dim := lookupInput(t, rng, rows, rows/10, exec)
	produceAll(t, addr, recs)
	exec("CREATE TABLE dim (id bigint, region text, name text, tier int, PRIMARY KEY (id, region))")
	exec("INSERT INTO dim VALUES " + dimValues(dim))
	// Redis keeps the rows of region x, keyed by id alone.
	exec("CREATE TABLE rdim AS SELECT id, name, tier FROM dim WHERE region = 'x'")
	ctx := context.Background()
	if err := msrv.Exec(ctx, mdb, "CREATE TABLE dim (id bigint, region varchar(8), name varchar(64), tier int, PRIMARY KEY (id, region))"); err != nil {
		t.Fatal(err)
	}
	if err := msrv.Exec(ctx, mdb, "INSERT INTO dim VALUES "+dimValues(dim)); err != nil {
		t.Fatal(err)
	}
	mset := []string{"MSET"}
	for _, d := range dim {
		if d[1] == "x" {
			v, _ := json.Marshal(map[string]any{"id": d[0], "name": d[2], "tier": d[3]})
			mset = append(mset, fmt.Sprintf("dim:%d", d[0]), string(v))
		}
	}
	if _, err := rsrv.Client(rdb, mset...); err != nil {
		t.Fatal(err)
	}
	u := strings.TrimPrefix(dsn, "postgres://")
	pgURL, pgUser := u[strings.Index(u, "@")+1:], u[:strings.Index(u, "@")]
	mhost := mdsn[strings.Index(mdsn, "(")+1 : strings.Index(mdsn, ")")]
	muser := mdsn[:strings.Index(mdsn, "@")]
	cases := []struct {
		name, dimDDL, selectList, from, batchFrom string
	}{
		{
			name: "mariadb",
			dimDDL: fmt.Sprintf(`CREATE TABLE dim (id BIGINT, region STRING, name STRING, tier INT, PRIMARY KEY (id, region) NOT ENFORCED)
WITH ('connector' = 'jdbc', 'url' = 'jdbc:mariadb://%s/%s', 'table-name' = 'dim', 'username' = '%s', 'lookup.cache' = 'PARTIAL')`, mhost, mdb, muser),
			selectList: lookupQueries[0].selectList, from: lookupQueries[0].from, batchFrom: lookupQueries[0].batchFrom,
		},
		{
			name: "redis",
			dimDDL: fmt.Sprintf(`CREATE TABLE dim (id BIGINT, name STRING, tier INT, PRIMARY KEY (id) NOT ENFORCED)
WITH ('connector' = 'redis', 'url' = '%s', 'key-prefix' = 'dim:')`, rurl),
			selectList: "p.seq, d.name, d.tier, p.amount",
			from:       "FROM probe AS p LEFT JOIN dim FOR SYSTEM_TIME AS OF p.proc_time AS d ON p.k = d.id",
			batchFrom:  "FROM probe AS p LEFT JOIN rdim AS d ON p.k = d.id",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			exec("CREATE TABLE out_" + c.name + " (seq int PRIMARY KEY, name text, tier int, amount int)")
			file := filepath.Join(dir, c.name+".sql")
			if err := os.WriteFile(file, []byte(lookupScript(c.name, dir, addr, pgURL, pgUser, c.dimDDL, c.selectList, c.from, "")), 0o644); err != nil {
				t.Fatal(err)
			}
			lw := &logWriter{t: t, name: c.name}
			r := &jobRunner{t: t, bin: binary(t), file: file, log: lw}
			r.crashAtCommitEdges()
			makeBounded(t, file, 1)
			r.runToEnd()
			n, padded := checkLookup(t, srv, db, c.name, c.selectList, c.batchFrom, lw)
			if n < rows/3 {
				t.Fatalf("the batch join has %d rows: too few to prove anything", n)
			}
			t.Logf("%s: %d rows (%d padded) equal to PostgreSQL's batch join", c.name, n, padded)
		})
	}
}

// TestSQLLookupJoinDatabaseRestart: the dimension table's PostgreSQL
// server (one of its own) is stopped and started twice while a job
// enriches a stream from it, the input arriving as the job runs: the
// lookups that fail are retried with backoff ('lookup.max-retries'), or
// the job restarts from its last checkpoint, and every probe still comes
// out joined exactly once — the sink table equals the batch join.
func TestSQLLookupJoinDatabaseRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end crash test skipped in -short mode")
	}
	rows, chunks := 6000, 30
	rng := seed(t)
	dsn, srv, db, exec := diffDatabase(t)
	// A server of its own (other options than the sink's), so that
	// restarting it stops the lookups and not the sink.
	ddsn, dsrv := dbtest.Postgres(t, dbtest.PostgresOptions{MaxPreparedTransactions: 3})
	ddb := ddsn[strings.LastIndex(ddsn, "/")+1 : strings.Index(ddsn, "?")]
	dir := t.TempDir()
	addr := startBroker(t, filepath.Join(dir, "broker"))
	createTopic(t, addr, "probe", 3)
	// The probe rows are produced in chunks while the job runs.
	staged, dim := lookupInput(t, rng, rows, rows/10, exec)
	exec("CREATE TABLE dim (id bigint, region text, name text, tier int, PRIMARY KEY (id, region))")
	exec("INSERT INTO dim VALUES " + dimValues(dim))
	if err := dsrv.Exec(context.Background(), ddb, "CREATE TABLE dim (id bigint, region text, name text, tier int, PRIMARY KEY (id, region))"); err != nil {
		t.Fatal(err)
	}
	if err := dsrv.Exec(context.Background(), ddb, "INSERT INTO dim VALUES "+dimValues(dim)); err != nil {
		t.Fatal(err)
	}
	u := strings.TrimPrefix(dsn, "postgres://")
	pgURL, pgUser := u[strings.Index(u, "@")+1:], u[:strings.Index(u, "@")]
	du := strings.TrimPrefix(ddsn, "postgres://")
	dURL := du[strings.Index(du, "@")+1 : strings.Index(du, "?")]
	qy := lookupQueries[1] // LEFT: a lookup that failed and passed the row padded would show
	exec("CREATE TABLE out_" + qy.name + " (seq int PRIMARY KEY, name text, tier int, amount int)")
	dimDDL := fmt.Sprintf(`CREATE TABLE dim (id BIGINT, region STRING, name STRING, tier INT, PRIMARY KEY (id, region) NOT ENFORCED)
WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://%s', 'table-name' = 'dim', 'username' = '%s', 'lookup.max-retries' = '8')`, dURL, du[:strings.Index(du, "@")])
	file := filepath.Join(dir, "restart.sql")
	if err := os.WriteFile(file, []byte(lookupScript(qy.name, dir, addr, pgURL, pgUser, dimDDL, qy.selectList, qy.from, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	lw := &logWriter{t: t, name: "restart"}
	r := &jobRunner{t: t, bin: binary(t), file: file, log: lw}
	cmd, done := r.start()
	defer func() { _ = cmd.Process.Kill() }()
	per := rows / chunks
	restarted := make(chan string, 2)
	for c := 0; c < chunks; c++ {
		produceAll(t, addr, staged[c*per:(c+1)*per])
		if c == chunks/3 || c == 2*chunks/3 {
			// Restarted while the next chunks arrive: their lookups fail
			// until the server is back.
			go func(c int) {
				t0 := time.Now()
				err := dsrv.Restart()
				restarted <- fmt.Sprintf("chunk %d: the dimension's server restarted in %v (%v)", c, time.Since(t0).Round(time.Millisecond), err)
			}(c)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for range 2 {
		t.Log(<-restarted)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		n, err := srv.Psql(db, "SELECT count(*) FROM out_"+qy.name)
		if err == nil && n == fmt.Sprint(rows) {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the job ended: %v\n%s", err, lw)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sink has %s of %d rows after 2 minutes\n%s", n, rows, lw)
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	<-done
	n, padded := checkLookup(t, srv, db, qy.name, qy.selectList, qy.batchFrom, lw)
	failed := strings.Count(lw.String(), "lookup failed")
	if failed == 0 {
		t.Fatalf("no lookup failed: the restarts did not meet the job's lookups, so the test proved nothing\n%s", lw)
	}
	t.Logf("%d rows (%d padded) equal to the batch join after two restarts of the dimension's server; %d lookups failed and were retried", n, padded, failed)
}
