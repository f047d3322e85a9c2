package mysql

import (
	"context"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/internal/dbtest"
)

// Review finding (review3, minor, fixed): the lookup compares the table's key
// column with the key sent as text (a derived table of strings), so the
// server converts the text to the column's type as it likes: for an
// integer column MariaDB takes the key text "7abc" as 7 (a warning) and
// joins the record with row 7, where SQL's key equality (and the
// PostgreSQL lookup) matches nothing. Only a job file can send such a key
// (a SQL job casts the key to the column's type). BIGINT ids above 2^53
// were checked too: MariaDB 10.11 compares them exactly (held). Want:
// key text that is not a value of the column's type matches no row
// ("7abc" and "7.0" of an integer column; " 7 " is 7, as in PostgreSQL).
func TestReview3LookupKeyTextNotOfTheColumnTypeMatches(t *testing.T) {
	dsn, srv := dbtest.MariaDB(t)
	db := dsn[strings.LastIndex(dsn, "/")+1:]
	ctx := context.Background()
	if err := srv.Exec(ctx, db, `CREATE TABLE dim (id BIGINT PRIMARY KEY, name VARCHAR(20))`); err != nil {
		t.Fatal(err)
	}
	if err := srv.Exec(ctx, db, `INSERT INTO dim VALUES (1234567890123456789, 'mine'), (1234567890123456790, 'next'), (7, 'seven')`); err != nil {
		t.Fatal(err)
	}
	l, err := OpenLookup(dsn, "dim", []string{"id"}, []string{"name"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got, err := l.Get(ctx, [][]string{{"1234567890123456789"}, {"7abc"}, {"7.0"}, {" 7 "}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range got[0] {
		names = append(names, string(r))
	}
	if len(names) != 1 || !strings.Contains(names[0], "mine") {
		t.Errorf("id 1234567890123456789 matched %q, want only the row named mine", names)
	}
	for i, k := range []string{"7abc", "7.0"} {
		if len(got[1+i]) != 0 {
			t.Errorf("key text %q matched %q, want no row", k, got[1+i])
		}
	}
	if len(got[3]) != 1 {
		t.Errorf("key text \" 7 \" matched %q, want the row seven (as PostgreSQL's integer input takes it)", got[3])
	}
}
