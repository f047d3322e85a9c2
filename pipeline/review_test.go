package pipeline

import (
	"fmt"
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
//
// And the other way: window's layout leaves out time, so switching a
// window between event time and processing time (SQL: TUMBLE over a
// rowtime column made TUMBLE over a PROCTIME() one; same uid, same
// fields) restores event-time windows and their event-time timers into
// processing-time windows, where no watermark comes to fire them: those
// windows are never emitted nor freed.
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
	g := win(Params{"key": "value.u", "size": time.Minute, "fields": fields, "time": "to_timestamp(value.t)"})
	h := win(Params{"key": "value.u", "size": time.Minute, "fields": fields, "time": "processing"})
	if g == h {
		t.Errorf("window: event-time and processing-time windows have one layout %q: a restore between them is not refused", g)
	}
	// interval-join keeps lower and upper as written: -10m and -600s are
	// one bound and two layouts.
	ij, _ := Lookup("interval-join")
	e := ij.StateLayout(ij.WithDefaults(Params{"lower": "-10m", "upper": "0s"}))
	f := ij.StateLayout(ij.WithDefaults(Params{"lower": "-600s", "upper": "0s"}))
	if e != f {
		t.Errorf("interval-join: layouts %q and %q for the same bounds", e, f)
	}
}

// Review finding: only the aggregate step checks row kinds. A changelog
// (a debezium-json select, an aggregate with update-before) into count,
// dedupe, top-n, window or join is taken as adds: every retraction is
// counted as a row. The SQL planner refuses these plans; a job file is
// accepted and silently wrong. Want: refused (validate, or a poison
// record), never a silent add.
func TestReviewRetractionIntoCount(t *testing.T) {
	ev := func(op, before, after string) string {
		return fmt.Sprintf(`{"before":%s,"after":%s,"op":%q}`, before, after, op)
	}
	in := orders(
		ev("c", "null", `{"id":1,"cat":"x"}`),
		ev("u", `{"id":1,"cat":"x"}`, `{"id":1,"cat":"x"}`),
		ev("d", `{"id":1,"cat":"x"}`, "null"),
	)
	steps := []Step{
		{Op: "select", Params: Params{"format": "debezium-json",
			"schema":  []Named{{Name: "id", Text: "BIGINT"}, {Name: "cat", Text: "STRING"}},
			"columns": []Named{{Name: "id", Text: "id"}, {Name: "cat", Text: "cat"}}}},
		{Op: "count", Params: Params{"key": "value.cat"}},
	}
	out, dead, err := runK(t, in, 1, steps, flow.DeadLetterOnError)
	if err != nil || len(dead) > 0 {
		return // refused: fine
	}
	var got []string
	for _, r := range out {
		got = append(got, r.Key+"="+r.Value)
	}
	t.Errorf("count over a changelog (one row added, updated, deleted: none left) ran and emitted %v: its retractions were counted as rows", got)
}
