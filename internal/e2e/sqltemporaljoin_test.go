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
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestSQLTemporalJoinDifferentialPostgres: event-time temporal joins of
// an orders table (its own WATERMARK, rows out of order by up to 1 s
// within a 2 s delay, NULL keys, NULL times, rows before any version of
// their key and at exactly a version's time) with a versioned
// upsert-kafka rates table (upserts and tombstones keyed by k, dated by
// their record timestamps) — "inner": `JOIN rates FOR SYSTEM_TIME AS OF
// o.ts` with a WHERE on the orders; "left": a LEFT JOIN with a condition
// of the versioned side in ON (a version that fails it counts as none);
// "debezium": the same LEFT JOIN against the same versions written as
// Debezium change events (c, u with its before row, d and its tombstone)
// of a debezium-json table — each crashed at both edges of its first commit and SIGKILLed at
// random moments, then run to the end of its input: the rows appended to
// a PostgreSQL table (no primary key, so a row written twice would show)
// equal, as a multiset, PostgreSQL's batch query of the same semantics: a
// LATERAL subquery picking each order's newest version at or before its
// time from a table of every version (its time, and whether it deleted)
// (docs/design.md, "SQL").
func TestSQLTemporalJoinDifferentialPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end crash test skipped in -short mode")
	}
	rows, kills := 1500, 3 // orders
	if os.Getenv("ONCEFLOW_LONG") != "" {
		rows, kills = 10000, 10
	}
	rng := seed(t)
	dsn, srv, db, exec := diffDatabase(t)
	dir := t.TempDir()
	addr := startBroker(t, filepath.Join(dir, "broker"))
	createTopic(t, addr, "torders", 3)
	createTopic(t, addr, "trates", 2)
	createTopic(t, addr, "tcdc", 2)

	keys := rows / 30
	base := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	const layout = "2006-01-02 15:04:05.000"
	var recs []*kgo.Record
	var ovals, vvals []string
	exists := map[int]bool{}
	// The same versions as Debezium change events: c, u (with the row
	// before), d, and the tombstone Debezium writes after a delete.
	last := map[int]json.RawMessage{}
	cdc := func(k int, vt time.Time, op string, after json.RawMessage) {
		ev := map[string]any{"op": op, "before": last[k], "after": after}
		v, _ := json.Marshal(ev)
		key := fmt.Appendf(nil, `{"k":%d}`, k)
		recs = append(recs, &kgo.Record{Topic: "tcdc", Key: key, Value: v, Timestamp: vt})
		if op == "d" {
			recs = append(recs, &kgo.Record{Topic: "tcdc", Key: key, Timestamp: vt})
			delete(last, k)
		} else {
			last[k] = after
		}
	}
	for i := 0; i < rows; i++ {
		// A version every other order or so, of a random key, dated by
		// its record timestamp: in order of production, 10 ms a step,
		// so each key's versions come in time order.
		if rng.IntN(2) == 0 {
			k, vt := rng.IntN(keys), base.Add(time.Duration(i*10)*time.Millisecond)
			if exists[k] && rng.IntN(5) == 0 {
				delete(exists, k)
				recs = append(recs, &kgo.Record{Topic: "trates", Key: fmt.Appendf(nil, "%d", k), Timestamp: vt}) // a tombstone
				cdc(k, vt, "d", nil)
				vvals = append(vvals, fmt.Sprintf("(%d, %d, '%s', true, NULL, NULL)", i, k, vt.Format(layout)))
			} else {
				exists[k] = true
				rate, name := rng.IntN(50), fmt.Sprintf("n%d", rng.IntN(6))
				v, _ := json.Marshal(map[string]any{"k": k, "rate": rate, "name": name})
				recs = append(recs, &kgo.Record{Topic: "trates", Key: fmt.Appendf(nil, "%d", k), Value: v, Timestamp: vt})
				op := "c"
				if last[k] != nil {
					op = "u"
				}
				cdc(k, vt, op, v)
				vvals = append(vvals, fmt.Sprintf("(%d, %d, '%s', false, %d, '%s')", i, k, vt.Format(layout), rate, name))
			}
		}
		// An order: 10 ms a step less up to 1 s, in whole steps, so that
		// many fall on a version's exact time.
		k := nullablePct(rng, rng.IntN(keys), 6)
		ts := nullablePct(rng, base.Add(time.Duration(i*10-10*rng.IntN(100))*time.Millisecond).Format(layout), 2)
		amount := rng.IntN(100)
		v, _ := json.Marshal(map[string]any{"seq": i, "k": k, "ts": ts, "amount": amount})
		recs = append(recs, &kgo.Record{Topic: "torders", Key: fmt.Appendf(nil, "o%d", i), Value: v, Timestamp: base.Add(time.Duration(i*10) * time.Millisecond)})
		ovals = append(ovals, fmt.Sprintf("(%d, %s, %s, %d)", i, sqlLiteral(k), sqlLiteral(ts), amount))
	}
	cl := client(t, addr)
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	exec("CREATE TABLE torders (seq int, k bigint, ts timestamp(3), amount int)")
	exec("INSERT INTO torders VALUES " + strings.Join(ovals, ", "))
	exec("CREATE TABLE tversions (seq int, k bigint, vt timestamp(3), deleted bool, rate int, name text)")
	exec("INSERT INTO tversions VALUES " + strings.Join(vvals, ", "))
	// Each order's version: the newest at or before its time (of one
	// time, the last produced).
	const version = "LATERAL (SELECT * FROM tversions v WHERE v.k = o.k AND v.vt <= o.ts ORDER BY v.vt DESC, v.seq DESC LIMIT 1) r"

	u := strings.TrimPrefix(dsn, "postgres://")
	for _, qy := range []struct{ name, join, where, pgFrom string }{
		{
			// The same LEFT JOIN against the debezium-json table.
			name: "debezium", join: "LEFT JOIN tcdc FOR SYSTEM_TIME AS OF o.ts AS r ON o.k = r.k AND r.name <> 'n3'",
			pgFrom: "torders o LEFT JOIN " + version + " ON NOT r.deleted AND r.name <> 'n3' WHERE o.ts IS NOT NULL",
		},
		{
			name: "inner", join: "JOIN trates FOR SYSTEM_TIME AS OF o.ts AS r ON o.k = r.k", where: "WHERE o.amount > 10",
			pgFrom: "torders o JOIN " + version + " ON NOT r.deleted WHERE o.amount > 10",
		},
		{
			name: "left", join: "LEFT JOIN trates FOR SYSTEM_TIME AS OF o.ts AS r ON o.k = r.k AND r.name <> 'n3'",
			pgFrom: "torders o LEFT JOIN " + version + " ON NOT r.deleted AND r.name <> 'n3' WHERE o.ts IS NOT NULL",
		},
	} {
		t.Run(qy.name, func(t *testing.T) {
			exec("CREATE TABLE tout_" + qy.name + " (seq int, k bigint, ts timestamp(3), rate int, name text, amount int)")
			script := fmt.Sprintf(`SET 'pipeline.name' = 'tdiff-%[1]s';
SET 'execution.checkpointing.interval' = '100 ms';
SET 'restart-strategy.type' = 'none';
SET 'state.checkpoints.dir' = '%[2]s';
CREATE TABLE torders (seq INT, k BIGINT, ts TIMESTAMP(3), amount INT, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
WITH ('connector' = 'kafka', 'topic' = 'torders', 'properties.bootstrap.servers' = '%[3]s', 'properties.group.id' = 'tdiff-%[1]s',
      'scan.startup.mode' = 'earliest-offset', 'format' = 'json');
CREATE TABLE trates (k BIGINT, rate INT, name STRING, vt TIMESTAMP_LTZ(3) METADATA FROM 'timestamp',
      WATERMARK FOR vt AS vt - INTERVAL '1' SECOND, PRIMARY KEY (k) NOT ENFORCED)
WITH ('connector' = 'upsert-kafka', 'topic' = 'trates', 'properties.bootstrap.servers' = '%[3]s', 'properties.group.id' = 'tdiff-%[1]s',
      'scan.startup.mode' = 'earliest-offset', 'key.format' = 'raw', 'value.format' = 'json');
CREATE TABLE tcdc (k BIGINT, rate INT, name STRING, vt TIMESTAMP_LTZ(3) METADATA FROM 'timestamp',
      WATERMARK FOR vt AS vt - INTERVAL '1' SECOND, PRIMARY KEY (k) NOT ENFORCED)
WITH ('connector' = 'kafka', 'topic' = 'tcdc', 'properties.bootstrap.servers' = '%[3]s', 'properties.group.id' = 'tdiff-%[1]s',
      'scan.startup.mode' = 'earliest-offset', 'format' = 'debezium-json');
CREATE TABLE tout_%[1]s (seq INT, k BIGINT, ts TIMESTAMP(3), rate INT, name STRING, amount INT)
WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://%[4]s', 'table-name' = 'tout_%[1]s', 'username' = '%[5]s');
INSERT INTO tout_%[1]s
SELECT o.seq, o.k, o.ts, r.rate, r.name, o.amount
FROM torders o %[6]s
%[7]s;
`, qy.name, filepath.Join(dir, "state-"+qy.name), addr, u[strings.Index(u, "@")+1:], u[:strings.Index(u, "@")], qy.join, qy.where)
			file := filepath.Join(dir, qy.name+".sql")
			if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := osexec.Command(binary(t), "validate", file).CombinedOutput()
			for _, want := range []string{"temporal join (" + map[string]string{"inner": "inner", "left": "left", "debezium": "left"}[qy.name] + ")", "freed by watermark", "torders's event time: to_timestamp(value.ts), watermarks 2s", map[bool]string{true: "tcdc", false: "trates"}[qy.name == "debezium"] + "'s event time: timestamp, watermarks 1s"} {
				if err != nil || !strings.Contains(string(out), want) {
					t.Fatalf("validate: %v, want %q in\n%s", err, want, out)
				}
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
			bounded = strings.ReplaceAll(bounded, "'format' = 'debezium-json');", "'format' = 'debezium-json', 'scan.bounded.mode' = 'latest-offset');")
			if strings.Count(bounded, "scan.bounded.mode") != 3 {
				t.Fatalf("the script's three source tables were not made bounded:\n%s", bounded)
			}
			if err := os.WriteFile(file, []byte(bounded), 0o644); err != nil {
				t.Fatal(err)
			}
			r.runToEnd()

			cols := "seq, k, to_char(ts, 'YYYY-MM-DD HH24:MI:SS.MS'), rate, name, amount"
			const orderBy = " ORDER BY 1"
			got, err := srv.Psql(db, "SELECT "+cols+" FROM tout_"+qy.name+orderBy)
			if err != nil {
				t.Fatal(err)
			}
			want, err := srv.Psql(db, "SELECT "+cols+" FROM (SELECT o.seq, o.k, o.ts, r.rate, r.name, o.amount FROM "+qy.pgFrom+") x"+orderBy)
			if err != nil {
				t.Fatal(err)
			}
			g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
			if len(w) < rows/2 {
				t.Fatalf("the batch join has %d rows: too few to prove anything (want at least %d)", len(w), rows/2)
			}
			// The cases the test is about, counted in the batch result.
			var stats []string
			for _, c := range []struct{ what, q string }{
				{"padded", "SELECT count(*) FROM (SELECT r.seq FROM " + qy.pgFrom + ") x WHERE seq IS NULL"},
				{"at a version's exact time", "SELECT count(*) FROM (SELECT o.ts, r.vt FROM " + qy.pgFrom + ") x WHERE ts = vt"},
				{"before any version of the key", "SELECT count(*) FROM torders o WHERE NOT EXISTS (SELECT 1 FROM tversions v WHERE v.k = o.k AND v.vt <= o.ts) AND o.k IS NOT NULL AND o.ts IS NOT NULL"},
				{"after a deletion", "SELECT count(*) FROM torders o, " + version + " WHERE r.deleted"},
			} {
				n, err := srv.Psql(db, c.q)
				if err != nil {
					t.Fatal(err)
				}
				if strings.TrimSpace(n) == "0" && (c.what != "padded" || qy.name != "inner") {
					t.Fatalf("no order %s: the input proves too little", c.what)
				}
				stats = append(stats, c.what+" "+strings.TrimSpace(n))
			}
			if got != want {
				t.Fatalf("the streaming temporal join (%d rows) differs from PostgreSQL's (%d rows):\n%s\n%s", len(g), len(w), rowDiff(g, w), lw)
			}
			t.Logf("%s: %d rows, equal to PostgreSQL's as a multiset (%s)", qy.name, len(g), strings.Join(stats, ", "))
		})
	}
}
