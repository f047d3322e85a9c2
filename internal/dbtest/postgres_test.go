package dbtest

import (
	"context"
	"os"
	"slices"
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

// A test whose job ended between a prepare and its commit leaves a
// prepared transaction in its database: the cleanup rolls it back, so the
// database is dropped (DROP DATABASE refuses one with prepared
// transactions, even WITH (FORCE)) and the server keeps none, while
// another database's prepared transaction is left alone.
func TestPostgresCleanupRollsBackPrepared(t *testing.T) {
	opts := PostgresOptions{MaxPreparedTransactions: 8}
	otherDSN, srv := Postgres(t, opts)
	prepare := func(t *testing.T, dsn, gid string) string {
		t.Helper()
		db := dsn[strings.LastIndex(dsn, "/")+1 : strings.Index(dsn, "?")]
		if out, err := srv.Psql(db, "CREATE TABLE t (k int); BEGIN; INSERT INTO t VALUES (1); PREPARE TRANSACTION '"+gid+"'"); err != nil {
			t.Fatal(out, err)
		}
		return db
	}
	var leftDB string
	t.Run("leaves one prepared", func(t *testing.T) {
		dsn, _ := Postgres(t, opts)
		leftDB = prepare(t, dsn, "left-by-the-test")
	})
	other := prepare(t, otherDSN, "another-tests")
	defer func() { _ = srv.Exec(context.Background(), other, "ROLLBACK PREPARED 'another-tests'") }()
	if got, err := srv.Psql("postgres", "SELECT string_agg(gid, ',') FROM pg_prepared_xacts"); err != nil || got != "another-tests" {
		t.Errorf("after the test's cleanup the server's prepared transactions are %q (%v), want the other database's only", got, err)
	}
	if got, err := srv.Psql("postgres", "SELECT count(*) FROM pg_database WHERE datname = '"+leftDB+"'"); err != nil || got != "0" {
		t.Errorf("the test's database %s is still there (%q, %v)", leftDB, got, err)
	}
}

// MariaDB's XA RECOVER lists the whole server's prepared transactions:
// PreparedXA and RollbackXA take those whose xid starts with a prefix (a
// job's, sqlsink.GIDPrefix) and leave the others.
func TestMariaDBPreparedXAByPrefix(t *testing.T) {
	dsn, srv := MariaDB(t)
	db := dsn[strings.LastIndex(dsn, "/")+1:]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := srv.Exec(ctx, db, "CREATE TABLE t (k int) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	xids := []string{"onceflow:aaaa:0:1", "onceflow:aaaa:1:2", "onceflow:bbbb:0:1"}
	for _, x := range xids {
		// The session that prepared it ends: the transaction outlives it.
		if out, err := srv.Client(db, "XA START '"+x+"'; INSERT INTO t VALUES (1); XA END '"+x+"'; XA PREPARE '"+x+"'"); err != nil {
			t.Fatal(out, err)
		}
	}
	t.Cleanup(func() { _, _ = srv.RollbackXA(context.Background(), "onceflow:") })
	got, err := srv.PreparedXA(ctx, "onceflow:aaaa:")
	slices.Sort(got)
	if err != nil || strings.Join(got, ",") != "onceflow:aaaa:0:1,onceflow:aaaa:1:2" {
		t.Errorf("PreparedXA(onceflow:aaaa:) = %v, %v", got, err)
	}
	if got, err := srv.RollbackXA(ctx, "onceflow:aaaa:"); err != nil || len(got) != 2 {
		t.Errorf("RollbackXA(onceflow:aaaa:) = %v, %v; want the 2 of that prefix", got, err)
	}
	if got, err := srv.PreparedXA(ctx, ""); err != nil || strings.Join(got, ",") != "onceflow:bbbb:0:1" {
		t.Errorf("after the rollback XA RECOVER lists %v (%v), want the other prefix's only", got, err)
	}
}
