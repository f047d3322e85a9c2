package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/dbtest"
	"github.com/onceflow/onceflow/scaleout"
)

// The scale-out tests of database sinks: each task of the last
// sub-topology writes the table with the database's transaction as its
// commit point (its progress row, fenced per task), the first
// sub-topology writes the repartition topic through Kafka transactions
// (docs/design.md, "Scale-out").

// scaleOutDBCase is a database for runScaleOutDB: the sink section, and
// the database's own view: started tells when output has arrived, check
// checks the output against each user's input records once the
// instances have stopped (log: the instances' logs).
type scaleOutDBCase struct {
	job     string
	sink    string
	started func() bool
	check   func(t *testing.T, perUser map[string]int, produced int, log fmt.Stringer)
}

// runScaleOutDB runs three instances of a running count keyed by a field
// of the value (so through a repartition topic) into a database, while
// input keeps coming and the instances go through scaleOutEvents kills,
// adds, removes and pauses past the session timeout; every input record
// makes one output record (the user's count so far).
func runScaleOutDB(t *testing.T, c scaleOutDBCase) {
	rng := seed(t)
	dir := t.TempDir()
	addr := startBroker(t, filepath.Join(dir, "broker"))
	createTopic(t, addr, "in", 4)
	const users = 40
	perUser := map[string]int{}
	cl := client(t, addr, kgo.DefaultProduceTopic("in"), kgo.ProducerLinger(5*time.Millisecond))
	record := func(rng *rand.Rand, i int) *kgo.Record {
		u := "u" + strconv.Itoa(rng.IntN(users))
		perUser[u]++
		return &kgo.Record{Key: []byte("order-" + strconv.Itoa(i)), Value: []byte(`{"user":"` + u + `","seq":` + strconv.Itoa(i) + `}`)}
	}
	var recs []*kgo.Record
	const first = 3000
	for i := range first {
		recs = append(recs, record(rng, i))
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	file := writeScaleOutJobFile(t, dir, c.job, addr, "in", "pipeline:\n  - aggregate: { key: value.user, fields: { n: \"count()\" } }", c.sink, "")
	f := &fleet{t: t, file: file, log: &logWriter{t: t, name: c.job}, run: map[string]*instanceProc{}}
	defer f.stopAll()
	for _, n := range []string{"a", "b", "c"} {
		f.start(n)
	}
	// Input keeps coming through every event (perUser is the generator's
	// until it is done).
	genCtx, stopGen := context.WithCancel(context.Background())
	genDone := make(chan int)
	genRng := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64())) // chaos draws from rng meanwhile
	go func() {
		n := first
		for ; genCtx.Err() == nil; n++ {
			// Not canceled with genCtx: a record counted is produced.
			if err := cl.ProduceSync(context.Background(), record(genRng, n)).FirstErr(); err != nil {
				t.Errorf("produce input record %d: %v", n, err)
				break
			}
			time.Sleep(3 * time.Millisecond)
		}
		genDone <- n
	}()
	// Rows arrive before the events start.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if c.started() {
			break
		}
		f.checkAlive()
		if time.Now().After(deadline) {
			stopGen()
			<-genDone
			t.Fatalf("no row in the table within a minute\n%s", f.log)
		}
	}
	events := f.chaos(rng, scaleOutEvents())
	stopGen()
	produced := <-genDone
	adm := kadm.NewClient(client(t, addr))
	// The last sub-topology's tasks commit their offsets to the group as
	// their instance's member after each database commit: the group
	// shows them caught up, as `onceflow status` does.
	waitCaughtUp(t, adm, c.job, "in", f)
	waitCaughtUp(t, adm, c.job, c.job+"-repartition-1", f)
	// The repartition topic is purged up to what the database commit
	// points passed.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		starts, err1 := adm.ListStartOffsets(t.Context(), c.job+"-repartition-1")
		ends, err2 := adm.ListEndOffsets(t.Context(), c.job+"-repartition-1")
		purged := err1 == nil && err2 == nil
		starts.Each(func(o kadm.ListedOffset) {
			// All but the last record (scaleout.purgeOffset: a partition
			// purged to its end lost its offsets in the embedded broker).
			if e, ok := ends.Lookup(o.Topic, o.Partition); !ok || o.Offset < e.Offset-1 {
				purged = false
			}
		})
		if purged {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the repartition topic was not purged to its last record within 30s of the tasks' last commit (start offsets %v, end offsets %v)", starts, ends)
		}
	}
	// onceflow status shows the last sub-topology's partitions caught up,
	// each with the checkpoint that committed its offset. The tasks'
	// states come from the instances' reports (every
	// scaleout.ReportInterval), so a partition the last rebalance moved
	// shows its new task once its instance has reported again.
	var problems []string
	var out []byte
	for deadline := time.Now().Add(5 * scaleout.ReportInterval); ; {
		var err error
		out, err = exec.Command(binary(t), "status", file).CombinedOutput()
		if err != nil {
			t.Fatalf("onceflow status: %v\n%s", err, out)
		}
		problems = problems[:0]
		rows := 0
		for _, line := range strings.Split(string(out), "\n") {
			cols := strings.Fields(line)
			// TOPIC PARTITION TASK INSTANCE STATE CHECKPOINT COMMITTED END
			// LAG RESTARTS [PROBLEM]
			if len(cols) < 10 || cols[0] != c.job+"-repartition-1" {
				continue
			}
			rows++
			if cols[6] != cols[7] || cols[5] == "-" || cols[4] != "running" {
				problems = append(problems, fmt.Sprintf("%q: want the task running, the committed offset at the end and a checkpoint", line))
			}
		}
		if rows != 4 {
			problems = append(problems, fmt.Sprintf("%d partitions of %s-repartition-1 shown, want 4", rows, c.job))
		}
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, p := range problems {
		t.Errorf("onceflow status: %s\n%s", p, out)
	}
	f.stopAll()
	t.Logf("%d records, events: %s", produced, strings.Join(events, ", "))

	c.check(t, perUser, produced, f.log)
}

