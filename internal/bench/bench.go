// Package bench measures onceflow's end-to-end Kafka throughput against a
// ceiling, as ratios.
//
// Absolute records per second say little on a shared machine: they drift
// with whatever else runs. [Run] therefore measures, in one run on one
// broker and one input topic, a hand-written franz-go transactional
// consume->produce loop (the ceiling: the least work an exactly-once copy
// through Kafka transactions can do with the same client library) and two
// onceflow jobs doing the same copy with checkpoints (a pass-through, and a
// keyed count once per state backend), and reports each as a ratio of the
// ceiling. Ratios taken in the same run are comparable across
// runs and machines; the absolute numbers are not.
//
// Every run's output is read back with a read_committed consumer and must
// hold exactly one output record per input record: a benchmark that loses or
// duplicates data would measure the wrong thing, so Run fails instead.
package bench

// Pebble plugs into the engine by import (docs/design.md, "State backends").
import _ "github.com/onceflow/onceflow/state/pebblestate"

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/compile"
	"github.com/onceflow/onceflow/internal/jobfile"
	"github.com/onceflow/onceflow/metrics"
	"github.com/onceflow/onceflow/pipeline"
	"github.com/onceflow/onceflow/state"
)

// Defaults of [Config].
const (
	DefaultRecords            = 200_000
	DefaultPartitions         = 4
	DefaultValueSize          = 100
	DefaultKeys               = 10_000
	DefaultCheckpointInterval = time.Second
)

// Names of the measured runs, in the order [Run] returns them: the
// ceiling, the pass-through, then the keyed count once per backend of
// Config.Backends ([CountName]).
const (
	NameCeiling     = "franz-go txn loop (ceiling)"
	NamePassThrough = "onceflow pass-through"
	// NamePassThroughMetrics is the pass-through with the metrics
	// collector registered and scraped every 100 ms (a hundred times
	// more often than Prometheus usually does): the cost of metrics.
	NamePassThroughMetrics = "onceflow pass-through, metrics scraped"
	// NameMapLoop is the ceiling's loop keeping a count per key in a Go
	// map (no durable state): the keyed count's yardstick.
	NameMapLoop     = "franz-go txn loop, counts in a Go map"
	NameCountMemory = "onceflow keyed count (memory)"
	NameCountPebble = "onceflow keyed count (pebble)"
	// NameFilterMap is a job file's filter and map steps over JSON values
	// (Config.Pipelines): an expression condition and a reshaped value.
	NameFilterMap = "onceflow filter+map (JSON)"
	// NameFilterMapSQL is the filter+map written in Flink SQL
	// (FilterMapSQL), compiled by the SQL planner into its select step
	// (Config.Pipelines).
	NameFilterMapSQL = "onceflow filter+map (SQL)"
	// NameSumPerKey is a job file's aggregate step summing a JSON field
	// per key given by another JSON field (Config.Pipelines).
	NameSumPerKey = "onceflow sum per key (JSON)"
)

// WindowName is the name of the run of a job file's one-minute tumbling
// count per key (a JSON field) over event time, keyed state in backend:
// the records' timestamps spread over WindowSpan (Config.Pipelines),
// state per key and window, output only when a window closes.
func WindowName(backend string) string {
	return "onceflow 1-min tumbling count per key (JSON, " + backend + ")"
}

// JoinName is the name of the run of the regular join (JoinStep) with
// keyed state in backend (Config.Joins).
func JoinName(backend string) string { return "onceflow join, ttl 1h (JSON, " + backend + ")" }

// IntervalJoinName is the name of the run of the interval join
// (IntervalJoinStep) with keyed state in backend (Config.Joins).
func IntervalJoinName(backend string) string {
	return "onceflow interval join, 1m (JSON, " + backend + ")"
}

// JoinSpan is the event time the join inputs' timestamps cover under
// Config.Joins, and JoinLead how much earlier than its order each
// customer record is dated: the interval join keeps about
// (1m + JoinLead + out-of-orderness) / JoinSpan of the input.
const (
	JoinSpan = 10 * time.Minute
	JoinLead = 10 * time.Second
)

// WindowSpan is the event time the input's timestamps cover under
// Config.Pipelines: with one-minute windows, each key has up to three.
const WindowSpan = 3 * time.Minute

