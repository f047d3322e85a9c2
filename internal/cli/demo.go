package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/api"
	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/checkpoint"
	"github.com/onceflow/onceflow/internal/compile"
	"github.com/onceflow/onceflow/internal/jobfile"
)

// The demo's names.
const (
	demoJob        = "demo"
	demoGroup      = "onceflow-demo"
	demoInput      = "demo-events"
	demoOutput     = "demo-deduped"
	demoPartitions = 4
)

func demoFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	duration := fs.Duration("duration", 0, "stop the demo after this long (default: run until Ctrl-C)")
	rate := fs.Int("rate", 1000, "events generated per second")
	dupPct := fs.Int("duplicates", 20, "percentage of events that are resends of an earlier event")
	seed := fs.Uint64("seed", 0, "seed of the event generator (default: random; printed so a run can be repeated)")
	crashEvery := fs.Duration("crash-every", 0, "run the pipeline as a child process and SIGKILL it this often, restarting it each time: exactly-once\n"+
		"survives crashes, not only duplicates in the input (default 0: one pipeline in this process)")
	httpAddr := fs.String("http", "127.0.0.1:8081", "serve the web UI, /metrics and the REST API on `ADDR` (a free port when this one is taken; \"off\": none)")
	return func(ctx context.Context, e *env, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("%w: demo takes no arguments (got %q)", errUsage, strings.Join(args, " "))
		}
		if *duration < 0 {
			return fmt.Errorf("%w: --duration %v is negative", errUsage, *duration)
		}
		if *rate < 1 {
			return fmt.Errorf("%w: --rate %d is below 1", errUsage, *rate)
		}
		if *crashEvery < 0 || (*crashEvery > 0 && *crashEvery < 500*time.Millisecond) {
			return fmt.Errorf("%w: --crash-every %v: give 0 (no crashes) or at least 500ms", errUsage, *crashEvery)
		}
		if *dupPct < 0 || *dupPct > 90 {
			return fmt.Errorf("%w: --duplicates %d is outside 0..90", errUsage, *dupPct)
		}
		s := *seed
		if s == 0 {
			s = rand.Uint64()
		}
		return runDemo(ctx, e, demoOptions{duration: *duration, rate: *rate, dupPct: *dupPct, seed: s, http: *httpAddr, crashEvery: *crashEvery})
	}
}

type demoOptions struct {
	duration time.Duration
	rate     int
	dupPct   int
	seed     uint64
	// statusInterval is how often the live status line is printed.
	statusInterval time.Duration
	// http is where the UI and metrics are served; "" or "off": nowhere.
	http string
	// crashEvery > 0 runs the pipeline as `onceflow run` child processes
	// killed this often.
	crashEvery time.Duration
}

// demoResult is what the demo proves, read back from the output topic.
type demoResult struct {
	generated, resent, distinctIn int64
	output, distinctOut           int64
}

