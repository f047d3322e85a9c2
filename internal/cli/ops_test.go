package cli

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/state"
)

// rec is the record type of these tests.
type rec struct{ Key, Value string }

var recAccess = RecordAccess[rec]{
	Key:       func(r rec) string { return r.Key },
	WithCount: func(r rec, n int64) rec { return rec{Key: r.Key, Value: string(formatCount(n))} },
	Value:     func(r rec) []byte { return []byte(r.Value) },
	WithKey:   func(r rec, key []byte) rec { return rec{Key: string(key), Value: r.Value} },
	Position:  func(r rec) string { return "rec(" + r.Key + ")" },
}

// memSource emits its records once from subtask 0 and ends.
type memSource struct{ recs []rec }

func (s memSource) Open(_ context.Context, sc flow.SourceContext, _ map[string][]byte) (flow.SourceReader[rec], error) {
	r := &memReader{}
	if sc.Subtask == 0 {
		r.recs = s.recs
	}
	return r, nil
}

type memReader struct{ recs []rec }

func (r *memReader) Poll(_ context.Context, emit func(rec)) error {
	if len(r.recs) == 0 {
		return io.EOF
	}
	for _, x := range r.recs {
		emit(x)
	}
	r.recs = nil
	return nil
}
func (r *memReader) Snapshot(int64) (map[string][]byte, error)        { return nil, nil }
func (r *memReader) CheckpointCommitted(context.Context, int64) error { return nil }
func (r *memReader) Close() error                                     { return nil }
func (s *memSink) Committer(context.Context, string, string) (flow.SinkCommitter, error) {
	return nopCommitter{}, nil
}

// memSink collects what reaches the commit, in arrival order per key.
type memSink struct {
	mu  sync.Mutex
	out []rec
}

func (s *memSink) Open(context.Context, flow.SinkContext) (flow.SinkWriter[rec], error) {
	return &memWriter{s: s}, nil
}

func (s *memSink) records() []rec {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]rec(nil), s.out...)
}

type memWriter struct {
	s       *memSink
	pending []rec
}

func (w *memWriter) Write(_ context.Context, r rec) error {
	w.pending = append(w.pending, r)
	return nil
}
func (w *memWriter) Prepare(context.Context, int64) ([]byte, error) {
	w.s.mu.Lock()
	w.s.out = append(w.s.out, w.pending...)
	w.s.mu.Unlock()
	w.pending = nil
	return nil, nil
}
func (w *memWriter) Commit(context.Context, int64, []byte) error { return nil }
func (w *memWriter) Close() error                                { return nil }

type nopCommitter struct{}

func (nopCommitter) Commit(context.Context, int64, []byte) error { return nil }
func (nopCommitter) Close() error                                { return nil }

// runPipeline runs in through steps with the given parallelism and returns
// what reached the sink, grouped by key in order of arrival.
func runPipeline(t testing.TB, in []rec, steps []Step, parallelism int) (map[string][]string, *PipelineMetrics) {
	t.Helper()
	r := runPipelineWith(t, in, steps, parallelism, flow.FailOnError)
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.byKey, r.m
}

// pipelineRun is what runPipelineWith saw.
type pipelineRun struct {
	byKey map[string][]string
	dead  []rec // the dead letters: the failed records, Key and Value as read
	m     *PipelineMetrics
	stats flow.Stats
	err   error // the job's
}