// The pipeline steps of the Config.Pipelines runs, as a job file writes
// them.
var (
	FilterMapSteps = []pipeline.Step{
		{Op: "filter", Params: pipeline.Params{"if": `value.amount >= 0 && value.country != "XX"`}},
		{Op: "map", Params: pipeline.Params{"set": map[string]string{"gross": "value.amount * 1.19"}, "remove": []string{"pad"}}},
	}
	// FilterMapSQL is FilterMapSteps in Flink SQL: the same filter, the
	// same columns out (pad dropped, gross added).
	FilterMapSQL = `CREATE TABLE orders (` + "`user`" + ` STRING, amount DECIMAL(10, 2), country STRING, ` + "`order`" + ` BIGINT, pad STRING)
WITH ('connector' = 'kafka', 'topic' = 'in', 'properties.bootstrap.servers' = '127.0.0.1:9092', 'format' = 'json');
CREATE TABLE gross (` + "`user`" + ` STRING, amount DECIMAL(10, 2), country STRING, ` + "`order`" + ` BIGINT, gross DECIMAL(20, 4))
WITH ('connector' = 'kafka', 'topic' = 'out', 'properties.bootstrap.servers' = '127.0.0.1:9092', 'format' = 'json');
INSERT INTO gross SELECT ` + "`user`" + `, amount, country, ` + "`order`" + `, amount * 1.19 FROM orders WHERE amount >= 0 AND country <> 'XX';`
	SumPerKeySteps = []pipeline.Step{
		{Op: "aggregate", Params: pipeline.Params{"key": "value.user", "fields": map[string]string{"revenue": "sum(value.amount)"}}},
	}
	// JoinStep is the regular join of the Config.Joins runs: orders
	// with the customer of the same id, each side kept an hour (longer
	// than the run: the state holds every record).
	JoinStep = pipeline.Step{Op: "join", Params: pipeline.Params{"left-key": "value.customer", "right-key": "value.id", "ttl": time.Hour}}
	// IntervalJoinStep is the interval join of the Config.Joins runs: an
	// order pairs with the customer record of its id dated up to a
	// minute before it (JoinInputs dates it JoinLead before).
	IntervalJoinStep = pipeline.Step{Op: "interval-join", Params: pipeline.Params{"left-key": "value.customer", "right-key": "value.id", "lower": "0s", "upper": "1m"}}
	WindowSteps      = []pipeline.Step{
		{Op: "window", Params: pipeline.Params{"key": "value.user", "size": time.Minute, "fields": map[string]string{"n": "count()"}}},
	}
)

// CountName is the name of the keyed count run with the state backend
// backend (flow.MemoryBackend, flow.PebbleBackend).
func CountName(backend string) string { return "onceflow keyed count (" + backend + ")" }

// DefaultBackends are the state backends the keyed count runs with by
// default, in this order.
var DefaultBackends = []string{flow.MemoryBackend, flow.PebbleBackend}

// Config configures [Run]. The zero value is the default benchmark.
type Config struct {
	// Brokers are the seed brokers of the Kafka cluster to measure on,
	// default none: Run starts an embedded in-memory broker for the run.
	// On a real cluster Run creates its topics (named
	// "onceflow-bench-<run>-*") and deletes them at the end.
	Brokers []string
	// Records is how many input records every measured run copies,
	// default 200,000.
	Records int
	// Partitions is the partition count of the input and output topics,
	// default 4. The onceflow jobs run one source subtask per partition.
	Partitions int
	// ValueSize is the size of each input record's value in bytes,
	// default 100.
	ValueSize int
	// Keys is the number of distinct record keys, default 10,000. The
	// keyed count job keeps one counter per key.
	Keys int
	// Backends are the state backends the keyed count job runs with, one
	// run each, in this order (flow.MemoryBackend, flow.PebbleBackend),
	// default [DefaultBackends]: both, so the heap and Pebble are measured
	// against the same ceiling.
	Backends []string
	// StateMemory is the Pebble backend's memory budget (flow.StateMemory),
	// default 0: the library's default.
	StateMemory int64
	// CheckpointInterval is both the onceflow jobs' checkpoint interval
	// and how often the ceiling commits its transaction, default 1s, so
	// all three pay for the same number of commits.
	CheckpointInterval time.Duration
	// MetricsFirst runs the pass-through with metrics before the plain one
	// (default after), so that alternating runs cancel the order's bias.
	MetricsFirst bool
	// Pipelines writes JSON values ({"user":"key-N","amount":...,
	// "country":..., "pad":...}, about ValueSize bytes) and adds the runs
	// of job-file steps over them: NameFilterMap and NameSumPerKey.
	Pipelines bool
	// Joins adds the join runs once per backend of Backends: a regular
	// join (JoinName) and an interval join (IntervalJoinName) of two
	// input topics of JSON values, Records/2 records each, every key
	// once on each side (so every record joins).
	Joins bool
	// Progress receives a line as each phase starts and ends, default nil
	// (silent).
	Progress func(string)
}

func (c *Config) withDefaults() {
	if c.Records == 0 {
		c.Records = DefaultRecords
	}
	if c.Partitions == 0 {
		c.Partitions = DefaultPartitions
	}
	if c.ValueSize == 0 {
		c.ValueSize = DefaultValueSize
	}
	if c.Keys == 0 {
		c.Keys = DefaultKeys
	}
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = DefaultCheckpointInterval
	}
	if len(c.Backends) == 0 {
		c.Backends = append([]string(nil), DefaultBackends...)
	}
}

