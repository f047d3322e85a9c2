package pipeline

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
)

// krec is a record with everything an expression can see.
type krec struct {
	Key, Value string
	Topic      string
	Partition  int32
	Offset     int64
	TS         int64
	Headers    map[string]string
}

// valueReads counts the calls of kAccess.Value, to prove laziness.
var valueReads atomic.Int64

var kAccess = RecordAccess[krec]{
	Key: func(r krec) string { return r.Key },
	Value: func(r krec) []byte {
		valueReads.Add(1)
		return []byte(r.Value)
	},
	WithKey:   func(r krec, k []byte) krec { r.Key = string(k); return r },
	WithValue: func(r krec, v []byte) krec { r.Value = string(v); return r },
	WithTopic: func(r krec, t string) krec { r.Topic = t; return r },
	WithHeader: func(r krec, name string, v []byte) krec {
		h := map[string]string{}
		for k, x := range r.Headers {
			h[k] = x
		}
		h[name] = string(v)
		r.Headers = h
		return r
	},
	WithCount: func(r krec, n int64) krec { r.Value = strconv.FormatInt(n, 10); return r },
	Position: func(r krec) string {
		return r.Topic + "/" + strconv.Itoa(int(r.Partition)) + "@" + strconv.FormatInt(r.Offset, 10)
	},
	Meta: func(r krec) Meta {
		return Meta{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.TS}
	},
	Headers: func(r krec) map[string]string { return r.Headers },
	New:     func(k, v []byte, ts int64) krec { return krec{Key: string(k), Value: string(v), TS: ts} },
	RowKind: func(r krec) RowKind { return ParseRowKind([]byte(r.Headers[RowKindHeader])) },
	WithRowKind: func(r krec, k RowKind) krec {
		h := map[string]string{}
		for n, x := range r.Headers {
			if n != RowKindHeader {
				h[n] = x
			}
		}
		if k.Retracts() {
			h[RowKindHeader] = k.String()
		}
		r.Headers = h
		return r
	},
}

func evalOn(t *testing.T, src string, r krec) (any, error) {
	t.Helper()
	e, err := CompileExpr(src, AnyResult)
	if err != nil {
		t.Fatalf("compile %q: %v", src, err)
	}
	return e.Eval(&handle[krec]{acc: &kAccess, rec: r})
}

const order = `{"order_id":"o-1","user_id":"u-42","amount":129.5,"qty":3,"big":9007199254740993,"country":"DE",` +
	`"items":[{"sku":"a","qty":2},{"sku":"b","qty":1}],"a.b":{"c":7},"nested":{"deep":{"x":true}},"none":null}`

