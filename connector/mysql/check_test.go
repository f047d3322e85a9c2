package mysql

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/dbtest"
)

// The client-side check never refuses a value the server takes: every
// value of a list of awkward ones goes into columns of many types, once
// through the check and once through an INSERT in strict mode (rolled
// back). A value the check refuses must be refused by the server; the
// server's other refusals (the check does not know every rule) are
// counted.
func TestCheckAgreesWithServer(t *testing.T) {
	dsn, srv := dbtest.MariaDB(t)
	db := dsn[strings.LastIndex(dsn, "/")+1:]
	ctx := context.Background()
	types := []string{"TINYINT", "TINYINT UNSIGNED", "SMALLINT", "INT", "INT UNSIGNED", "BIGINT", "BIGINT UNSIGNED",
		"DECIMAL(10,2)", "DOUBLE", "DATE", "DATETIME(3)", "TIMESTAMP NULL", "VARCHAR(5)", "CHAR(3)", "TEXT", "INT NOT NULL DEFAULT 0", "VARCHAR(10) NOT NULL DEFAULT ''",
		"BIGINT NOT NULL AUTO_INCREMENT UNIQUE", "TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP"}
	var defs []string
	for i, typ := range types {
		defs = append(defs, fmt.Sprintf("c%d %s", i, typ))
	}
	if err := srv.Exec(ctx, db, "CREATE TABLE t ("+strings.Join(defs, ", ")+") ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	d := &driver{dsn: dsn, table: "t"}
	for i := range types {
		d.columns = append(d.columns, fmt.Sprintf("c%d", i))
	}
	conn, err := d.conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := d.describe(ctx, conn); err != nil {
		t.Fatal(err)
	}
	values := []any{nil, "", " 12 ", "12", "-1", "128", "255", "256", "-129", "32768", "2147483648", "4294967296", "9223372036854775808",
		"18446744073709551616", "1.5", "12abc", "abc", "1e3", int64(-5), int64(300), int64(1) << 40, uint64(1) << 63, 3.7, 1e20, true,
		"2024-02-03", "2024-02-03 04:05:06", "2024-02-03T04:05:06.123", "03/02/2024", "yesterday", time.Date(2024, 2, 3, 4, 5, 6, 0, time.UTC),
		"héllo", "hello!", "ab", "abcd", []byte("xyz"), "1e400", "0x10", "-99999999.99", "99999999.995", "100000000", "ab   ", "2024-13-45", int64(20240203),
		"2024/02/03", "24-02-03", "2024.02.03 04:05", "2024-02-03Z", "T12", []byte("42"), []byte(" 7 "), 1.8e19, 2e19, float64(1 << 62),
		"18446744073709551615", "-0", "007", "1e19"}
	var refusedBoth, missed int
	for i, col := range d.cols {
		for _, v := range values {
			checkErr := col.check(v)
			_, serverErr := conn.ExecContext(ctx, "BEGIN")
			if serverErr != nil {
				t.Fatal(serverErr)
			}
			_, serverErr = conn.ExecContext(ctx, fmt.Sprintf("INSERT INTO t (c%d) VALUES (?)", i), v)
			if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
				t.Fatal(err)
			}
			switch {
			case checkErr != nil && serverErr == nil:
				t.Errorf("%s: the check refuses %#v (%v), the server takes it", types[i], v, checkErr)
			case checkErr != nil:
				refusedBoth++
			case serverErr != nil:
				missed++
				if testing.Verbose() {
					t.Logf("left to the server: %s %#v: %v", types[i], v, serverErr)
				}
			}
		}
	}
	t.Logf("%d refusals caught by the check, %d left to the server", refusedBoth, missed)
	if refusedBoth == 0 {
		t.Error("the check refused nothing")
	}
}
