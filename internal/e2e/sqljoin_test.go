package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestSQLJoinDifferentialPostgres: regular inner joins of Kafka tables
// over bounded random input with many rows per key and NULL keys on every
// side — "pair": a two-column key of two integer types and a string, a
// condition of both sides applied after the join, one of one side pushed
// before it, the ttl from a STATE_TTL hint; "chain": three tables, the
// second join reading the first's stream, the ttl from SET; "using": JOIN
// … USING (k, tag) with a filter of one side — each job
// crashed by failpoints at both edges of its first commit and SIGKILLed
// at random moments, then run to the end of its input: the rows it
// appended to a PostgreSQL table (no primary key, so a pair written twice
// would show) equal, as a multiset, PostgreSQL's batch result of the
// same join over the same rows (docs/design.md, "SQL").
func TestSQLJoinDifferentialPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end crash test skipped in -short mode")
	}
	rows, kills := 1500, 3 // per side
	if os.Getenv("ONCEFLOW_LONG") != "" {
		rows, kills = 10000, 10
	}
	rng := seed(t)
	dsn, srv, db, exec := diffDatabase(t)
	dir := t.TempDir()
	addr := startBroker(t, filepath.Join(dir, "broker"))
	createTopic(t, addr, "lft", 4)
	createTopic(t, addr, "rgt", 3)
	createTopic(t, addr, "thd", 2)

	nullable := func(v any, pct int) any { return nullablePct(rng, v, pct) }
	keys := rows / 25 // about 25 rows a key on each side: many pairs per key
	var recs []*kgo.Record
	var lvals, rvals, tvals []string
	for i := 0; i < rows; i++ {
		k, tag, amount := nullable(rng.IntN(keys), 8), nullable([]string{"x", "y"}[rng.IntN(2)], 4), rng.IntN(100)
		v, _ := json.Marshal(map[string]any{"seq": i, "k": k, "tag": tag, "amount": amount})
		recs = append(recs, &kgo.Record{Topic: "lft", Key: fmt.Appendf(nil, "l%d", i), Value: v})
		lvals = append(lvals, fmt.Sprintf("(%d, %s, %s, %d)", i, sqlLiteral(k), sqlLiteral(tag), amount))

		k, tag = nullable(rng.IntN(keys), 8), nullable([]string{"x", "y"}[rng.IntN(2)], 4)
		bonus, name := rng.IntN(100), fmt.Sprintf("n%d", rng.IntN(10))
		v, _ = json.Marshal(map[string]any{"seq": i, "k": k, "tag": tag, "bonus": bonus, "name": name})
		recs = append(recs, &kgo.Record{Topic: "rgt", Value: v}) // no record key: the join keys by its columns
		rvals = append(rvals, fmt.Sprintf("(%d, %s, %s, %d, '%s')", i, sqlLiteral(k), sqlLiteral(tag), bonus, name))

		if i%5 == 0 { // a fifth as many: about one partner for each pair
			name, k := nullable(fmt.Sprintf("n%d", rng.IntN(10)), 8), rng.IntN(keys)
			v, _ = json.Marshal(map[string]any{"seq": i, "name": name, "k": k})
			recs = append(recs, &kgo.Record{Topic: "thd", Value: v})
			tvals = append(tvals, fmt.Sprintf("(%d, %s, %d)", i, sqlLiteral(name), k))
		}
	}
	cl := client(t, addr)
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	exec("CREATE TABLE lft (seq int, k bigint, tag text, amount int)")
	exec("INSERT INTO lft VALUES " + strings.Join(lvals, ", "))
	exec("CREATE TABLE rgt (seq int, k int, tag text, bonus int, name text)")
	exec("INSERT INTO rgt VALUES " + strings.Join(rvals, ", "))
	exec("CREATE TABLE thd (seq int, name text, k bigint)")
	exec("INSERT INTO thd VALUES " + strings.Join(tvals, ", "))

	u := strings.TrimPrefix(dsn, "postgres://")
	for _, qy := range []struct {
		name, set, hint, cols, ddl, sinkSQL, selectList, from string
		minRows                                               int
	}{
		{
			name: "pair", hint: "/*+ STATE_TTL('l' = '1 h', 'r' = '1 h') */ ",
			cols: "lseq, rseq, k, name, total", ddl: "(lseq int, rseq int, k bigint, name text, total int)",
			sinkSQL:    "(lseq INT, rseq INT, k BIGINT, name STRING, total INT)",
			selectList: "l.seq, r.seq, l.k, r.name, l.amount + r.bonus",
			from:       "FROM lft AS l JOIN rgt AS r ON l.k = r.k AND r.tag = l.tag AND l.amount >= r.bonus WHERE r.name <> 'n3'",
			minRows:    rows,
		},
		{
			name: "chain", set: "SET 'table.exec.state.ttl' = '1 h';\n",
			cols: "lseq, rseq, tseq, k", ddl: "(lseq int, rseq int, tseq int, k bigint)",
			sinkSQL:    "(lseq INT, rseq INT, tseq INT, k BIGINT)",
			selectList: "l.seq, r.seq, t.seq, t.k",
			from:       "FROM lft l, rgt r, thd t WHERE l.k = r.k AND l.tag = r.tag AND t.name = r.name AND t.k = l.k AND l.amount < r.bonus",
			minRows:    rows / 2,
		},
		{
			// JOIN … USING: k and tag equal on both sides (an INT and a
			// BIGINT k), the unqualified k the left's.
			name: "using", set: "SET 'table.exec.state.ttl' = '1 h';\n",
			cols: "lseq, rseq, k, tag, name", ddl: "(lseq int, rseq int, k bigint, tag text, name text)",
			sinkSQL:    "(lseq INT, rseq INT, k BIGINT, tag STRING, name STRING)",
			selectList: "l.seq, r.seq, k, tag, r.name",
			from:       "FROM lft AS l JOIN rgt AS r USING (k, tag) WHERE l.amount < 30",
			minRows:    rows,
		},
	} {
		t.Run(qy.name, func(t *testing.T) {
			exec("CREATE TABLE out_" + qy.name + " " + qy.ddl)
			script := fmt.Sprintf(`SET 'pipeline.name' = 'diff-%[1]s';
SET 'execution.checkpointing.interval' = '100 ms';
SET 'restart-strategy.type' = 'none';
SET 'state.checkpoints.dir' = '%[2]s';
%[3]sCREATE TABLE lft (seq INT, k BIGINT, tag STRING, amount INT)
WITH ('connector' = 'kafka', 'topic' = 'lft', 'properties.bootstrap.servers' = '%[4]s', 'properties.group.id' = 'diff-%[1]s',
      'scan.startup.mode' = 'earliest-offset', 'format' = 'json');
CREATE TABLE rgt (seq INT, k INT, tag STRING, bonus INT, name STRING)
WITH ('connector' = 'kafka', 'topic' = 'rgt', 'properties.bootstrap.servers' = '%[4]s', 'properties.group.id' = 'diff-%[1]s',
      'scan.startup.mode' = 'earliest-offset', 'format' = 'json');
CREATE TABLE thd (seq INT, name STRING, k BIGINT)
WITH ('connector' = 'kafka', 'topic' = 'thd', 'properties.bootstrap.servers' = '%[4]s', 'properties.group.id' = 'diff-%[1]s',
      'scan.startup.mode' = 'earliest-offset', 'format' = 'json');
CREATE TABLE out_%[1]s %[5]s
WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://%[6]s', 'table-name' = 'out_%[1]s', 'username' = '%[7]s');
INSERT INTO out_%[1]s
SELECT %[8]s%[9]s
%[10]s;
`, qy.name, filepath.Join(dir, "state-"+qy.name), qy.set, addr, qy.sinkSQL, u[strings.Index(u, "@")+1:], u[:strings.Index(u, "@")], qy.hint, qy.selectList, qy.from)
			file := filepath.Join(dir, qy.name+".sql")
			if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
				t.Fatal(err)
			}
			// The compiled job joins in the named form, with its bound shown.
			out, err := osexec.Command(binary(t), "validate", file).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "inner join on record.key = record.key, ttl 1h") || !strings.Contains(string(out), "freed by ttl 1h") {
				t.Fatalf("validate: %v\n%s", err, out)
			}
			lw := &logWriter{t: t, name: qy.name}
			r := &jobRunner{t: t, bin: binary(t), file: file, log: lw}
			r.crashAtCommitEdges()
			r.killAtRandom(rng, kills, 200, 600)
			// The last run reads every table to its end and ends.
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			bounded := strings.ReplaceAll(string(b), "'format' = 'json');", "'format' = 'json', 'scan.bounded.mode' = 'latest-offset');")
			if strings.Count(bounded, "scan.bounded.mode") != 3 {
				t.Fatalf("the script's three tables were not made bounded:\n%s", bounded)
			}
			if err := os.WriteFile(file, []byte(bounded), 0o644); err != nil {
				t.Fatal(err)
			}
			r.runToEnd()

			n := strings.Count(qy.cols, ",") + 1
			order := make([]string, n)
			for i := range order {
				order[i] = fmt.Sprint(i + 1)
			}
			orderBy := " ORDER BY " + strings.Join(order, ", ")
			got, err := srv.Psql(db, "SELECT "+qy.cols+" FROM out_"+qy.name+orderBy)
			if err != nil {
				t.Fatal(err)
			}
			want, err := srv.Psql(db, "SELECT "+qy.selectList+" "+qy.from+orderBy)
			if err != nil {
				t.Fatal(err)
			}
			g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
			if len(w) < qy.minRows {
				t.Fatalf("the batch join has %d rows: too few to prove anything (want at least %d)", len(w), qy.minRows)
			}
			if got != want {
				t.Fatalf("the streaming join (%d rows) differs from PostgreSQL's (%d rows):\n%s\n%s", len(g), len(w), rowDiff(g, w), lw)
			}
			t.Logf("%s: %d rows, equal to PostgreSQL's as a multiset", qy.name, len(g))
		})
	}
}