func TestExprValues(t *testing.T) {
	r := krec{Key: "k1", Value: order, Topic: "orders", Partition: 2, Offset: 41, TS: 1764000000000, Headers: map[string]string{"trace": "t-9"}}
	for _, tc := range []struct {
		src  string
		want any
	}{
		{`key`, "k1"},
		{`record.key`, "k1"},
		{`value.amount`, 129.5},
		{`value.qty`, 3},
		{`value.big`, 9007199254740993}, // an id keeps its digits
		{`value.amount > 100 && value.country == "DE"`, true},
		{`value.items[1].sku`, "b"},
		{`len(value.items)`, 2},
		{`value["a.b"].c`, 7},
		{`value.nested.deep.x`, true},
		{`value.missing`, nil},
		{`value.none`, nil},
		{`value.missing ?? "dflt"`, "dflt"},
		{`record.value.user_id`, "u-42"},
		{`topic + "/" + string(partition) + "@" + string(offset)`, "orders/2@41"},
		{`timestamp`, 1764000000000},
		{`headers.trace`, "t-9"},
		{`headers["trace"]`, "t-9"},
		{`value.user_id + ":" + key`, "u-42:k1"},
		{`sum(map(value.items, .qty))`, 3},
		{`{"u": value.user_id, "n": len(value.items)}`, map[string]any{"u": "u-42", "n": 2}},
		{`value.items | map(.sku) | join(",")`, "a,b"},
		{`len(raw) > 10`, true},
		{`value.order_id startsWith "o-"`, true},
	} {
		got, err := evalOn(t, tc.src, r)
		if err != nil {
			t.Errorf("%s: %v", tc.src, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s = %#v, want %#v", tc.src, got, tc.want)
		}
	}
}

func TestExprErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`value.amount >> 3`, `expression "value.amount >> 3": unexpected token Operator(">") at column 15`},
		{`vlaue.amount > 3`, `expression "vlaue.amount > 3": unknown name vlaue at column 1`},
		{`  `, `expression "  " is empty: write one, such as value.user_id (docs/operators.md, Expressions)`},
		{`value.a +`, `expression "value.a +": unexpected token EOF at column 9`},
	} {
		_, err := CompileExpr(tc.src, AnyResult)
		var ee *ExprError
		if !errors.As(err, &ee) || err.Error() != tc.want {
			t.Errorf("CompileExpr(%q) = %v, want %s", tc.src, err, tc.want)
		}
	}
	if _, err := CompileExpr(`key + "x"`, BoolResult); err == nil || !strings.Contains(err.Error(), "bool") {
		t.Errorf("a string as a condition: %v, want an error about bool", err)
	}
	// Runtime errors name the expression and the record.
	r := krec{Key: "k", Value: `not json`, Topic: "t", Offset: 5}
	if _, err := evalOn(t, `value.amount > 1`, r); err == nil || !strings.Contains(err.Error(), "the value is not JSON") {
		t.Errorf("not JSON: %v", err)
	}
	r.Value = `{"x":1}`
	if _, err := evalOn(t, `value.amount > 1`, r); err == nil || !strings.Contains(err.Error(), `expression "value.amount > 1"`) {
		t.Errorf("null > 1: %v", err)
	}
}

// An expression that does not name the value never reads it, and one
// that reads paths does not parse the whole document.
func TestExprLazy(t *testing.T) {
	r := krec{Key: "k", Value: order}
	valueReads.Store(0)
	if _, err := evalOn(t, `key + "x"`, r); err != nil {
		t.Fatal(err)
	}
	if n := valueReads.Load(); n != 0 {
		t.Errorf("key + \"x\" read the value %d times, want 0", n)
	}
	e, _ := CompileExpr(`value.amount`, AnyResult)
	if !e.ReadsValue() {
		t.Error("value.amount: ReadsValue false")
	}
	e, _ = CompileExpr(`key`, AnyResult)
	if e.ReadsValue() || !e.IsRecordKey() {
		t.Errorf("key: ReadsValue %v, IsRecordKey %v", e.ReadsValue(), e.IsRecordKey())
	}
}