// validate reports, for a defaulted c, the settings that cannot work.
func (c *Config) validate() error {
	checks := []struct {
		bad bool
		msg string
	}{
		{c.Records < 0, fmt.Sprintf("record count %d is negative: use 1 or more (0 means the default %d)", c.Records, DefaultRecords)},
		{c.Partitions < 0, fmt.Sprintf("partition count %d is negative: use 1 or more (0 means the default %d)", c.Partitions, DefaultPartitions)},
		{c.Partitions > 1<<16, fmt.Sprintf("partition count %d is more than a benchmark topic needs: use at most %d", c.Partitions, 1<<16)},
		{c.ValueSize < 0, fmt.Sprintf("value size %d is negative: use 1 or more bytes (0 means the default %d)", c.ValueSize, DefaultValueSize)},
		{c.Keys < 0, fmt.Sprintf("key count %d is negative: use 1 or more (0 means the default %d)", c.Keys, DefaultKeys)},
		{c.CheckpointInterval < 0, fmt.Sprintf("checkpoint interval %v is negative (0 means the default %v)", c.CheckpointInterval, DefaultCheckpointInterval)},
		{c.StateMemory < 0, fmt.Sprintf("state memory %d is negative (0 means the library's default)", c.StateMemory)},
	}
	var errs []error
	for _, ch := range checks {
		if ch.bad {
			errs = append(errs, errors.New(ch.msg))
		}
	}
	seen := map[string]bool{}
	for _, be := range c.Backends {
		switch {
		case be != flow.MemoryBackend && be != flow.PebbleBackend:
			errs = append(errs, fmt.Errorf("state backend %q is unknown: use %q or %q", be, flow.MemoryBackend, flow.PebbleBackend))
		case seen[be]:
			errs = append(errs, fmt.Errorf("state backend %q is listed twice: each runs once", be))
		}
		seen[be] = true
	}
	for i, b := range c.Brokers {
		if strings.TrimSpace(b) == "" {
			errs = append(errs, fmt.Errorf("broker address %d is empty: list host:port addresses, or none for an embedded broker", i))
		}
	}
	return errors.Join(errs...)
}

// Result is the measurement of one run.
type Result struct {
	// Name names the run (NameCeiling, NamePassThrough, CountName of a
	// backend).
	Name string
	// Records is how many records the run copied, verified in its output.
	Records int
	// Elapsed is the run's wall time, from creating its clients (or
	// starting the job) to its last transaction's commit.
	Elapsed time.Duration
	// RecordsPerSec is Records / Elapsed.
	RecordsPerSec float64
	// Ratio is RecordsPerSec divided by the ceiling's RecordsPerSec; 1 for
	// the ceiling itself.
	Ratio float64
	// VsMapLoop is, for the keyed count runs, RecordsPerSec divided by
	// the map loop's (NameMapLoop); 0 for the other runs.
	VsMapLoop float64
	// CPU is the CPU time of this process during the run (the embedded
	// broker's included): unlike Elapsed, it hardly changes with what
	// else the machine runs.
	CPU time.Duration
	// CPUVsMapLoop is, for the keyed count runs, the map loop's CPU over
	// this run's: records per CPU-second as a ratio of the map loop's.
	CPUVsMapLoop float64
}

// Run produces cfg.Records keyed records into a fresh input topic (not
// timed), then times bounded copies of that input, each to its own output
// topic: the ceiling, the onceflow pass-through job and the onceflow keyed
// count job once per state backend of cfg.Backends. It verifies each output with a read_committed reader
// and fails if a run lost or duplicated records. The results come in that
// order, each with its ratio to the ceiling.
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	b, closeBroker, err := newBench(cfg)
	if err != nil {
		return nil, err
	}
	defer closeBroker()
	return b.run(ctx)
}

// newBench validates cfg and starts the embedded broker when cfg names no
// brokers; stop stops it.
func newBench(cfg Config) (_ *bench, stop func(), _ error) {
	cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, nil, fmt.Errorf("bench: %w", err)
	}
	b := &bench{cfg: cfg, progress: cfg.Progress, brokers: cfg.Brokers}
	if b.progress == nil {
		b.progress = func(string) {}
	}
	if len(b.brokers) > 0 {
		return b, func() {}, nil
	}
	br, err := broker.Start(broker.Config{Addr: "127.0.0.1:0", Partitions: cfg.Partitions})
	if err != nil {
		return nil, nil, fmt.Errorf("bench: start the embedded broker: %w", err)
	}
	b.brokers = []string{br.Addr()}
	b.embedded = true
	b.logf("embedded broker at %s", br.Addr())
	return b, func() { _ = br.Close() }, nil
}