func runDemo(ctx context.Context, e *env, o demoOptions) error {
	if o.statusInterval == 0 {
		o.statusInterval = time.Second
	}
	b, err := broker.Start(broker.Config{
		Addr:       "127.0.0.1:0",
		Partitions: demoPartitions,
		Topics:     map[string]int32{demoInput: demoPartitions, demoOutput: demoPartitions},
		Logger:     e.log,
	})
	if err != nil {
		return fmt.Errorf("start the embedded broker: %w", err)
	}
	defer b.Close()
	stateDir, err := os.MkdirTemp("", "onceflow-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stateDir)

	fmt.Fprintf(e.stderr, "demo: embedded broker on %s; generating %d events/s into %s, %d%% of them resent duplicates (seed %d)\n", b.Addr(), o.rate, demoInput, o.dupPct, o.seed)
	fmt.Fprintf(e.stderr, "demo: pipeline %s -> dedupe(record.key) -> %s, exactly-once, checkpoint every 1s\n", demoInput, demoOutput)
	if o.duration > 0 {
		fmt.Fprintf(e.stderr, "demo: running for %v (Ctrl-C stops earlier)\n", o.duration)
	} else {
		fmt.Fprintln(e.stderr, "demo: running until Ctrl-C")
	}

	cc := kafka.ClientConfig{Brokers: []string{b.Addr()}, ClientID: "onceflow-demo"}
	jf := &jobfile.JobFile{
		Path:     "demo",
		Job:      demoJob,
		Kafka:    jobfile.KafkaConfig{Brokers: cc.Brokers, ClientID: cc.ClientID},
		Source:   jobfile.SourceConfig{Topics: []string{demoInput}, Group: demoGroup, Startup: jobfile.Startup{Mode: jobfile.StartEarliest}, Isolation: jobfile.IsolationReadCommitted},
		Pipeline: []jobfile.Step{{Op: jobfile.OpDedupe, Key: jobfile.KeyRecordKey, TTL: time.Hour, UID: "dedupe"}},
		Sink:     jobfile.SinkConfig{Topic: demoOutput, Delivery: jobfile.DeliveryExactlyOnce},
		Checkpointing: checkpoint.Config{
			Interval: time.Second,
			Mode:     checkpoint.ExactlyOnce,
			Timeout:  30 * time.Second,
		},
		State: jobfile.StateConfig{Dir: stateDir},
	}
	if o.crashEvery > 0 {
		return runDemoCrashing(ctx, e, o, b.Addr(), stateDir)
	}
	var srv *api.Server
	var fopts []flow.Option
	if o.http != "" && o.http != "off" {
		jf.HTTP.Listen = o.http
		srv, err = newHTTPServer(e, jf, httpOptions{})
		if err != nil && strings.Contains(err.Error(), "address already in use") {
			jf.HTTP.Listen = "127.0.0.1:0"
			srv, err = newHTTPServer(e, jf, httpOptions{})
		}
		if err != nil {
			return err
		}
		defer func() { _ = srv.Close() }()
		fopts = append(fopts, flow.WithHooks(srv.Hooks()...))
	}
	built, err := compile.Job(jf, cc, e.log, fopts...)
	if err != nil {
		return err
	}
	defer func() { _ = built.CloseSink() }()
	fenv, metrics := built.Env, built.Metrics
	// The job gets its own context: Ctrl-C first stops the generator and
	// lets the job catch up, then stops the job (a final checkpoint).
	jobCtx, cancelJob := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelJob()
	job, err := fenv.Start(jobCtx)
	if err != nil {
		return err
	}
	if srv != nil {
		serveJob(e, srv, jf, job, metrics)
		fmt.Fprintf(e.stderr, "demo: web UI at %s/ (metrics at %s/metrics)\n", srv.URL(), srv.URL())
	}

	gen, prod, genDone, stopGen, err := startGenerator(ctx, b.Addr(), o)
	if err != nil {
		return err
	}
	defer prod.Close()
	defer stopGen()

	start := time.Now()
	status := func() {
		s := job.Stats()
		fmt.Fprintf(e.stderr, "demo: %5.1fs  generated %d (%d resent)  read %d  lag %s  written %d  duplicates dropped %d  checkpoints %d\n",
			time.Since(start).Seconds(), gen.generated.Load(), gen.resent.Load(), metrics.RecordsRead.Load(), fmtLag(jobLag(job)), s.RecordsOut, metrics.DuplicatesDropped.Load(), s.CheckpointsCompleted)
	}
	tick := time.NewTicker(o.statusInterval)
	defer tick.Stop()
	var genErr error
wait:
	for {
		select {
		case <-tick.C:
			status()
		case genErr = <-genDone:
			break wait
		case <-job.Done():
			stopGen()
			<-genDone
			return fmt.Errorf("the pipeline stopped early: %w", job.Wait())
		}
	}
	if genErr != nil {
		cancelJob()
		job.Wait()
		return fmt.Errorf("event generator: %w", genErr)
	}
	fmt.Fprintln(e.stderr, "demo: generator stopped; waiting for the pipeline to commit everything it was given")
	adm := kadm.NewClient(prod)
	if err := waitCaughtUp(ctx, adm, job.Done(), job.Wait, 30*time.Second); err != nil {
		cancelJob()
		job.Wait()
		return err
	}
	job.Stop()
	if err := job.Wait(); err != nil {
		return fmt.Errorf("the pipeline failed: %w", err)
	}
	status()

	out, distinct, err := readOutput(context.WithoutCancel(ctx), b.Addr(), 30*time.Second)
	if err != nil {
		return fmt.Errorf("read back %s: %w", demoOutput, err)
	}
	r := demoResult{generated: gen.generated.Load(), resent: gen.resent.Load(), distinctIn: gen.distinct(), output: out, distinctOut: distinct}
	s := job.Stats()
	printDemoSummary(e, r, metrics.DuplicatesDropped.Load(), s)
	if dups := r.output - r.distinctOut; dups != 0 {
		return fmt.Errorf("%d duplicates reached %s: exactly-once is broken", dups, demoOutput)
	}
	if r.distinctOut != r.distinctIn {
		return fmt.Errorf("%s holds %d distinct events, %d were generated", demoOutput, r.distinctOut, r.distinctIn)
	}
	return nil
}

// startGenerator starts the demo's event generator writing to the broker
// at addr until o.duration has passed or ctx ends (stopGen ends it
// earlier); genDone receives its end.
func startGenerator(ctx context.Context, addr string, o demoOptions) (gen *generator, prod *kgo.Client, genDone chan error, stopGen context.CancelFunc, err error) {
	prod, err = kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("onceflow-demo-generator"), kgo.DefaultProduceTopic(demoInput))
	if err != nil {
		return nil, nil, nil, nil, err
	}
	gen = &generator{cl: prod, rng: rand.New(rand.NewPCG(o.seed, o.seed^0x9e3779b97f4a7c15)), dupPct: o.dupPct}
	genCtx, stopGen := context.WithCancel(ctx)
	if o.duration > 0 {
		genCtx, stopGen = context.WithTimeout(ctx, o.duration)
	}
	genDone = make(chan error, 1)
	go func() { genDone <- gen.run(genCtx, o.rate) }()
	return gen, prod, genDone, stopGen, nil
}

