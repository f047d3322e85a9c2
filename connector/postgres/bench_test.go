package postgres_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onceflow/onceflow/connector/postgres"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
	"github.com/onceflow/onceflow/internal/dbtest"
)

// TestBenchRatios measures, in one run on one server, each delivery of the
// sink against a hand-written pgx loop doing the same writes (batches of
// 1000 rows, one transaction per second): append (COPY) and upsert by key
// (multi-row INSERT … ON CONFLICT). Set ONCEFLOW_DBBENCH=1 to run it;
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
	dsn, srv := dbtest.Postgres(t)
	db := dbName(dsn)
	ctx := context.Background()
	reset := func() {
		for _, q := range []string{"DROP TABLE IF EXISTS events, counts, fenced, onceflow_progress",
			"CREATE TABLE events (key text NOT NULL, n bigint NOT NULL)",
			"CREATE TABLE counts (key text PRIMARY KEY, n bigint NOT NULL)",
			"CREATE TABLE fenced (key text PRIMARY KEY, n bigint NOT NULL, onceflow_epoch bigint NOT NULL DEFAULT 0)"} {
			if err := srv.Exec(ctx, db, q); err != nil {
				t.Fatal(err)
			}
		}
	}
	recs := make([]count, rows)
	for i := range recs {
		recs[i] = count{Key: "k" + strconv.Itoa(i%keys), N: int64(i)}
	}
	type result struct {
		name string
		d    time.Duration
	}
	var results []result
	run := func(name string, f func()) {
		reset()
		start := time.Now()
		f()
		results = append(results, result{name, time.Since(start)})
		t.Logf("%s: %v", name, time.Since(start).Round(time.Millisecond))
	}
	loop := func(upsert bool) func() {
		return func() {
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			last := time.Now()
			for i := 0; i < len(recs); i += 1000 {
				batch := recs[i:min(i+1000, len(recs))]
				if upsert {
					var sb strings.Builder
					sb.WriteString("INSERT INTO counts AS t (key, n) VALUES ")
					args := make([]any, 0, 2*len(batch))
					last := map[string]int{}
					for j, r := range batch {
						last[r.Key] = j
					}
					for j, r := range batch {
						if last[r.Key] != j {
							continue
						}
						if len(args) > 0 {
							sb.WriteString(", ")
						}
						fmt.Fprintf(&sb, "($%d, $%d)", len(args)+1, len(args)+2)
						args = append(args, r.Key, r.N)
					}
					sb.WriteString(" ON CONFLICT (key) DO UPDATE SET n = EXCLUDED.n")
					_, err = tx.Exec(ctx, sb.String(), args...)
				} else {
					_, err = tx.CopyFrom(ctx, pgx.Identifier{"events"}, []string{"key", "n"}, pgx.CopyFromSlice(len(batch), func(j int) ([]any, error) {
						return []any{batch[j].Key, batch[j].N}, nil
					}))
				}
				if err != nil {
					t.Fatal(err)
				}
				if time.Since(last) >= time.Second {
					if err := tx.Commit(ctx); err != nil {
						t.Fatal(err)
					}
					if tx, err = conn.Begin(ctx); err != nil {
						t.Fatal(err)
					}
					last = time.Now()
				}
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	job := func(mode crashMode) func() {
		return func() {
			cfg := sinkConfig(dsn, mode)
			cfg.BatchRows = 1000
			sink, err := postgres.NewSink(cfg)
			if err != nil {
				t.Fatal(err)
			}
			env := flow.New(flow.JobName("bench-"+string(mode)), flow.Checkpointing(time.Second), flow.StateDir(t.TempDir()),
				flow.Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			flow.To(flow.From(env, flowtest.NewSource([][]count{recs}, flowtest.PerPoll(1000))), sink)
			if err := env.Run(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	run("hand-written pgx loop, COPY", loop(false))
	run("onceflow exactly-once, append (COPY)", job(modeAppend))
	run("hand-written pgx loop, upsert", loop(true))
	run("onceflow exactly-once, upsert", job(modeUpsert))
	run("onceflow at-least-once, fenced upsert", job(modeFenced))
	if got, _ := srv.Psql(db, "SELECT count(*) FROM fenced"); got != strconv.Itoa(keys) {
		t.Errorf("fenced holds %s keys, want %d", got, keys)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n%d rows, %d keys for upserts\n%-40s %12s %10s\n", rows, keys, "run", "rows/s", "ratio")
	for i, r := range results {
		base := results[0].d
		if i >= 2 {
			base = results[2].d
		}
		fmt.Fprintf(&sb, "%-40s %12.0f %9.2fx\n", r.name, float64(rows)/r.d.Seconds(), base.Seconds()/r.d.Seconds())
	}
	t.Log(sb.String())
}