type bench struct {
	cfg      Config
	progress func(string)
	brokers  []string
	embedded bool
	// prefix names this run's topics, groups, jobs and transactional ids,
	// so runs against one long-lived cluster never meet.
	prefix string
	input  string
	// ends are the input partitions' end offsets after producing, which
	// bound the ceiling's copy.
	ends map[int32]int64
	// windows counts the input records per window of the window run,
	// "user-N@start" (Config.Pipelines).
	windows map[string]int
	// perKey is how many input records carry each key index.
	perKey []int
}

func (b *bench) logf(format string, args ...any) { b.progress(fmt.Sprintf(format, args...)) }

func (b *bench) topic(suffix string) string { return b.prefix + "-" + suffix }

func (b *bench) run(ctx context.Context) (_ []Result, err error) {
	b.prefix = "onceflow-bench-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	b.input = b.topic("in")

	admCl, err := b.client()
	if err != nil {
		return nil, err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	var created []string
	if !b.embedded {
		defer func() {
			// The topics are the run's garbage on a shared cluster;
			// failing to delete them does not spoil the measurement.
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if _, derr := adm.DeleteTopics(dctx, created...); derr != nil {
				b.logf("could not delete the benchmark topics %v: %v", created, derr)
			}
		}()
	}
	suffixes := []string{"in", "ceiling", "passthrough", "passthrough-metrics", "map-loop"}
	for _, be := range b.cfg.Backends {
		suffixes = append(suffixes, "count-"+be)
	}
	if b.cfg.Pipelines {
		suffixes = append(suffixes, "filter-map", "filter-map-sql", "sum")
		for _, be := range b.cfg.Backends {
			suffixes = append(suffixes, "window-"+be)
		}
	}
	if b.cfg.Joins {
		suffixes = append(suffixes, "join-left", "join-right")
		for _, be := range b.cfg.Backends {
			suffixes = append(suffixes, "join-"+be, "interval-join-"+be)
		}
	}
	for _, s := range suffixes {
		t := b.topic(s)
		if err := createTopic(ctx, adm, t, b.cfg.Partitions); err != nil {
			return nil, err
		}
		created = append(created, t)
	}

	if err := b.produceInput(ctx, admCl, adm); err != nil {
		return nil, err
	}
	if b.cfg.Joins {
		if err := b.produceJoinInputs(ctx, admCl); err != nil {
			return nil, err
		}
	}

	type measured struct {
		name, label, out string
		fn               func(ctx context.Context, out string) error
		counts           bool // the output holds running counts per key
		windows          bool // the output holds one count per key and window
		join             bool // the output holds one pair per join key
	}
	runs := []measured{
		{NameCeiling, "ceiling", b.topic("ceiling"), b.runCeiling, false, false, false},
		{NamePassThrough, "pass-through", b.topic("passthrough"), b.runPassThrough, false, false, false},
		{NamePassThroughMetrics, "pass-through-metrics", b.topic("passthrough-metrics"), b.runPassThroughMetrics, false, false, false},
	}
	if b.cfg.MetricsFirst {
		runs[1], runs[2] = runs[2], runs[1]
	}
	runs = append(runs, measured{NameMapLoop, "map-loop", b.topic("map-loop"), b.runMapLoop, true, false, false})
	for _, be := range b.cfg.Backends {
		runs = append(runs, measured{CountName(be), "count-" + be, b.topic("count-" + be), func(ctx context.Context, out string) error { return b.runCount(ctx, out, be) }, true, false, false})
	}
	if b.cfg.Pipelines {
		runs = append(runs,
			measured{NameFilterMap, "filter-map", b.topic("filter-map"), func(ctx context.Context, out string) error {
				return b.runSteps(ctx, "filter-map", out, FilterMapSteps)
			}, false, false, false},
			measured{NameFilterMapSQL, "filter-map-sql", b.topic("filter-map-sql"), func(ctx context.Context, out string) error {
				steps, err := SQLSteps(FilterMapSQL)
				if err != nil {
					return err
				}
				return b.runSteps(ctx, "filter-map-sql", out, steps)
			}, false, false, false},
			measured{NameSumPerKey, "sum", b.topic("sum"), func(ctx context.Context, out string) error {
				return b.runSteps(ctx, "sum", out, SumPerKeySteps)
			}, false, false, false})
		for _, be := range b.cfg.Backends {
			runs = append(runs, measured{WindowName(be), "window-" + be, b.topic("window-" + be), func(ctx context.Context, out string) error {
				return b.runSteps(ctx, "window-"+be, out, WindowSteps, flow.StateBackend(be))
			}, false, true, false})
		}
	}
	if b.cfg.Joins {
		for _, be := range b.cfg.Backends {
			runs = append(runs,
				measured{JoinName(be), "join-" + be, b.topic("join-" + be), func(ctx context.Context, out string) error {
					return b.runJoin(ctx, "join-"+be, out, JoinStep, be)
				}, false, false, true},
				measured{IntervalJoinName(be), "interval-join-" + be, b.topic("interval-join-" + be), func(ctx context.Context, out string) error {
					return b.runJoin(ctx, "interval-join-"+be, out, IntervalJoinStep, be)
				}, false, false, true})
		}
	}
	var (
		rs      []Result
		counted []bool // the run is a keyed count
	)
	for _, r := range runs {
		b.logf("%s: running", r.name)
		var (
			el   time.Duration
			rerr error
		)
		// The label marks the CPU the run's goroutines (and the
		// clients they start) spend, so a profile of the whole
		// benchmark can be narrowed to one run:
		// go tool pprof -tagfocus run=pass-through (or ceiling,
		// count-memory, count-pebble).
		var cpu time.Duration
		pprof.Do(ctx, pprof.Labels("run", r.label), func(ctx context.Context) {
			start, startCPU := time.Now(), processCPU()
			rerr = r.fn(ctx, r.out)
			el, cpu = time.Since(start), processCPU()-startCPU
		})
		if rerr != nil {
			return nil, fmt.Errorf("bench: %s: %w", r.name, rerr)
		}
		n := b.cfg.Records
		if r.join {
			n = b.cfg.Records / 2 * 2
		}
		res := Result{Name: r.name, Records: n, Elapsed: el, RecordsPerSec: float64(n) / el.Seconds(), CPU: cpu}
		b.logf("%s: %d records in %v (%.0f records/s); verifying the output", r.name, res.Records, el.Round(time.Millisecond), res.RecordsPerSec)
		var v verifier = countOnly{}
		want := b.cfg.Records
		switch {
		case r.join:
			v = &joinVerifier{pairs: b.cfg.Records / 2}
			want = b.cfg.Records / 2
		case r.counts:
			v = &countVerifier{perKey: b.perKey}
		case r.windows:
			v = &windowVerifier{want: b.windows, records: b.cfg.Records}
			want = len(b.windows)
		}
		if err := verifyOutput(ctx, b.brokers, r.out, want, v); err != nil {
			return nil, fmt.Errorf("bench: %s: %w", r.name, err)
		}
		rs = append(rs, res)
		counted = append(counted, r.counts)
	}
	var mapLoop *Result
	for i := range rs {
		rs[i].Ratio = rs[i].RecordsPerSec / rs[0].RecordsPerSec
		if rs[i].Name == NameMapLoop {
			mapLoop = &rs[i]
		}
	}
	for i := range rs {
		if counted[i] && rs[i].Name != NameMapLoop && mapLoop != nil {
			rs[i].VsMapLoop = rs[i].RecordsPerSec / mapLoop.RecordsPerSec
			if rs[i].CPU > 0 {
				rs[i].CPUVsMapLoop = float64(mapLoop.CPU) / float64(rs[i].CPU)
			}
		}
	}
	return rs, nil
}

func (b *bench) client(opts ...kgo.Opt) (*kgo.Client, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.brokers...), kgo.ClientID("onceflow-bench")}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("bench: kafka client: %w", err)
	}
	return cl, nil
}

func createTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int) error {
	resp, err := adm.CreateTopic(ctx, int32(partitions), -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("bench: create topic %q: %w", topic, err)
	}
	return nil
}

// keyOf is the key of input record i; keys cycle so each appears about
// Records/Keys times, spread over all partitions by the key hash.
func keyOf(i, keys int) []byte { return strconv.AppendInt([]byte("key-"), int64(i%keys), 10) }

// produceInput writes the input with an idempotent, non-transactional
// producer and records its end offsets.
func (b *bench) produceInput(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
	b.logf("producing %d records (%d-byte values, %d keys, %d partitions) into %s", b.cfg.Records, b.cfg.ValueSize, b.cfg.Keys, b.cfg.Partitions, b.input)
	start := time.Now()
	value := make([]byte, b.cfg.ValueSize)
	for i := range value {
		value[i] = 'a' + byte(i%26)
	}
	b.perKey = make([]int, b.cfg.Keys)
	errc := make(chan error, 1)
	// Under Pipelines the records' timestamps (event time) rise evenly
	// over WindowSpan from a minute boundary, so the window run knows its
	// windows: key and minute.
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	step := WindowSpan / time.Duration(max(b.cfg.Records, 1))
	if b.cfg.Pipelines {
		b.windows = map[string]int{}
	}
	for i := range b.cfg.Records {
		b.perKey[i%b.cfg.Keys]++
		v := value
		var ts time.Time
		if b.cfg.Pipelines {
			v = jsonValue(i, b.cfg.Keys, b.cfg.ValueSize)
			ts = base.Add(time.Duration(i) * step)
			b.windows["user-"+strconv.Itoa(i%b.cfg.Keys)+"@"+strconv.FormatInt(ts.Truncate(time.Minute).UnixMilli(), 10)]++
		}
		r := &kgo.Record{Topic: b.input, Key: keyOf(i, b.cfg.Keys), Value: v, Timestamp: ts}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errc <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("bench: produce the input: %w", err)
	}
	select {
	case err := <-errc:
		return fmt.Errorf("bench: produce the input: %w", err)
	default:
	}
	ends, err := adm.ListEndOffsets(ctx, b.input)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("bench: end offsets of the input: %w", err)
	}
	b.ends = map[int32]int64{}
	var total int64
	ends.Each(func(o kadm.ListedOffset) {
		b.ends[o.Partition] = o.Offset
		total += o.Offset
	})
	if total != int64(b.cfg.Records) {
		return fmt.Errorf("bench: the input topic %s holds %d records after producing %d: was it written to by someone else?", b.input, total, b.cfg.Records)
	}
	b.logf("produced the input in %v", time.Since(start).Round(time.Millisecond))
	return nil
}

