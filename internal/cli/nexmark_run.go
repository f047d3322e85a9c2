package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/internal/bench"
	"github.com/onceflow/onceflow/internal/nexmark"
	"github.com/onceflow/onceflow/internal/nexmark/queries"
)

// `onceflow nexmark run` measures the Nexmark queries the way issue 26
// and docs/benchmarks.md ("Nexmark queries") define it: the events
// pre-loaded in Kafka, each query a separate `onceflow run` process with
// exactly-once checkpoints, its user+system CPU time the figure (events
// per CPU-second: Nexmark's "cores"), beside the franz-go transactional
// loop of README's Performance section on the same input.

type nexmarkRunOpts struct {
	queries, langs, backends, sinks *string
	ceiling                         *bool
	interval                        *time.Duration
	cpuProfile                      *string
	keep                            *bool
}

// nexmarkRunFlags registers the flags only nexmark run reads.
func nexmarkRunFlags(fs *flag.FlagSet) nexmarkRunOpts {
	return nexmarkRunOpts{
		queries:    fs.String("query", "q0,q1,q2", "run: the queries to run, comma-separated (of "+strings.Join(queries.Names(), ", ")+"); q1.yaml names one language of q1"),
		langs:      fs.String("lang", "", "run: the languages each query runs in, one after the other, comma-separated: sql (Flink SQL), yaml (the hand-written job file); default each query's own (SQL where it is written in SQL)"),
		backends:   fs.String("backends", "memory,pebble", "run: the state backends each query runs with, comma-separated"),
		sinks:      fs.String("sinks", "kafka,discard", "run: where each query's output goes: kafka (an exactly-once Kafka sink), discard (dropped after the query's last step)"),
		ceiling:    fs.Bool("ceiling", true, "run: also time the franz-go transactional copy of the input (README's ceiling), in this process"),
		interval:   fs.Duration("checkpoint-interval", time.Second, "run: the jobs' checkpoint interval, and how often the ceiling commits"),
		cpuProfile: fs.String("cpuprofile", "", "run: run each job in this process instead of its own, writing its CPU profile to `PREFIX`-<query>-<backend>-<sink>.pprof"),
		keep:       fs.Bool("keep", false, "run: keep the job files, logs and state of the jobs (their directory is printed)"),
	}
}

// start validates the run flags and runs gen's events through them.
func (o nexmarkRunOpts) start(ctx context.Context, e *env, gen *nexmarkGen) error {
	n := &nexmarkRun{
		e: e, brokers: gen.brokers, input: gen.topic, events: gen.events, cfg: gen.g.Config(),
		backends: splitList(*o.backends), sinks: splitList(*o.sinks),
		ceiling: *o.ceiling, interval: *o.interval, cpuProfile: *o.cpuProfile,
	}
	langs := splitList(*o.langs)
	for _, l := range langs {
		if l != queries.SQL && l != queries.YAML {
			return fmt.Errorf("%w: --lang: %q is not sql or yaml", errUsage, l)
		}
	}
	for _, q := range splitList(*o.queries) {
		if len(langs) == 0 || strings.Contains(q, ".") {
			l, err := queries.Lang(q)
			if err != nil {
				return fmt.Errorf("%w: --query: %v", errUsage, err)
			}
			n.queries = append(n.queries, strings.TrimSuffix(q, "."+l)+"."+l)
			continue
		}
		for _, l := range langs {
			if _, err := queries.Lang(q + "." + l); err != nil {
				return fmt.Errorf("%w: --query %s --lang %s: %v", errUsage, q, l, err)
			}
			n.queries = append(n.queries, q+"."+l)
		}
	}
	for _, b := range n.backends {
		if b != "memory" && b != "pebble" {
			return fmt.Errorf("%w: --backends: %q is not memory or pebble", errUsage, b)
		}
	}
	for _, s := range n.sinks {
		if s != "kafka" && s != "discard" {
			return fmt.Errorf("%w: --sinks: %q is not kafka or discard", errUsage, s)
		}
	}
	if n.interval <= 0 {
		return fmt.Errorf("%w: --checkpoint-interval %v must be positive", errUsage, n.interval)
	}
	dir, err := os.MkdirTemp("", "onceflow-nexmark-")
	if err != nil {
		return err
	}
	n.dir = dir
	if *o.keep {
		n.logf("job files, logs and state in %s", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	return n.run(ctx, gen)
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// nexmarkRun is one nexmark run invocation.
type nexmarkRun struct {
	e       *env
	brokers []string
	input   string
	events  int64
	// cfg is the generator's: the reference computes over the same
	// events, dated as they were (a windowed query's windows depend on
	// --event-rate and --base-time, not only the seed).
	cfg        nexmark.Config
	queries    []string // query and language: q0.sql, q0.yaml
	backends   []string
	sinks      []string
	ceiling    bool
	interval   time.Duration
	cpuProfile string
	dir        string
	broker     *os.Process // the broker this command started, or nil
}

// nexmarkResult is one measured run.
type nexmarkResult struct {
	name, backend, sink string
	wall, cpu           time.Duration
	brokerCPU           time.Duration // -1: not known
	out                 int64
}

func (n *nexmarkRun) logf(format string, args ...any) {
	fmt.Fprintf(n.e.stderr, "nexmark run: "+format+"\n", args...)
}

// startBroker runs `onceflow broker` (in memory, on a free port) as a
// child process, so that its CPU is not the measured processes'.
func (n *nexmarkRun) startBroker(ctx context.Context) (stop func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "broker", "--addr", "127.0.0.1:0", "--partitions", "8", "--log-level", "warn")
	pipe, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start onceflow broker: %w", err)
	}
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "broker listening on "); ok {
				addr <- a
			}
		}
	}()
	select {
	case a := <-addr:
		n.brokers, n.broker = []string{a}, cmd.Process
		n.logf("started onceflow broker (pid %d) at %s, in memory", cmd.Process.Pid, a)
		return stop, nil
	case <-time.After(30 * time.Second):
	case <-ctx.Done():
	}
	stop()
	return nil, errors.New("onceflow broker did not say where it listens within 30s")
}

