package postgres

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/dbtest"
)

// The lookup reads the rows of each key (several, one or none), in the
// order of the keys asked, with keys cast to the columns' types; a
// missing table or column is unrecoverable.
func TestLookupGet(t *testing.T) {
	dsn, srv := dbtest.Postgres(t)
	db := dsn[strings.LastIndex(dsn, "/")+1 : strings.Index(dsn, "?")]
	ctx := context.Background()
	if err := srv.Exec(ctx, db, `CREATE TABLE dim (id bigint, region text, name text, score numeric(5,2));
		INSERT INTO dim VALUES (1, 'x', 'one', 1.5), (1, 'y', 'uno', NULL), (2, 'x', 'two', 2), (2, 'x', 'deux', 3)`); err != nil {
		t.Fatal(err)
	}
	l, err := OpenLookup(dsn, "dim", []string{"id", "region"}, []string{"name", "score"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for range 2 { // the second time on the kept connection
		got, err := l.Get(ctx, [][]string{{"2", "x"}, {"3", "x"}, {"1", "y"}, {"1", "x"}})
		if err != nil {
			t.Fatal(err)
		}
		var texts []string
		for _, rows := range got {
			var rs []string
			for _, r := range rows {
				rs = append(rs, string(r))
			}
			texts = append(texts, strings.Join(rs, " "))
		}
		want := []string{`{"name" : "two", "score" : 2.00} {"name" : "deux", "score" : 3.00}`, ``, `{"name" : "uno", "score" : null}`, `{"name" : "one", "score" : 1.50}`}
		if len(texts) != 4 || texts[1] != "" || texts[2] != want[2] || texts[3] != want[3] || (texts[0] != want[0] && texts[0] != `{"name" : "deux", "score" : 3.00} {"name" : "two", "score" : 2.00}`) {
			t.Fatalf("got %q\nwant %q", texts, want)
		}
	}
	for _, tc := range []struct{ table, col, want string }{
		{"nope", "name", "lookup table nope does not exist"},
		{"dim", "nope", "lookup table dim has no column nope"},
	} {
		l, err := OpenLookup(dsn, tc.table, []string{"id"}, []string{tc.col})
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.Get(ctx, [][]string{{"1"}})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, flow.ErrUnrecoverable) {
			t.Errorf("%s.%s: %v; want an unrecoverable error saying %q", tc.table, tc.col, err, tc.want)
		}
	}
}

// BenchmarkLookupGet: batches of 256 keys, a third of them missing, from
// a table of 100,000 rows keyed by its primary key; reports keys/s.
func BenchmarkLookupGet(b *testing.B) {
	dsn, srv := dbtest.Postgres(b)
	db := dsn[strings.LastIndex(dsn, "/")+1 : strings.Index(dsn, "?")]
	ctx := context.Background()
	if err := srv.Exec(ctx, db, `CREATE TABLE dim (id bigint PRIMARY KEY, name text, tier int);
		INSERT INTO dim SELECT g, 'name-' || g, g % 7 FROM generate_series(0, 99999) g`); err != nil {
		b.Fatal(err)
	}
	l, err := OpenLookup(dsn, "dim", []string{"id"}, []string{"id", "name", "tier"})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	keys := make([][]string, 256)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range keys {
			keys[j] = []string{strconv.Itoa((i*256 + j) * 3 / 2 % 150000)}
		}
		if _, err := l.Get(ctx, keys); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*256)/b.Elapsed().Seconds(), "keys/s")
}
