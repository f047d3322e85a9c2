package cli

import (
	"context"
	"io"
	"log/slog"
	"reflect"
	"sort"
	"strconv"
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
	env := flow.New(flow.JobName("test"), flow.Parallelism(parallelism), flow.Logger(slog.New(slog.DiscardHandler)))
	s := flow.From(env, memSource{recs: in}, flow.UID("src"))
	var m PipelineMetrics
	s, err := BuildPipeline(s, steps, recAccess, &m)
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	flow.To(s, sink, flow.UID("sink"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := env.Run(ctx); err != nil {
		t.Fatal(err)
	}
	byKey := map[string][]string{}
	for _, r := range sink.records() {
		byKey[r.Key] = append(byKey[r.Key], r.Value)
	}
	return byKey, &m
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
	st := state.NewStore(0, 127, 128, func() time.Time { return now })
	seen := state.NewValue[bool](st, "seen", state.WithTTL(time.Minute))
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
	} {
		if _, err := BuildPipeline(s, []Step{st}, recAccess, nil); err == nil {
			t.Errorf("step %+v accepted", st)
		}
	}
}
