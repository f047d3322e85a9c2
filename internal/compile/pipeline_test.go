package compile

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/jobfile"
	"github.com/onceflow/onceflow/pipeline"
	"github.com/onceflow/onceflow/pipeline/kafkarec"
)

// rec is the record type of these tests.
type rec struct{ Key, Value string }

var recAccess = RecordAccess[rec]{
	Key:       func(r rec) string { return r.Key },
	WithCount: func(r rec, n int64) rec { return rec{Key: r.Key, Value: string(kafkarec.FormatCount(n))} },
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
func runPipeline(t testing.TB, in []rec, steps []jobfile.Step, parallelism int) (map[string][]string, *PipelineMetrics) {
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
func runPipelineWith(t testing.TB, in []rec, steps []jobfile.Step, parallelism int, policy flow.ErrorPolicy) pipelineRun {
	t.Helper()
	env := flow.New(flow.JobName("test"), flow.Parallelism(parallelism), flow.Logger(slog.New(slog.DiscardHandler)))
	s := flow.From(env, memSource{recs: in}, flow.UID("src"))
	m := &PipelineMetrics{}
	s, failures, err := BuildPipeline(s, steps, recAccess, policy, m, "")
	if err != nil {
		t.Fatal(err)
	}
	sink, dlq := &memSink{}, &memSink{}
	flow.To(s, sink, flow.UID("sink"))
	for i, f := range failures {
		dl := flow.Map(f, func(f flow.Failure[rec]) rec {
			if !errors.Is(f.Err, pipeline.ErrNotExtractable) {
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
	// As a job file gives them, and as Go code (the demo) writes them.
	dedupe := jobfile.Step{Op: jobfile.OpDedupe, Params: pipeline.Params{"key": jobfile.KeyRecordKey, "ttl": time.Hour}, UID: "dedupe-0"}
	count := jobfile.Step{Op: jobfile.OpCount, Params: pipeline.Params{"key": jobfile.KeyRecordKey}, UID: "count-1"}
	dedupeInGo := jobfile.Step{Op: jobfile.OpDedupe, Key: jobfile.KeyRecordKey, TTL: time.Hour, UID: "dedupe"}
	for _, tc := range []struct {
		name    string
		steps   []jobfile.Step
		want    map[string][]string
		dropped int64
	}{
		{"pass-through", nil, map[string][]string{"a": {"1", "2", "3"}, "b": {"1", "2"}, "c": {"1"}}, 0},
		{"dedupe keeps the first record of each key", []jobfile.Step{dedupe}, map[string][]string{"a": {"1"}, "b": {"1"}, "c": {"1"}}, 3},
		{"count emits the running count", []jobfile.Step{count}, map[string][]string{"a": {"1", "2", "3"}, "b": {"1", "2"}, "c": {"1"}}, 0},
		{"dedupe then count", []jobfile.Step{dedupe, count}, map[string][]string{"a": {"1"}, "b": {"1"}, "c": {"1"}}, 3},
		{"dedupe written in Go", []jobfile.Step{dedupeInGo}, map[string][]string{"a": {"1"}, "b": {"1"}, "c": {"1"}}, 3},
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

// BuildPipeline checks steps built in Go too, and names their lines.
func TestBuildPipelineRejectsUnsupportedSteps(t *testing.T) {
	env := flow.New()
	s := flow.From(env, memSource{}, flow.UID("src"))
	for _, tc := range []struct {
		step jobfile.Step
		want string
	}{
		{jobfile.Step{Op: "nope", Line: 3}, `pipeline operator nope (line 3): unknown operator "nope"; supported operators: ` + strings.Join(pipeline.Names(), ", ")},
		{jobfile.Step{Op: jobfile.OpCount, Key: "value.a +", Line: 4}, `pipeline operator count (line 4): key: expression "value.a +": unexpected token EOF at column 9`},
		{jobfile.Step{Op: jobfile.OpDedupe, Key: jobfile.KeyRecordKey, Line: 5}, `pipeline operator dedupe (line 5): ttl is missing: set how long a key is remembered, such as ttl: 24h (dedupe keeps one entry per distinct key until it expires)`},
		{jobfile.Step{Op: jobfile.OpExtractKey, Params: pipeline.Params{"json-field": ""}, Line: 6}, `pipeline operator extract-key (line 6): json-field is empty: name the JSON field whose value becomes the record key, such as json-field: user`},
	} {
		if _, _, err := BuildPipeline(s, []jobfile.Step{tc.step}, recAccess, flow.FailOnError, nil, ""); err == nil || err.Error() != tc.want {
			t.Errorf("step %+v: error\n%v\nwant\n%s", tc.step, err, tc.want)
		}
	}
}
