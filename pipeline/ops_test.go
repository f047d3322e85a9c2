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
	"github.com/onceflow/onceflow/state"
)

// rec is the record type of these tests.
type rec struct{ Key, Value string }

var recAccess = RecordAccess[rec]{
	Key:       func(r rec) string { return r.Key },
	WithCount: func(r rec, n int64) rec { return rec{Key: r.Key, Value: strconv.FormatInt(n, 10)} },
	Value:     func(r rec) []byte { return []byte(r.Value) },
	WithKey:   func(r rec, key []byte) rec { return rec{Key: string(key), Value: r.Value} },
	Position:  func(r rec) string { return "rec(" + r.Key + ")" },
}

func recs(kv ...string) []rec {
	var out []rec
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, rec{kv[i], kv[i+1]})
	}
	return out
}

// result is what a run of a pipeline saw.
type result struct {
	byKey map[string][]string // the output's values by key, in arrival order
	dead  []rec               // the dead letters, sorted by key
	stats flow.Stats
	err   error // the job's
}

// run runs in through what build adds to the stream, with the given
// parallelism and without restarts, and collects the output and the dead
// letters (failures that do not wrap ErrNotExtractable show as
// "unexpected error" records).
func run(t *testing.T, in []rec, parallelism int, build func(flow.Stream[rec]) (flow.Stream[rec], []flow.Stream[flow.Failure[rec]], error)) result {
	t.Helper()
	env := flow.New(flow.JobName("test"), flow.Parallelism(parallelism), flow.Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	s, failures, err := build(flow.From(env, flowtest.NewSource(flowtest.Split(in, 1)), flow.UID("src")))
	if err != nil {
		t.Fatal(err)
	}
	sink, dlq := flowtest.NewSink[rec](), flowtest.NewSink[rec]()
	flow.To(s, sink, flow.UID("sink"))
	for i, f := range failures {
		dl := flow.Map(f, func(f flow.Failure[rec]) rec {
			if !errors.Is(f.Err, ErrNotExtractable) || !errors.Is(f.Err, flow.ErrUnrecoverable) {
				return rec{Key: "unexpected error", Value: f.Err.Error()}
			}
			return f.Record
		})
		flow.To(dl, dlq, flow.UID("dlq-"+strconv.Itoa(i)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := result{byKey: map[string][]string{}, err: job.Wait(), stats: job.Stats()}
	for _, x := range sink.Committed() {
		r.byKey[x.Key] = append(r.byKey[x.Key], x.Value)
	}
	r.dead = flowtest.SortedBy(dlq.Committed(), func(a, b rec) bool { return a.Key < b.Key })
	return r
}

// buildSteps is a build function for run that applies steps with Build.
func buildSteps(steps []Step, env Env) func(flow.Stream[rec]) (flow.Stream[rec], []flow.Stream[flow.Failure[rec]], error) {
	return func(s flow.Stream[rec]) (flow.Stream[rec], []flow.Stream[flow.Failure[rec]], error) {
		return Build(s, recAccess, steps, env)
	}
}

func TestBuildOperators(t *testing.T) {
	in := recs("a", "1", "b", "1", "a", "2", "c", "1", "a", "3", "b", "2")
	dedupe := Step{Op: "dedupe", Params: Params{"ttl": time.Hour}}
	count := Step{Op: "count"}
	for _, tc := range []struct {
		name    string
		steps   []Step
		want    map[string][]string
		dropped int64
	}{
		{"pass-through", nil, map[string][]string{"a": {"1", "2", "3"}, "b": {"1", "2"}, "c": {"1"}}, 0},
		{"dedupe keeps the first record of each key", []Step{dedupe}, map[string][]string{"a": {"1"}, "b": {"1"}, "c": {"1"}}, 3},
		{"count emits the running count", []Step{count}, map[string][]string{"a": {"1", "2", "3"}, "b": {"1", "2"}, "c": {"1"}}, 0},
		{"dedupe then count", []Step{dedupe, count}, map[string][]string{"a": {"1"}, "b": {"1"}, "c": {"1"}}, 3},
	} {
		for _, par := range []int{1, 3} {
			t.Run(tc.name+"/parallelism "+strconv.Itoa(par), func(t *testing.T) {
				var dropped atomic.Int64
				env := Env{Counter: func(name string) *atomic.Int64 {
					if name == DuplicatesDropped {
						return &dropped
					}
					return nil
				}}
				r := run(t, in, par, buildSteps(tc.steps, env))
				if r.err != nil {
					t.Fatal(r.err)
				}
				if !reflect.DeepEqual(r.byKey, tc.want) {
					t.Errorf("output %v, want %v", r.byKey, tc.want)
				}
				if d := dropped.Load(); d != tc.dropped {
					t.Errorf("duplicates dropped = %d, want %d", d, tc.dropped)
				}
			})
		}
	}
}

// The Go entry points do what the steps of the same name do.
func TestGoEntryPoints(t *testing.T) {
	in := recs("k1", `{"user":"alice"}`, "k2", `{"user":"bob"}`, "k3", `{"user":"alice"}`, "k4", `{"user":"alice"}`, "k5", `no json`)
	var dropped atomic.Int64
	r := run(t, in, 2, func(s flow.Stream[rec]) (flow.Stream[rec], []flow.Stream[flow.Failure[rec]], error) {
		s, bad, err := ExtractKey(s, recAccess, ExtractKeyConfig{JSONField: "user", OnError: flow.DeadLetterOnError})
		if err != nil {
			return s, nil, err
		}
		if s, err = Count(s, recAccess, CountConfig{}); err != nil {
			return s, nil, err
		}
		// A second keyed operator with the same default id needs its own.
		s, err = Dedupe(s, RecordAccess[rec]{Key: func(r rec) string { return r.Key + "/" + r.Value }}, DedupeConfig{TTL: time.Hour, Dropped: &dropped}, flow.UID("dedupe-counts"))
		return s, []flow.Stream[flow.Failure[rec]]{bad}, err
	})
	if r.err != nil {
		t.Fatal(r.err)
	}
	if want := map[string][]string{"alice": {"1", "2", "3"}, "bob": {"1"}}; !reflect.DeepEqual(r.byKey, want) {
		t.Errorf("output %v, want %v", r.byKey, want)
	}
	if want := recs("k5", "no json"); !reflect.DeepEqual(r.dead, want) {
		t.Errorf("dead letters %v, want %v", r.dead, want)
	}
	if dropped.Load() != 0 {
		t.Errorf("dropped %d, want 0", dropped.Load())
	}
}

func TestGoEntryPointErrors(t *testing.T) {
	s := flow.From(flow.New(), flowtest.NewSource([][]rec{nil}))
	if _, err := Dedupe(s, recAccess, DedupeConfig{}); err == nil || err.Error() != "pipeline.Dedupe: ttl must be positive: a key remembered for 0s drops nothing" {
		t.Errorf("Dedupe without a TTL: %v", err)
	}
	if _, err := Count(s, RecordAccess[rec]{Key: recAccess.Key}, CountConfig{}); err == nil || err.Error() != "pipeline.Count: RecordAccess.WithCount is nil: count needs it" {
		t.Errorf("Count without WithCount: %v", err)
	}
	if _, _, err := ExtractKey(s, RecordAccess[rec]{}, ExtractKeyConfig{JSONField: "user"}); err == nil ||
		err.Error() != "pipeline.ExtractKey: RecordAccess.Value, RecordAccess.Position and RecordAccess.WithKey are nil: extract-key needs them" {
		t.Errorf("ExtractKey without access: %v", err)
	}
	if _, _, err := ExtractKey(s, recAccess, ExtractKeyConfig{}); err == nil || !strings.Contains(err.Error(), "json-field is empty") {
		t.Errorf("ExtractKey without a field: %v", err)
	}
}

func TestCountValuesAreDistinctPerKey(t *testing.T) {
	// Many keys over several subtasks: every key's counts are 1..n in order.
	var in []rec
	n := map[string]int{}
	for i := range 500 {
		k := "k" + strconv.Itoa(i%37)
		n[k]++
		in = append(in, rec{k, strconv.Itoa(i)})
	}
	r := run(t, in, 4, buildSteps([]Step{{Op: "count", UID: "c"}}, Env{}))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.byKey) != len(n) {
		t.Fatalf("got %d keys, want %d", len(r.byKey), len(n))
	}
	for k, counts := range r.byKey {
		for i, v := range counts {
			if v != strconv.Itoa(i+1) {
				t.Fatalf("key %s: count #%d is %s, want %d (all: %v)", k, i, v, i+1, counts)
			}
		}
		if len(counts) != n[k] {
			t.Errorf("key %s: %d counts, want %d", k, len(counts), n[k])
		}
	}
}

func TestDedupeTTL(t *testing.T) {
	// The TTL logic runs against a store with a clock the test moves.
	now := time.Unix(1000, 0)
	st := state.NewRuntime(0, 127, 128, func() time.Time { return now }, nil)
	seen := state.NewValue[bool](st.Store(), "seen", state.WithTTL(time.Minute))
	st.Seal()
	step := func(key string, advance time.Duration) bool {
		now = now.Add(advance)
		st.SetKey(key)
		return seenBefore(seen)
	}
	for i, tc := range []struct {
		key     string
		advance time.Duration
		dup     bool
	}{
		{"a", 0, false},
		{"a", 30 * time.Second, true},  // within the TTL
		{"b", 0, false},                // other keys are independent
		{"a", 59 * time.Second, true},  // the sighting above restarted a's TTL
		{"a", 61 * time.Second, false}, // expired: passes again
		{"b", 0, false},                // b was last seen 2m ago: expired
	} {
		if got := step(tc.key, tc.advance); got != tc.dup {
			t.Errorf("step %d (%s after %v): duplicate = %v, want %v", i, tc.key, tc.advance, got, tc.dup)
		}
	}
}

func TestJSONFieldKey(t *testing.T) {
	for _, tc := range []struct {
		value, field string
		key          string // when ok
		err          string // message after the ErrNotExtractable prefix
	}{
		{value: `{"user":"alice","n":1}`, field: "user", key: "alice"},
		{value: ` { "user" : "al\u0069ce" } `, field: "user", key: "alice"},
		{value: `{"user":42}`, field: "user", key: "42"},
		{value: `{"user":-4.2e1}`, field: "user", key: "-4.2e1"},
		{value: `{"user":12345678901234567890123}`, field: "user", key: "12345678901234567890123"},
		{value: `{"user":""}`, field: "user", key: ""},
		{value: `{"a.b":"x"}`, field: "a.b", key: "x"},
		{value: `{"user":"alice"}`, field: "id", err: `the JSON object has no field "id"`},
		{value: `hello`, field: "user", err: `the value is not JSON (invalid character 'h' looking for beginning of value)`},
		{value: `{"user":"alice"} trailing`, field: "user", err: `the value is not JSON (invalid character 't' after top-level value)`},
		{value: ``, field: "user", err: `the value is empty, not a JSON object`},
		{value: `[1,2]`, field: "user", err: `the value is a JSON array, not an object`},
		{value: `"alice"`, field: "user", err: `the value is a JSON string, not an object`},
		{value: `null`, field: "user", err: `the value is JSON null, not an object`},
		{value: `{"user":true}`, field: "user", err: `field "user" is a boolean, not a string or number`},
		{value: `{"user":null}`, field: "user", err: `field "user" is null, not a string or number`},
		{value: `{"user":{"id":1}}`, field: "user", err: `field "user" is an object, not a string or number`},
		{value: `{"user":["a"]}`, field: "user", err: `field "user" is a list, not a string or number`},
	} {
		key, err := jsonFieldKey([]byte(tc.value), tc.field)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s [%s]: %v", tc.value, tc.field, err)
		case tc.err == "" && string(key) != tc.key:
			t.Errorf("%s [%s]: key %q, want %q", tc.value, tc.field, key, tc.key)
		case tc.err != "" && err == nil:
			t.Errorf("%s [%s]: key %q, want error %q", tc.value, tc.field, key, tc.err)
		case tc.err != "":
			if want := ErrNotExtractable.Error() + ": " + tc.err; err.Error() != want || !errors.Is(err, ErrNotExtractable) {
				t.Errorf("%s [%s]: error\n%v\nwant\n%s", tc.value, tc.field, err, want)
			}
		}
	}
}

func TestExtractKeyPolicies(t *testing.T) {
	// Poison records (not JSON, no field, wrong type) among good ones; the
	// count after extract-key shows the keys were set before keying.
	in := recs(
		"k1", `{"user":"alice"}`,
		"k2", `not json`,
		"k3", `{"user":"bob"}`,
		"k4", `{"id":7}`,
		"k5", `{"user":"alice"}`,
		"k6", `{"user":7}`,
		"k7", `{"user":false}`,
	)
	steps := []Step{
		{Op: "extract-key", Params: Params{"json-field": "user"}},
		{Op: "count"},
	}
	good := map[string][]string{"alice": {"1", "2"}, "bob": {"1"}, "7": {"1"}}
	poison := recs("k2", `not json`, "k4", `{"id":7}`, "k7", `{"user":false}`)
	for _, par := range []int{1, 3} {
		t.Run("skip/parallelism "+strconv.Itoa(par), func(t *testing.T) {
			r := run(t, in, par, buildSteps(steps, Env{Policy: flow.SkipOnError}))
			if r.err != nil {
				t.Fatal(r.err)
			}
			if !reflect.DeepEqual(r.byKey, good) {
				t.Errorf("output %v, want %v", r.byKey, good)
			}
			if r.stats.RecordsSkipped != 3 || r.stats.RecordsDeadLettered != 0 || len(r.dead) != 0 {
				t.Errorf("skipped %d, dead-lettered %d (%v); want 3 skipped", r.stats.RecordsSkipped, r.stats.RecordsDeadLettered, r.dead)
			}
		})
		t.Run("dead-letter/parallelism "+strconv.Itoa(par), func(t *testing.T) {
			r := run(t, in, par, buildSteps(steps, Env{Policy: flow.DeadLetterOnError}))
			if r.err != nil {
				t.Fatal(r.err)
			}
			if !reflect.DeepEqual(r.byKey, good) {
				t.Errorf("output %v, want %v", r.byKey, good)
			}
			if !reflect.DeepEqual(r.dead, poison) {
				t.Errorf("dead letters %v, want %v (unchanged, with an ErrNotExtractable error)", r.dead, poison)
			}
			if r.stats.RecordsDeadLettered != 3 || r.stats.RecordsSkipped != 0 {
				t.Errorf("dead-lettered %d, skipped %d; want 3 dead-lettered", r.stats.RecordsDeadLettered, r.stats.RecordsSkipped)
			}
		})
	}
	t.Run("fail", func(t *testing.T) {
		r := run(t, in, 1, buildSteps(steps, Env{Policy: flow.FailOnError}))
		if r.err == nil {
			t.Fatalf("the job did not fail; output %v", r.byKey)
		}
		for _, want := range []string{`record rec(k2): extract-key json-field "user": no key in the record value: the value is not JSON`, "error policy fail"} {
			if !strings.Contains(r.err.Error(), want) {
				t.Errorf("error does not contain %q:\n%v", want, r.err)
			}
		}
		if !errors.Is(r.err, ErrNotExtractable) || !errors.Is(r.err, flow.ErrUnrecoverable) {
			t.Errorf("error does not wrap ErrNotExtractable and flow.ErrUnrecoverable: %v", r.err)
		}
	})
}

func TestBuildRejects(t *testing.T) {
	s := flow.From(flow.New(), flowtest.NewSource([][]rec{nil}))
	for _, tc := range []struct {
		step Step
		acc  RecordAccess[rec]
		want string
	}{
		{Step{Op: "nope"}, recAccess, `pipeline step 1 (nope): unknown operator "nope"; supported operators: ` + strings.Join(Names(), ", ")},
		{Step{Op: "count", Params: Params{"key": "value.amount >> 3"}}, recAccess, `pipeline step 1 (count): key: expression "value.amount >> 3": unexpected token Operator(">") at column 15`},
		{Step{Op: "count", Params: Params{"ttl": time.Hour}}, recAccess, `pipeline step 1 (count): ttl is not a field of count; known fields: key`},
		{Step{Op: "dedupe"}, recAccess, `pipeline step 1 (dedupe): ttl is missing: set how long a key is remembered, such as ttl: 24h (dedupe keeps one entry per distinct key until it expires)`},
		{Step{Op: "dedupe", Params: Params{"ttl": "1h"}}, recAccess, `pipeline step 1 (dedupe): ttl: 1h is a string, not a duration`},
		{Step{Op: "dedupe", Params: Params{"ttl": -time.Second}}, recAccess, `pipeline step 1 (dedupe): ttl must be positive: a key remembered for -1s drops nothing`},
		{Step{Op: "extract-key", Params: Params{"json-field": ""}}, recAccess, `pipeline step 1 (extract-key): json-field is empty: name the JSON field whose value becomes the record key, such as json-field: user`},
		{Step{Op: "count"}, RecordAccess[rec]{Key: recAccess.Key}, `pipeline step 1 (count): RecordAccess.WithCount is nil: count needs it`},
	} {
		first := Step{Op: "dedupe", Params: Params{"ttl": time.Hour}, UID: "first"} // needs only Key
		_, _, err := Build(s, tc.acc, []Step{first, tc.step}, Env{})
		var se *StepError
		if !errors.As(err, &se) || se.Index != 1 || se.Op != tc.step.Op {
			t.Errorf("step %+v: error %v is not a StepError of step 1", tc.step, err)
		}
		if err == nil || err.Error() != tc.want {
			t.Errorf("step %+v: error\n%v\nwant\n%s", tc.step, err, tc.want)
		}
	}
}

func TestIDs(t *testing.T) {
	dedupe := func(ttl time.Duration, uid string) Step {
		return Step{Op: "dedupe", Params: Params{"ttl": ttl}, UID: uid}
	}
	for _, tc := range []struct {
		steps []Step
		want  []string
	}{
		{[]Step{dedupe(time.Hour, ""), dedupe(2*time.Hour, ""), dedupe(3*time.Hour, "")}, []string{"dedupe:record.key", "dedupe:record.key#2", "dedupe:record.key#3"}},
		// Explicit uids count as occurrences, so adding one moves nobody.
		{[]Step{{Op: "count", UID: "c"}, {Op: "count"}}, []string{"c", "count:record.key#2"}},
		{[]Step{{Op: "count", Params: Params{"key": "record.key"}}, {Op: "count"}}, []string{"count:record.key", "count:record.key#2"}},
		{[]Step{
			{Op: "extract-key", Params: Params{"json-field": "a"}},
			{Op: "extract-key", Params: Params{"json-field": "b"}},
			{Op: "extract-key", Params: Params{"json-field": "a"}},
		}, []string{"extract-key:a", "extract-key:b", "extract-key:a#2"}},
		// The ttl is not part of the id: changing it keeps the state.
		{[]Step{dedupe(time.Hour, ""), {Op: "count"}}, []string{"dedupe:record.key", "count:record.key"}},
		{[]Step{{Op: "nope"}, {Op: "nope"}}, []string{"nope", "nope#2"}},
	} {
		if got := IDs(tc.steps); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("IDs(%+v) = %q, want %q", tc.steps, got, tc.want)
		}
	}
}

func TestRegistry(t *testing.T) {
	if got, want := Names(), []string{"aggregate", "changelog-normalize", "count", "dedupe", "explode", "extract-key", "filter", "interval-join", "join", "key-by", "lookup", "map", "route", "select", "temporal-join", "top-n", "union", "window", "window-join"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Names() = %q, want %q", got, want)
	}
	for _, spec := range Specs() {
		if err := spec.selfCheck(); err != nil {
			t.Errorf("%s: %v", spec.Name, err)
		}
		// The spec's example is a valid step with the spec's own example
		// values, so the docs show something that works.
		for _, f := range spec.Fields {
			if f.Example == "" {
				t.Errorf("%s.%s has no example", spec.Name, f.Name)
			}
			if !strings.Contains(spec.Example, f.Name+": "+f.Example) && f.Required {
				t.Errorf("%s: the example %q does not show the required field %s", spec.Name, spec.Example, f.Name)
			}
		}
	}
	valid := Spec{Name: "x", Summary: "s", Build: func(Params, Env) (Operator, error) { return Operator{}, nil }, Props: losesKeys}
	for _, tc := range []struct {
		name   string
		change func(*Spec)
		want   string
	}{
		{"taken name", func(s *Spec) { s.Name = "dedupe" }, `operator "dedupe" is registered twice`},
		{"no build", func(s *Spec) { s.Build = nil }, "no Build function"},
		{"no props", func(s *Spec) { s.Props = nil }, "no Props function"},
		{"uid field", func(s *Spec) { s.Fields = []Field{{Name: "uid", Type: String, Description: "d"}} }, `field "uid" is declared twice, or is uid`},
		{"required without hint", func(s *Spec) { s.Fields = []Field{{Name: "f", Type: String, Required: true, Description: "d"}} }, "says nothing (Missing)"},
		{"bad default", func(s *Spec) { s.Fields = []Field{{Name: "f", Type: Duration, Default: "1h", Description: "d"}} }, "the default: 1h is a string, not a duration"},
		{"unknown id field", func(s *Spec) { s.IDField = "f" }, `IDField "f" is not a field`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := valid
			tc.change(&s)
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, tc.want) {
					t.Errorf("Register panicked with %q, want %q", msg, tc.want)
				}
			}()
			Register(s)
		})
	}
}