// runCeiling copies the input to out with the canonical franz-go
// exactly-once loop: a read_committed group consumer and a transactional
// producer in one GroupTransactSession, committing the group's offsets in
// each transaction every CheckpointInterval.
func (b *bench) runCeiling(ctx context.Context, out string) error {
	return b.runLoop(ctx, "ceiling", out, nil)
}

// runMapLoop is the ceiling's loop keeping a running count per key in a
// Go map, writing each record's key with its count in decimal as the
// keyed count job does: the least a hand-written exactly-once keyed count
// does, with no durable state (its counts live only in the process, and
// an aborted transaction fails the run, as the map cannot be rewound).
// It is the yardstick of the keyed count (issue 26).
func (b *bench) runMapLoop(ctx context.Context, out string) error {
	counts := make(map[string]int64)
	return b.runLoop(ctx, "map-loop", out, func(r *kgo.Record) *kgo.Record {
		c := counts[string(r.Key)] + 1
		counts[string(r.Key)] = c
		return &kgo.Record{Topic: out, Key: r.Key, Value: strconv.AppendInt(nil, c, 10), Timestamp: r.Timestamp}
	})
}

// runLoop is the franz-go transactional loop named name (its group and
// transactional id) from the input to out; each record is copied, or
// turned into the record fn returns when fn is not nil, in which case an
// aborted transaction fails the run (fn's state cannot be rewound).
func (b *bench) runLoop(ctx context.Context, name, out string, fn func(*kgo.Record) *kgo.Record) error {
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(b.brokers...),
		kgo.ClientID("onceflow-bench"),
		kgo.TransactionalID(b.topic(name+"-txn")),
		kgo.ConsumerGroup(b.topic(name+"-group")),
		kgo.ConsumeTopics(b.input),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer sess.Close()

	// committed is the next offset to copy per partition as of the last
	// committed transaction; pending includes the open one. An aborted
	// transaction rewinds the session to the committed offsets, so
	// pending rewinds with it.
	committed := map[int32]int64{}
	done := func(pos map[int32]int64) bool {
		for p, end := range b.ends {
			if pos[p] < end {
				return false
			}
		}
		return true
	}
	errc := make(chan error, 1)
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			select {
			case errc <- err:
			default:
			}
		}
	}
	for !done(committed) {
		if err := sess.Begin(); err != nil {
			return fmt.Errorf("begin transaction: %w", err)
		}
		pending := make(map[int32]int64, len(committed))
		for p, o := range committed {
			pending[p] = o
		}
		deadline := time.Now().Add(b.cfg.CheckpointInterval)
		for !done(pending) && time.Now().Before(deadline) {
			pctx, cancel := context.WithDeadline(ctx, deadline)
			fs := sess.PollFetches(pctx)
			cancel()
			if err := ctx.Err(); err != nil {
				return err
			}
			var ferr error
			fs.EachError(func(t string, p int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) && ferr == nil {
					ferr = fmt.Errorf("read %s/%d: %w", t, p, err)
				}
			})
			if ferr != nil {
				return ferr
			}
			fs.EachRecord(func(r *kgo.Record) {
				if r.Offset < pending[r.Partition] {
					return
				}
				pending[r.Partition] = r.Offset + 1
				if fn != nil {
					sess.Produce(ctx, fn(r), promise)
					return
				}
				sess.Produce(ctx, &kgo.Record{Topic: out, Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp}, promise)
			})
		}
		ok, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			return fmt.Errorf("end transaction: %w", err)
		}
		select {
		case err := <-errc:
			return fmt.Errorf("produce: %w", err)
		default:
		}
		if ok {
			committed = pending
		} else if fn != nil {
			return errors.New("a transaction aborted: the loop's state cannot be rewound")
		}
	}
	return nil
}

