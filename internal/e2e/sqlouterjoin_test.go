package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestSQLOuterJoinDifferentialPostgres: regular outer joins of Kafka
// tables over bounded random input, many rows per key and NULL keys on
// both sides, into PostgreSQL tables whose PRIMARY KEY tells every row
// apart (both sides' row ids, COALESCE'd to -1 on a padded side, since a
// key column cannot be NULL there) — "left": a LEFT JOIN on two columns
// with a condition of each table in ON (the left's a guard that keeps
// its rows padded, the right's a filter before the join) and one of the
// left table in WHERE; "full": a FULL JOIN with a WHERE condition of the
// right table, which filters the joined rows, padded ones included;
// "agg": a GROUP BY over a LEFT JOIN, which takes its retractions;
// "aggs": a join of two GROUP BY results; "left_agg": a LEFT JOIN of a
// GROUP BY result; "full_cond": a FULL JOIN whose ON holds a condition
// of both tables; "chain": a LEFT JOIN of a LEFT JOIN (those four take
// changelogs: the join step's retractions, docs/design.md "Changelogs"). A
// row written padded is deleted when its first partner comes (the
// retraction's key is the padded row's). Each job is crashed by
// failpoints at both edges of its first commit and SIGKILLed at random
// moments, then run to the end of its input: the final table equals
// PostgreSQL's batch result of the same outer join over the same rows
// (docs/design.md, "SQL").
func TestSQLOuterJoinDifferentialPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end crash test skipped in -short mode")
	}
	rows, kills := 1200, 3 // per side
	if os.Getenv("ONCEFLOW_LONG") != "" {
		rows, kills = 10000, 10
	}
	rng := seed(t)
	dsn, srv, db, exec := diffDatabase(t)
	dir := t.TempDir()
	addr := startBroker(t, filepath.Join(dir, "broker"))
	createTopic(t, addr, "lft", 4)
	createTopic(t, addr, "rgt", 3)
	createTopic(t, addr, "dim", 1)

	nullable := func(v any, pct int) any { return nullablePct(rng, v, pct) }
	keys := rows / 8 // about 8 rows a key on each side; some keys of one side only
	var recs []*kgo.Record
	var lvals, rvals []string
	for i := 0; i < rows; i++ {
		k, tag, amount := nullable(rng.IntN(keys), 8), nullable([]string{"x", "y"}[rng.IntN(2)], 4), rng.IntN(100)
		v, _ := json.Marshal(map[string]any{"seq": i, "k": k, "tag": tag, "amount": amount})
		recs = append(recs, &kgo.Record{Topic: "lft", Key: fmt.Appendf(nil, "l%d", i), Value: v})
		lvals = append(lvals, fmt.Sprintf("(%d, %s, %s, %d)", i, sqlLiteral(k), sqlLiteral(tag), amount))

		k, tag = nullable(rng.IntN(keys)+keys/10, 8), nullable([]string{"x", "y"}[rng.IntN(2)], 4)
		bonus, name := rng.IntN(100), fmt.Sprintf("n%d", rng.IntN(10))
		v, _ = json.Marshal(map[string]any{"seq": i, "k": k, "tag": tag, "bonus": bonus, "name": name})
		recs = append(recs, &kgo.Record{Topic: "rgt", Value: v})
		rvals = append(rvals, fmt.Sprintf("(%d, %s, %s, %d, '%s')", i, sqlLiteral(k), sqlLiteral(tag), bonus, name))
	}
	// dim, an upsert-kafka table: about three versions of each key, a
	// fifth of them tombstones, so rows are updated and deleted on the
	// table side of a join. Its final state is what PostgreSQL joins.
	final := map[int]string{}
	var dimRecs []*kgo.Record
	for i := 0; i < keys*3; i++ {
		k := rng.IntN(keys + keys/10)
		rec := &kgo.Record{Topic: "dim", Key: []byte(strconv.Itoa(k))}
		if rng.IntN(5) == 0 {
			delete(final, k)
		} else {
			label, w := fmt.Sprintf("L%d", rng.IntN(50)), rng.IntN(100)
			rec.Value, _ = json.Marshal(map[string]any{"k": k, "label": label, "w": w})
			final[k] = fmt.Sprintf("(%d, '%s', %d)", k, label, w)
		}
		dimRecs = append(dimRecs, rec)
	}
	recs = append(recs, dimRecs...)
	// The topics interleaved in random order, so that many rows arrive
	// before their first partner; dim's records then put back in their
	// own order in the places dim drew (its last version is final's).
	rng.Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
	next := 0
	for i := range recs {
		if recs[i].Topic == "dim" {
			recs[i] = dimRecs[next]
			next++
		}
	}
	var dvals []string
	for _, v := range final {
		dvals = append(dvals, v)
	}
	cl := client(t, addr)
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	exec("CREATE TABLE lft (seq int, k bigint, tag text, amount int)")
	exec("INSERT INTO lft VALUES " + strings.Join(lvals, ", "))
	exec("CREATE TABLE rgt (seq int, k int, tag text, bonus int, name text)")
	exec("INSERT INTO rgt VALUES " + strings.Join(rvals, ", "))
	exec("CREATE TABLE dim (k bigint PRIMARY KEY, label text, w int)")
	exec("INSERT INTO dim VALUES " + strings.Join(dvals, ", "))

	u := strings.TrimPrefix(dsn, "postgres://")
	for _, qy := range []struct {
		name, cols, ddl, sinkSQL, selectList, from string
		minRows, minPadded                         int
		// padded tells a padded row of the batch result (nil: a row with
		// -1 in its first or second column); retracting: the join takes
		// a changelog (validate says "taking retractions").
		padded     func(f []string) bool
		retracting bool
	}{
		{
			name: "left",
			cols: "lseq, rseq, k, name, total", ddl: "(lseq int, rseq int, k bigint, name text, total int, PRIMARY KEY (lseq, rseq))",
			sinkSQL:    "(lseq INT, rseq INT, k BIGINT, name STRING, total INT, PRIMARY KEY (lseq, rseq) NOT ENFORCED)",
			selectList: "l.seq, COALESCE(r.seq, -1), l.k, r.name, l.amount + r.bonus",
			from:       "FROM lft AS l LEFT JOIN rgt AS r ON l.k = r.k AND r.tag = l.tag AND l.amount >= 10 AND r.bonus < 80 WHERE l.amount < 95",
			minRows:    rows, minPadded: rows / 10,
		},
		{
			name: "full",
			cols: "lseq, rseq, lk, rk, name", ddl: "(lseq int, rseq int, lk bigint, rk int, name text, PRIMARY KEY (lseq, rseq))",
			sinkSQL:    "(lseq INT, rseq INT, lk BIGINT, rk INT, name STRING, PRIMARY KEY (lseq, rseq) NOT ENFORCED)",
			selectList: "COALESCE(l.seq, -1), COALESCE(r.seq, -1), l.k, r.k, r.name",
			from:       "FROM lft AS l FULL OUTER JOIN rgt AS r ON l.k = r.k WHERE r.name IS NULL OR r.name <> 'n3'",
			minRows:    rows, minPadded: rows / 10,
		},
		{
			// A GROUP BY over a LEFT JOIN takes its retractions: a padded
			// row counted is taken out when its partners come.
			name: "agg",
			cols: "k, n, matched", ddl: "(k bigint PRIMARY KEY, n bigint, matched bigint)",
			sinkSQL:    "(k BIGINT, n BIGINT, matched BIGINT, PRIMARY KEY (k) NOT ENFORCED)",
			selectList: "l.k, COUNT(*), COUNT(r.seq)",
			from:       "FROM lft AS l LEFT JOIN rgt AS r ON l.k = r.k AND r.tag = 'x' WHERE l.k IS NOT NULL GROUP BY l.k",
			minRows:    keys * 9 / 10, minPadded: 3,
			padded: func(f []string) bool { return f[2] == "0" },
		},
		{
			// A join of two GROUP BY results: each aggregate emits its old
			// row before its new one, and the join retracts the joined row
			// of the old one.
			name: "aggs",
			cols: "k, n, total", ddl: "(k bigint PRIMARY KEY, n bigint, total bigint)",
			sinkSQL:    "(k BIGINT, n BIGINT, total BIGINT, PRIMARY KEY (k) NOT ENFORCED)",
			selectList: "a.k, a.n, b.total",
			from:       "FROM (SELECT k, COUNT(*) AS n FROM lft WHERE amount < 90 GROUP BY k) AS a JOIN (SELECT k, SUM(bonus) AS total FROM rgt WHERE tag = 'x' GROUP BY k) AS b ON a.k = b.k",
			minRows:    keys * 3 / 4, padded: func([]string) bool { return false }, retracting: true,
		},
		{
			// A LEFT JOIN of an aggregate: a row is padded until its key's
			// total comes, then follows every change of the total.
			name: "left_agg",
			cols: "seq, k, total", ddl: "(seq int PRIMARY KEY, k bigint, total bigint)",
			sinkSQL:    "(seq INT, k BIGINT, total BIGINT, PRIMARY KEY (seq) NOT ENFORCED)",
			selectList: "l.seq, l.k, t.total",
			from:       "FROM lft AS l LEFT JOIN (SELECT k, SUM(bonus) AS total FROM rgt WHERE name <> 'n2' GROUP BY k) AS t ON l.k = t.k",
			minRows:    rows, minPadded: rows / 20, padded: func(f []string) bool { return f[2] == "" }, retracting: true,
		},
		{
			// An ON condition of both tables in a FULL JOIN: part of the
			// match, a row is padded while no partner meets it.
			name: "full_cond",
			cols: "lseq, rseq, amount, bonus", ddl: "(lseq int, rseq int, amount int, bonus int, PRIMARY KEY (lseq, rseq))",
			sinkSQL:    "(lseq INT, rseq INT, amount INT, bonus INT, PRIMARY KEY (lseq, rseq) NOT ENFORCED)",
			selectList: "COALESCE(l.seq, -1), COALESCE(r.seq, -1), l.amount, r.bonus",
			from:       "FROM lft AS l FULL OUTER JOIN rgt AS r ON l.k = r.k AND l.amount + 20 < r.bonus",
			minRows:    rows, minPadded: rows / 5, retracting: true,
		},
		{
			// A LEFT JOIN of an upsert-kafka table: a key's new version
			// retracts the rows its old one made, a tombstone pads them.
			name: "left_upsert",
			cols: "seq, k, label, w", ddl: "(seq int PRIMARY KEY, k bigint, label text, w int)",
			sinkSQL:    "(seq INT, k BIGINT, label STRING, w INT, PRIMARY KEY (seq) NOT ENFORCED)",
			selectList: "l.seq, l.k, d.label, d.w",
			from:       "FROM lft AS l LEFT JOIN dim AS d ON l.k = d.k",
			minRows:    rows, minPadded: rows / 10, padded: func(f []string) bool { return f[2] == "" }, retracting: true,
		},
		{
			// A chain of outer joins: the second takes the first's
			// changelog (its padded rows retracted as partners come).
			name: "chain",
			cols: "lseq, rseq, xseq, xname", ddl: "(lseq int, rseq int, xseq int, xname text, PRIMARY KEY (lseq, rseq, xseq))",
			sinkSQL:    "(lseq INT, rseq INT, xseq INT, xname STRING, PRIMARY KEY (lseq, rseq, xseq) NOT ENFORCED)",
			selectList: "l.seq, COALESCE(r.seq, -1), COALESCE(x.seq, -1), x.name",
			from:       "FROM lft AS l LEFT JOIN rgt AS r ON l.k = r.k AND r.tag = 'y' LEFT JOIN rgt AS x ON x.k = l.k AND x.name = 'n1'",
			minRows:    rows, minPadded: rows / 10, padded: func(f []string) bool { return f[1] == "-1" || f[2] == "-1" }, retracting: true,
		},
	} {
		t.Run(qy.name, func(t *testing.T) {
			exec("CREATE TABLE out_" + qy.name + " " + qy.ddl)
			script := fmt.Sprintf(`SET 'pipeline.name' = 'outer-%[1]s';
SET 'execution.checkpointing.interval' = '100 ms';
SET 'restart-strategy.type' = 'none';
SET 'state.checkpoints.dir' = '%[2]s';
SET 'table.exec.state.ttl' = '1 h';
CREATE TABLE lft (seq INT, k BIGINT, tag STRING, amount INT)
WITH ('connector' = 'kafka', 'topic' = 'lft', 'properties.bootstrap.servers' = '%[3]s', 'properties.group.id' = 'outer-%[1]s',
      'scan.startup.mode' = 'earliest-offset', 'format' = 'json');
CREATE TABLE rgt (seq INT, k INT, tag STRING, bonus INT, name STRING)
WITH ('connector' = 'kafka', 'topic' = 'rgt', 'properties.bootstrap.servers' = '%[3]s', 'properties.group.id' = 'outer-%[1]s',
      'scan.startup.mode' = 'earliest-offset', 'format' = 'json');
CREATE TABLE dim (k BIGINT, label STRING, w INT, PRIMARY KEY (k) NOT ENFORCED)
WITH ('connector' = 'upsert-kafka', 'topic' = 'dim', 'properties.bootstrap.servers' = '%[3]s', 'properties.group.id' = 'outer-%[1]s',
      'key.format' = 'raw', 'value.format' = 'json');
CREATE TABLE out_%[1]s %[4]s
WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://%[5]s', 'table-name' = 'out_%[1]s', 'username' = '%[6]s');
INSERT INTO out_%[1]s
SELECT %[7]s
%[8]s;
`, qy.name, filepath.Join(dir, "state-"+qy.name), addr, qy.sinkSQL, u[strings.Index(u, "@")+1:], u[:strings.Index(u, "@")], qy.selectList, qy.from)
			file := filepath.Join(dir, qy.name+".sql")
			if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := osexec.Command(binary(t), "validate", file).CombinedOutput()
			wantJoin := strings.Replace(qy.name, "agg", "left", 1) + " join on record.key = record.key"
			if err != nil || !strings.Contains(string(out), wantJoin) && !qy.retracting || qy.retracting && !strings.Contains(string(out), ", taking retractions") {
				t.Fatalf("validate: %v\n%s", err, out)
			}
			lw := &logWriter{t: t, name: qy.name}
			r := &jobRunner{t: t, bin: binary(t), file: file, log: lw}
			r.crashAtCommitEdges()
			r.killAtRandom(rng, kills, 200, 600)
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			bounded := strings.ReplaceAll(string(b), "'format' = 'json');", "'format' = 'json', 'scan.bounded.mode' = 'latest-offset');")
			bounded = strings.ReplaceAll(bounded, "'value.format' = 'json');", "'value.format' = 'json', 'scan.bounded.mode' = 'latest-offset');")
			if strings.Count(bounded, "scan.bounded.mode") != 3 {
				t.Fatalf("the script's three tables were not made bounded:\n%s", bounded)
			}
			if err := os.WriteFile(file, []byte(bounded), 0o644); err != nil {
				t.Fatal(err)
			}
			r.runToEnd()

			orderBy := " ORDER BY 1, 2"
			if qy.name == "agg" || qy.name == "aggs" || qy.name == "left_agg" || qy.name == "left_upsert" {
				orderBy = " ORDER BY 1"
			}
			if qy.name == "chain" {
				orderBy = " ORDER BY 1, 2, 3"
			}
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
			padded := 0 // rows of one side without a partner (agg: keys without one)
			for _, row := range w {
				f := strings.Split(row, "|")
				if qy.padded != nil && qy.padded(f) || qy.padded == nil && (f[0] == "-1" || f[1] == "-1") {
					padded++
				}
			}
			if padded < qy.minPadded {
				t.Fatalf("the batch join has %d padded rows: too few to prove anything (want at least %d)", padded, qy.minPadded)
			}
			if got != want {
				t.Fatalf("the streaming join (%d rows) differs from PostgreSQL's (%d rows):\n%s\n%s", len(g), len(w), rowDiff(g, w), lw)
			}
			t.Logf("%s: %d rows, %d of them padded, equal to PostgreSQL's", qy.name, len(g), padded)
		})
	}
}
