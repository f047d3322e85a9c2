package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/dbtest"
)

// TestMillisIntoTimestampColumns: a window's window_start and window_end
// are milliseconds since 1970; the column source timestamp(...) writes
// them into a PostgreSQL timestamptz and a MariaDB DATETIME(3) column
// without a hand-made conversion, read back with each database's own
// client. A value that is no number of milliseconds is a poison record
// under errors.policy: here fail, naming the column.
func TestMillisIntoTimestampColumns(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end database test skipped in -short mode")
	}
	dir := t.TempDir()
	addr := startBroker(t, filepath.Join(dir, "broker"))
	createTopic(t, addr, "in", 1)
	const n = 20
	const base = int64(1764583200123) // 2025-12-01 10:00:00.123 UTC
	cl := client(t, addr, kgo.DefaultProduceTopic("in"))
	for i := 0; i < n; i++ {
		v := fmt.Sprintf(`{"id": %d, "window_start": %d, "window_end": "%d"}`, i, base+int64(i)*60_000, base+int64(i+1)*60_000)
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	columns := "{ id: record.value.id, ws: timestamp(record.value.window_start), we: timestamp(record.value.window_end) }"

	pgDSN, pg := dbtest.Postgres(t)
	pgdb := pgDSN[strings.LastIndex(pgDSN, "/")+1 : strings.Index(pgDSN, "?")]
	if err := pg.Exec(context.Background(), pgdb, "CREATE TABLE w (id bigint PRIMARY KEY, ws timestamptz NOT NULL, we timestamp NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	myDSN, my := dbtest.MariaDB(t)
	mydb := myDSN[strings.LastIndex(myDSN, "/")+1:]
	if err := my.Exec(context.Background(), mydb, "CREATE TABLE w (id BIGINT PRIMARY KEY, ws DATETIME(3) NOT NULL, we DATETIME(3) NOT NULL) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("E2E_PG_DSN", pgDSN)
	t.Setenv("E2E_MYSQL_DSN", myDSN)
	for _, c := range []struct {
		name, sink string
		query      func(string) (string, error)
		q          string
	}{
		{"pg-time", "  postgres:\n    dsn: ${E2E_PG_DSN}\n    table: w\n    key: [id]\n    columns: " + columns,
			func(q string) (string, error) { return pg.Psql(pgdb, q) },
			"SELECT count(*), to_char(min(ws) AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.MS'), to_char(max(we), 'YYYY-MM-DD HH24:MI:SS.MS') FROM w"},
		{"my-time", "  mysql:\n    dsn: ${E2E_MYSQL_DSN}\n    table: w\n    key: [id]\n    columns: " + columns,
			func(q string) (string, error) { return my.Client(mydb, q) },
			"SELECT COUNT(*), MIN(ws), MAX(we) FROM w"},
	} {
		t.Run(c.name, func(t *testing.T) {
			lw := &logWriter{t: t, name: c.name}
			file := writeDBJob(t, dir, c.name, addr, "", c.sink)
			r := &jobRunner{t: t, bin: binary(t), file: file, log: lw}
			cmd, done := r.start()
			defer func() { _ = cmd.Process.Kill() }()
			want := fmt.Sprintf("%d|2025-12-01 10:00:00.123|2025-12-01 10:20:00.123", n)
			var got string
			for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
				select {
				case err := <-done:
					t.Fatalf("job exited: %v\n%s", err, lw)
				default:
				}
				if got, _ = c.query(c.q); got == want {
					return
				}
			}
			t.Fatalf("%s = %q, want %q\n%s", c.q, got, want, lw)
		})
	}
}
