package postgres

import (
	"fmt"
	"testing"
	"time"
)

// Rows of one key in one upsert are reduced to the last, also when the
// key comes in different Go types the database takes as equal; one
// statement may not update a row twice.
func TestLastPerKey(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	rows := [][]any{
		{int(1), "a"}, {int64(1), "b"}, {1.0, "c"}, {2.5, "d"},
		{at, "e"}, {at.In(time.FixedZone("x", 3600)), "f"},
		{"k", "g"}, {[]byte("k"), "h"}, {nil, "i"}, {2, "j"},
	}
	got := lastPerKey(rows, []int{0})
	var vals []any
	for _, r := range got {
		vals = append(vals, r[1])
	}
	if want := "[c d f h i j]"; fmt.Sprint(vals) != want {
		t.Errorf("kept %v, want %s: the last row of each key, 1 (c), 2.5 (d), the instant (f), k (h), null (i), 2 (j)", vals, want)
	}
}