// runPipelineWith runs in through steps under an error policy, without
// restarts, and collects the output and the dead letters.
func runPipelineWith(t testing.TB, in []rec, steps []Step, parallelism int, policy flow.ErrorPolicy) pipelineRun {
	t.Helper()
	env := flow.New(flow.JobName("test"), flow.Parallelism(parallelism), flow.Logger(slog.New(slog.DiscardHandler)))
	s := flow.From(env, memSource{recs: in}, flow.UID("src"))
	m := &PipelineMetrics{}
	s, failures, err := BuildPipeline(s, steps, recAccess, policy, m)
	if err != nil {
		t.Fatal(err)
	}
	sink, dlq := &memSink{}, &memSink{}
	flow.To(s, sink, flow.UID("sink"))
	for i, f := range failures {
		dl := flow.Map(f, func(f flow.Failure[rec]) rec {
			if !errors.Is(f.Err, ErrNotExtractable) {
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
	r := pipelineRun{byKey: map[string][]string{}, m: m, dead: dlq.records()}
	r.err = job.Wait()
	r.stats = job.Stats()
	r.dead = dlq.records()
	for _, x := range sink.records() {
		r.byKey[x.Key] = append(r.byKey[x.Key], x.Value)
	}
	return r
}

func recs(kv ...string) []rec {
	var out []rec
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, rec{kv[i], kv[i+1]})
	}
	return out
}

func TestPipelineOperators(t *testing.T) {
	in := recs("a", "1", "b", "1", "a", "2", "c", "1", "a", "3", "b", "2")
	dedupe := Step{Op: OpDedupe, Key: KeyRecordKey, TTL: time.Hour, UID: "dedupe-0"}
	count := Step{Op: OpCount, Key: KeyRecordKey, UID: "count-1"}
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
				got, m := runPipeline(t, in, tc.steps, par)
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("output %v, want %v", got, tc.want)
				}
				if d := m.DuplicatesDropped.Load(); d != tc.dropped {
					t.Errorf("duplicates dropped = %d, want %d", d, tc.dropped)
				}
			})
		}
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
	got, _ := runPipeline(t, in, []Step{{Op: OpCount, Key: KeyRecordKey, UID: "c"}}, 4)
	keys := make([]string, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) != len(n) {
		t.Fatalf("got %d keys, want %d", len(keys), len(n))
	}
	for _, k := range keys {
		for i, v := range got[k] {
			if v != strconv.Itoa(i+1) {
				t.Fatalf("key %s: count #%d is %s, want %d (all: %v)", k, i, v, i+1, got[k])
			}
		}
		if len(got[k]) != n[k] {
			t.Errorf("key %s: %d counts, want %d", k, len(got[k]), n[k])
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

func TestBuildPipelineRejectsUnsupportedSteps(t *testing.T) {
	env := flow.New()
	s := flow.From(env, memSource{}, flow.UID("src"))
	for _, st := range []Step{
		{Op: "window", Key: KeyRecordKey, Line: 3},
		{Op: OpCount, Key: "record.value", Line: 4},
		{Op: OpDedupe, Key: KeyRecordKey, Line: 5},
		{Op: OpExtractKey, Line: 6},
	} {
		if _, _, err := BuildPipeline(s, []Step{st}, recAccess, flow.FailOnError, nil); err == nil {
			t.Errorf("step %+v accepted", st)
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
		{Op: OpExtractKey, JSONField: "user", UID: "extract-key-0", Line: 1},
		{Op: OpCount, Key: KeyRecordKey, UID: "count-1", Line: 2},
	}
	good := map[string][]string{"alice": {"1", "2"}, "bob": {"1"}, "7": {"1"}}
	poison := []rec{{"k2", `not json`}, {"k4", `{"id":7}`}, {"k7", `{"user":false}`}}
	for _, par := range []int{1, 3} {
		t.Run("skip/parallelism "+strconv.Itoa(par), func(t *testing.T) {
			r := runPipelineWith(t, in, steps, par, flow.SkipOnError)
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
			r := runPipelineWith(t, in, steps, par, flow.DeadLetterOnError)
			if r.err != nil {
				t.Fatal(r.err)
			}
			if !reflect.DeepEqual(r.byKey, good) {
				t.Errorf("output %v, want %v", r.byKey, good)
			}
			dead := append([]rec(nil), r.dead...)
			sort.Slice(dead, func(i, j int) bool { return dead[i].Key < dead[j].Key })
			if !reflect.DeepEqual(dead, poison) {
				t.Errorf("dead letters %v, want %v (unchanged, with an ErrNotExtractable error)", dead, poison)
			}
			if r.stats.RecordsDeadLettered != 3 || r.stats.RecordsSkipped != 0 {
				t.Errorf("dead-lettered %d, skipped %d; want 3 dead-lettered", r.stats.RecordsDeadLettered, r.stats.RecordsSkipped)
			}
		})
	}
	t.Run("fail", func(t *testing.T) {
		r := runPipelineWith(t, in, steps, 1, flow.FailOnError)
		if r.err == nil {
			t.Fatalf("the job did not fail; output %v", r.byKey)
		}
		for _, want := range []string{`record rec(k2): extract-key json-field "user": no key in the record value: the value is not JSON`, "error policy fail"} {
			if !strings.Contains(r.err.Error(), want) {
				t.Errorf("error does not contain %q:\n%v", want, r.err)
			}
		}
		if !errors.Is(r.err, ErrNotExtractable) {
			t.Errorf("error does not wrap ErrNotExtractable: %v", r.err)
		}
	})
}