func TestExplain(t *testing.T) {
	for _, tc := range []struct {
		step Step
		want string
	}{
		{Step{Op: "dedupe", Params: Params{"ttl": 24 * time.Hour}}, "dedupe by record.key, ttl 24h"},
		{Step{Op: "dedupe", Params: Params{"ttl": 90 * time.Minute}}, "dedupe by record.key, ttl 1h30m"},
		{Step{Op: "count"}, "count by record.key"},
		{Step{Op: "extract-key", Params: Params{"json-field": "user id"}}, `extract-key from JSON field "user id" of the value`},
	} {
		spec, _ := Lookup(tc.step.Op)
		if got := spec.Explain(tc.step.Params); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.step, got, tc.want)
		}
	}
	plain := Spec{Name: "x", Fields: []Field{{Name: "f", Type: Duration, Default: time.Minute}}}
	if got := plain.Explain(nil); got != "x, f 1m" {
		t.Errorf("Explain without Describe = %q", got)
	}
}

func TestFieldNamesSorted(t *testing.T) {
	spec, _ := Lookup("dedupe")
	if got := spec.FieldNames(); !sort.StringsAreSorted(got) || len(got) != 3 {
		t.Errorf("FieldNames() = %q", got)
	}
}

// An operator is one registered spec: Build, IDs and Explain work from it
// alone.
func TestRegisteredOperator(t *testing.T) {
	Register(Spec{
		Name:    "suffix",
		Summary: "Appends a text to the record key.",
		Fields: []Field{
			{Name: "text", Type: String, Default: "!", Description: "What is appended.", Example: "!"},
		},
		IDField: "text",
		Props:   losesKeys,
		Build: func(p Params, _ Env) (Operator, error) {
			text := p.Text("text")
			return Operator{Uses: UsesKey | UsesWithKey, Map: func(r Record) error {
				r.SetKey([]byte(r.Key() + text))
				return nil
			}}, nil
		},
	})
	t.Cleanup(func() {
		registry.Lock()
		delete(registry.specs, "suffix")
		registry.Unlock()
	})
	steps := []Step{{Op: "suffix"}, {Op: "suffix", Params: Params{"text": "?"}}, {Op: "count"}}
	if got, want := IDs(steps), []string{"suffix:!", "suffix:?", "count:record.key"}; !reflect.DeepEqual(got, want) {
		t.Errorf("IDs = %q, want %q", got, want)
	}
	spec, _ := Lookup("suffix")
	if got := spec.Explain(nil); got != "suffix, text !" {
		t.Errorf("Explain = %q", got)
	}
	r := run(t, recs("a", "x", "b", "y", "a", "z"), 2, buildSteps(steps, Env{}))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if want := map[string][]string{"a!?": {"1", "2"}, "b!?": {"1"}}; !reflect.DeepEqual(r.byKey, want) {
		t.Errorf("output %v, want %v", r.byKey, want)
	}
}