// fmtLag writes a lag for people: "?" while it is unknown.
func fmtLag(lag int64) string {
	if lag < 0 {
		return "?"
	}
	return strconv.FormatInt(lag, 10)
}

func printDemoSummary(e *env, r demoResult, dropped int64, s flow.Stats) {
	w := e.stdout
	fmt.Fprintln(w, "demo summary:")
	fmt.Fprintf(w, "  generated    %d events: %d distinct, %d resent duplicates\n", r.generated, r.distinctIn, r.resent)
	fmt.Fprintf(w, "  dropped      %d duplicates in the pipeline (dedupe by record key)\n", dropped)
	fmt.Fprintf(w, "  checkpoints  %d committed, %d failed, %d restarts\n", s.CheckpointsCompleted, s.CheckpointsFailed, s.Restarts)
	fmt.Fprintf(w, "  output       %d records committed to %s (read read_committed), %d distinct\n", r.output, demoOutput, r.distinctOut)
	fmt.Fprintf(w, "  duplicates   %d in the output\n", r.output-r.distinctOut)
	fmt.Fprintf(w, "  missing      %d events\n", r.distinctIn-r.distinctOut)
}

// generator produces events with deliberate duplicates: a resend repeats
// an earlier event's key and value exactly, as a retrying producer would.
type generator struct {
	cl     *kgo.Client
	rng    *rand.Rand
	dupPct int

	generated, resent atomic.Int64
	next              atomic.Int64 // events numbered 0..next-1 exist
}

