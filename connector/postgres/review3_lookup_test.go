package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/internal/dbtest"
)

// Review finding (review3): the lookup casts each key's text to the key
// column's type in the query (u.k0::bigint), so one key that is not a
// value of that type ("abc", "", "1.5", or 3000000000 for an integer
// column) fails the whole batch's query. The error is not unrecoverable:
// the step retries it max-retries times, then fails the task, and the
// restart replays the same record into the same batch, so the job never
// gets past it, and the up to 255 other records of its batch are held with
// it. SQL's key equality matches nothing for such a key (a job file's key
// expression reads raw JSON; a SQL job casts the key first). Want: such a
// key matches no row, and the batch's other keys are answered.
func TestReview3LookupKeyNotOfTheColumnTypeFailsTheBatch(t *testing.T) {
	t.Skip("finding: postgres lookup.go casts the key text in the query: one key not of the column's type fails every lookup of its batch, for good")
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
	got, err := l.Get(ctx, keys)
	if err != nil {
		t.Fatalf("a batch with keys that are no integer: %v", err)
	}
	if len(got) != len(keys) || len(got[0]) != 1 || !strings.Contains(string(got[0][0]), "one") {
		t.Fatalf("key 1: %q, want the row named one", got)
	}
	for i := 1; i < 5; i++ {
		if len(got[i]) != 0 {
			t.Errorf("key %q matched %q, want no row", keys[i][0], got[i])
		}
	}
	if len(got[5]) != 1 || !strings.Contains(string(got[5][0]), "two") {
		t.Errorf("key %q: %q, want the row named two (PostgreSQL's integer input takes spaces)", keys[5][0], got[5])
	}
}
