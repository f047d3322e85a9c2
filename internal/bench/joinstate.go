package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/broker"
)

// The join-state soak (issue 25's bounded-state proof, docs/benchmarks.md
// "Join state over time"): two input topics fed at a steady rate with a
// new key for every record, and join jobs reading them as real `onceflow
// run` processes, one per join kind and state backend, sampled at a fixed
// interval for their RSS, Go heap, checkpoint size, state directory size,
// records in and out and watermark. A join whose state is bounded shows
// these flat once its bound (the ttl, or the interval and the
// out-of-orderness) is reached.

// The join kinds of a soak.
const (
	// SoakJoin is the join step: state bound by its ttl (processing
	// time since a record was kept).
	SoakJoin = "join"
	// SoakIntervalJoin is the interval-join step on the records'
	// timestamps: state bound by the watermark.
	SoakIntervalJoin = "interval-join"
)

// SoakConfig configures [Soak].
type SoakConfig struct {
	// Binary is the onceflow binary the jobs run with (`onceflow run`).
	Binary string
	// Dir holds the broker's data, the job files, logs and state.
	Dir string
	// Kinds are the join kinds to run (SoakJoin, SoakIntervalJoin), each
	// once per backend; default both.
	Kinds []string
	// Backends are the state backends, default memory and pebble.
	Backends []string
	// Rate is the records per second written to each input, default 500.
	Rate int
	// Duration is how long the inputs are written, default 35m.
	Duration time.Duration
	// Sample is the sampling interval, default 30s.
	Sample time.Duration
	// TTL is the join step's ttl, default 10m.
	TTL time.Duration
	// Bound is the interval join's bound: a pair's times differ by at
	// most Bound either way, default 1m.
	Bound time.Duration
	// CheckpointInterval is the jobs' checkpoint interval, default 10s.
	CheckpointInterval time.Duration
	// Partitions of the input and output topics, default 4.
	Partitions int
	// Out receives the samples as CSV, one line per job and sample.
	Out io.Writer
	// Progress receives a line per phase, default nil (silent).
	Progress func(string)
}