func (g *generator) distinct() int64 { return g.next.Load() }

func event(n int64) *kgo.Record {
	return &kgo.Record{Key: fmt.Appendf(nil, "event-%08d", n), Value: fmt.Appendf(nil, `{"event":%d,"amount":%d}`, n, n%997)}
}

// run produces rate events a second, in batches every 10ms, until ctx ends.
func (g *generator) run(ctx context.Context, rate int) error {
	const tick = 10 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	start := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		due := int64(time.Since(start).Seconds() * float64(rate))
		var batch []*kgo.Record
		for g.generated.Load()+int64(len(batch)) < due && len(batch) < 10000 {
			n := g.next.Load()
			if n > 0 && g.rng.IntN(100) < g.dupPct {
				// Resend one of the last 1000 events.
				batch = append(batch, event(n-1-g.rng.Int64N(min(n, 1000))))
				g.resent.Add(1)
			} else {
				batch = append(batch, event(n))
				g.next.Add(1)
			}
		}
		if len(batch) == 0 {
			continue
		}
		// Produce even when ctx ended meanwhile: the counters already
		// include these events.
		if err := g.cl.ProduceSync(context.WithoutCancel(ctx), batch...).FirstErr(); err != nil {
			return err
		}
		g.generated.Add(int64(len(batch)))
	}
}

// waitCaughtUp waits until the job committed source offsets (in its
// checkpoint transactions) up to the end of the input topic: everything
// generated has then been processed and its output committed.
func waitCaughtUp(ctx context.Context, adm *kadm.Client, done <-chan struct{}, why func() error, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	cctx := context.WithoutCancel(ctx)
	for {
		ends, err := adm.ListEndOffsets(cctx, demoInput)
		if err != nil {
			return err
		}
		committed, err := adm.FetchOffsets(cctx, demoGroup)
		if errors.Is(err, kerr.GroupIDNotFound) {
			// No checkpoint has committed offsets yet (a slow first
			// one after the kills): all of it is still to read.
			committed, err = nil, nil
		}
		if err != nil {
			return err
		}
		behind := int64(0)
		ends.Each(func(lo kadm.ListedOffset) {
			c, ok := committed.Lookup(lo.Topic, lo.Partition)
			at := int64(0)
			if ok && c.Err == nil {
				at = c.At
			}
			if lo.Offset > at {
				behind += lo.Offset - at
			}
		})
		if behind == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the pipeline is still %d events behind after %v", behind, timeout)
		}
		// A checkpoint commits offsets every second; polling the group
		// is the only way to observe it from outside the job.
		select {
		case <-time.After(200 * time.Millisecond):
		case <-done:
			return fmt.Errorf("the pipeline stopped while catching up: %w", why())
		}
	}
}

// readOutput reads the output topic read_committed from the start to its
// last stable offset and returns how many records it holds and how many
// distinct keys.
func readOutput(ctx context.Context, addr string, timeout time.Duration) (total, distinct int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.ConsumeTopics(demoOutput),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Control records (transaction markers) are kept so the reader
		// sees its position reach the end even when the last offsets of
		// a partition are markers.
		kgo.KeepControlRecords(),
	)
	if err != nil {
		return 0, 0, err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, demoOutput)
	if err != nil {
		return 0, 0, err
	}
	remaining := map[int32]int64{}
	ends.Each(func(lo kadm.ListedOffset) {
		if lo.Offset > 0 {
			remaining[lo.Partition] = lo.Offset
		}
	})
	seen := map[string]bool{}
	for len(remaining) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return 0, 0, fmt.Errorf("%d partitions not read to the end: %w", len(remaining), err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return 0, 0, ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := remaining[r.Partition]; ok && r.Offset+1 >= end {
				delete(remaining, r.Partition)
			}
			if r.Attrs.IsControl() {
				return
			}
			total++
			seen[string(r.Key)] = true
		})
	}
	return total, int64(len(seen)), nil
}