// procCPU is the user+system CPU time of process pid from
// /proc/<pid>/stat, or -1 where there is none.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return -1
	}
	// Fields 14 and 15 of stat (utime, stime), in clock ticks of 1/100 s
	// (USER_HZ is 100 on Linux).
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * 10 * time.Millisecond
}

func (n *nexmarkRun) brokerCPU() time.Duration {
	if n.broker == nil {
		return -1
	}
	return procCPU(n.broker.Pid)
}

// selfCPU is the user and system CPU time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (n *nexmarkRun) admin() (*kadm.Client, func(), error) {
	cl, err := kafka.ClientConfig{Brokers: n.brokers, ClientID: "onceflow-nexmark"}.NewClient()
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl.Close, nil
}

func (n *nexmarkRun) createTopic(ctx context.Context, topic string, partitions int) error {
	adm, closeAdm, err := n.admin()
	if err != nil {
		return err
	}
	defer closeAdm()
	if _, err := adm.CreateTopic(ctx, int32(partitions), -1, nil, topic); err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}

// countCommitted counts the records a read_committed reader sees in
// topic, up to its last stable offsets (as internal/verify reads: with
// the control records kept, the last offset below the end is always
// seen).
func (n *nexmarkRun) countCommitted(ctx context.Context, topic string) (int64, error) {
	cl, err := kafka.ClientConfig{Brokers: n.brokers, ClientID: "onceflow-nexmark"}.NewClient(
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	lso, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("last stable offsets of %s: %w", topic, err)
	}
	left := map[int32]int64{}
	lso.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	var count int64
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if err := fs.Err0(); err != nil {
			return 0, fmt.Errorf("read %s: %w", topic, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, want := left[r.Partition]
			if !want || r.Offset >= end {
				return
			}
			if r.Offset == end-1 {
				delete(left, r.Partition)
			}
			if !r.Attrs.IsControl() {
				count++
			}
		})
	}
	return count, nil
}