// runK runs in through steps at parallelism par and returns the committed
// output and the dead letters.
func runK(t *testing.T, in []krec, par int, steps []Step, policy flow.ErrorPolicy) ([]krec, []flow.Failure[krec], error) {
	t.Helper()
	env := flow.New(flow.JobName("test"), flow.Parallelism(par), flow.Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	splits := 2
	if par == 1 {
		splits = 1 // one split keeps the input's order
	}
	s, failures, err := Build(flow.From(env, flowtest.NewSource(flowtest.Split(in, splits)), flow.UID("src")), kAccess, steps, Env{Policy: policy})
	if err != nil {
		return nil, nil, err
	}
	sink := flowtest.NewSink[krec]()
	dlq := flowtest.NewSink[flow.Failure[krec]]()
	flow.To(s, sink, flow.UID("sink"))
	for i, f := range failures {
		flow.To(f, dlq, flow.UID("dlq-"+strconv.Itoa(i)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = job.Wait()
	return sink.Committed(), dlq.Committed(), err
}

func orders(vals ...string) []krec {
	out := make([]krec, len(vals))
	for i, v := range vals {
		out[i] = krec{Key: "k" + strconv.Itoa(i), Value: v, Topic: "in", Offset: int64(i), TS: int64(1000 * i)}
	}
	return out
}

func values(rs []krec) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Key + "=" + r.Value
	}
	sort.Strings(out)
	return out
}

func TestStatelessOperators(t *testing.T) {
	in := orders(
		`{"id":1,"user":"ann","amount":50,"items":[{"sku":"a"},{"sku":"b"}]}`,
		`{"id":2,"user":"bob","amount":150,"items":[]}`,
		`{"id":3,"user":"ann","amount":250,"items":[{"sku":"c"}]}`,
	)
	for _, tc := range []struct {
		name string
		step Step
		want []string
	}{
		{"filter", Step{Op: "filter", Params: Params{"if": "value.amount > 100"}}, []string{"k1=" + in[1].Value, "k2=" + in[2].Value}},
		{"map value", Step{Op: "map", Params: Params{"value": `{"u": value.user, "net": value.amount / 2}`}},
			[]string{`k0={"net":25,"u":"ann"}`, `k1={"net":75,"u":"bob"}`, `k2={"net":125,"u":"ann"}`}},
		{"map set remove key", Step{Op: "map", Params: Params{"set": map[string]string{"x.y": "value.id * 10", "src": "topic"}, "remove": []string{"items", "amount"}, "key": "value.user"}},
			[]string{`ann={"id":1,"user":"ann","src":"in","x":{"y":10}}`, `ann={"id":3,"user":"ann","src":"in","x":{"y":30}}`, `bob={"id":2,"user":"bob","src":"in","x":{"y":20}}`}},
		{"map set on a non-object", Step{Op: "map", Params: Params{"set": map[string]string{"user.x": "1"}}}, nil},
		{"map raw", Step{Op: "map", Params: Params{"value": `value.user + ":" + string(value.amount)`, "format": "raw"}},
			[]string{`k0=ann:50`, `k1=bob:150`, `k2=ann:250`}},
		{"key-by", Step{Op: "key-by", Params: Params{"key": "value.id"}}, []string{"1=" + in[0].Value, "2=" + in[1].Value, "3=" + in[2].Value}},
		{"explode", Step{Op: "explode", Params: Params{"array": "value.items", "value": `{"id": value.id, "sku": item.sku, "i": index}`}},
			[]string{`k0={"i":0,"id":1,"sku":"a"}`, `k0={"i":1,"id":1,"sku":"b"}`, `k2={"i":0,"id":3,"sku":"c"}`}},
		{"explode elements", Step{Op: "explode", Params: Params{"array": "value.items"}}, []string{`k0={"sku":"a"}`, `k0={"sku":"b"}`, `k2={"sku":"c"}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := runK(t, in, 2, []Step{tc.step}, flow.FailOnError)
			if tc.want == nil {
				if err == nil || !strings.Contains(err.Error(), `cannot set user.x: user is the string "`) {
					t.Errorf("error %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := values(out); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("output\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

func TestRoute(t *testing.T) {
	in := orders(`{"a":1}`, `{"a":500}`, `{"a":5000}`)
	cases := []Case{{If: "value.a >= 1000", Topic: "huge"}, {If: "value.a >= 100", Topic: "big"}}
	for _, tc := range []struct {
		dflt string
		want []string
	}{
		{"", []string{"k0:in", "k1:big", "k2:huge"}},
		{"small", []string{"k0:small", "k1:big", "k2:huge"}},
		{RouteDrop, []string{"k1:big", "k2:huge"}},
	} {
		out, _, err := runK(t, in, 1, []Step{{Op: "route", Params: Params{"cases": cases, "default": tc.dflt}}}, flow.FailOnError)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range out {
			got = append(got, r.Key+":"+r.Topic)
		}
		sort.Strings(got)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("default %q: %q, want %q", tc.dflt, got, tc.want)
		}
	}
}

// A record an expression fails on goes where the policy says, unchanged,
// and the others pass.
func TestExpressionPoisonRecords(t *testing.T) {
	in := orders(`{"amount":5}`, `not json`, `{"amount":500}`, `{"other":1}`)
	steps := []Step{{Op: "filter", Params: Params{"if": "value.amount > 100"}}}
	out, dead, err := runK(t, in, 1, steps, flow.DeadLetterOnError)
	if err != nil {
		t.Fatal(err)
	}
	if got := values(out); !reflect.DeepEqual(got, []string{"k2=" + in[2].Value}) {
		t.Errorf("output %q", got)
	}
	var deadKeys []string
	for _, f := range dead {
		deadKeys = append(deadKeys, f.Record.Key)
		if !errors.Is(f.Err, flow.ErrUnrecoverable) || !strings.Contains(f.Err.Error(), "filter") {
			t.Errorf("dead letter error %v", f.Err)
		}
	}
	sort.Strings(deadKeys)
	if !reflect.DeepEqual(deadKeys, []string{"k1", "k3"}) {
		t.Errorf("dead letters %q, want k1 and k3", deadKeys)
	}
	_, _, err = runK(t, in, 1, steps, flow.FailOnError)
	if err == nil || !errors.Is(err, flow.ErrUnrecoverable) || !strings.Contains(err.Error(), "record in/0@1: filter: ") {
		t.Errorf("fail policy: %v, want an unrecoverable error naming in/0@1", err)
	}
}

func TestAggregate(t *testing.T) {
	var in []krec
	var vals []string
	// Brute force: per user the running figures after each record.
	type fig struct {
		n           int
		sum         float64
		min, max    float64
		first, last string
		skus        map[string]bool
	}
	want := map[string][]string{}
	figs := map[string]*fig{}
	users := []string{"ann", "bob", "cy"}
	for i := 0; i < 60; i++ {
		u := users[(i*7)%3]
		amount := float64((i*37)%100) + 0.5
		sku := "s" + strconv.Itoa(i%4)
		vals = append(vals, `{"user":"`+u+`","amount":`+strconv.FormatFloat(amount, 'g', -1, 64)+`,"sku":"`+sku+`"}`)
		f := figs[u]
		if f == nil {
			f = &fig{min: amount, max: amount, first: sku, skus: map[string]bool{}}
			figs[u] = f
		}
		f.n++
		f.sum += amount
		f.min, f.max = min(f.min, amount), max(f.max, amount)
		f.last = sku
		f.skus[sku] = true
		b, _ := EncodeJSON(map[string]any{"key": u, "n": f.n, "total": f.sum, "lo": f.min, "hi": f.max, "avg": f.sum / float64(f.n),
			"first": f.first, "last": f.last, "skus": len(f.skus)})
		want[u] = append(want[u], string(b))
	}
	in = orders(vals...)
	step := Step{Op: "aggregate", Params: Params{"key": "value.user", "fields": map[string]string{
		"n": "count()", "total": "sum(value.amount)", "lo": "min(value.amount)", "hi": "max(value.amount)",
		"avg": "avg(value.amount)", "first": "first(value.sku)", "last": "last(value.sku)", "skus": "distinct(value.sku)"}}}
	for _, par := range []int{1, 3} {
		out, _, err := runK(t, in, par, []Step{step}, flow.FailOnError)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]string{}
		for _, r := range out {
			got[r.Key] = append(got[r.Key], r.Value)
		}
		// Each user's records come from two source splits, so only the
		// final figures and the count of updates are order-free.
		for u, w := range want {
			g := got[u]
			if len(g) != len(w) {
				t.Fatalf("parallelism %d: %s has %d updates, want %d", par, u, len(g), len(w))
			}
			last := w[len(w)-1]
			var finals []string
			for _, x := range g {
				if strings.Contains(x, `"n":`+strconv.Itoa(len(w))+`,`) {
					finals = append(finals, x)
				}
			}
			if len(finals) != 1 || !sameFigures(finals[0], last) {
				t.Errorf("parallelism %d: %s final %q, want %s", par, u, finals, last)
			}
		}
	}
}

// sameFigures compares two aggregate outputs, ignoring first and last
// (which depend on the order the two splits interleave).
func sameFigures(a, b string) bool {
	pa, _ := ParseJSON([]byte(a))
	pb, _ := ParseJSON([]byte(b))
	ma, mb := pa.(map[string]any), pb.(map[string]any)
	for _, k := range []string{"first", "last"} {
		delete(ma, k)
		delete(mb, k)
	}
	// Float sums may differ in the last bits with the order.
	for _, k := range []string{"total", "avg"} {
		fa, fb := toFloat(ma[k]), toFloat(mb[k])
		if d := fa - fb; d > 1e-9 || d < -1e-9 {
			return false
		}
		delete(ma, k)
		delete(mb, k)
	}
	return reflect.DeepEqual(ma, mb)
}

func TestAggregateIntegers(t *testing.T) {
	in := orders(`{"u":"a","n":2}`, `{"u":"a","n":3}`, `{"u":"a","n":1.5}`, `{"u":"a"}`)
	out, _, err := runK(t, in, 1, []Step{{Op: "aggregate", Params: Params{"key": "value.u", "fields": map[string]string{"s": "sum(value.n)", "m": "max(value.n)", "c": "count()"}}}}, flow.FailOnError)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`a={"c":1,"key":"a","m":2,"s":2}`, `a={"c":2,"key":"a","m":3,"s":5}`, `a={"c":3,"key":"a","m":3,"s":6.5}`, `a={"c":4,"key":"a","m":3,"s":6.5}`}
	if got := values(out); !reflect.DeepEqual(got, want) {
		t.Errorf("%q\nwant %q", got, want)
	}
}

func TestAggregateRejects(t *testing.T) {
	for _, tc := range []struct {
		fields map[string]string
		want   string
	}{
		{map[string]string{"x": "median(value.a)"}, `fields: x: "median(value.a)" is not an aggregate`},
		{map[string]string{"x": "count(value.a)"}, `count() takes no argument`},
		{map[string]string{"x": "sum()"}, `sum needs an expression`},
		{map[string]string{"key": "count()"}, `has a field called key`},
		{map[string]string{"x": "sum(value.a >> 1)"}, `unexpected token`},
	} {
		err := aggregateSpec.Check(aggregateSpec.WithDefaults(Params{"fields": tc.fields}))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.fields, err, tc.want)
		}
	}
}

// dedupe and count take any expression as the key, and leave the record's
// own key alone.
func TestKeyedByExpression(t *testing.T) {
	in := orders(`{"o":"x"}`, `{"o":"y"}`, `{"o":"x"}`, `{"o":"z"}`, `{"o":"y"}`)
	out, _, err := runK(t, in, 2, []Step{{Op: "dedupe", Params: Params{"key": "value.o", "ttl": time.Hour}}}, flow.FailOnError)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range out {
		keys = append(keys, r.Key)
	}
	sort.Strings(keys)
	// The first of x and y is k0/k1 or k2/k4 depending on the splits'
	// interleaving; three records pass, with input keys.
	if len(keys) != 3 || !strings.HasPrefix(keys[0], "k") {
		t.Errorf("dedupe by value.o passed %q", keys)
	}
	if ids := IDs([]Step{{Op: "dedupe", Params: Params{"key": "value.o", "ttl": time.Hour}}}); ids[0] != "dedupe:value.o" {
		t.Errorf("id %q", ids[0])
	}
}

// A record whose aggregate input is bad goes to the error policy and
// changes no figure.
func TestAggregatePoisonInput(t *testing.T) {
	in := orders(`{"u":"a","n":2}`, `{"u":"a","n":"three"}`, `not json`, `{"u":"a","n":4}`, `{"n":1}`)
	step := Step{Op: "aggregate", Params: Params{"key": "value.u", "fields": map[string]string{"s": "sum(value.n)"}}}
	out, dead, err := runK(t, in, 1, []Step{step}, flow.DeadLetterOnError)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`a={"key":"a","s":2}`, `a={"key":"a","s":6}`}
	if got := values(out); !reflect.DeepEqual(got, want) {
		t.Errorf("%q, want %q", got, want)
	}
	var keys []string
	for _, f := range dead {
		keys = append(keys, f.Record.Key)
	}
	sort.Strings(keys)
	if !reflect.DeepEqual(keys, []string{"k1", "k2", "k4"}) {
		t.Errorf("dead letters %q, want k1 (text to sum), k2 (not JSON), k4 (no key)", keys)
	}
}
