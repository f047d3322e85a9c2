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

// TestSQLIntervalJoinDifferentialPostgres: interval and window joins of two Kafka
// tables, each with its own WATERMARK (so its own event time), over
// bounded random input: many rows per key, NULL keys and NULL times on
// both sides, event times out of order by up to 1 s (within the 2 s the
// watermarks allow, so no row is late and the batch result is exact) —
// "between": `l.ts BETWEEN r.ts - INTERVAL '2' SECOND AND r.ts + INTERVAL
// '1' SECOND`; "strict": the comparison pair, strict, written with the
// right table first; "window": TUMBLE windows of 2 s joined on
// window_start, window_end and the key (PostgreSQL: equal date_bin);
// "hop" and "cumulate": HOP windows of 2 s every 1 s and CUMULATE windows
// of 2 s by 1 s (PostgreSQL: each left row's windows expanded with
// generate_series, a pair once per window holding both) — each job crashed by failpoints at both edges of
// its first commit and SIGKILLed at random moments, then run to the end
// of its input: the rows it appended to a PostgreSQL table (no primary
// key, so a pair written twice would show) equal, as a multiset,
// PostgreSQL's batch join with the same predicate over the same rows
// (docs/design.md, "SQL").
func TestSQLIntervalJoinDifferentialPostgres(t *testing.T) {
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
	createTopic(t, addr, "ilft", 3)
	createTopic(t, addr, "irgt", 2)

	nullable := func(v any, pct int) any { return nullablePct(rng, v, pct) }
	keys := rows / 30
	base := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	// A row's time: 10 ms apart in order of production, less up to 1 s,
	// so within each partition no row is more than 1 s older than one
	// before it: the watermarks (2 s behind) never pass a row not read.
	at := func(i int) any {
		return nullable(base.Add(time.Duration(i*10-rng.IntN(1000))*time.Millisecond).Format("2006-01-02 15:04:05.000"), 3)
	}
	var recs []*kgo.Record
	var lvals, rvals []string
	for i := 0; i < rows; i++ {
		k, ts, amount := nullable(rng.IntN(keys), 8), at(i), rng.IntN(100)
		v, _ := json.Marshal(map[string]any{"seq": i, "k": k, "ts": ts, "amount": amount})
		recs = append(recs, &kgo.Record{Topic: "ilft", Key: fmt.Appendf(nil, "l%d", i), Value: v})
		lvals = append(lvals, fmt.Sprintf("(%d, %s, %s, %d)", i, sqlLiteral(k), sqlLiteral(ts), amount))

		k, ts = nullable(rng.IntN(keys), 8), at(i)
		name := fmt.Sprintf("n%d", rng.IntN(10))
		v, _ = json.Marshal(map[string]any{"seq": i, "k": k, "ts": ts, "name": name})
		recs = append(recs, &kgo.Record{Topic: "irgt", Value: v}) // no record key: the join keys by its columns
		rvals = append(rvals, fmt.Sprintf("(%d, %s, %s, '%s')", i, sqlLiteral(k), sqlLiteral(ts), name))
	}
	cl := client(t, addr)
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	exec("CREATE TABLE ilft (seq int, k bigint, ts timestamp(3), amount int)")
	exec("INSERT INTO ilft VALUES " + strings.Join(lvals, ", "))
	exec("CREATE TABLE irgt (seq int, k int, ts timestamp(3), name text)")
	exec("INSERT INTO irgt VALUES " + strings.Join(rvals, ", "))

	u := strings.TrimPrefix(dsn, "postgres://")
	for _, qy := range []struct {
		name, lts, from, pgLts, pgOn, step string
		// pgWin, when set, expands each left row into its windows (w)
		// before the join.
		pgWin string
	}{
		{
			name: "between", lts: "l.ts",
			from:  "ilft l JOIN irgt r ON l.k = r.k AND l.ts BETWEEN r.ts - INTERVAL '2' SECOND AND r.ts + INTERVAL '1' SECOND",
			pgLts: "l.ts", pgOn: "l.ts BETWEEN r.ts - interval '2 seconds' AND r.ts + interval '1 second'",
			step: "interval join on record.key = record.key, left time - right time within [-2s, 1s]",
		},
		{
			name: "strict", lts: "l.ts",
			from:  "ilft l JOIN irgt r ON l.k = r.k AND r.ts - INTERVAL '1' SECOND < l.ts AND r.ts > l.ts",
			pgLts: "l.ts", pgOn: "r.ts - interval '1 second' < l.ts AND r.ts > l.ts",
			step: "interval join on record.key = record.key, left time - right time within [-999ms, -1ms]",
		},
		{
			// A window join: the pairs of a 2 s window, written when it
			// closes; lts is the window's start.
			name: "window", lts: "l.window_start",
			from: "TABLE(TUMBLE(TABLE ilft, DESCRIPTOR(ts), INTERVAL '2' SECOND)) l JOIN TABLE(TUMBLE(TABLE irgt, DESCRIPTOR(ts), INTERVAL '2' SECOND)) r " +
				"ON l.window_start = r.window_start AND l.window_end = r.window_end AND l.k = r.k",
			pgLts: "date_bin('2 seconds', l.ts, timestamp '1970-01-01')",
			pgOn:  "date_bin('2 seconds', l.ts, timestamp '1970-01-01') = date_bin('2 seconds', r.ts, timestamp '1970-01-01')",
			step:  "window join on record.key = record.key in tumbling windows of 2s",
		},
		{
			// HOP windows of 2 s every 1 s: a pair once per window
			// holding both; each left row's two windows expanded by
			// generate_series.
			name: "hop", lts: "l.window_start",
			from: "TABLE(HOP(TABLE ilft, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '2' SECOND)) l JOIN TABLE(HOP(TABLE irgt, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '2' SECOND)) r " +
				"ON l.window_start = r.window_start AND l.window_end = r.window_end AND l.k = r.k",
			pgWin: " CROSS JOIN LATERAL generate_series(date_bin('1 second', l.ts, timestamp '1970-01-01') - interval '1 second', date_bin('1 second', l.ts, timestamp '1970-01-01'), interval '1 second') AS w(ws)",
			pgLts: "w.ws",
			pgOn:  "r.ts >= w.ws AND r.ts < w.ws + interval '2 seconds'",
			step:  "window join on record.key = record.key in sliding windows of 2s every 1s",
		},
		{
			// CUMULATE windows of 2 s by 1 s: [s, s+1s) and [s, s+2s)
			// for s a multiple of 2 s; lts is the window's end, which
			// tells the two apart.
			name: "cumulate", lts: "l.window_end",
			from: "TABLE(CUMULATE(TABLE ilft, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '2' SECOND)) l JOIN TABLE(CUMULATE(TABLE irgt, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '2' SECOND)) r " +
				"ON l.window_start = r.window_start AND l.window_end = r.window_end AND l.k = r.k",
			pgWin: " CROSS JOIN LATERAL generate_series(date_bin('1 second', l.ts, timestamp '1970-01-01') + interval '1 second', date_bin('2 seconds', l.ts, timestamp '1970-01-01') + interval '2 seconds', interval '1 second') AS w(we)",
			pgLts: "w.we",
			pgOn:  "r.ts >= date_bin('2 seconds', l.ts, timestamp '1970-01-01') AND r.ts < w.we",
			step:  "window join on record.key = record.key in cumulate windows of 2s by 1s",
		},
	} {
		t.Run(qy.name, func(t *testing.T) {
			exec("CREATE TABLE iout_" + qy.name + " (lseq int, rseq int, k bigint, lts timestamp(3), name text, amount int)")
			script := fmt.Sprintf(`SET 'pipeline.name' = 'idiff-%[1]s';
SET 'execution.checkpointing.interval' = '100 ms';
SET 'restart-strategy.type' = 'none';
SET 'state.checkpoints.dir' = '%[2]s';
CREATE TABLE ilft (seq INT, k BIGINT, ts TIMESTAMP(3), amount INT, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
WITH ('connector' = 'kafka', 'topic' = 'ilft', 'properties.bootstrap.servers' = '%[3]s', 'properties.group.id' = 'idiff-%[1]s',
      'scan.startup.mode' = 'earliest-offset', 'format' = 'json');
CREATE TABLE irgt (seq INT, k INT, ts TIMESTAMP(3), name STRING, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
WITH ('connector' = 'kafka', 'topic' = 'irgt', 'properties.bootstrap.servers' = '%[3]s', 'properties.group.id' = 'idiff-%[1]s',
      'scan.startup.mode' = 'earliest-offset', 'format' = 'json');
CREATE TABLE iout_%[1]s (lseq INT, rseq INT, k BIGINT, lts TIMESTAMP(3), name STRING, amount INT)
WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://%[4]s', 'table-name' = 'iout_%[1]s', 'username' = '%[5]s');
INSERT INTO iout_%[1]s
SELECT l.seq, r.seq, l.k, %[6]s, r.name, l.amount
FROM %[7]s
WHERE r.name <> 'n3';
`, qy.name, filepath.Join(dir, "state-"+qy.name), addr, u[strings.Index(u, "@")+1:], u[:strings.Index(u, "@")], qy.lts, qy.from)
			file := filepath.Join(dir, qy.name+".sql")
			if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
				t.Fatal(err)
			}
			// The compiled job is an interval or window join, its state
			// freed by the watermark, each table's event time on its own
			// source.
			out, err := osexec.Command(binary(t), "validate", file).CombinedOutput()
			for _, want := range []string{qy.step, "freed by watermark", "ilft's event time: to_timestamp(value.ts), watermarks 2s", "irgt's event time: to_timestamp(value.ts), watermarks 2s"} {
				if err != nil || !strings.Contains(string(out), want) {
					t.Fatalf("validate: %v, want %q in\n%s", err, want, out)
				}
			}
			lw := &logWriter{t: t, name: qy.name}
			r := &jobRunner{t: t, bin: binary(t), file: file, log: lw}
			r.crashAtCommitEdges()
			r.killAtRandom(rng, kills, 200, 600)
			// The last run reads both tables to their end and ends.
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			bounded := strings.ReplaceAll(string(b), "'format' = 'json');", "'format' = 'json', 'scan.bounded.mode' = 'latest-offset');")
			if strings.Count(bounded, "scan.bounded.mode") != 2 {
				t.Fatalf("the script's two tables were not made bounded:\n%s", bounded)
			}
			if err := os.WriteFile(file, []byte(bounded), 0o644); err != nil {
				t.Fatal(err)
			}
			r.runToEnd()

			cols := "lseq, rseq, k, to_char(lts, 'YYYY-MM-DD HH24:MI:SS.MS'), name, amount"
			const orderBy = " ORDER BY 1, 2, 4" // a pair is in several HOP and CUMULATE windows
			got, err := srv.Psql(db, "SELECT "+cols+" FROM iout_"+qy.name+orderBy)
			if err != nil {
				t.Fatal(err)
			}
			want, err := srv.Psql(db, "SELECT "+cols+" FROM (SELECT l.seq AS lseq, r.seq AS rseq, l.k, "+qy.pgLts+" AS lts, r.name, l.amount FROM ilft l"+qy.pgWin+" JOIN irgt r ON l.k = r.k AND "+qy.pgOn+" WHERE r.name <> 'n3') x"+orderBy)
			if err != nil {
				t.Fatal(err)
			}
			g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
			if len(w) < rows/2 {
				t.Fatalf("the batch join has %d rows: too few to prove anything (want at least %d)", len(w), rows/2)
			}
			if got != want {
				t.Fatalf("the streaming interval join (%d rows) differs from PostgreSQL's (%d rows):\n%s\n%s", len(g), len(w), rowDiff(g, w), lw)
			}
			t.Logf("%s: %d rows, equal to PostgreSQL's as a multiset", qy.name, len(g))
		})
	}
}
