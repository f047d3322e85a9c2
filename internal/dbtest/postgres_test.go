package dbtest

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// A test gets a database of its own on a server that pgx and psql both
// reach, and committed rows survive an immediate restart of the server.
func TestPostgres(t *testing.T) {
	dsn, srv := Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE t (k int PRIMARY KEY); INSERT INTO t VALUES (1), (2)"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	db := conn.Config().Database
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	out, err := srv.Psql(db, "SELECT count(*), sum(k) FROM t")
	if err != nil {
		t.Fatal(err)
	}
	if out != "2|3" {
		t.Errorf("psql after the restart: %q, want 2|3", out)
	}
	if got, err := srv.Psql(db, "SHOW max_prepared_transactions"); err != nil || got != "0" {
		t.Errorf("max_prepared_transactions = %q, %v; want PostgreSQL's default 0", got, err)
	}
	_, srv2 := Postgres(t, PostgresOptions{MaxPreparedTransactions: 8})
	if srv2 == srv {
		t.Fatal("servers with different options are the same")
	}
	if got, err := srv2.Psql("postgres", "SHOW max_prepared_transactions"); err != nil || got != "8" {
		t.Errorf("max_prepared_transactions = %q, %v; want 8", got, err)
	}
}

// The same for MariaDB: a database of its own, reached by the driver and
// the mariadb client; committed rows survive a killed server.
func TestMariaDB(t *testing.T) {
	dsn, srv := MariaDB(t)
	db := dsn[strings.LastIndex(dsn, "/")+1:]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := srv.Exec(ctx, db, "CREATE TABLE t (k int PRIMARY KEY) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	if err := srv.Exec(ctx, db, "INSERT INTO t VALUES (1), (2)"); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	out, err := srv.Client(db, "SELECT count(*), sum(k) FROM t")
	if err != nil {
		t.Fatal(err)
	}
	if out != "2|3" {
		t.Errorf("mariadb after the restart: %q, want 2|3", out)
	}
}