// expected counts the output records of query q ("q1.sql") over the
// input events; exact is false when the count is only the least there
// can be: an updating query (queries.GroupKey) writes at least a row per
// group, and then one per update, as many as its aggregate emits; a
// processing-time query (queries.ProcessingTime) a row per group and
// window its records fell in.
func (n *nexmarkRun) expected(q string) (count int64, exact bool, err error) {
	q = strings.TrimSuffix(strings.TrimSuffix(q, ".sql"), ".yaml")
	if _, err := queries.Selects(q, &nexmark.Event{}); err != nil {
		// Not a query of one row per event at most: the reference
		// computes its whole result.
		rows, err := queries.Reference(q, n.cfg, n.events)
		if queries.ProcessingTime(q) {
			// The reference is each bidder's bids: the windows are at
			// least one per bidder.
			return int64(len(rows)), false, err
		}
		for _, k := range rows {
			count += int64(k)
		}
		return count, queries.GroupKey(q) == nil && !queries.Changelog(q), err
	}
	g, err := nexmark.New(n.cfg)
	if err != nil {
		return 0, false, err
	}
	var e nexmark.Event
	for range n.events {
		g.NextInto(&e)
		ok, err := queries.Selects(q, &e)
		if err != nil {
			return 0, false, err
		}
		if ok {
			count++
		}
	}
	return count, true, nil
}

// runJob runs one query ("q1.sql") as its own `onceflow run` process
// (or, with --cpuprofile, in this process) and measures it.
func (n *nexmarkRun) runJob(ctx context.Context, q, backend, sink string) (nexmarkResult, error) {
	r := nexmarkResult{name: q, backend: backend, sink: sink, brokerCPU: -1}
	tag := strings.ReplaceAll(q, ".", "-") + "-" + backend + "-" + sink
	out := n.input + "-" + tag
	if err := n.createTopic(ctx, out, 8); err != nil {
		return r, err
	}
	job, err := queries.Job(q, queries.Overrides{
		Job: "nexmark-" + tag, Brokers: n.brokers, Input: n.input, Group: n.input + "-" + tag, Output: out,
		StateDir: filepath.Join(n.dir, tag, "state"), Backend: backend, Interval: n.interval,
		Bounded: true, Discard: sink == "discard",
	})
	if err != nil {
		return r, err
	}
	file := filepath.Join(n.dir, tag+".yaml")
	if err := os.WriteFile(file, job, 0o644); err != nil {
		return r, err
	}
	logPath := filepath.Join(n.dir, tag+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return r, err
	}
	defer logFile.Close()
	args := []string{"run", "--status-interval", "5s", "--log-level", "warn", file}
	b0 := n.brokerCPU()
	began := time.Now()
	if n.cpuProfile != "" {
		runtime.GC()
		prof, err := os.Create(n.cpuProfile + "-" + tag + ".pprof")
		if err != nil {
			return r, err
		}
		defer prof.Close()
		c0 := selfCPU()
		if err := pprof.StartCPUProfile(prof); err != nil {
			return r, err
		}
		code := Main(ctx, args, logFile, logFile)
		pprof.StopCPUProfile()
		r.wall, r.cpu = time.Since(began), selfCPU()-c0
		if code != 0 {
			return r, fmt.Errorf("onceflow run %s: exit code %d (log: %s)", file, code, logPath)
		}
	} else {
		self, err := os.Executable()
		if err != nil {
			return r, err
		}
		cmd := exec.CommandContext(ctx, self, args...)
		cmd.Stdout, cmd.Stderr = logFile, logFile
		err = cmd.Run()
		r.wall = time.Since(began)
		if cmd.ProcessState != nil {
			r.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		}
		if err != nil {
			return r, fmt.Errorf("onceflow run %s: %w (log: %s)", file, err, logPath)
		}
	}
	if b0 >= 0 {
		r.brokerCPU = n.brokerCPU() - b0
	}
	if r.out, err = n.countCommitted(ctx, out); err != nil {
		return r, err
	}
	want, exact, err := n.expected(q)
	if err != nil {
		return r, err
	}
	if sink == "discard" {
		want, exact = 0, true
	}
	if r.out != want && (exact || r.out < want) {
		return r, fmt.Errorf("%s wrote %d records, the reference computation %d (log: %s)", tag, r.out, want, logPath)
	}
	return r, nil
}

// runCeiling times the franz-go transactional copy of the input in this
// process (the broker is another).
func (n *nexmarkRun) runCeiling(ctx context.Context) (nexmarkResult, error) {
	r := nexmarkResult{name: "franz-go txn loop (ceiling)", backend: "-", sink: "kafka", brokerCPU: -1}
	out := n.input + "-ceiling"
	if err := n.createTopic(ctx, out, 8); err != nil {
		return r, err
	}
	runtime.GC()
	b0, c0, began := n.brokerCPU(), selfCPU(), time.Now()
	if err := bench.Ceiling(ctx, n.brokers, n.input+"-ceiling", n.input, out, n.interval); err != nil {
		return r, fmt.Errorf("ceiling: %w", err)
	}
	r.wall, r.cpu = time.Since(began), selfCPU()-c0
	if b0 >= 0 {
		r.brokerCPU = n.brokerCPU() - b0
	}
	var err error
	if r.out, err = n.countCommitted(ctx, out); err != nil {
		return r, err
	}
	if r.out != n.events {
		return r, fmt.Errorf("the ceiling wrote %d records of %d", r.out, n.events)
	}
	return r, nil
}

