package sqlsink

import (
	"fmt"
	"testing"
)

// A batch's rows come down to the last operation of each key, upserts
// and deletes apart, keys compared by KeyText; without retractions the
// rows are left as they are.
func TestBatchSplit(t *testing.T) {
	b := Batch{
		Rows: [][]any{
			{"a", 1}, {"b", 1}, {"a", 2}, {"c", 1}, {int64(7), 1}, {"b", 2},
			{"c", 2}, {"d", 1}, {7.0, 2},
		},
		Retract: []bool{false, false, true, false, false, false, true, false, true},
	}
	up, del := b.Split([]int{0})
	if got, want := fmt.Sprint(up), "[[b 2] [d 1]]"; got != want {
		t.Errorf("upserts %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(del), "[[a 2] [c 2] [7 2]]"; got != want {
		t.Errorf("deletes %s, want %s", got, want)
	}
	b.Retract = nil
	up, del = b.Split([]int{0})
	if len(up) != len(b.Rows) || del != nil {
		t.Errorf("without retractions: %d upserts, deletes %v; want the %d rows as they are", len(up), del, len(b.Rows))
	}
}
