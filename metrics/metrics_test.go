package metrics_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/metrics"
	"github.com/onceflow/onceflow/pipeline"
	"github.com/onceflow/onceflow/state"
)

func quiet() flow.Option { return flow.Logger(slog.New(slog.NewTextHandler(io.Discard, nil))) }

// scrape gathers reg and returns every sample as "name{a=x,b=y}" -> value
// (labels sorted; a histogram as its _count and _sum).
func scrape(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(ls)
			key := func(suffix string) string { return mf.GetName() + suffix + "{" + strings.Join(ls, ",") + "}" }
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[key("")] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key("")] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[key("_count")] = float64(m.GetHistogram().GetSampleCount())
				out[key("_sum")] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

// sumOf adds the samples of metric name whose labels include every one of
// with ("k=v").
func sumOf(samples map[string]float64, name string, with ...string) (sum float64, n int) {
	for k, v := range samples {
		if !strings.HasPrefix(k, name+"{") {
			continue
		}
		labels := strings.Split(strings.TrimSuffix(strings.TrimPrefix(k, name+"{"), "}"), ",")
		ok := true
		for _, w := range with {
			ok = ok && slices.Contains(labels, w)
		}
		if ok {
			sum += v
			n++
		}
	}
	return sum, n
}

type event struct {
	Key string
	Seq int
}