func (n *nexmarkRun) run(ctx context.Context, gen *nexmarkGen) error {
	if len(n.brokers) == 0 {
		stop, err := n.startBroker(ctx)
		if err != nil {
			return err
		}
		defer stop()
		gen.brokers = n.brokers
	}
	n.logf("loading %d events into %s (%d partitions)", n.events, n.input, gen.partitions)
	if err := gen.run(ctx, &env{stdout: io.Discard, stderr: n.e.stderr, log: n.e.log}); err != nil {
		return err
	}
	load1, _ := loadAvg()
	var results []nexmarkResult
	report := func(r nexmarkResult) {
		results = append(results, r)
		n.logf("%s %s %s: %s wall, %s events/s; %.2f s CPU, %s events per CPU-second",
			r.name, r.backend, r.sink, r.wall.Round(time.Millisecond), humanCount(float64(n.events)/r.wall.Seconds()),
			r.cpu.Seconds(), humanCount(float64(n.events)/r.cpu.Seconds()))
	}
	if n.ceiling {
		n.logf("timing the franz-go transactional loop (ceiling)")
		r, err := n.runCeiling(ctx)
		if err != nil {
			return err
		}
		report(r)
	}
	// The languages of one query run one after the other for each
	// backend and sink (q0.sql, q0.yaml, q0.sql, ...), so that the
	// machine's load drifts as little as can be between the runs they
	// are compared by.
	var groups [][]string
	for i, q := range n.queries {
		base, _, _ := strings.Cut(q, ".")
		if i > 0 {
			if prev, _, _ := strings.Cut(n.queries[i-1], "."); prev == base {
				groups[len(groups)-1] = append(groups[len(groups)-1], q)
				continue
			}
		}
		groups = append(groups, []string{q})
	}
	for _, group := range groups {
		for _, backend := range n.backends {
			for _, sink := range n.sinks {
				for _, q := range group {
					n.logf("running %s, %s backend, %s sink", q, backend, sink)
					r, err := n.runJob(ctx, q, backend, sink)
					if err != nil {
						return err
					}
					report(r)
				}
			}
		}
	}
	load2, _ := loadAvg()
	n.printTable(results, load1, load2)
	return nil
}

// loadAvg is the first line of /proc/loadavg, or "".
func loadAvg() (string, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "", err
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "", errors.New("short /proc/loadavg")
	}
	return strings.Join(f[:3], " "), nil
}

func (n *nexmarkRun) printTable(rs []nexmarkResult, load1, load2 string) {
	fmt.Fprintf(n.e.stdout, "%d Nexmark events (seed %d) from %s, 8 partitions, checkpoints every %v; %d CPUs, load average %s at the start, %s at the end\n",
		n.events, n.cfg.Seed, n.input, n.interval, runtime.NumCPU(), load1, load2)
	var ceiling float64
	if len(rs) > 0 && rs[0].backend == "-" {
		ceiling = float64(n.events) / rs[0].cpu.Seconds()
	}
	tw := tabwriter.NewWriter(n.e.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tbackend\tsink\toutput\twall s\tevents/s\tCPU s\tevents/CPU-s\t÷ ceiling\tbroker CPU s\t")
	for _, r := range rs {
		ratio, broker := "", ""
		perCPU := float64(n.events) / r.cpu.Seconds()
		if ceiling > 0 {
			ratio = fmt.Sprintf("%.2f×", perCPU/ceiling)
		}
		if r.brokerCPU >= 0 {
			broker = fmt.Sprintf("%.1f", r.brokerCPU.Seconds())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.1f\t%s\t%.2f\t%s\t%s\t%s\t\n", r.name, r.backend, r.sink, r.out,
			r.wall.Seconds(), humanCount(float64(n.events)/r.wall.Seconds()), r.cpu.Seconds(), humanCount(perCPU), ratio, broker)
	}
	_ = tw.Flush()
}
