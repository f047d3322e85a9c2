package pipeline

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/flow"
)

// kind is r's row kind as Flink prints it.
func kind(r krec) string {
	k := ParseRowKind([]byte(r.Headers[RowKindHeader]))
	if k == RowAdd {
		return "+"
	}
	return k.String()
}

// An aggregate with update-before emits a group's old row as -U before
// its new one; the first row of a group has none.
func TestAggregateUpdateBefore(t *testing.T) {
	in := orders(`{"u":"a","n":2}`, `{"u":"b","n":5}`, `{"u":"a","n":3}`, `{"u":"a","n":1}`)
	step := Step{Op: "aggregate", Params: Params{"key": "value.u", "update-before": true,
		"fields": map[string]string{"s": "sum(value.n)", "c": "count()"}}}
	out, _, err := runK(t, in, 1, []Step{step}, flow.FailOnError)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range out {
		got = append(got, kind(r)+r.Value)
	}
	want := []string{
		`+{"c":1,"key":"a","s":2}`,
		`+{"c":1,"key":"b","s":5}`,
		`-U{"c":1,"key":"a","s":2}`, `+{"c":2,"key":"a","s":5}`,
		`-U{"c":2,"key":"a","s":5}`, `+{"c":3,"key":"a","s":6}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A retraction into an aggregate that does not take them is a poison
// record, not a silent add; min over retractions is refused.
func TestAggregateRetractionsRefused(t *testing.T) {
	in := orders(`{"u":"a","n":2}`)
	in[0].Headers = map[string]string{RowKindHeader: "-U"}
	_, dead, err := runK(t, in, 1, []Step{{Op: "aggregate", Params: Params{"key": "value.u", "fields": map[string]string{"c": "count()"}}}}, flow.DeadLetterOnError)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || !strings.Contains(dead[0].Err.Error(), "does not take retractions") {
		t.Errorf("dead letters %v, want the retraction refused", dead)
	}
	_, _, err = runK(t, in, 1, []Step{{Op: "aggregate", Params: Params{"key": "value.u", "retractions": true, "fields": map[string]string{"m": "last(value.n)"}}}}, flow.FailOnError)
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "retractions" {
		t.Errorf("last with retractions: %v, want a retractions field error", err)
	}
}

// Two aggregates, the second over the first's changelog through a filter
// (SQL: SELECT COUNT(*), SUM(total) FROM (SELECT u, SUM(n) total … GROUP
// BY u) WHERE total > 10, with MIN, MAX and COUNT(DISTINCT total % 3) too): the -U rows take the old totals out, a total
// that stops passing the filter takes its row out for good, and a group
// left with no row is deleted. At parallelism 1 and 3 the final figures
// equal a batch computation.
func TestAggregateOverChangelog(t *testing.T) {
	var vals []string
	totals := map[string]int{}
	for i := 0; i < 200; i++ {
		u := "u" + strconv.Itoa((i*7)%13)
		n := (i*31)%17 - 5 // some negative: totals go up and down
		totals[u] += n
		vals = append(vals, fmt.Sprintf(`{"u":%q,"n":%d}`, u, n))
	}
	wantN, wantS := 0, 0
	wantLo, wantHi := 1<<30, -1<<30
	parity := map[int]bool{}
	for _, tot := range totals {
		if tot > 10 {
			wantN++
			wantS += tot
			wantLo, wantHi = min(wantLo, tot), max(wantHi, tot)
			parity[tot%3] = true
		}
	}
	steps := []Step{
		{Op: "aggregate", UID: "per-user", Params: Params{"key": "value.u", "update-before": true, "fields": map[string]string{"total": "sum(value.n)"}}},
		{Op: "filter", Params: Params{"if": "value.total > 10"}},
		{Op: "aggregate", UID: "all", Params: Params{"key": `"all"`, "retractions": true,
			"fields": map[string]string{"users": "count()", "sum": "sum(value.total)", "lo": "min(value.total)", "hi": "max(value.total)",
				"mods": "distinct(value.total % 3)"}}},
	}
	for _, par := range []int{1, 3} {
		out, _, err := runK(t, orders(vals...), par, steps, flow.FailOnError)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) == 0 {
			t.Fatal("no output")
		}
		last := out[len(out)-1]
		want := fmt.Sprintf(`{"hi":%d,"key":"all","lo":%d,"mods":%d,"sum":%d,"users":%d}`, wantHi, wantLo, len(parity), wantS, wantN)
		if wantN == 0 {
			t.Fatal("the data lets no user pass: change it")
		}
		if kind(last) != "+" || last.Value != want {
			t.Errorf("parallelism %d: last %s%s, want +%s", par, kind(last), last.Value, want)
		}
	}
}

// A group whose every row is retracted is deleted: -D with its last
// figures, and a later row starts it again.
func TestAggregateDeletesEmptyGroup(t *testing.T) {
	in := orders(`{"u":"a","n":2}`, `{"u":"a","n":2}`, `{"u":"a","n":7}`)
	in[1].Headers = map[string]string{RowKindHeader: "-D"}
	step := Step{Op: "aggregate", Params: Params{"key": "value.u", "retractions": true, "update-before": true,
		"fields": map[string]string{"s": "sum(value.n)", "c": "count()"}}}
	out, _, err := runK(t, in, 1, []Step{step}, flow.FailOnError)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range out {
		got = append(got, kind(r)+r.Value)
	}
	want := []string{`+{"c":1,"key":"a","s":2}`, `-D{"c":1,"key":"a","s":2}`, `+{"c":1,"key":"a","s":7}`}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("got %s, want %s", strings.Join(got, " "), strings.Join(want, " "))
	}
}

// A debezium-json select turns each change event into the rows it takes
// out and puts in, each through where and columns; the envelope may be
// inside payload; the tombstone after a delete is skipped; an update
// without its before row is a poison record naming what to do.
func TestSelectDebezium(t *testing.T) {
	ev := func(op, before, after string) string {
		return fmt.Sprintf(`{"before":%s,"after":%s,"op":%q,"source":{"db":"shop"},"ts_ms":1}`, before, after, op)
	}
	in := orders(
		ev("r", "null", `{"id":1,"qty":5}`),
		ev("c", "null", `{"id":2,"qty":50}`),
		ev("u", `{"id":1,"qty":5}`, `{"id":1,"qty":7}`),
		`{"schema":{},"payload":`+ev("u", `{"id":2,"qty":50}`, `{"id":2,"qty":60}`)+`}`,
		ev("d", `{"id":1,"qty":7}`, "null"),
		"",
		ev("u", "null", `{"id":3,"qty":1}`),
	)
	step := Step{Op: "select", Params: Params{"format": "debezium-json",
		"schema":  []Named{{Name: "id", Text: "BIGINT"}, {Name: "qty", Text: "INT"}},
		"columns": []Named{{Name: "id", Text: "id"}, {Name: "twice", Text: "qty * 2"}},
		"where":   "qty < 55", "key": []string{"id"}}}
	out, dead, err := runK(t, in, 1, []Step{step}, flow.DeadLetterOnError)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range out {
		got = append(got, kind(r)+r.Key+"="+r.Value)
	}
	// qty 60 fails the where: the update of id 2 only takes its old row out.
	want := []string{`+1={"id":1,"twice":10}`, `+2={"id":2,"twice":100}`, `-U1={"id":1,"twice":10}`, `+1={"id":1,"twice":14}`,
		`-U2={"id":2,"twice":100}`, `-D1={"id":1,"twice":14}`}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("got  %s\nwant %s", strings.Join(got, " "), strings.Join(want, " "))
	}
	if len(dead) != 1 || !strings.Contains(dead[0].Err.Error(), "REPLICA IDENTITY FULL") {
		t.Errorf("dead letters %v, want the update without a before row", dead)
	}
}

// changelog-normalize turns upserts and tombstones into a changelog with
// retractions, dropping an upsert equal to the row it has.
func TestChangelogNormalize(t *testing.T) {
	in := orders(`{"v":1}`, `{"v":2}`, `{"v":2}`, ``, ``, `{"v":3}`, `{"v":4}`)
	for i := range in {
		in[i].Key = "k"
	}
	in[6].Headers = map[string]string{RowKindHeader: "-U"}
	out, _, err := runK(t, in, 1, []Step{{Op: "changelog-normalize", Params: Params{}}}, flow.FailOnError)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range out {
		got = append(got, kind(r)+r.Value)
	}
	want := []string{`+{"v":1}`, `-U{"v":1}`, `+{"v":2}`, `-D{"v":2}`, `+{"v":3}`, `-D{"v":3}`}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("got %s, want %s", strings.Join(got, " "), strings.Join(want, " "))
	}
}