// A job over a known input: the counters read what it did, a checkpoint
// that times out counts as failed, and a task's busy, idle and
// backpressured time add up to a second per second.
func TestCountersOfAKnownJob(t *testing.T) {
	const keys, perKey = 20, 50
	var evs []event
	for i := range keys * perKey {
		evs = append(evs, event{Key: fmt.Sprint("k", i%keys), Seq: i})
	}
	m := metrics.New()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	var seen atomic.Int64
	var sampled atomic.Bool
	var mid map[string]float64
	var slowly func(event)
	src := flowtest.NewSource(flowtest.Split(evs, 2), flowtest.PerPoll(5))
	sink := flowtest.NewSink[event]()
	env := flow.New(flow.JobName("known"), quiet(), flow.StateDir(t.TempDir()),
		flow.Checkpointing(20*time.Millisecond), flow.CheckpointTimeout(time.Second), flow.TolerableCheckpointFailures(-1),
		flow.WithHooks(m))
	in := flow.From(env, src, flow.UID("src"))
	counted := flow.Process(flow.KeyBy(in, func(e event) string { return e.Key }), "count", func(s *state.Store) flow.ProcessFunc[event, event] {
		n := state.NewValue[int64](s, "n")
		return func(ctx flow.Context, e event, out flow.Collector[event]) error {
			slowly(e)
			c, _ := n.Get()
			n.Set(c + 1)
			out.Emit(e)
			return nil
		}
	})
	// The keyed task is slow; the source waits for it (backpressure).
	slowly = func(event) {
		n := seen.Add(1)
		if n == 300 {
			// Holds the barrier past the checkpoint timeout: one
			// checkpoint at least fails. (The timeout is not shorter:
			// the job's final checkpoint must not time out on a loaded
			// machine, which restarts the job.)
			time.Sleep(1500 * time.Millisecond)
		}
		if n == 700 && !sampled.Load() {
			// The load needs two samples, a second apart.
			time.Sleep(2500 * time.Millisecond)
			mid = scrape(t, reg)
			sampled.Store(true)
		}
		time.Sleep(200 * time.Microsecond)
	}
	flow.To(counted, sink, flow.UID("sink"))
	j, err := env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	got := scrape(t, reg)
	const job = "job_name=known"
	want := map[string]float64{
		"onceflow_records_in_total{" + job + "}":        keys * perKey,
		"onceflow_records_committed_total{" + job + "}": keys * perKey,
		"onceflow_job_running{" + job + "}":             0,
		"onceflow_in_progress_checkpoints{" + job + "}": 0,
		"onceflow_restarts_total{" + job + "}":          0,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	done := got["onceflow_completed_checkpoints_total{"+job+"}"]
	if done < 1 || got["onceflow_checkpoint_duration_seconds_count{"+job+"}"] != done || got["onceflow_checkpoint_commit_duration_seconds_count{"+job+"}"] != done {
		t.Errorf("completed checkpoints %v; duration histogram counts %v and %v: want equal and at least 1", done,
			got["onceflow_checkpoint_duration_seconds_count{"+job+"}"], got["onceflow_checkpoint_commit_duration_seconds_count{"+job+"}"])
	}
	if got["onceflow_failed_checkpoints_total{"+job+"}"] < 1 {
		t.Errorf("failed checkpoints %v: the checkpoint held past its timeout did not count", got["onceflow_failed_checkpoints_total{"+job+"}"])
	}
	if got["onceflow_last_checkpoint_size_bytes{"+job+"}"] <= 0 || got["onceflow_last_checkpoint_id{"+job+"}"] < 1 {
		t.Errorf("last checkpoint: size %v, id %v", got["onceflow_last_checkpoint_size_bytes{"+job+"}"], got["onceflow_last_checkpoint_id{"+job+"}"])
	}
	if got["onceflow_checkpoint_interval_seconds{"+job+"}"] != 0.02 {
		t.Errorf("checkpoint interval %v, want 0.02", got["onceflow_checkpoint_interval_seconds{"+job+"}"])
	}

	// In the middle of the run: per task figures.
	if mid == nil {
		t.Fatal("no scrape in the middle of the run")
	}
	if mid["onceflow_job_running{"+job+"}"] != 1 {
		t.Errorf("job_running mid-run = %v", mid["onceflow_job_running{"+job+"}"])
	}
	for _, task := range []string{"src", "count"} {
		tl := "task=" + task
		if p, _ := sumOf(mid, "onceflow_task_parallelism", job, tl); p < 1 {
			t.Errorf("task %s: parallelism %v", task, p)
		}
		busy, n1 := sumOf(mid, "onceflow_task_busy_time_ms_per_second", job, tl)
		idle, n2 := sumOf(mid, "onceflow_task_idle_time_ms_per_second", job, tl)
		bp, n3 := sumOf(mid, "onceflow_task_backpressured_time_ms_per_second", job, tl)
		if n1+n2+n3 != 3 {
			t.Errorf("task %s: load figures missing mid-run: %d of 3", task, n1+n2+n3)
			continue
		}
		if sum := busy + idle + bp; math.Abs(sum-1000) > 1 {
			t.Errorf("task %s: busy %.1f + idle %.1f + backpressured %.1f ms/s = %.1f, want 1000", task, busy, idle, bp, sum)
		}
		t.Logf("task %s mid-run: busy %.0f, idle %.0f, backpressured %.0f ms/s", task, busy, idle, bp)
		// The time per operator of the task's chain (docs/design.md, "Time
		// per operator"): shares of the task's time, the first operator's
		// series named by the task's uid.
		if share, n := sumOf(mid, "onceflow_task_operator_time_ratio", job, tl, "operator="+task); n != 1 || share < 0 || share > 1 {
			t.Errorf("task %s: operator time ratio of its first operator %v (%d series), want one series in [0, 1]", task, share, n)
		}
	}
	// The source waited for room while the map slept: backpressured.
	if bp, _ := sumOf(mid, "onceflow_task_backpressured_time_ms_per_second", job, "task=src"); bp < 500 {
		t.Errorf("source backpressured %.0f ms/s while the next task slept; want most of the time", bp)
	}
	if in, _ := sumOf(mid, "onceflow_task_records_in_total", job, "task=src"); in < 700 {
		t.Errorf("source task records in mid-run = %v, want at least 700", in)
	}
}

// The Kafka source reports offsets and lag per partition and the sink its
// transactions: after the job read everything, the current and committed
// offsets are the end offsets and the lag is 0; while the job is held,
// current offset plus lag is the end offset of every partition.
func TestKafkaOffsetsLagAndTransactions(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{})
	c.CreateTopic(t, "in", 2)
	c.CreateTopic(t, "out", 1)
	const n = 400
	kv := make([]string, 0, 2*n)
	for i := range n {
		kv = append(kv, fmt.Sprint("k", i%7), fmt.Sprint("v", i))
	}
	c.Produce(t, "in", kv...)
	client := kafka.ClientConfig{Brokers: []string{c.Addr}}
	src, err := kafka.NewSource(kafka.SourceConfig{Client: client, Topics: []string{"in"}, StartupMode: kafka.StartEarliest})
	if err != nil {
		t.Fatal(err)
	}
	sink, err := kafka.NewSink(kafka.SinkConfig{Client: client, Topic: "out", OffsetsOf: []*kafka.Source{src}})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	m := metrics.New()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	var hold atomic.Bool
	release := make(chan struct{})
	env := flow.New(flow.JobName("lag"), quiet(), flow.StateDir(t.TempDir()), flow.Checkpointing(50*time.Millisecond), flow.WithHooks(m))
	in := flow.Map(flow.From(env, src, flow.UID("in")), func(r kafka.Record) kafka.Record {
		if hold.Load() {
			<-release
		}
		return kafka.Record{Key: r.Key, Value: r.Value}
	})
	flow.To(in, sink, flow.UID("out"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	j, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const job, op = "job_name=lag", "operator=in"
	eventually := func(what string, ok func(map[string]float64) bool) map[string]float64 {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			s := scrape(t, reg)
			if ok(s) {
				return s
			}
			if time.Now().After(deadline) {
				keys := make([]string, 0, len(s))
				for k, v := range s {
					if strings.Contains(k, "source_") || strings.Contains(k, "kafka_") || strings.Contains(k, "committed") {
						keys = append(keys, fmt.Sprintf("%s=%v", k, v))
					}
				}
				sort.Strings(keys)
				t.Fatalf("%s: not reached in 20s; samples:\n%s", what, strings.Join(keys, "\n"))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	s := eventually("everything read and committed", func(s map[string]float64) bool {
		cur, parts := sumOf(s, "onceflow_source_current_offset", job, op)
		com, _ := sumOf(s, "onceflow_source_committed_offset", job, op)
		pend, _ := sumOf(s, "onceflow_source_pending_records", job, op)
		return parts == 2 && cur == n && com == n && pend == 0 && s["onceflow_records_committed_total{"+job+"}"] == n
	})
	if lagMax, k := sumOf(s, "onceflow_source_records_lag_max", job, op); k != 1 || lagMax != 0 {
		t.Errorf("records_lag_max = %v (%d series), want 0", lagMax, k)
	}
	txns, _ := sumOf(s, "onceflow_kafka_sink_transactions_committed_total", job, "operator=out")
	if txns < 1 {
		t.Errorf("kafka sink transactions committed = %v, want at least 1", txns)
	}
	if ok, _ := sumOf(s, "onceflow_source_commits_succeeded_total", job, op); ok < 1 {
		t.Errorf("source commits succeeded = %v, want at least 1", ok)
	}

	// Hold the job and write more: the lag is what it has not read.
	hold.Store(true)
	kv = kv[:0]
	for i := range 100 {
		kv = append(kv, fmt.Sprint("k", i%7), fmt.Sprint("w", i))
	}
	c.Produce(t, "in", kv...)
	s = eventually("lag of the records written while the job is held", func(s map[string]float64) bool {
		cur, _ := sumOf(s, "onceflow_source_current_offset", job, op)
		lag, parts := sumOf(s, "onceflow_source_records_lag", job, op)
		pend, _ := sumOf(s, "onceflow_source_pending_records", job, op)
		return parts == 2 && cur+lag == n+100 && pend == lag && lag > 0
	})
	for _, p := range []string{"partition=0", "partition=1"} {
		cur, _ := sumOf(s, "onceflow_source_current_offset", job, op, p)
		lag, _ := sumOf(s, "onceflow_source_records_lag", job, op, p)
		t.Logf("%s: current offset %v, lag %v", p, cur, lag)
	}
	close(release)
	eventually("caught up again", func(s map[string]float64) bool {
		pend, _ := sumOf(s, "onceflow_source_pending_records", job, op)
		com, _ := sumOf(s, "onceflow_source_committed_offset", job, op)
		return pend == 0 && com == n+100
	})
	cancel()
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := len(c.ReadCommitted(t, "out")); got != n+100 {
		t.Errorf("output holds %d records, want %d", got, n+100)
	}
}

// lookupTable is a pipeline.LookupTable holding the rows of even keys.
type lookupTable struct{}

func (lookupTable) Get(_ context.Context, keys [][]string) ([][][]byte, error) {
	out := make([][][]byte, len(keys))
	for i, k := range keys {
		var n int
		fmt.Sscan(k[0], &n)
		if n%2 == 0 {
			out[i] = [][]byte{fmt.Appendf(nil, `{"id":%d}`, n)}
		}
	}
	return out, nil
}

func (lookupTable) Close() error { return nil }

// A lookup join's cache hits and misses and its queries' latency are on
// /metrics: counters and a histogram (docs/design.md, "Metrics and the
// REST API").
func TestLookupJoinMetrics(t *testing.T) {
	type rec struct{ V string }
	acc := pipeline.RecordAccess[rec]{
		Value:     func(r rec) []byte { return []byte(r.V) },
		WithValue: func(r rec, v []byte) rec { return rec{V: string(v)} },
		Position:  func(r rec) string { return r.V },
	}
	var in []rec
	for i := range 1000 {
		in = append(in, rec{fmt.Sprintf(`{"k":%d}`, i%50)})
	}
	m := metrics.New()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	env := flow.New(flow.JobName("lookup"), quiet(), flow.StateDir(t.TempDir()), flow.WithHooks(m))
	s := flow.From(env, flowtest.NewSource(flowtest.Split(in, 1)), flow.UID("src"))
	out, _, err := pipeline.LookupJoin(s, acc, pipeline.LookupConfig{Table: lookupTable{}, Source: pipeline.LookupSource{Table: "t", Keys: []string{"id"}, Columns: []string{"id"}},
		KeyExprs: []string{"value.k"}, Kind: pipeline.LookupLeft, Cache: pipeline.LookupCachePartial}, flow.UID("lookup"))
	if err != nil {
		t.Fatal(err)
	}
	sink := flowtest.NewSink[rec]()
	flow.To(out, sink, flow.UID("sink"))
	if err := env.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(sink.Committed()); n != 1000 {
		t.Fatalf("%d records out of a LEFT lookup join of 1000", n)
	}
	got := scrape(t, reg)
	hits, _ := sumOf(got, "onceflow_lookup_cache_hits_total", "operator=lookup")
	misses, _ := sumOf(got, "onceflow_lookup_cache_misses_total", "operator=lookup")
	if misses != 50 || hits != 950 {
		t.Errorf("cache hits %v, misses %v; want 950 and 50 (50 keys, each looked up once)", hits, misses)
	}
	n, _ := sumOf(got, "onceflow_lookup_seconds_count", "operator=lookup")
	queries, _ := sumOf(got, "onceflow_lookup_queries_total", "operator=lookup")
	if n == 0 || n != queries {
		t.Errorf("the latency histogram counts %v queries, the counter %v", n, queries)
	}
}