// sqlScaleOutCase is the case of an append table so_counts (u, n) of
// the running counts: it must hold, per user, exactly the counts
// 1..(its records), each once (a duplicate row, a record counted twice
// or one lost would show), and a progress row per task of the last
// sub-topology, fenced by that task's recoveries alone.
func sqlScaleOutCase(job, sink string, query func(string) (string, error)) scaleOutDBCase {
	return scaleOutDBCase{job: job, sink: sink,
		started: func() bool {
			n, _ := query("SELECT count(*) FROM so_counts")
			return n != "" && n != "0"
		},
		check: func(t *testing.T, perUser map[string]int, produced int, log fmt.Stringer) {
			if got, err := query("SELECT count(*) FROM so_counts"); err != nil || got != strconv.Itoa(produced) {
				t.Errorf("the table has %s rows (%v), want one per input record, %d\n%s", got, err, produced, log)
			}
			out, err := query("SELECT u, count(*), count(DISTINCT n), min(n), max(n) FROM so_counts GROUP BY u ORDER BY u")
			if err != nil {
				t.Fatal(err)
			}
			seen := 0
			for _, line := range strings.Split(out, "\n") {
				cols := strings.Split(line, "|")
				if len(cols) != 5 {
					t.Fatalf("unexpected row %q of %q", line, out)
				}
				n := perUser[cols[0]]
				if want := fmt.Sprintf("%d|%d|1|%d", n, n, n); strings.Join(cols[1:], "|") != want {
					t.Errorf("user %s: rows, distinct counts, min, max = %s, want %s (the counts 1..%d, each once)", cols[0], strings.Join(cols[1:], "|"), want, n)
				}
				seen++
			}
			if seen != len(perUser) {
				t.Errorf("%d users in the table, want %d", seen, len(perUser))
			}
			// A progress row per task of the last sub-topology, each fenced by
			// the recoveries of its task alone.
			rows, err := query("SELECT count(*), max(fence) > 1 FROM onceflow_progress WHERE job LIKE '" + job + "-" + job + "-repartition-1-%' AND checkpoint > 0")
			if err != nil {
				t.Fatal(err)
			}
			if rows != "4|t" && rows != "4|1" {
				t.Errorf("progress rows of the tasks (rows, some task recovered more than once) = %s, want 4 rows, fences moved", rows)
			}
		},
	}
}

