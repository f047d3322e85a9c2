package cli

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/pipeline"
)

// TestRowLineRetraction: the shell prints a keyless retraction (an outer
// join's padded row taken back) as -D with its row, a tombstone as -D
// with its key, and an add of an updating result as +U.
func TestRowLineRetraction(t *testing.T) {
	cols := []string{"a", "b"}
	for _, tc := range []struct {
		r    *kgo.Record
		want string
	}{
		{&kgo.Record{Value: []byte(`{"a":1,"b":null}`), Headers: []kgo.RecordHeader{{Key: pipeline.RowKindHeader, Value: []byte("-D")}}}, "-D | 1 | NULL"},
		{&kgo.Record{Key: []byte("k"), Value: nil}, "-D | key k"},
		{&kgo.Record{Value: []byte(`{"a":1,"b":"x"}`)}, "+U | 1 | x"},
	} {
		if got := rowLine(cols, true, tc.r); got != tc.want {
			t.Errorf("rowLine(%s) = %q, want %q", tc.r.Value, got, tc.want)
		}
	}
}
