package pipeline

import (
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
)

// Review finding: an aggregate with update-before (what the SQL planner
// turns on for a HAVING, a WHERE or a GROUP BY over the result) runs
// changelogAggregate, which feeds distinct(e) through Acc.add: that counts
// every non-null input, not the distinct ones. SQL: SELECT u,
// COUNT(DISTINCT page) … GROUP BY u HAVING COUNT(DISTINCT page) > 1.
func TestReviewDistinctWithUpdateBefore(t *testing.T) {
	in := orders(`{"u":"a","p":"x"}`, `{"u":"a","p":"x"}`, `{"u":"a","p":"x"}`)
	for _, ub := range []bool{false, true} {
		step := Step{Op: "aggregate", Params: Params{"key": "value.u", "update-before": ub,
			"fields": map[string]string{"d": "distinct(value.p)"}}}
		out, _, err := runK(t, in, 1, []Step{step}, flow.FailOnError)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range out {
			if kind(r) == "+" {
				got = append(got, r.Value)
			}
		}
		want := `{"d":1,"key":"a"}`
		if len(got) == 0 || got[len(got)-1] != want {
			t.Errorf("update-before %v: adds %s, the last should be %s (one distinct page)", ub, strings.Join(got, " "), want)
		}
	}
}

// Review finding: a StateFields field whose spec has no Default (aggregate
// retractions, window offset) changes the layout when a job file writes
// its zero value explicitly (retractions: false, offset: 0s), though the
// state is the same: a restore after that edit is refused.
func TestReviewLayoutExplicitZero(t *testing.T) {
	fields := map[string]string{"c": "count()"}
	agg := func(p Params) string { return aggregateSpec.StateLayout(aggregateSpec.WithDefaults(p)) }
	a := agg(Params{"key": "value.u", "fields": fields})
	b := agg(Params{"key": "value.u", "fields": fields, "retractions": false})
	if a != b {
		t.Errorf("aggregate: layout %q without retractions and %q with retractions: false: a restore between them is refused", a, b)
	}
	ws, _ := Lookup("window")
	win := func(p Params) string { return ws.StateLayout(ws.WithDefaults(p)) }
	c := win(Params{"key": "value.u", "size": time.Minute, "fields": fields})
	d := win(Params{"key": "value.u", "size": time.Minute, "fields": fields, "offset": time.Duration(0)})
	if c != d {
		t.Errorf("window: layout %q without offset and %q with offset: 0s", c, d)
	}
}
