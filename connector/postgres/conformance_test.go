package postgres_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/connector/postgres"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/dbtest"
	"github.com/onceflow/onceflow/internal/sinktest"
)

// conformance is the sink conformance suite's harness of the PostgreSQL
// sink: table conform, one row per key, read with psql.
func conformance() sinktest.Harness {
	// By DSN, for the readers; a sync.Map: the crash subtests run in
	// parallel.
	var servers sync.Map
	psql := func(t *testing.T, dsn, sql string) string {
		t.Helper()
		srv, _ := servers.Load(dsn)
		out, err := srv.(*dbtest.PostgresServer).Psql(dbName(dsn), sql)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	return sinktest.Harness{
		Spec: postgres.Spec,
		Server: func(t *testing.T, twoPhase bool) string {
			var opts dbtest.PostgresOptions
			if twoPhase {
				opts.MaxPreparedTransactions = 64
			}
			dsn, srv := dbtest.Postgres(t, opts)
			if err := srv.Exec(context.Background(), dbName(dsn), "CREATE TABLE conform (key text PRIMARY KEY, n bigint NOT NULL, onceflow_epoch bigint NOT NULL DEFAULT 0)"); err != nil {
				t.Fatal(err)
			}
			servers.Store(dsn, srv)
			return dsn
		},
		NewSink: func(dsn string, c sinktest.Config) (flow.Sink[count], error) {
			return postgres.NewSink(conformanceConfig(dsn, c))
		},
		Rows: func(t *testing.T, dsn string) []sinktest.Row {
			var rows []sinktest.Row
			for _, line := range strings.Split(psql(t, dsn, "SELECT key, n FROM conform"), "\n") {
				if k, v, ok := strings.Cut(line, "|"); ok {
					rows = append(rows, sinktest.Row{Key: k, Value: v})
				}
			}
			return rows
		},
		// dsn's database only: the suite's crash subtests run in parallel.
		Isolated: true,
		Leftovers: func(t *testing.T, dsn, _, _ string) string {
			var left []string
			if n := psql(t, dsn, "SELECT count(*) FROM pg_prepared_xacts WHERE database = current_database()"); n != "0" {
				left = append(left, n+" prepared transactions: "+psql(t, dsn, "SELECT string_agg(gid, ', ') FROM pg_prepared_xacts WHERE database = current_database()"))
			}
			if n := psql(t, dsn, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'onceflow%' AND state LIKE 'idle in transaction%'"); n != "0" {
				left = append(left, n+" open transactions")
			}
			return strings.Join(left, "; ")
		},
		Prepared: func(t *testing.T, dsn, _, _ string) int {
			n, _ := strconv.Atoi(psql(t, dsn, "SELECT count(*) FROM pg_prepared_xacts WHERE database = current_database()"))
			return n
		},
		DeadLetters: func(t *testing.T, dsn, job string) int {
			n, _ := strconv.Atoi(psql(t, dsn, "SELECT count(DISTINCT id) FROM dead WHERE job = '"+job+"' AND error LIKE '%column n of table conform is bigint%'"))
			return n
		},
		Refused:         []string{"column n of table conform is bigint"},
		Unreachable:     "postgres://u:" + dbtest.Secret + "@127.0.0.1:1/db?connect_timeout=5",
		UnreachableSays: []string{"connect to postgres://u:xxxxx@127.0.0.1:1/db", "check that the server runs"},
	}
}

func conformanceConfig(dsn string, c sinktest.Config) postgres.Config[count] {
	row := func(r count) ([]any, error) {
		if c.Refuse && r.N%10 == 0 {
			return []any{r.Key, "not a number"}, nil
		}
		return []any{r.Key, r.N}, nil
	}
	cfg := postgres.Config[count]{DSN: dsn, Table: "conform", Columns: []string{"key", "n"}, Key: []string{"key"}, Row: row, BatchRows: 500}
	switch c.Delivery {
	case connector.TwoPhase:
		cfg.Delivery = postgres.DeliveryTwoPhase
	case connector.AtLeastOnce:
		cfg.Delivery = postgres.DeliveryAtLeastOnce
	}
	if c.Refuse {
		cfg.BatchRows = 37
	}
	if c.DeadLetters {
		cfg.DeadLetters = &postgres.DeadLetters[count]{Table: "dead", Of: dbtest.RejectsDeadLetters}
	}
	return cfg
}

// The sink conformance suite (internal/sinktest): exactly-once,
// two-phase and at-least-once under crashes, replays, prepared
// transactions, refused values and an unreachable server.
func TestConformance(t *testing.T) { sinktest.Conformance(t, conformance()) }
