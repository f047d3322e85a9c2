package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/internal/dbtest"
)

// Review finding (review3, fixed): the lookup casts each key's text to the key
// column's type in the query (u.k0::integer), so one key that is not a
// value of that type ("abc", "", "1.5", or 3000000000 for an integer
// column) fails the whole batch's query. The error is not unrecoverable:
// the step retries it max-retries times, then fails the task, and the
// restart replays the same record into the same batch, so the job never
// gets past it, and the up to 255 other records of its batch are held with
// it. SQL's key equality matches nothing for such a key (a job file's key
// expression reads raw JSON; a SQL job casts the key first). Want: such a
// key matches no row, and the batch's other keys are answered.
func TestReview3LookupKeyNotOfTheColumnTypeFailsTheBatch(t *testing.T) {
	dsn, srv := dbtest.Postgres(t)
	db := dsn[strings.LastIndex(dsn, "/")+1 : strings.Index(dsn, "?")]
	ctx := context.Background()
	if err := srv.Exec(ctx, db, `CREATE TABLE dim (id integer, name text); INSERT INTO dim VALUES (1, 'one'), (2, 'two')`); err != nil {
		t.Fatal(err)
	}
	l, err := OpenLookup(dsn, "dim", []string{"id"}, []string{"name"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	keys := [][]string{{"1"}, {"abc"}, {""}, {"1.5"}, {"3000000000"}, {" 2 "}}
	for _, batch := range [][][]string{keys, {{"abc"}}} {
		got, err := l.Get(ctx, batch)
		if err != nil {
			t.Fatalf("a batch with keys that are no integer: %v", err)
		}
		if len(got) != len(batch) {
			t.Fatalf("%d answers for %d keys", len(got), len(batch))
		}
		for i, k := range batch {
			want := map[string]string{"1": "one", " 2 ": "two"}[k[0]]
			switch {
			case want == "" && len(got[i]) != 0:
				t.Errorf("key %q matched %q, want no row", k[0], got[i])
			case want != "" && (len(got[i]) != 1 || !strings.Contains(string(got[i][0]), want)):
				t.Errorf("key %q: %q, want the row named %s", k[0], got[i], want)
			}
		}
	}
}

// Review finding (review3, fixed): the lookup casts the key's text to the key
// column's type with its modifier (format_type(atttypid, atttypmod)), and
// an explicit cast to varchar(n) cuts the text to n characters, to
// numeric(p, s) rounds it to s digits: key "abcdef" of a varchar(3)
// column matches the row "abc", key 1.234 of a numeric(5, 2) column the
// row 1.23, so a record is joined with another key's row. Want: only
// equal keys match (cast to the type without its modifier).
func TestReview3LookupKeyCutToTheColumnModifier(t *testing.T) {
	dsn, srv := dbtest.Postgres(t)
	db := dsn[strings.LastIndex(dsn, "/")+1 : strings.Index(dsn, "?")]
	ctx := context.Background()
	if err := srv.Exec(ctx, db, `CREATE TABLE codes (code varchar(3), name text); INSERT INTO codes VALUES ('abc', 'abc');
		CREATE TABLE prices (amount numeric(5, 2), name text); INSERT INTO prices VALUES (1.23, 'p123');
		CREATE TABLE padded (code char(5), name text); INSERT INTO padded VALUES ('ab', 'ab');
		CREATE TABLE bits (b bit(3), name text); INSERT INTO bits VALUES (B'101', '101');
		CREATE TABLE times (ts timestamp(3), name text); INSERT INTO times VALUES ('2026-01-02 03:04:05.123', 't')`); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ table, col, hit, miss string }{
		{"codes", "code", "abc", "abcdef"},
		{"prices", "amount", "1.230", "1.234"},
		{"padded", "code", "ab", "abcdefg"}, // char(5): trailing blanks do not count
		{"bits", "b", "101", "1"},
		{"times", "ts", "2026-01-02 03:04:05.123", "2026-01-02 03:04:05.1234"},
	} {
		l, err := OpenLookup(dsn, tc.table, []string{tc.col}, []string{"name"})
		if err != nil {
			t.Fatal(err)
		}
		got, err := l.Get(ctx, [][]string{{tc.hit}, {tc.miss}})
		l.Close()
		if err != nil {
			t.Fatalf("%s: %v", tc.table, err)
		}
		if len(got[0]) != 1 {
			t.Errorf("%s.%s = %q: %q, want its row", tc.table, tc.col, tc.hit, got[0])
		}
		if len(got[1]) != 0 {
			t.Errorf("%s.%s = %q matched %q, want no row", tc.table, tc.col, tc.miss, got[1])
		}
	}
}
