package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// TestRunSmall runs the whole benchmark on a small input. It asserts what
// Run promises besides speed: the ceiling, the pass-through and the keyed
// count on each backend, in order, each having copied and verified every
// record (the counts per key included), ratios relative to the first.
func TestRunSmall(t *testing.T) {
	cfg := Config{Records: 20_000, Partitions: 2, Keys: 500, CheckpointInterval: 10 * time.Millisecond, Progress: func(s string) { t.Log(s) }}
	rs, err := Run(kafkatest.ContextTimeout(t, 2*time.Minute), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", Format(rs))
	names := []string{NameCeiling, NamePassThrough, NamePassThroughMetrics, NameMapLoop, NameCountMemory, NameCountPebble}
	if len(rs) != len(names) {
		t.Fatalf("got %d results, want %d", len(rs), len(names))
	}
	for i, r := range rs {
		if r.Name != names[i] {
			t.Errorf("result %d is %q, want %q", i, r.Name, names[i])
		}
		if r.Records != cfg.Records {
			t.Errorf("%s copied %d records, want %d", r.Name, r.Records, cfg.Records)
		}
		if r.Elapsed <= 0 || r.RecordsPerSec <= 0 {
			t.Errorf("%s: elapsed %v, %v records/s: want both positive", r.Name, r.Elapsed, r.RecordsPerSec)
		}
		if want := r.RecordsPerSec / rs[0].RecordsPerSec; r.Ratio != want {
			t.Errorf("%s: ratio %v, want %v (its rate over the ceiling's)", r.Name, r.Ratio, want)
		}
		if want := r.RecordsPerSec / rs[3].RecordsPerSec; i > 3 && r.VsMapLoop != want {
			t.Errorf("%s: %v of the map loop, want %v (its rate over the map loop's)", r.Name, r.VsMapLoop, want)
		}
		if i <= 3 && r.VsMapLoop != 0 {
			t.Errorf("%s: %v of the map loop, want 0 (not a keyed count)", r.Name, r.VsMapLoop)
		}
	}
}

// With Pipelines the job-file steps run too, over JSON values, each
// copying every record (the filter keeps them all).
func TestRunSmallPipelines(t *testing.T) {
	cfg := Config{Records: 5_000, Partitions: 2, Keys: 100, CheckpointInterval: 10 * time.Millisecond, Backends: []string{flow.MemoryBackend}, Pipelines: true}
	rs, err := Run(kafkatest.ContextTimeout(t, 2*time.Minute), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", Format(rs))
	names := []string{NameCeiling, NamePassThrough, NamePassThroughMetrics, NameMapLoop, NameCountMemory, NameFilterMap, NameFilterMapSQL, NameSumPerKey, WindowName(flow.MemoryBackend)}
	if len(rs) != len(names) {
		t.Fatalf("got %d results, want %d", len(rs), len(names))
	}
	for i, r := range rs {
		if r.Name != names[i] || r.Records != cfg.Records {
			t.Errorf("result %d: %s with %d records, want %s with %d", i, r.Name, r.Records, names[i], cfg.Records)
		}
	}
}

// With Joins the join runs read both join inputs and write one verified
// pair per key, on each backend.
func TestRunSmallJoins(t *testing.T) {
	cfg := Config{Records: 4_000, Partitions: 2, CheckpointInterval: 10 * time.Millisecond, Joins: true}
	rs, err := Run(kafkatest.ContextTimeout(t, 2*time.Minute), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", Format(rs))
	names := []string{NameCeiling, NamePassThrough, NamePassThroughMetrics, NameMapLoop, NameCountMemory, NameCountPebble,
		JoinName(flow.MemoryBackend), IntervalJoinName(flow.MemoryBackend), JoinName(flow.PebbleBackend), IntervalJoinName(flow.PebbleBackend)}
	if len(rs) != len(names) {
		t.Fatalf("got %d results, want %d", len(rs), len(names))
	}
	for i, r := range rs {
		if r.Name != names[i] || r.Records != cfg.Records {
			t.Errorf("result %d: %s with %d records, want %s with %d", i, r.Name, r.Records, names[i], cfg.Records)
		}
	}
}

// The join verifier refuses a missing, duplicated or mismatched pair.
func TestJoinVerifier(t *testing.T) {
	pair := func(i int, customer string) []byte {
		o, _ := joinValues(i, 80)
		_, c := joinValues(0, 80)
		c = []byte(strings.Replace(string(c), `"c-0"`, `"`+customer+`"`, 1))
		return fmt.Appendf(nil, `{"left":%s,"right":%s}`, o, c)
	}
	tests := []struct {
		name string
		keys []int
		bad  int // index of a record whose customer is another, -1 none
		want string
	}{
		{"exact", []int{0, 1, 2}, -1, ""},
		{"missing", []int{0, 2}, -1, "2 distinct pairs, want 3"},
		{"twice", []int{0, 1, 1, 2}, -1, `key "c-1" joined twice`},
		{"wrong partner", []int{0, 1, 2}, 1, `pairs order 1 of customer "c-1" with customer "c-7"`},
		{"unknown key", []int{0, 1, 5}, -1, `unexpected join key "c-5"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := &joinVerifier{pairs: 3}
			var err error
			for j, k := range tt.keys {
				c := joinKey(k)
				if j == tt.bad {
					c = "c-7"
				}
				if err = v.record([]byte(joinKey(k)), pair(k, c)); err != nil {
					break
				}
			}
			if err == nil {
				err = v.finish()
			}
			if tt.want == "" {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrOutputMismatch) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want ErrOutputMismatch containing %q", err, tt.want)
			}
		})
	}
}

func TestJSONValue(t *testing.T) {
	v := jsonValue(1234, 100, 100)
	var m map[string]any
	if err := json.Unmarshal(v, &m); err != nil || m["user"] != "user-34" || m["amount"] != 234.34 || len(v) != 100 {
		t.Errorf("jsonValue = %s (%d bytes), %v", v, len(v), err)
	}
}

// TestBenchFull runs the default benchmark; set ONCEFLOW_BENCH=1 to run it.
// Other settings, from the environment:
//
//	ONCEFLOW_BENCH_RECORDS=N     input records (default 200k, which runs well
//	                             under a second per job, so fixed start-up
//	                             costs weigh in and no periodic checkpoint
//	                             happens; 2M includes them)
//	ONCEFLOW_BENCH_KEYS=N        distinct keys, the keyed count's state size
//	ONCEFLOW_BENCH_BACKENDS=a,b  the keyed count's backends (memory,pebble)
//	ONCEFLOW_BENCH_STATE_MEMORY=BYTES  the pebble backend's memory budget
//	ONCEFLOW_BENCH_METRICS_FIRST=1  measure the pass-through with metrics
//	                             before the plain one
//	ONCEFLOW_BENCH_PIPELINES=1   JSON values, and the job-file steps
//	                             filter+map and a sum per key over them
//	ONCEFLOW_BENCH_JOINS=1       a regular and an interval join of two
//	                             topics of JSON values (Records/2 each),
//	                             once per backend
//	ONCEFLOW_BENCH_TIMEOUT=d     bound of the whole run (default 10m; pass a
//	                             longer go test -timeout too)
//	ONCEFLOW_BENCH_CHECKPOINT_INTERVAL=d  the jobs' checkpoint interval and
//	                             the ceiling's transaction interval
//	                             (default 1s); a long one shows what a
//	                             job costs without its checkpoints
func TestBenchFull(t *testing.T) {
	if os.Getenv("ONCEFLOW_BENCH") != "1" {
		t.Skip("set ONCEFLOW_BENCH=1 to run the full benchmark")
	}
	cfg := Config{Progress: func(s string) { t.Log(s) }}
	if n, err := strconv.Atoi(os.Getenv("ONCEFLOW_BENCH_RECORDS")); err == nil {
		cfg.Records = n
	}
	if n, err := strconv.Atoi(os.Getenv("ONCEFLOW_BENCH_KEYS")); err == nil {
		cfg.Keys = n
	}
	cfg.MetricsFirst = os.Getenv("ONCEFLOW_BENCH_METRICS_FIRST") == "1"
	cfg.Pipelines = os.Getenv("ONCEFLOW_BENCH_PIPELINES") == "1"
	cfg.Joins = os.Getenv("ONCEFLOW_BENCH_JOINS") == "1"
	if n, err := strconv.ParseInt(os.Getenv("ONCEFLOW_BENCH_STATE_MEMORY"), 10, 64); err == nil {
		cfg.StateMemory = n
	}
	if s := os.Getenv("ONCEFLOW_BENCH_BACKENDS"); s != "" {
		cfg.Backends = strings.Split(s, ",")
	}
	if s := os.Getenv("ONCEFLOW_BENCH_CHECKPOINT_INTERVAL"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("ONCEFLOW_BENCH_CHECKPOINT_INTERVAL: %v", err)
		}
		cfg.CheckpointInterval = d
	}
	timeout := 10 * time.Minute
	if s := os.Getenv("ONCEFLOW_BENCH_TIMEOUT"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("ONCEFLOW_BENCH_TIMEOUT: %v", err)
		}
		timeout = d
	}
	rs, err := Run(kafkatest.ContextTimeout(t, timeout), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", Format(rs))
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string // substring of the error, "" for valid
	}{
		{"zero value is the default", Config{}, ""},
		{"negative records", Config{Records: -1}, "record count -1 is negative"},
		{"negative partitions", Config{Partitions: -2}, "partition count -2 is negative"},
		{"too many partitions", Config{Partitions: 1 << 20}, "at most"},
		{"negative value size", Config{ValueSize: -1}, "value size -1 is negative"},
		{"negative keys", Config{Keys: -1}, "key count -1 is negative"},
		{"negative interval", Config{CheckpointInterval: -time.Second}, "checkpoint interval -1s is negative"},
		{"empty broker", Config{Brokers: []string{"a:1", " "}}, "broker address 1 is empty"},
		{"negative state memory", Config{StateMemory: -1}, "state memory -1 is negative"},
		{"unknown backend", Config{Backends: []string{"rocksdb"}}, `state backend "rocksdb" is unknown`},
		{"backend twice", Config{Backends: []string{"pebble", "memory", "pebble"}}, `state backend "pebble" is listed twice`},
		{"one backend", Config{Backends: []string{"pebble"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.withDefaults()
			err := cfg.validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("validate: %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("validate: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	var c Config
	c.withDefaults()
	want := Config{Records: DefaultRecords, Partitions: DefaultPartitions, ValueSize: DefaultValueSize, Keys: DefaultKeys, CheckpointInterval: DefaultCheckpointInterval}
	if c.Records != want.Records || c.Partitions != want.Partitions || c.ValueSize != want.ValueSize || c.Keys != want.Keys || c.CheckpointInterval != want.CheckpointInterval {
		t.Errorf("defaults %+v, want %+v", c, want)
	}
	if want := []string{flow.MemoryBackend, flow.PebbleBackend}; !slices.Equal(c.Backends, want) {
		t.Errorf("default backends %v, want %v", c.Backends, want)
	}
	if CountName(flow.MemoryBackend) != NameCountMemory || CountName(flow.PebbleBackend) != NameCountPebble {
		t.Errorf("CountName: %q, %q; want %q, %q", CountName(flow.MemoryBackend), CountName(flow.PebbleBackend), NameCountMemory, NameCountPebble)
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	_, err := Run(context.Background(), Config{Records: -5})
	if err == nil || !strings.Contains(err.Error(), "record count -5") {
		t.Fatalf("Run: %v, want the validation error", err)
	}
}

// produce writes the records key/value pairs (alternating) to topic,
// inside one committed transaction when txn is set, and, with abort, a
// second transaction of the same records that is aborted.
func produce(tb testing.TB, addr, topic string, txn, abort bool, kv ...string) {
	tb.Helper()
	ctx := kafkatest.ContextTimeout(tb, 30*time.Second)
	c := kafkatest.Cluster{Addr: addr}
	if err := createTopic(ctx, c.Admin(tb), topic, 2); err != nil {
		tb.Fatal(err)
	}
	opts := []kgo.Opt{kgo.DefaultProduceTopic(topic)}
	if txn {
		opts = append(opts, kgo.TransactionalID("t-"+topic))
	}
	cl := c.Client(tb, opts...)
	var rs []*kgo.Record
	for i := 0; i+1 < len(kv); i += 2 {
		rs = append(rs, &kgo.Record{Key: []byte(kv[i]), Value: []byte(kv[i+1])})
	}
	once := func(end kgo.TransactionEndTry) {
		if txn {
			if err := cl.BeginTransaction(); err != nil {
				tb.Fatal(err)
			}
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			tb.Fatal(err)
		}
		if txn {
			if err := cl.EndTransaction(ctx, end); err != nil {
				tb.Fatal(err)
			}
		}
	}
	once(kgo.TryCommit)
	if abort {
		once(kgo.TryAbort)
	}
}

// TestVerifyOutput checks that the verification Run relies on fails on
// missing, extra and duplicated output, and ignores aborted records.
func TestVerifyOutput(t *testing.T) {
	addr := kafkatest.Start(t, broker.Config{Partitions: 2}).Addr
	perKey := []int{2, 1} // key-0 twice, key-1 once
	tests := []struct {
		name       string
		txn, abort bool
		kv         []string
		want       int
		counts     bool
		wantErr    string // "" for success
	}{
		{"exact", false, false, []string{"key-0", "1", "key-0", "2", "key-1", "1"}, 3, true, ""},
		{"aborted copies are not counted", true, true, []string{"key-0", "1", "key-0", "2", "key-1", "1"}, 3, true, ""},
		{"missing record", false, false, []string{"key-0", "1", "key-1", "1"}, 3, false, "sees 2 records, want 3"},
		{"extra record", false, false, []string{"key-0", "1", "key-0", "2", "key-1", "1", "key-1", "1"}, 3, false, "sees 4 records, want 3"},
		{"duplicated count", false, false, []string{"key-0", "1", "key-0", "1", "key-1", "1"}, 3, true, `"key-0" has count 1 twice`},
		{"count out of range", false, false, []string{"key-0", "1", "key-0", "3", "key-1", "1"}, 3, true, `"key-0" has count "3", want 1..2`},
		{"unknown key", false, false, []string{"key-0", "1", "key-0", "2", "key-7", "1"}, 3, true, `unexpected key "key-7"`},
		{"missing count", false, false, []string{"key-0", "1", "key-1", "1"}, 2, true, `"key-0" has 1 distinct counts, want 1..2`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topic := "out-" + strconv.Itoa(i)
			produce(t, addr, topic, tt.txn, tt.abort, tt.kv...)
			var v verifier = countOnly{}
			if tt.counts {
				v = &countVerifier{perKey: perKey}
			}
			err := verifyOutput(kafkatest.ContextTimeout(t, 30*time.Second), []string{addr}, topic, tt.want, v)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("verifyOutput: %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrOutputMismatch) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("verifyOutput: %v, want ErrOutputMismatch containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestFormat(t *testing.T) {
	got := Format([]Result{
		{Name: "ceiling", Records: 1000, Elapsed: 2 * time.Second, RecordsPerSec: 500, Ratio: 1},
		{Name: "a longer name", Records: 1000, Elapsed: 4 * time.Second, RecordsPerSec: 250, Ratio: 0.5},
	})
	want := "" +
		"run              records    elapsed    records/s   ratio\n" +
		"ceiling             1000         2s          500   1.00x\n" +
		"a longer name       1000         4s          250   0.50x\n"
	if got != want {
		t.Errorf("Format:\n%s\nwant:\n%s", got, want)
	}
}

// RunOverhead alternates the order of its pairs and verifies every run's
// output (a run that lost a record would fail it).
func TestRunOverheadSmall(t *testing.T) {
	cfg := Config{Records: 5_000, Partitions: 2, Keys: 100, CheckpointInterval: 10 * time.Millisecond}
	ps, err := RunOverhead(kafkatest.ContextTimeout(t, 2*time.Minute), cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", FormatOverhead(ps))
	if len(ps) != 3 {
		t.Fatalf("%d pairs, want 3", len(ps))
	}
	for i, p := range ps {
		if p.MetricsFirst != (i%2 == 1) {
			t.Errorf("pair %d: metrics first %v, want the order to alternate", i, p.MetricsFirst)
		}
		if p.Plain <= 0 || p.Metrics <= 0 || p.PlainCPU <= 0 || p.MetricsCPU <= 0 {
			t.Errorf("pair %d: %+v, want every time positive", i, p)
		}
	}
	if _, err := RunOverhead(context.Background(), cfg, 0); err == nil || !strings.Contains(err.Error(), "at least 1") {
		t.Errorf("0 pairs: %v", err)
	}
}

func TestSummarize(t *testing.T) {
	s := time.Second
	ps := []OverheadPair{
		{Plain: 10 * s, Metrics: 10 * s, PlainCPU: 4 * s, MetricsCPU: 4 * s},
		{MetricsFirst: true, Plain: 9 * s, Metrics: 10 * s, PlainCPU: 4 * s, MetricsCPU: 5 * s},
		{Plain: 12 * s, Metrics: 10 * s, PlainCPU: 6 * s, MetricsCPU: 5 * s},
	}
	got := Summarize(ps)
	if got.Median != 1.0 || got.Min != 0.9 || got.Max != 1.2 || got.Pooled != 31.0/30 {
		t.Errorf("median %v, range %v–%v, pooled %v; want 1, 0.9–1.2, %v", got.Median, got.Min, got.Max, got.Pooled, 31.0/30)
	}
	if got.PlainFirstMedian != 1.1 || got.MetricsFirstMedian != 0.9 {
		t.Errorf("by order: plain first %v, metrics first %v; want 1.1 and 0.9", got.PlainFirstMedian, got.MetricsFirstMedian)
	}
	if got.CPUPooled != 14.0/14 || got.CPUMedian != 1.0 {
		t.Errorf("CPU: median %v, pooled %v; want 1 and 1", got.CPUMedian, got.CPUPooled)
	}
	if want := math.Cbrt(1.0 * 0.9 * 1.2); math.Abs(got.GeoMean-want) > 1e-12 || got.GeoLow > got.GeoMean || got.GeoHigh < got.GeoMean {
		t.Errorf("geometric mean %v (%v–%v), want %v within its interval", got.GeoMean, got.GeoLow, got.GeoHigh, want)
	}
	if got.Low < got.Min || got.High > got.Max || got.Low > got.Median || got.High < got.Median {
		t.Errorf("interval %v–%v, want it within the range %v–%v and around the median %v", got.Low, got.High, got.Min, got.Max, got.Median)
	}
}

// TestBenchOverhead measures the metrics' overhead on the pass-through in
// pairs of runs of alternating order; set ONCEFLOW_BENCH=1 and
// ONCEFLOW_BENCH_OVERHEAD_PAIRS=N (ONCEFLOW_BENCH_RECORDS sets each run's
// records, default 200k).
func TestBenchOverhead(t *testing.T) {
	pairs, err := strconv.Atoi(os.Getenv("ONCEFLOW_BENCH_OVERHEAD_PAIRS"))
	if os.Getenv("ONCEFLOW_BENCH") != "1" || err != nil {
		t.Skip("set ONCEFLOW_BENCH=1 and ONCEFLOW_BENCH_OVERHEAD_PAIRS=N to measure the metrics' overhead")
	}
	cfg := Config{Progress: func(s string) { t.Log(s) }}
	if n, err := strconv.Atoi(os.Getenv("ONCEFLOW_BENCH_RECORDS")); err == nil {
		cfg.Records = n
	}
	ps, err := RunOverhead(kafkatest.ContextTimeout(t, time.Hour), cfg, pairs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", FormatOverhead(ps))
}
