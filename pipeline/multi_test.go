package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
)

// joinAccess is recAccess with what join needs: timestamps (none) and new
// records.
var joinAccess = func() RecordAccess[rec] {
	a := recAccess
	a.Meta = func(rec) Meta { return Meta{} }
	a.New = func(k, v []byte, _ int64) rec { return rec{Key: string(k), Value: string(v)} }
	return a
}()

// runFrom runs steps over several inputs and returns the sink's records.
func runFrom(t *testing.T, parallelism int, steps []Step, ins ...[]rec) []rec {
	t.Helper()
	env := flow.New(flow.JobName("test"), flow.Parallelism(parallelism), flow.Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	var streams []flow.Stream[rec]
	for i, in := range ins {
		streams = append(streams, flow.From(env, flowtest.NewSource(flowtest.Split(in, 2)), flow.UID(fmt.Sprintf("src-%d", i))))
	}
	s, _, err := BuildFrom(streams, joinAccess, steps, Env{})
	if err != nil {
		t.Fatal(err)
	}
	sink := flowtest.NewSink[rec]()
	flow.To(s, sink, flow.UID("sink"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	return sink.Committed()
}

func TestJoinPairsEveryMatchOnce(t *testing.T) {
	left := recs("a", `{"o":1}`, "b", `{"o":2}`, "a", `{"o":3}`, "c", `{"o":4}`)
	right := recs("a", `{"c":"x"}`, "a", "plain text", "b", `{"c":"y"}`, "d", `{"c":"z"}`)
	for _, p := range []int{1, 3} {
		out := runFrom(t, p, []Step{{Op: "join", Params: Params{"ttl": time.Hour}}}, left, right)
		var got []string
		for _, r := range out {
			var v struct{ Left, Right any }
			if err := json.Unmarshal([]byte(r.Value), &v); err != nil {
				t.Fatalf("parallelism %d: joined value %s is not JSON: %v", p, r.Value, err)
			}
			got = append(got, fmt.Sprintf("%s %v %v", r.Key, v.Left, v.Right))
		}
		sort.Strings(got)
		// a: 2 left × 2 right; b: 1 × 1; c and d have no partner.
		want := []string{
			"a map[o:1] map[c:x]", "a map[o:1] plain text", "a map[o:3] map[c:x]", "a map[o:3] plain text",
			"b map[o:2] map[c:y]",
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("parallelism %d: joined\n%s\nwant\n%s", p, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

func TestJoinByValueKeys(t *testing.T) {
	orders := recs("o1", `{"customer":7,"amount":5}`, "o2", `{"customer":"8","amount":6}`)
	customers := recs("k7", `{"id":7,"name":"ann"}`, "k8", `{"id":8,"name":"bob"}`)
	out := runFrom(t, 2, []Step{{Op: "join", Params: Params{"left-key": "value.customer", "right-key": "value.id", "ttl": time.Hour}}}, orders, customers)
	var got []string
	for _, r := range out {
		got = append(got, r.Key+" "+r.Value)
	}
	sort.Strings(got)
	// A JSON number and a string of the same digits are one key.
	want := []string{`7 {"left":{"customer":7,"amount":5},"right":{"id":7,"name":"ann"}}`, `8 {"left":{"customer":"8","amount":6},"right":{"id":8,"name":"bob"}}`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("joined\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestJoinNullKeyMeetsNothing: a key expression that is null or names a
// missing field gives no key (SQL's NULL equals nothing): the record
// pairs with nothing, not even another null, and is not a poison record
// (the job, whose policy is fail, ends).
func TestJoinNullKeyMeetsNothing(t *testing.T) {
	orders := recs("o1", `{"customer":null,"n":1}`, "o2", `{"n":2}`, "o3", `{"customer":7,"n":3}`)
	customers := recs("k0", `{"id":null}`, "k1", `{}`, "k7", `{"id":7}`)
	for _, p := range []int{1, 2} {
		out := runFrom(t, p, []Step{{Op: "join", Params: Params{"left-key": "value.customer", "right-key": "value.id", "ttl": time.Hour}}}, orders, customers)
		var got []string
		for _, r := range out {
			got = append(got, r.Key+" "+r.Value)
		}
		if want := `7 {"left":{"customer":7,"n":3},"right":{"id":7}}`; strings.Join(got, "\n") != want {
			t.Errorf("parallelism %d: joined\n%s\nwant\n%s", p, strings.Join(got, "\n"), want)
		}
	}
}

func TestUnionThenSteps(t *testing.T) {
	out := runFrom(t, 2, []Step{{Op: "union"}, {Op: "count"}}, recs("a", "1", "b", "1"), recs("a", "2"), recs("a", "3", "c", "1"))
	last := map[string]string{}
	n := 0
	for _, r := range out {
		last[r.Key] = r.Value // counts of a key come in order
		n++
	}
	if n != 5 || last["a"] != "3" || last["b"] != "1" || last["c"] != "1" {
		t.Errorf("union then count: %d records, last counts %v; want 5 records, a=3 b=1 c=1", n, last)
	}
}

func TestBuildFromRefusesWhatDoesNotFit(t *testing.T) {
	env := flow.New()
	a := flow.From(env, flowtest.NewSource([][]rec{nil}), flow.UID("a"))
	b := flow.From(env, flowtest.NewSource([][]rec{nil}), flow.UID("b"))
	c := flow.From(env, flowtest.NewSource([][]rec{nil}), flow.UID("c"))
	for _, tc := range []struct {
		ins   []flow.Stream[rec]
		steps []Step
		want  string
	}{
		{[]flow.Stream[rec]{a, b}, nil, "2 inputs and no step"},
		{[]flow.Stream[rec]{a, b}, []Step{{Op: "count"}}, "count takes one input and the stream has 2"},
		{[]flow.Stream[rec]{a, b, c}, []Step{{Op: "join", Params: Params{"ttl": time.Hour}}}, "join takes 2 inputs and the stream has 3"},
		{[]flow.Stream[rec]{a}, []Step{{Op: "union"}}, "union takes two or more inputs: it can only be the first step"},
		{[]flow.Stream[rec]{a, b}, []Step{{Op: "union"}, {Op: "union"}}, "union takes two or more inputs"},
		{[]flow.Stream[rec]{a, b}, []Step{{Op: "join", Params: Params{"ttl": time.Hour, "kind": "outer"}}}, `"outer": write kind: full`},
	} {
		_, _, err := BuildFrom(tc.ins, joinAccess, tc.steps, Env{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%d inputs, %v: error %v, want one containing %q", len(tc.ins), tc.steps, err, tc.want)
		}
		if se := (*StepError)(nil); err != nil && len(tc.steps) > 0 && !errors.As(err, &se) {
			t.Errorf("%v: error %T, want a *StepError", tc.steps, err)
		}
	}
}
