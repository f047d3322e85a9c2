// Package metrics exports a running job's figures to Prometheus: consumer
// lag and offsets, checkpoint health, per-task throughput and load, and
// what the job's components report about themselves. The names follow the
// meaning of Flink's metrics in Prometheus style; docs/design.md
// ("Metrics") has the reference table.
//
// A Collector is both a job hook and a prometheus.Collector:
//
//	m := metrics.New()
//	env := flow.New(flow.WithHooks(m), ...)
//	prometheus.MustRegister(m)
//	job, err := env.Start(ctx)
//
// It reads the job's counters when it is scraped (Job.Stats and
// Job.ReportMetrics), learns checkpoint events through the hooks, and
// samples the tasks' time once a second for the per-second load figures.
// Package flow stays free of Prometheus: only programs that import this
// package depend on it.
package metrics

import (
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/onceflow/onceflow/flow"
)

// Namespace prefixes every metric name.
const Namespace = "onceflow"

// Collector exports one job's metrics. Create it with New, register it with
// flow.WithHooks before the job starts and with a Prometheus registry.
type Collector struct {
	mu   sync.Mutex
	job  *flow.Job
	name string
	load *sampler

	cpDuration *prometheus.HistogramVec
	cpCommit   *prometheus.HistogramVec
}

var (
	_ prometheus.Collector         = (*Collector)(nil)
	_ flow.HookJobStarted          = (*Collector)(nil)
	_ flow.HookCheckpointCompleted = (*Collector)(nil)
)

// New returns a Collector for the job it is registered with.
func New() *Collector {
	return &Collector{
		load: newSampler(),
		cpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "checkpoint_duration_seconds",
			Help:    "Time from the trigger of a checkpoint to the end of its commit point, for committed checkpoints.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
		}, []string{"job_name"}),
		cpCommit: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "checkpoint_commit_duration_seconds",
			Help:    "Time the commit point took (Kafka: the transaction's offsets and EndTxn; a database: its COMMIT).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"job_name"}),
	}
}

// OnJobStarted learns the job and starts sampling its tasks' time.
func (c *Collector) OnJobStarted(j *flow.Job) {
	c.mu.Lock()
	c.job, c.name = j, j.Name()
	c.mu.Unlock()
	go c.load.run(j)
}

// OnCheckpointCompleted records the checkpoint's durations.
func (c *Collector) OnCheckpointCompleted(e flow.CheckpointCompleted) {
	c.cpDuration.WithLabelValues(e.Job).Observe(e.Duration.Seconds())
	c.cpCommit.WithLabelValues(e.Job).Observe(e.CommitDuration.Seconds())
}

// Describe sends nothing: the metrics a job's components report are known
// only when it runs, so the Collector is unchecked (see
// prometheus.Collector).
func (c *Collector) Describe(chan<- *prometheus.Desc) {}

