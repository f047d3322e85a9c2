package pipeline

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
)

// kresult is what a run of steps over krecs saw.
type kresult struct {
	out   []krec
	dead  []krec // the failure stream's records, with the error as the key
	stats flow.Stats
	err   error
}

// runSteps runs in through steps with the error policy, parallelism 2.
func runSteps(t *testing.T, in []krec, steps []Step, policy flow.ErrorPolicy) kresult {
	t.Helper()
	env := flow.New(flow.JobName("test"), flow.Parallelism(2), flow.Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	s, failures, err := Build(flow.From(env, flowtest.NewSource(flowtest.Split(in, 1)), flow.UID("src")), kAccess, steps, Env{Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	sink, dlq := flowtest.NewSink[krec](), flowtest.NewSink[krec]()
	flow.To(s, sink, flow.UID("sink"))
	for i, f := range failures {
		flow.To(flow.Map(f, func(f flow.Failure[krec]) krec {
			r := f.Record
			r.Key = f.Err.Error()
			if !errors.Is(f.Err, flow.ErrUnrecoverable) {
				r.Key = "recoverable?! " + r.Key
			}
			return r
		}), dlq, flow.UID("dlq-"+string(rune('0'+i))))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := kresult{err: job.Wait(), stats: job.Stats()}
	r.out = flowtest.SortedBy(sink.Committed(), func(a, b krec) bool { return a.Offset < b.Offset })
	r.dead = flowtest.SortedBy(dlq.Committed(), func(a, b krec) bool { return a.Offset < b.Offset })
	return r
}

func named(kv ...string) []Named {
	var out []Named
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, Named{Name: kv[i], Text: kv[i+1]})
	}
	return out
}

var eventSchema = named("user_id", "BIGINT", "event_time", "TIMESTAMP(3)", "action_type", "STRING",
	"person", "ROW<id BIGINT, name STRING>", "ts", "TIMESTAMP_LTZ(3) METADATA FROM 'timestamp'",
	"src", "STRING METADATA FROM 'topic'")

func events(values ...string) []krec {
	var out []krec
	for i, v := range values {
		out = append(out, krec{Key: "k" + string(rune('0'+i)), Value: v, Topic: "events", Offset: int64(i), TS: 1700000000000 + int64(i)})
	}
	return out
}

func TestSelectStep(t *testing.T) {
	in := events(
		`{"user_id": 1, "event_time": "2026-12-01 10:00:00.123", "action_type": "buy", "person": {"id": 7, "name": "Ann"}}`,
		`{"user_id": 2, "event_time": "2026-12-01T10:00:01Z", "action_type": "view"}`,
		`{"user_id": 3, "action_type": "cart", "extra": [1, 2]}`,
		`{"user_id": 4, "event_time": 1796119200000}`,
	)
	for _, tc := range []struct {
		name   string
		params Params
		want   []string // key, then value
	}{
		{
			"projection, where and key",
			Params{"schema": eventSchema, "where": "action_type <> 'view'", "key": []string{"user_id"},
				"columns": named("message_id", "md5(concat(cast(user_id AS STRING), cast(event_time AS STRING)))",
					"user_id", "user_id", "t", "upper(action_type)", "who", "person.name", "at", "ts", "topic", "src")},
			[]string{
				"1", `{"message_id":"` + md5hex("12026-12-01 10:00:00.123") + `","user_id":1,"t":"BUY","who":"Ann","at":"2023-11-14 22:13:20.000Z","topic":"events"}`,
				"3", `{"message_id":null,"user_id":3,"t":"CART","who":null,"at":"2023-11-14 22:13:20.002Z","topic":"events"}`,
			},
		},
		{
			"columns omitted: the schema's columns; the key stays",
			Params{"schema": named("user_id", "BIGINT", "event_time", "TIMESTAMP(3)"), "where": "user_id >= 2"},
			[]string{
				"k1", `{"user_id":2,"event_time":"2026-12-01 10:00:01.000"}`,
				"k2", `{"user_id":3,"event_time":null}`,
				"k3", `{"user_id":4,"event_time":"2026-12-01 10:00:00.000"}`,
			},
		},
		{
			"two key columns",
			Params{"schema": eventSchema, "where": "user_id = 1", "key": []string{"u", "a"},
				"columns": named("u", "user_id", "a", "action_type")},
			[]string{`[1,"buy"]`, `{"u":1,"a":"buy"}`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runSteps(t, in, []Step{{Op: "select", Params: tc.params}}, flow.FailOnError)
			if r.err != nil {
				t.Fatal(r.err)
			}
			var got []string
			for _, x := range r.out {
				got = append(got, x.Key, x.Value)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("output\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

// Records that do not fit the schema or that an expression fails on are
// poison records, handled by the error policy.
func TestSelectPoisonRecords(t *testing.T) {
	in := events(
		`{"user_id": 1, "action_type": "buy"}`,
		`{"user_id": "abc", "action_type": "buy"}`,
		`{"user_id": 2, "action_type": "buy"`,
		`{"user_id": 3, "action_type": "x1"}`,
		`{"user_id": 4, "action_type": "42"}`,
	)
	steps := []Step{{Op: "select", Params: Params{"schema": eventSchema,
		"columns": named("user_id", "user_id", "n", "CAST(action_type AS INT)"), "where": "user_id <> 4 OR action_type = '42'"}}}
	want := []string{`{"user_id":4,"n":42}`}
	deadWant := []string{
		`record events/0@1: select: column user_id: expected BIGINT, got "abc"`,
		`record events/0@2: select: the value is not a JSON object: at byte 35: unexpected end of the value`,
		`record events/0@3: select: column n: CAST('x1' AS INT): the STRING value cannot be converted`,
	}
	values := func(rs []krec) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Value)
		}
		return out
	}
	t.Run("dead-letter", func(t *testing.T) {
		r := runSteps(t, in, steps, flow.DeadLetterOnError)
		if r.err != nil {
			t.Fatal(r.err)
		}
		// The first record fails too: CAST('buy' AS INT).
		if got := values(r.out); !reflect.DeepEqual(got, want) {
			t.Errorf("output %q, want %q", got, want)
		}
		var keys []string
		for _, d := range r.dead {
			keys = append(keys, d.Key)
		}
		if len(r.dead) != 4 || r.dead[1].Value != in[1].Value || !reflect.DeepEqual(keys[1:], deadWant) {
			t.Errorf("dead letters:\n%q\nwant 4, the last three\n%q", keys, deadWant)
		}
		if r.stats.RecordsDeadLettered != 4 {
			t.Errorf("dead-lettered %d, want 4", r.stats.RecordsDeadLettered)
		}
	})
	t.Run("skip", func(t *testing.T) {
		r := runSteps(t, in, steps, flow.SkipOnError)
		if r.err != nil {
			t.Fatal(r.err)
		}
		if got := values(r.out); !reflect.DeepEqual(got, want) || r.stats.RecordsSkipped != 4 {
			t.Errorf("output %q, skipped %d; want %q, 4 skipped", got, r.stats.RecordsSkipped, want)
		}
	})
	t.Run("fail", func(t *testing.T) {
		r := runSteps(t, in, steps, flow.FailOnError)
		if r.err == nil || !strings.Contains(r.err.Error(), "record events/0@0: select: column n: CAST('buy' AS INT)") ||
			!errors.Is(r.err, flow.ErrUnrecoverable) {
			t.Errorf("job error %v", r.err)
		}
	})
}

// Errors in the step's SQL are reported when it is built, with the field,
// the output column, the SQL text and the place in it.
func TestSelectBuildErrors(t *testing.T) {
	spec, _ := Lookup("select")
	for _, tc := range []struct {
		params Params
		want   string
	}{
		{Params{}, "schema is missing"},
		{Params{"schema": named("a", "BIGNIT")}, `schema.a: "BIGNIT": line 1, column 1: unknown type BIGNIT; did you mean BIGINT?`},
		{Params{"schema": named("a", "BIGINT"), "columns": named("x", "0.908 * prise")},
			`columns.x: "0.908 * prise": line 1, column 9: unknown column prise`},
		{Params{"schema": named("a", "BIGINT"), "columns": named("x", "a +")}, `columns.x: "a +": line 1, column 4: expected an expression`},
		{Params{"schema": named("a", "BIGINT"), "columns": named("x", "uuid()")}, `columns.x: "uuid()": line 1, column 1: UUID() is not deterministic`},
		{Params{"schema": named("a", "BIGINT"), "where": "a"}, `where: "a": line 1, column 1: the condition is a BIGINT, not a BOOLEAN`},
		{Params{"schema": named("a", "BIGINT"), "key": []string{"b"}}, "key: b is not an output column"},
		{Params{"schema": named("a", "INT METADATA FROM 'nope'")}, `schema.a: "INT METADATA FROM 'nope'": unknown metadata key "nope"`},
		{Params{"schema": []Named{{"a", "INT"}, {"a", "INT"}}}, "schema: a is given twice"},
	} {
		err := spec.Check(spec.WithDefaults(tc.params))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.params, err, tc.want)
		}
		var fe *FieldError
		if err != nil && !errors.As(err, &fe) {
			t.Errorf("%v: %T is not a *FieldError", tc.params, err)
		}
	}
}

// select reads only what its columns need of a record: no headers or
// metadata unless a metadata column is used, no value when only metadata
// is.
func TestSelectUses(t *testing.T) {
	for _, tc := range []struct {
		params Params
		want   Access
	}{
		{Params{"schema": eventSchema, "columns": named("u", "user_id")}, UsesValue | UsesWithValue | UsesPosition},
		{Params{"schema": eventSchema, "columns": named("t", "ts")}, UsesMeta | UsesWithValue | UsesPosition},
		{Params{"schema": named("k", "STRING METADATA FROM 'key'", "h", "MAP<STRING, BYTES> METADATA FROM 'headers'"),
			"columns": named("k", "k", "h", "h"), "key": []string{"k"}}, UsesKey | UsesHeaders | UsesWithKey | UsesWithValue | UsesPosition},
	} {
		op, err := selectConfig(tc.params, Env{}).operator()
		if err != nil {
			t.Fatal(err)
		}
		if op.Uses != tc.want {
			t.Errorf("%v: uses %b, want %b", tc.params, op.Uses, tc.want)
		}
	}
}

func TestSelectDescribeAndProps(t *testing.T) {
	spec, _ := Lookup("select")
	p := Params{"schema": eventSchema, "columns": named("u", "user_id", "a", "upper(action_type)"), "where": "user_id > 1", "key": []string{"u"}}
	if got, want := spec.Explain(p), "select u = user_id, a = upper(action_type) where user_id > 1, key u"; got != want {
		t.Errorf("Explain = %q, want %q", got, want)
	}
	// The value is replaced, so key expressions over it do not survive
	// the step, with or without key:.
	for _, p := range []Params{p, {"schema": eventSchema}} {
		if pr := spec.PropsOf(spec.WithDefaults(p)); pr.Keys != KeysLost || pr.Keyed || pr.Routes {
			t.Errorf("props %+v", pr)
		}
	}
	if spec.DefaultID(p) != "select" {
		t.Errorf("default id %q", spec.DefaultID(p))
	}
}

// The Go entry point does what the step does.
func TestSelectGo(t *testing.T) {
	in := events(`{"user_id": 5, "action_type": "buy"}`, `{"user_id": 6, "action_type": "view"}`)
	env := flow.New(flow.JobName("test"), flow.Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	s, _, err := Select(flow.From(env, flowtest.NewSource(flowtest.Split(in, 1)), flow.UID("src")), kAccess,
		SelectConfig{Schema: eventSchema, Columns: named("x", "user_id * 2"), Where: "action_type = 'buy'"})
	if err != nil {
		t.Fatal(err)
	}
	sink := flowtest.NewSink[krec]()
	flow.To(s, sink, flow.UID("sink"))
	job, err := env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range sink.Committed() {
		got = append(got, r.Key+" "+r.Value)
	}
	sort.Strings(got)
	if want := []string{`k0 {"x":10}`}; !reflect.DeepEqual(got, want) {
		t.Errorf("output %q, want %q", got, want)
	}
	if _, _, err := Select(s, kAccess, SelectConfig{Schema: named("a", "INT"), Columns: named("x", "nosuch")}); err == nil ||
		!strings.Contains(err.Error(), `pipeline.Select: columns.x: "nosuch": line 1, column 1: unknown column nosuch`) {
		t.Errorf("error %v", err)
	}
}

// nexmarkBid is a Nexmark bid event as the generator writes it.
const nexmarkBid = `{"event_type":2,"person":null,"auction":null,"bid":{"auction":1000,"bidder":2001,"price":1234,"channel":"Google","url":"https://www.nexmark.com/a/b/c","dateTime":"2026-12-01 10:00:00.123","extra":""}}`

// q1Select is Nexmark q1 as a select step: SELECT auction, bidder, 0.908
// * price AS price, dateTime, extra FROM bid.
var q1Select = SelectConfig{
	Schema: named("event_type", "INT", "bid",
		"ROW<auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING, dateTime TIMESTAMP(3), extra STRING>"),
	Columns: named("auction", "bid.auction", "bidder", "bid.bidder", "price", "0.908 * bid.price",
		"dateTime", "bid.dateTime", "extra", "bid.extra"),
	Where: "event_type = 2",
}

func TestSelectNexmarkQ1(t *testing.T) {
	op, err := q1Select.operator()
	if err != nil {
		t.Fatal(err)
	}
	h := &handle[krec]{acc: &kAccess, rec: krec{Key: "k", Value: strings.Replace(nexmarkBid, "1234", "13015233", 1)}}
	n := 0
	if err := op.Each(h, func() { n++ }); err != nil {
		t.Fatal(err)
	}
	want := `{"auction":1000,"bidder":2001,"price":11817831.564,"dateTime":"2026-12-01 10:00:00.123","extra":""}`
	if n != 1 || h.rec.Value != want {
		t.Errorf("emitted %d: %s\nwant %s", n, h.rec.Value, want)
	}
	h.rec.Value = `{"event_type":1,"person":{"id":1},"auction":null,"bid":null}`
	if err := op.Each(h, func() { n++ }); err != nil || n != 1 {
		t.Errorf("a person event: emitted %d, %v", n-1, err)
	}
}

// BenchmarkSelect runs Nexmark q1 on a bid record: the select step, and
// the filter and map steps of internal/nexmark/queries/q1.yaml doing the
// same with expr-lang. ns and allocations per record, without the engine.
func BenchmarkSelect(b *testing.B) {
	sel, err := q1Select.operator()
	if err != nil {
		b.Fatal(err)
	}
	filter, err := FilterConfig{If: "value.event_type == 2"}.operator()
	if err != nil {
		b.Fatal(err)
	}
	mapOp, err := MapConfig{Value: `{"auction": value.bid.auction, "bidder": value.bid.bidder, "price": value.bid.price * 908 / 1000, "dateTime": value.bid.dateTime, "extra": value.bid.extra}`}.operator()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("select", func(b *testing.B) {
		h := &handle[krec]{acc: &kAccess}
		emitted := 0
		emit := func() { emitted++ }
		b.ReportAllocs()
		cpu := cpuNanos()
		for b.Loop() {
			h.rec = krec{Key: "k", Value: nexmarkBid}
			if err := sel.Each(h, emit); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(cpuNanos()-cpu)/float64(b.N), "cpu-ns/op")
		if emitted == 0 {
			b.Fatal("nothing emitted")
		}
	})
	b.Run("filter+map", func(b *testing.B) {
		h := &handle[krec]{acc: &kAccess}
		emitted := 0
		pass := false
		emit := func() { pass = true }
		b.ReportAllocs()
		cpu := cpuNanos()
		for b.Loop() {
			h.rec = krec{Key: "k", Value: nexmarkBid}
			pass = false
			if err := filter.Each(h, emit); err != nil {
				b.Fatal(err)
			}
			if pass {
				if err := mapOp.Map(h); err != nil {
					b.Fatal(err)
				}
				emitted++
			}
		}
		b.ReportMetric(float64(cpuNanos()-cpu)/float64(b.N), "cpu-ns/op")
		if emitted == 0 {
			b.Fatal("nothing emitted")
		}
	})
}

// A select writes its output as a csv line or as the raw text of its one
// column when asked.
func TestSelectOutputFormats(t *testing.T) {
	in := []krec{{Key: "k", Value: `{"id": 7, "name": "a, \"b\"", "score": null}`}, {Key: "k", Value: `{"id": 8, "name": "c", "score": 1.5}`}}
	schema := []Named{{Name: "id", Text: "BIGINT"}, {Name: "name", Text: "STRING"}, {Name: "score", Text: "DOUBLE"}}
	for _, tc := range []struct {
		params Params
		want   []string
	}{
		{Params{"schema": schema, "output-format": "csv"}, []string{`7,"a, ""b""",`, `8,c,1.5`}},
		{Params{"schema": schema, "output-format": "csv", "output-csv-field-delimiter": "|", "output-csv-null-literal": `\N`}, []string{`7|"a, ""b"""|\N`, `8|c|1.5`}},
		{Params{"schema": schema, "columns": []Named{{Name: "name", Text: "name"}}, "output-format": "raw"}, []string{`a, "b"`, `c`}},
		{Params{"schema": schema, "columns": []Named{{Name: "s", Text: "score"}}, "output-format": "raw"}, []string{``, `1.5`}},
	} {
		res := runSteps(t, in, []Step{{Op: "select", Params: tc.params}}, flow.FailOnError)
		var got []string
		for _, r := range res.out {
			got = append(got, r.Value)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v: got %q, want %q", tc.params["output-format"], got, tc.want)
		}
	}
	if _, err := (SelectConfig{Schema: schema, OutputFormat: "raw"}).operator(); err == nil || !strings.Contains(err.Error(), "raw writes one column, and the select has 3") {
		t.Errorf("raw of three columns: %v", err)
	}
}