// jobEnv returns a fresh job environment with checkpoints under a
// temporary directory, removed by the returned func.
func (b *bench) jobEnv(job string, opts ...flow.Option) (*flow.Env, func(), error) {
	dir, err := os.MkdirTemp("", "onceflow-bench-")
	if err != nil {
		return nil, nil, err
	}
	env := flow.New(append([]flow.Option{
		flow.JobName(job),
		flow.Checkpointing(b.cfg.CheckpointInterval),
		flow.StateDir(dir),
		flow.Logger(slog.New(slog.DiscardHandler)),
	}, opts...)...)
	return env, func() { os.RemoveAll(dir) }, nil
}

// connectors returns the bounded exactly-once source of the input and the
// sink to out for job.
func (b *bench) connectors(job, out string) (*kafka.Source, *kafka.Sink, error) {
	cc := kafka.ClientConfig{Brokers: b.brokers, ClientID: "onceflow-bench"}
	src, err := kafka.NewSource(kafka.SourceConfig{Client: cc, Topics: []string{b.input}, Bounded: true})
	if err != nil {
		return nil, nil, err
	}
	sink, err := kafka.NewSink(kafka.SinkConfig{Client: cc, Job: job, Topic: out, OffsetsOf: []*kafka.Source{src}})
	if err != nil {
		return nil, nil, err
	}
	return src, sink, nil
}

// runJob runs the onceflow job named name from the input to out, with
// pipeline between the Kafka source and sink and opts added to the job's
// options.
func (b *bench) runJob(ctx context.Context, name, out string, pipeline func(flow.Stream[kafka.Record]) flow.Stream[kafka.Record], opts ...flow.Option) error {
	return b.runJobFrom(ctx, name, out, nil, pipeline, opts...)
}

// runJobFrom is runJob with options for the source.
func (b *bench) runJobFrom(ctx context.Context, name, out string, srcOpts []flow.OpOption, pipeline func(flow.Stream[kafka.Record]) flow.Stream[kafka.Record], opts ...flow.Option) error {
	job := b.topic(name)
	src, sink, err := b.connectors(job, out)
	if err != nil {
		return err
	}
	defer sink.Close()
	env, cleanup, err := b.jobEnv(job, opts...)
	if err != nil {
		return err
	}
	defer cleanup()
	flow.To(pipeline(flow.From(env, src, append(srcOpts, flow.UID("in"))...)), sink, flow.UID("out"))
	return env.Run(ctx)
}

// runPassThroughMetrics is runPassThrough with a metrics.Collector
// gathered every 100 ms while the job runs.
func (b *bench) runPassThroughMetrics(ctx context.Context, out string) error {
	return b.runPassThroughMetricsAs(ctx, "passthrough-metrics", out)
}

// runPassThroughMetricsAs is runPassThroughMetrics as job name.
func (b *bench) runPassThroughMetricsAs(ctx context.Context, name, out string) error {
	m := metrics.New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	stop := make(chan struct{})
	scraped := make(chan error, 1)
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				scraped <- nil
				return
			case <-t.C:
				if _, err := reg.Gather(); err != nil {
					scraped <- err
					return
				}
			}
		}
	}()
	err := b.runJob(ctx, name, out, func(s flow.Stream[kafka.Record]) flow.Stream[kafka.Record] { return s }, flow.WithHooks(m))
	close(stop)
	return errors.Join(err, <-scraped)
}

// jsonValue is input record i's value under Config.Pipelines: a JSON
// object padded to about size bytes.
func jsonValue(i, keys, size int) []byte {
	countries := []string{"DE", "FR", "NL", "PL", "IT"}
	v := fmt.Appendf(nil, `{"user":"user-%d","amount":%d.%02d,"country":"%s","order":%d,"pad":"`, i%keys, i%1000, i%100, countries[i%len(countries)], i)
	for len(v) < size-2 {
		v = append(v, 'x')
	}
	return append(v, '"', '}')
}

