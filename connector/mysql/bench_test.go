package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/connector/mysql"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
	"github.com/onceflow/onceflow/internal/dbtest"
)

// TestBenchRatios measures, in one run on one server, each delivery of the
// sink against a hand-written go-sql-driver loop doing the same writes
// (multi-row INSERTs of 1000 rows, one transaction per second), appended
// and upserted by key. Set ONCEFLOW_DBBENCH=1 to run it;
// ONCEFLOW_DBBENCH_ROWS sets the rows (default 500k).
func TestBenchRatios(t *testing.T) {
	if os.Getenv("ONCEFLOW_DBBENCH") != "1" {
		t.Skip("set ONCEFLOW_DBBENCH=1 to run the sink benchmark")
	}
	rows := 500_000
	if n, err := strconv.Atoi(os.Getenv("ONCEFLOW_DBBENCH_ROWS")); err == nil {
		rows = n
	}
	const keys = 10_000
	dsn, srv := dbtest.MariaDB(t)
	db := dsn[strings.LastIndex(dsn, "/")+1:]
	ctx := context.Background()
	recs := make([]dbtest.Count, rows)
	for i := range recs {
		recs[i] = dbtest.Count{Key: "k" + strconv.Itoa(i%keys), N: int64(i)}
	}
	var names []string
	var took []time.Duration
	run := func(name string, f func()) {
		for _, q := range []string{"DROP TABLE IF EXISTS append, upsert, fenced, onceflow_progress"} {
			if err := srv.Exec(ctx, db, q); err != nil {
				t.Fatal(err)
			}
		}
		createTables(t, srv, db)
		start := time.Now()
		f()
		names, took = append(names, name), append(took, time.Since(start))
	}
	loop := func(upsert bool) func() {
		return func() {
			conn, err := sql.Open("mysql", dsn+"?interpolateParams=true")
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			tx, err := conn.Begin()
			if err != nil {
				t.Fatal(err)
			}
			last := time.Now()
			for i := 0; i < len(recs); i += 1000 {
				batch := recs[i:min(i+1000, len(recs))]
				table := "append"
				if upsert {
					table = "upsert"
				}
				q := "INSERT INTO " + table + " (k, n) VALUES " + strings.TrimSuffix(strings.Repeat("(?, ?), ", len(batch)), ", ")
				if upsert {
					q += " ON DUPLICATE KEY UPDATE n = VALUES(n)"
				}
				args := make([]any, 0, 2*len(batch))
				for _, r := range batch {
					args = append(args, r.Key, r.N)
				}
				if _, err := tx.Exec(q, args...); err != nil {
					t.Fatal(err)
				}
				if time.Since(last) >= time.Second {
					if err := tx.Commit(); err != nil {
						t.Fatal(err)
					}
					if tx, err = conn.Begin(); err != nil {
						t.Fatal(err)
					}
					last = time.Now()
				}
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}
	job := func(mode string) func() {
		return func() {
			cfg := sinkConfig(dsn, mode)
			cfg.BatchRows = 1000
			sink, err := mysql.NewSink(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer sink.Close()
			env := flow.New(flow.JobName("bench-"+mode), flow.Checkpointing(time.Second), flow.StateDir(t.TempDir()),
				flow.Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			flow.To(flow.From(env, flowtest.NewSource([][]dbtest.Count{recs}, flowtest.PerPoll(1000))), sink)
			if err := env.Run(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	run("hand-written loop, append", loop(false))
	run("onceflow exactly-once, append", job("append"))
	run("hand-written loop, upsert", loop(true))
	run("onceflow exactly-once, upsert", job("upsert"))
	run("onceflow at-least-once, fenced upsert", job("fenced"))
	if got, _ := srv.Client(db, "SELECT COUNT(*) FROM fenced"); got != strconv.Itoa(keys) {
		t.Errorf("fenced holds %s keys, want %d", got, keys)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n%d rows, %d keys for upserts\n%-40s %12s %10s\n", rows, keys, "run", "rows/s", "ratio")
	for i, d := range took {
		base := took[0]
		if i >= 2 {
			base = took[2]
		}
		fmt.Fprintf(&sb, "%-40s %12.0f %9.2fx\n", names[i], float64(rows)/d.Seconds(), base.Seconds()/d.Seconds())
	}
	t.Log(sb.String())
}