func (c *SoakConfig) withDefaults() {
	if len(c.Kinds) == 0 {
		c.Kinds = []string{SoakJoin, SoakIntervalJoin}
	}
	if len(c.Backends) == 0 {
		c.Backends = append([]string(nil), DefaultBackends...)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.Duration, 35*time.Minute)
	def(&c.Sample, 30*time.Second)
	def(&c.TTL, 10*time.Minute)
	def(&c.Bound, time.Minute)
	def(&c.CheckpointInterval, 10*time.Second)
	if c.Rate == 0 {
		c.Rate = 500
	}
	if c.Partitions == 0 {
		c.Partitions = DefaultPartitions
	}
	if c.Progress == nil {
		c.Progress = func(string) {}
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
}

func (c *SoakConfig) validate() error {
	var errs []error
	if c.Binary == "" || c.Dir == "" {
		errs = append(errs, errors.New("set the onceflow binary and a directory for the soak's files"))
	}
	for _, k := range c.Kinds {
		if k != SoakJoin && k != SoakIntervalJoin {
			errs = append(errs, fmt.Errorf("join kind %q is unknown: use %q or %q", k, SoakJoin, SoakIntervalJoin))
		}
	}
	for _, be := range c.Backends {
		if be != flow.MemoryBackend && be != flow.PebbleBackend {
			errs = append(errs, fmt.Errorf("state backend %q is unknown: use %q or %q", be, flow.MemoryBackend, flow.PebbleBackend))
		}
	}
	if c.Rate < 10 {
		errs = append(errs, fmt.Errorf("rate %d records/s is below 10: the producer writes a tenth of it every 100ms", c.Rate))
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{{"duration", c.Duration}, {"sample interval", c.Sample}, {"ttl", c.TTL}, {"bound", c.Bound}, {"checkpoint interval", c.CheckpointInterval}} {
		if d.d < 0 {
			errs = append(errs, fmt.Errorf("%s %v is negative (0 means the default)", d.name, d.d))
		}
	}
	return errors.Join(errs...)
}

// SoakSample is one sample of one job.
type SoakSample struct {
	Job     string        // "join-memory", ...
	Elapsed time.Duration // since the inputs started
	// Produced is the records written to each input so far.
	Produced int64
	// RSS is the job process's VmRSS, HeapInuse its Go heap in use.
	RSS, HeapInuse int64
	// CheckpointBytes is the size of the state files the newest
	// committed checkpoint needs (onceflow_last_checkpoint_size_bytes).
	CheckpointBytes int64
	// DirBytes is the size of the job's state directory on disk (the
	// local store and the checkpoints kept).
	DirBytes int64
	// In and Out are the job's records read and written.
	In, Out int64
	// WatermarkLag is how far the join's watermark trails the wall
	// clock (the input's timestamps are the wall clock when written);
	// -1 without event time.
	WatermarkLag time.Duration
}

// SoakHeader is the CSV header of [SoakSample.CSV].
const SoakHeader = "job,elapsed_s,produced_per_side,rss_bytes,heap_inuse_bytes,checkpoint_bytes,state_dir_bytes,records_in,records_out,watermark_lag_s"

// CSV is s as a line of SoakHeader's columns.
func (s SoakSample) CSV() string {
	wl := "-"
	if s.WatermarkLag >= 0 {
		wl = strconv.FormatFloat(s.WatermarkLag.Seconds(), 'f', 1, 64)
	}
	return fmt.Sprintf("%s,%.0f,%d,%d,%d,%d,%d,%d,%d,%s", s.Job, s.Elapsed.Seconds(), s.Produced, s.RSS, s.HeapInuse, s.CheckpointBytes, s.DirBytes, s.In, s.Out, wl)
}

// soakJob is one running `onceflow run` process.
type soakJob struct {
	name, kind, backend string
	out, stateDir, log  string
	http                string
	cmd                 *exec.Cmd
	exited              chan error
}

// Soak runs the join-state soak: it starts an embedded broker (its data in
// cfg.Dir), writes the two inputs at cfg.Rate for cfg.Duration, a new key
// per record, with one job per kind and backend reading them from the
// start, and writes a sample of every job to cfg.Out every cfg.Sample.
// When the inputs end it waits for every job to read them all, stops the
// jobs gracefully and checks that each wrote exactly one pair per key
// (every left record meets its right record within the ttl and the
// interval). It returns every sample.
func Soak(ctx context.Context, cfg SoakConfig) ([]SoakSample, error) {
	cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	br, err := broker.Start(broker.Config{Addr: "127.0.0.1:0", Partitions: cfg.Partitions, DataDir: filepath.Join(cfg.Dir, "broker")})
	if err != nil {
		return nil, fmt.Errorf("soak: start the embedded broker: %w", err)
	}
	defer br.Close()
	b := &bench{cfg: Config{Partitions: cfg.Partitions}, brokers: []string{br.Addr()}, progress: cfg.Progress, prefix: "soak"}
	cl, err := b.client(kgo.ProducerLinger(20 * time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topics := []string{b.topic("orders"), b.topic("customers")}
	var jobs []*soakJob
	for _, k := range cfg.Kinds {
		for _, be := range cfg.Backends {
			j := &soakJob{name: k + "-" + be, kind: k, backend: be}
			j.out = b.topic("out-" + j.name)
			topics = append(topics, j.out)
			jobs = append(jobs, j)
		}
	}
	for _, t := range topics {
		if err := createTopic(ctx, adm, t, cfg.Partitions); err != nil {
			return nil, err
		}
	}
	for _, j := range jobs {
		if err := j.start(cfg, b); err != nil {
			return nil, err
		}
		defer j.kill()
	}
	fmt.Fprintln(cfg.Out, SoakHeader)

	var produced atomic.Int64
	start := time.Now()
	perr := make(chan error, 1)
	go func() { perr <- soakProduce(ctx, cl, topics[0], topics[1], cfg.Rate, cfg.Duration, &produced) }()

	var samples []SoakSample
	sample := func() error {
		for _, j := range jobs {
			select {
			case err := <-j.exited:
				return fmt.Errorf("soak: job %s exited early: %v (log: %s)", j.name, err, j.log)
			default:
			}
			s := j.sample(ctx, time.Since(start), produced.Load())
			samples = append(samples, s)
			fmt.Fprintln(cfg.Out, s.CSV())
		}
		if f, ok := cfg.Out.(interface{ Sync() error }); ok {
			_ = f.Sync()
		}
		return nil
	}
	tick := time.NewTicker(cfg.Sample)
	defer tick.Stop()
	if err := sample(); err != nil {
		return samples, err
	}
	producing := true
	for producing {
		select {
		case <-ctx.Done():
			return samples, ctx.Err()
		case err := <-perr:
			if err != nil {
				return samples, fmt.Errorf("soak: write the inputs: %w", err)
			}
			producing = false
		case <-tick.C:
			if err := sample(); err != nil {
				return samples, err
			}
			cfg.Progress(fmt.Sprintf("%v: %d records per side", time.Since(start).Round(time.Second), produced.Load()))
		}
	}
	n := produced.Load()
	cfg.Progress(fmt.Sprintf("inputs done: %d records per side; waiting for the jobs to read them", n))
	for _, j := range jobs {
		if err := j.drain(ctx, 2*n); err != nil {
			return samples, err
		}
	}
	if err := sample(); err != nil {
		return samples, err
	}
	for _, j := range jobs {
		if err := j.stop(); err != nil {
			return samples, err
		}
		if err := verifyOutput(ctx, b.brokers, j.out, int(n), countOnly{}); err != nil {
			return samples, fmt.Errorf("soak: job %s: %w (log: %s)", j.name, err, j.log)
		}
		cfg.Progress(fmt.Sprintf("%s wrote exactly %d pairs", j.name, n))
	}
	return samples, nil
}

// soakProduce writes rate records per second to each of left and right,
// a tenth every 100ms, for d (or until ctx ends), and flushes them: record i is the order
// {"order":i,"customer":"c<i>",...} and the customer {"id":"c<i>",...},
// both with record key c<i> (so they share a partition) and the wall
// clock as their timestamp.
func soakProduce(ctx context.Context, cl *kgo.Client, left, right string, rate int, d time.Duration, produced *atomic.Int64) error {
	var mu sync.Mutex
	var perr error
	// Every error fails the soak: a record the producer gave up on would
	// be counted as written and missed in the jobs' output.
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			perr = errors.Join(perr, err)
			mu.Unlock()
		}
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	end := time.After(d)
	var i int64
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-end:
			if err := cl.Flush(ctx); err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			produced.Store(i)
			return perr
		case now := <-tick.C:
			// Catch up to the rate since the start, so a slow tick
			// does not lower it.
			due := int64(now.Sub(start).Seconds() * float64(rate))
			for ; i < due; i++ {
				key := "c" + strconv.FormatInt(i, 10)
				cl.Produce(ctx, &kgo.Record{Topic: left, Key: []byte(key), Timestamp: now,
					Value: fmt.Appendf(nil, `{"order":%d,"customer":"%s","amount":%d.%02d,"pad":"%s"}`, i, key, i%1000, i%100, soakPad)}, promise)
				cl.Produce(ctx, &kgo.Record{Topic: right, Key: []byte(key), Timestamp: now,
					Value: fmt.Appendf(nil, `{"id":"%s","name":"customer %d","pad":"%s"}`, key, i, soakPad)}, promise)
			}
			produced.Store(i)
		}
	}
}

// soakPad brings each input value to about 100 bytes.
var soakPad = strings.Repeat("x", 40)

// jobFile is j's job file.
func (j *soakJob) jobFile(cfg SoakConfig, b *bench) string {
	step := fmt.Sprintf("join: { left-key: value.customer, right-key: value.id, ttl: %s }", cfg.TTL)
	eventTime := ""
	if j.kind == SoakIntervalJoin {
		step = fmt.Sprintf("interval-join: { left-key: value.customer, right-key: value.id, lower: %s, upper: %s }", -cfg.Bound, cfg.Bound)
		eventTime = "event-time:\n  max-out-of-orderness: 5s\n  idle-timeout: 30s\n"
	}
	return fmt.Sprintf(`job: soak-%s
kafka:
  brokers: [%s]
sources:
  orders:    { topics: [%s], group: soak-%s }
  customers: { topics: [%s] }
streams:
  enriched:
    from: [orders, customers]
    steps:
      - %s
sinks:
  out: { from: enriched, topic: %s, delivery: exactly-once }
%scheckpointing:
  interval: %s
  mode: exactly-once
  timeout: 5m
state:
  dir: %s
  backend: %s
restart:
  strategy: none
`, j.name, b.brokers[0], b.topic("orders"), j.name, b.topic("customers"), step, j.out, eventTime, cfg.CheckpointInterval, j.stateDir, j.backend)
}

func (j *soakJob) start(cfg SoakConfig, b *bench) error {
	dir := filepath.Join(cfg.Dir, j.name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	j.stateDir = filepath.Join(dir, "state")
	file := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(file, []byte(j.jobFile(cfg, b)), 0o644); err != nil {
		return err
	}
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	j.http = addr
	j.log = filepath.Join(dir, "job.log")
	lf, err := os.Create(j.log)
	if err != nil {
		return err
	}
	j.cmd = exec.Command(cfg.Binary, "run", "--http", addr, "--log-level", "warn", "--status-interval", "0", file)
	j.cmd.Stdout, j.cmd.Stderr = lf, lf
	if err := j.cmd.Start(); err != nil {
		lf.Close()
		return fmt.Errorf("soak: start %s: %w", j.name, err)
	}
	j.exited = make(chan error, 1)
	go func() {
		err := j.cmd.Wait()
		lf.Close()
		j.exited <- err
	}()
	cfg.Progress(fmt.Sprintf("started %s (pid %d, http %s, log %s)", j.name, j.cmd.Process.Pid, addr, j.log))
	return nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// metrics reads j's /metrics, summing each metric's series by name.
func (j *soakJob) metrics(ctx context.Context) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+j.http+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return parseMetrics(resp.Body)
}

// parseMetrics sums the values of the Prometheus text format's series
// by metric name; for a name ending in _milliseconds it keeps the
// smallest (a watermark: the slowest task's).
func parseMetrics(r io.Reader) (map[string]float64, error) {
	m := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		name := line[:sp]
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = name[:i]
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		old, seen := m[name]
		switch {
		case !seen:
			m[name] = v
		case strings.HasSuffix(name, "_milliseconds"):
			m[name] = math.Min(old, v)
		default:
			m[name] = old + v
		}
	}
	return m, sc.Err()
}

func (j *soakJob) sample(ctx context.Context, elapsed time.Duration, produced int64) SoakSample {
	s := SoakSample{Job: j.name, Elapsed: elapsed, Produced: produced, WatermarkLag: -1,
		RSS: procStatus(j.cmd.Process.Pid, "VmRSS"), DirBytes: dirSize(j.stateDir)}
	m, err := j.metrics(ctx)
	if err != nil {
		return s
	}
	s.HeapInuse = int64(m["go_memstats_heap_inuse_bytes"])
	s.CheckpointBytes = int64(m["onceflow_last_checkpoint_size_bytes"])
	s.In = int64(m["onceflow_records_in_total"])
	s.Out = int64(m["onceflow_records_out_total"])
	if wm, ok := m["onceflow_task_watermark_milliseconds"]; ok && wm > 0 {
		s.WatermarkLag = time.Since(time.UnixMilli(int64(wm)))
	}
	return s
}

// drain waits until j has read want records.
func (j *soakJob) drain(ctx context.Context, want int64) error {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		m, err := j.metrics(ctx)
		if err == nil && int64(m["onceflow_records_in_total"]) >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("soak: job %s read %v of %d records in 10m after the inputs ended (log: %s)", j.name, m["onceflow_records_in_total"], want, j.log)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-j.exited:
			return fmt.Errorf("soak: job %s exited early: %v (log: %s)", j.name, err, j.log)
		case <-time.After(time.Second):
		}
	}
}