// Collect sends the job's metrics; nothing before the job has started.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	j, job := c.job, c.name
	c.mu.Unlock()
	if j == nil {
		return
	}
	w := writer{ch: ch, descs: map[string]*prometheus.Desc{}}
	s := j.Stats()
	jl := []string{"job_name"}
	jv := []string{job}
	gauge := func(name, help string, v float64) { w.send(name, help, prometheus.GaugeValue, jl, jv, v) }
	counter := func(name, help string, v float64) { w.send(name, help, prometheus.CounterValue, jl, jv, v) }

	gauge("job_running", "1 while an attempt of the job runs, 0 while it restarts or has ended.", b2f(s.Running))
	counter("restarts_total", "Failovers of the job and starts after a process that did not stop gracefully, over the job's life.", float64(s.Restarts))
	counter("records_in_total", "Records read by the sources in this process (replayed records count again).", float64(s.RecordsIn))
	counter("records_out_total", "Records written by the sinks in this process, including those of epochs that did not commit.", float64(s.RecordsOut))
	counter("records_committed_total", "Records written in checkpoints that committed, over the job's life: what readers of the output see.", float64(s.RecordsCommitted))
	counter("records_skipped_total", "Poison records dropped under the skip policy.", float64(s.RecordsSkipped))
	counter("records_dead_lettered_total", "Poison records sent to a dead-letter output.", float64(s.RecordsDeadLettered))

	counter("completed_checkpoints_total", "Checkpoints that committed, over the job's life.", float64(s.CheckpointsCompleted))
	counter("failed_checkpoints_total", "Checkpoints aborted (timeout, declined) or whose commit failed, over the job's life.", float64(s.CheckpointsFailed))
	gauge("in_progress_checkpoints", "Checkpoints triggered and neither committed nor aborted.", float64(s.CheckpointsInProgress))
	gauge("checkpoint_interval_seconds", "The configured checkpoint interval.", j.Checkpointing().Interval.Seconds())
	if s.LastCheckpoint > 0 {
		gauge("last_checkpoint_id", "Id of the newest committed checkpoint.", float64(s.LastCheckpoint))
		gauge("last_checkpoint_duration_seconds", "Trigger to commit of the newest committed checkpoint.", s.LastCheckpointDuration.Seconds())
	}
	if !s.LastCheckpointTime.IsZero() {
		gauge("last_checkpoint_size_bytes", "Size of the state files the newest committed checkpoint needs.", float64(s.LastCheckpointStateBytes))
		gauge("last_checkpoint_written_bytes", "Bytes of state the newest committed checkpoint wrote (incremental checkpoints write only new files).", float64(s.LastCheckpointWrittenBytes))
		gauge("last_checkpoint_alignment_seconds", "The longest barrier alignment of a subtask in the newest committed checkpoint.", s.LastCheckpointAlignment.Seconds())
		gauge("last_checkpoint_barrier_delay_seconds", "The longest time the newest committed checkpoint's barrier took from its trigger to a subtask's operators (aligned): its wait behind queued records.", s.LastCheckpointBarrierDelay.Seconds())
		gauge("last_checkpoint_commit_duration_seconds", "How long the commit point of the newest committed checkpoint took.", s.LastCheckpointCommitDuration.Seconds())
		gauge("last_checkpoint_completed_timestamp_seconds", "Unix time the newest checkpoint committed in this process.", unix(s.LastCheckpointTime))
	}
	if !s.LastRestoreTime.IsZero() {
		gauge("last_checkpoint_restore_timestamp_seconds", "Unix time the job last restored a checkpoint or savepoint.", unix(s.LastRestoreTime))
	}
	c.cpDuration.Collect(ch)
	c.cpCommit.Collect(ch)

	tl := []string{"job_name", "task"}
	rates := c.load.rates()
	for _, t := range s.Tasks {
		tv := []string{job, t.UID}
		w.send("task_parallelism", "Subtasks of the task (a chain of operators named by its first operator's uid).", prometheus.GaugeValue, tl, tv, float64(t.Parallelism))
		w.send("task_records_in_total", "Records the task took in during this attempt (a source: read).", prometheus.CounterValue, tl, tv, float64(t.RecordsIn))
		w.send("task_records_out_total", "Records the task's sinks wrote during this attempt.", prometheus.CounterValue, tl, tv, float64(t.RecordsOut))
		w.send("task_busy_seconds_total", "Time the task's subtasks spent processing during this attempt, summed.", prometheus.CounterValue, tl, tv, t.Busy.Seconds())
		w.send("task_idle_seconds_total", "Time the task's subtasks waited for input during this attempt, summed.", prometheus.CounterValue, tl, tv, t.Idle.Seconds())
		w.send("task_backpressured_seconds_total", "Time the task's subtasks waited for room downstream during this attempt, summed.", prometheus.CounterValue, tl, tv, t.Backpressured.Seconds())
		// Always present (0 without event time), so the shipped alert rule
		// on it has a series to watch.
		w.send("task_late_records_total", "Records a source task dated at or before the watermark it had already emitted, this attempt: event-time operators downstream take them as late (such as the records of a partition added while the job ran, written before discovery found it); 0 without event time.", prometheus.CounterValue, tl, tv, float64(t.LateRecords))
		if t.Watermark != flow.NoWatermark {
			w.send("task_watermark_milliseconds", "The task's input watermark (event time it has reached), the smallest of its subtasks', in ms since the Unix epoch; absent without event time.", prometheus.GaugeValue, tl, tv, float64(min(t.Watermark, 1<<53)))
		}
		// docs/design.md, "Time per operator": sampled, last 5 s.
		for _, op := range t.Operators {
			w.send("task_operator_time_ratio", "Share of the task's time, over the last 5 s, its subtasks spent in this operator of its chain (sampled every 10 ms; a blocked sink near 1).", prometheus.GaugeValue, []string{"job_name", "task", "operator"}, []string{job, t.UID, op.UID}, op.Share)
		}
		if r, ok := rates[t.UID]; ok {
			w.send("task_busy_time_ms_per_second", "Milliseconds per second a subtask of the task was busy, averaged over its subtasks and the last few seconds.", prometheus.GaugeValue, tl, tv, r.Busy)
			w.send("task_idle_time_ms_per_second", "Milliseconds per second a subtask of the task waited for input.", prometheus.GaugeValue, tl, tv, r.Idle)
			w.send("task_backpressured_time_ms_per_second", "Milliseconds per second a subtask of the task waited for room downstream (Flink: OK up to 100, LOW up to 500, HIGH above).", prometheus.GaugeValue, tl, tv, r.Backpressured)
		}
	}

	j.ReportMetrics(func(op string, m flow.Metric) {
		names := make([]string, 0, 2+len(m.Labels))
		values := make([]string, 0, 2+len(m.Labels))
		names = append(names, "job_name", "operator")
		values = append(values, job, op)
		for _, l := range m.Labels {
			names = append(names, l.Name)
			values = append(values, l.Value)
		}
		if m.Histogram != nil {
			w.sendHistogram(m.Name, m.Help, names, values, m.Histogram)
			return
		}
		kind := prometheus.GaugeValue
		if m.Counter {
			kind = prometheus.CounterValue
		}
		w.send(m.Name, m.Help, kind, names, values, m.Value)
	})
}

// writer sends constant metrics, one Desc per name.
type writer struct {
	ch    chan<- prometheus.Metric
	descs map[string]*prometheus.Desc
}

func (w writer) send(name, help string, kind prometheus.ValueType, labels, values []string, v float64) {
	fq := Namespace + "_" + name
	key := fq + "\x00" + strings.Join(labels, ",")
	d := w.descs[key]
	if d == nil {
		d = prometheus.NewDesc(fq, help, labels, nil)
		w.descs[key] = d
	}
	m, err := prometheus.NewConstMetric(d, kind, v, values...)
	if err != nil {
		m = prometheus.NewInvalidMetric(d, err)
	}
	w.ch <- m
}

// sendHistogram sends a histogram a component reports (flow.Histogram).
func (w writer) sendHistogram(name, help string, labels, values []string, h *flow.Histogram) {
	fq := Namespace + "_" + name
	key := fq + "\x00" + strings.Join(labels, ",")
	d := w.descs[key]
	if d == nil {
		d = prometheus.NewDesc(fq, help, labels, nil)
		w.descs[key] = d
	}
	m, err := prometheus.NewConstHistogram(d, h.Count, h.Sum, h.Buckets, values...)
	if err != nil {
		m = prometheus.NewInvalidMetric(d, err)
	}
	w.ch <- m
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