// runSteps runs the job-file steps between the source and the sink, as
// `onceflow run` builds them.
func (b *bench) runSteps(ctx context.Context, name, out string, steps []pipeline.Step, opts ...flow.Option) error {
	var buildErr error
	var srcOpts []flow.OpOption
	for _, st := range steps {
		if st.Op == "window" {
			// Event time as a job file's default event-time section
			// gives it: the records' timestamps, 5 s out of order.
			ts, err := pipeline.Timestamps(compile.KafkaAccess, "timestamp")
			if err != nil {
				return err
			}
			srcOpts = append(srcOpts, flow.WithWatermarks(flow.Watermarks[kafka.Record]{
				Timestamp: ts, Split: kafka.SplitOf, MaxOutOfOrderness: 5 * time.Second, IdleTimeout: 30 * time.Second,
			}))
		}
	}
	err := b.runJobFrom(ctx, name, out, srcOpts, func(s flow.Stream[kafka.Record]) flow.Stream[kafka.Record] {
		res, _, err := pipeline.Build(s, compile.KafkaAccess, steps, pipeline.Env{})
		buildErr = err
		return flow.Map(res, func(r kafka.Record) kafka.Record {
			r.Topic, r.Partition, r.Offset = "", 0, 0
			return r
		})
	}, opts...)
	return errors.Join(buildErr, err)
}

// runPassThrough copies the input to out with the onceflow job
// source -> sink.
func (b *bench) runPassThrough(ctx context.Context, out string) error {
	return b.runJob(ctx, "passthrough", out, func(s flow.Stream[kafka.Record]) flow.Stream[kafka.Record] { return s })
}

// runCount runs the onceflow job source -> keyBy(key) -> count per key in
// keyed state held by backend -> sink, writing each record's key with its
// running count in decimal.
func (b *bench) runCount(ctx context.Context, out, backend string) error {
	opts := []flow.Option{flow.StateBackend(backend)}
	if b.cfg.StateMemory > 0 {
		opts = append(opts, flow.StateMemory(b.cfg.StateMemory))
	}
	return b.runJob(ctx, "count-"+backend, out, func(in flow.Stream[kafka.Record]) flow.Stream[kafka.Record] {
		keyed := flow.KeyBy(in, func(r kafka.Record) string { return string(r.Key) })
		return flow.Process(keyed, "count", func(s *state.Store) flow.ProcessFunc[kafka.Record, kafka.Record] {
			n := state.NewValue[int64](s, "n")
			return func(_ flow.Context, r kafka.Record, emit flow.Collector[kafka.Record]) error {
				c, _ := n.Get()
				c++
				n.Set(c)
				emit.Emit(kafka.Record{Key: r.Key, Value: strconv.AppendInt(nil, c, 10), Timestamp: r.Timestamp})
				return nil
			}
		})
	}, opts...)
}

// Format renders rs as an aligned table.
func Format(rs []Result) string {
	var sb strings.Builder
	w := len("run")
	for _, r := range rs {
		w = max(w, len(r.Name))
	}
	// The map loop's and CPU columns only when a run has them.
	extra := false
	for _, r := range rs {
		extra = extra || r.VsMapLoop > 0 || r.CPUVsMapLoop > 0 || r.CPU > 0
	}
	if !extra {
		fmt.Fprintf(&sb, "%-*s  %9s  %9s  %11s  %6s\n", w, "run", "records", "elapsed", "records/s", "ratio")
		for _, r := range rs {
			fmt.Fprintf(&sb, "%-*s  %9d  %9s  %11.0f  %5.2fx\n", w, r.Name, r.Records, r.Elapsed.Round(time.Millisecond), r.RecordsPerSec, r.Ratio)
		}
		return sb.String()
	}
	fmt.Fprintf(&sb, "%-*s  %9s  %9s  %11s  %6s  %10s  %9s  %16s\n", w, "run", "records", "elapsed", "records/s", "ratio", "÷ map loop", "CPU", "÷ map loop (CPU)")
	for _, r := range rs {
		vs, vsCPU := "", ""
		if r.VsMapLoop > 0 {
			vs = fmt.Sprintf("%.2fx", r.VsMapLoop)
		}
		if r.CPUVsMapLoop > 0 {
			vsCPU = fmt.Sprintf("%.2fx", r.CPUVsMapLoop)
		}
		fmt.Fprintf(&sb, "%-*s  %9d  %9s  %11.0f  %5.2fx  %10s  %9s  %16s\n", w, r.Name, r.Records, r.Elapsed.Round(time.Millisecond), r.RecordsPerSec, r.Ratio, vs, r.CPU.Round(10*time.Millisecond), vsCPU)
	}
	return sb.String()
}

// SQLSteps compiles a SQL script of one INSERT INTO (its tables' topics
// and brokers are not used) and returns its job's pipeline steps.
func SQLSteps(script string) ([]pipeline.Step, error) {
	jf, err := jobfile.ParseJobFile("bench.sql", []byte(script), nil)
	if err != nil {
		return nil, err
	}
	steps := make([]pipeline.Step, len(jf.Pipeline))
	for i, st := range jf.Pipeline {
		steps[i] = pipeline.Step{Op: st.Op, Params: st.Params, UID: st.UID}
	}
	return steps, nil
}