// stop stops j gracefully (its final checkpoint commits what it wrote).
func (j *soakJob) stop() error {
	_ = j.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-j.exited:
		j.exited <- err
		if err != nil {
			return fmt.Errorf("soak: job %s: %v (log: %s)", j.name, err, j.log)
		}
		return nil
	case <-time.After(2 * time.Minute):
		return fmt.Errorf("soak: job %s did not stop within 2m of SIGTERM (log: %s)", j.name, j.log)
	}
}

// kill ends j if it still runs (after it exited, Kill does nothing:
// the os.Process knows).
func (j *soakJob) kill() { _ = j.cmd.Process.Kill() }

// procStatus is the kB field name (VmRSS, ...) of /proc/<pid>/status in
// bytes, 0 where there is none.
func procStatus(pid int, name string) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, name+":"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				return 0
			}
			n, _ := strconv.ParseInt(f[0], 10, 64)
			return n << 10
		}
	}
	return 0
}

// dirSize is the bytes of the regular files under dir.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// ReadSoakCSV reads the samples Soak wrote as CSV (SoakHeader's columns).
func ReadSoakCSV(r io.Reader) ([]SoakSample, error) {
	var ss []SoakSample
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		if line == 1 && sc.Text() == SoakHeader {
			continue
		}
		f := strings.Split(sc.Text(), ",")
		if len(f) != strings.Count(SoakHeader, ",")+1 {
			return nil, fmt.Errorf("soak CSV line %d has %d columns, want those of %s", line, len(f), SoakHeader)
		}
		var n [8]int64
		for i := range n {
			v, err := strconv.ParseInt(f[i+1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("soak CSV line %d, column %d: %v", line, i+2, err)
			}
			n[i] = v
		}
		s := SoakSample{Job: f[0], Elapsed: time.Duration(n[0]) * time.Second, Produced: n[1], RSS: n[2], HeapInuse: n[3],
			CheckpointBytes: n[4], DirBytes: n[5], In: n[6], Out: n[7], WatermarkLag: -1}
		if f[9] != "-" {
			v, err := strconv.ParseFloat(f[9], 64)
			if err != nil {
				return nil, fmt.Errorf("soak CSV line %d, watermark lag: %v", line, err)
			}
			s.WatermarkLag = time.Duration(v * float64(time.Second))
		}
		ss = append(ss, s)
	}
	return ss, sc.Err()
}

