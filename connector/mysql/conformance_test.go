package mysql_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/connector/mysql"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/dbtest"
	"github.com/onceflow/onceflow/internal/sinktest"
	"github.com/onceflow/onceflow/internal/sqlsink"
)

// conformance is the sink conformance suite's harness of the MySQL sink
// on MariaDB: table conform, one row per key, read with the mariadb
// client.
func conformance() sinktest.Harness {
	servers := map[string]*dbtest.MariaDBServer{} // by DSN, for the readers
	dbOf := func(dsn string) string { return dsn[strings.LastIndex(dsn, "/")+1:] }
	client := func(t *testing.T, dsn, q string) string {
		t.Helper()
		out, err := servers[dsn].Client(dbOf(dsn), q)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	// XA RECOVER lists the server's prepared transactions, of every
	// database: only the job's sink's count.
	prepared := func(t *testing.T, dsn, job, uid string) []string {
		t.Helper()
		xids, err := servers[dsn].PreparedXA(context.Background(), sqlsink.GIDPrefix(job, uid))
		if err != nil {
			t.Fatal(err)
		}
		return xids
	}
	return sinktest.Harness{
		Spec: mysql.Spec,
		Server: func(t *testing.T, _ bool) string {
			dsn, srv := dbtest.MariaDB(t)
			if err := srv.Exec(context.Background(), dbOf(dsn), "CREATE TABLE conform (k VARCHAR(32) PRIMARY KEY, n BIGINT NOT NULL, onceflow_epoch BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB"); err != nil {
				t.Fatal(err)
			}
			servers[dsn] = srv
			return dsn
		},
		NewSink: func(dsn string, c sinktest.Config) (flow.Sink[dbtest.Count], error) {
			return mysql.NewSink(conformanceConfig(dsn, c))
		},
		Rows: func(t *testing.T, dsn string) []sinktest.Row {
			var rows []sinktest.Row
			for _, line := range strings.Split(client(t, dsn, "SELECT CONCAT(k, '|', n) FROM conform"), "\n") {
				if k, v, ok := strings.Cut(strings.TrimSpace(line), "|"); ok {
					rows = append(rows, sinktest.Row{Key: k, Value: v})
				}
			}
			return rows
		},
		Leftovers: func(t *testing.T, dsn, job, uid string) string {
			var left []string
			if xids := prepared(t, dsn, job, uid); len(xids) != 0 {
				left = append(left, fmt.Sprintf("%d prepared XA transactions: %v", len(xids), xids))
			}
			// Sessions of dsn's database only (a prepared transaction,
			// in INNODB_TRX too, has none once its session ended: its
			// xid counts it).
			if n := client(t, dsn, "SELECT COUNT(*) FROM information_schema.INNODB_TRX t JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id WHERE p.DB = DATABASE()"); n != "0" {
				left = append(left, n+" open transactions")
			}
			return strings.Join(left, "; ")
		},
		Prepared: func(t *testing.T, dsn, job, uid string) int { return len(prepared(t, dsn, job, uid)) },
		DeadLetters: func(t *testing.T, dsn, job string) int {
			n, _ := strconv.Atoi(client(t, dsn, "SELECT COUNT(DISTINCT id) FROM dead WHERE job = '"+job+"' AND error LIKE '%column n of table conform is bigint%'"))
			return n
		},
		Refused:         []string{"column n of table conform is bigint"},
		Unreachable:     "u:" + dbtest.Secret + "@tcp(127.0.0.1:1)/db?timeout=5s",
		UnreachableSays: []string{"connect to u:xxxxx@tcp(127.0.0.1:1)/db", "check that the server runs"},
	}
}

func conformanceConfig(dsn string, c sinktest.Config) mysql.Config[dbtest.Count] {
	row := func(r dbtest.Count) ([]any, error) {
		if c.Refuse && r.N%10 == 0 {
			return []any{r.Key, "not a number"}, nil
		}
		return []any{r.Key, r.N}, nil
	}
	cfg := mysql.Config[dbtest.Count]{DSN: dsn, Table: "conform", Columns: []string{"k", "n"}, Key: []string{"k"}, Row: row, BatchRows: 500}
	switch c.Delivery {
	case connector.TwoPhase:
		cfg.Delivery = mysql.DeliveryTwoPhase
	case connector.AtLeastOnce:
		cfg.Delivery = mysql.DeliveryAtLeastOnce
	}
	if c.Refuse {
		cfg.BatchRows = 37
	}
	if c.DeadLetters {
		cfg.DeadLetters = &mysql.DeadLetters[dbtest.Count]{Table: "dead", Of: dbtest.RejectsDeadLetters}
	}
	return cfg
}

// The sink conformance suite (internal/sinktest): exactly-once,
// two-phase and at-least-once under crashes, replays, prepared
// transactions, refused values and an unreachable server.
func TestConformance(t *testing.T) { sinktest.Conformance(t, conformance()) }