// TestScaleOutPostgres: runScaleOutDB into PostgreSQL, checked with psql;
// no transaction of the job is left open.
func TestScaleOutPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	dsn, srv := dbtest.Postgres(t)
	db := dsn[strings.LastIndex(dsn, "/")+1 : strings.Index(dsn, "?")]
	if err := srv.Exec(context.Background(), db, "CREATE TABLE so_counts (u text NOT NULL, n bigint NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("E2E_PG_DSN", dsn)
	query := func(q string) (string, error) { return srv.Psql(db, q) }
	runScaleOutDB(t, sqlScaleOutCase("sopg", `  postgres:
    dsn: ${E2E_PG_DSN}
    table: so_counts
    columns: { u: value.key, n: value.n }`, query))
	for _, left := range postgresLeftOpen(query) {
		t.Error(left)
	}
}

// TestScaleOutMariaDB: runScaleOutDB into MariaDB, checked with the
// mariadb client; no transaction is left open or prepared.
func TestScaleOutMariaDB(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	dsn, srv := dbtest.MariaDB(t)
	db := dsn[strings.LastIndex(dsn, "/")+1:]
	if err := srv.Exec(context.Background(), db, "CREATE TABLE so_counts (u VARCHAR(16) NOT NULL, n BIGINT NOT NULL) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("E2E_MYSQL_DSN", dsn)
	query := func(q string) (string, error) { return srv.Client(db, q) }
	runScaleOutDB(t, sqlScaleOutCase("somy", `  mysql:
    dsn: ${E2E_MYSQL_DSN}
    table: so_counts
    columns: { u: value.key, n: value.n }`, query))
	if got, err := query(myOpenInDB); err != nil || got != "0" {
		t.Errorf("%s = %q (%v), want 0: the stopped instances left work open", myOpenInDB, got, err)
	}
	if xids, err := myPrepared(srv, "somy", "sink"); err != nil || xids != "" {
		t.Errorf("the stopped instances left XA transactions prepared (%v): %s", err, xids)
	}
}

// TestScaleOutRedis: runScaleOutDB into Redis, each output record an
// INCRBY 1 of its user's counter (Redis is each task's commit point: a
// single duplicate or loss changes a total), checked with redis-cli; a
// progress hash per task of the last sub-topology, and no stage left.
func TestScaleOutRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	url, srv, db := dbtest.Redis(t)
	t.Setenv("E2E_REDIS_URL", url)
	cli := func(args ...string) string {
		out, err := srv.Client(db, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	runScaleOutDB(t, scaleOutDBCase{job: "sord", sink: `  redis:
    url: ${E2E_REDIS_URL}
    command: incrby
    key: value.key
    key-prefix: "c:"`,
		started: func() bool { return cli("KEYS", "c:*") != "" },
		check: func(t *testing.T, perUser map[string]int, produced int, log fmt.Stringer) {
			keys := strings.Fields(cli("KEYS", "c:*"))
			if len(keys) != len(perUser) {
				t.Errorf("%d counters, want one per user, %d", len(keys), len(perUser))
			}
			total := 0
			for u, n := range perUser {
				got := cli("GET", "c:"+u)
				if got != strconv.Itoa(n) {
					t.Errorf("counter of user %s = %q, want %d: an output record was applied twice or not at all\n%s", u, got, n, log)
				}
				total += n
			}
			if total != produced {
				t.Errorf("the generator's users count %d records, it produced %d", total, produced)
			}
			tasks := strings.Fields(cli("KEYS", "onceflow:progress:sord-sord-repartition-1-*"))
			if len(tasks) != 4 {
				t.Errorf("progress hashes of the last sub-topology's tasks: %q, want 4", tasks)
			}
			if stages := cli("KEYS", "onceflow:stage:*"); stages != "" {
				t.Errorf("stages left behind after the instances stopped: %q", stages)
			}
		},
	})
}