// FormatSoak renders, per job, a Markdown table of its first sample at or
// after each multiple of every (and its last sample), sizes in MiB.
func FormatSoak(ss []SoakSample, every time.Duration) string {
	var jobs []string
	byJob := map[string][]SoakSample{}
	for _, s := range ss {
		if _, ok := byJob[s.Job]; !ok {
			jobs = append(jobs, s.Job)
		}
		byJob[s.Job] = append(byJob[s.Job], s)
	}
	mib := func(b int64) string { return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64) }
	var sb strings.Builder
	for _, j := range jobs {
		fmt.Fprintf(&sb, "%s:\n\n| min | records per side | RSS MiB | heap MiB | checkpoint MiB | state dir MiB | in | out | watermark lag s |\n|---|---|---|---|---|---|---|---|---|\n", j)
		next := time.Duration(0)
		js := byJob[j]
		for i, s := range js {
			if s.Elapsed < next && i != len(js)-1 {
				continue
			}
			for next <= s.Elapsed {
				next += every
			}
			wl := "–"
			if s.WatermarkLag >= 0 {
				wl = strconv.FormatFloat(s.WatermarkLag.Seconds(), 'f', 1, 64)
			}
			fmt.Fprintf(&sb, "| %.1f | %d | %s | %s | %s | %s | %d | %d | %s |\n", s.Elapsed.Minutes(), s.Produced, mib(s.RSS), mib(s.HeapInuse), mib(s.CheckpointBytes), mib(s.DirBytes), s.In, s.Out, wl)
		}
		sb.WriteString("\n")
	}
	return sb.String()
}
