package cli

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/onceflow/onceflow/internal/compile"
	"github.com/onceflow/onceflow/metrics"
)

// pipelineMetrics collects, for a scale-out instance's /metrics, what
// its tasks' pipelines count besides the engine: the counters a single
// instance registers in serveJob, per task (label job_name the task's).
// A task's counters are there while its job runs.
type pipelineMetrics struct {
	mu    sync.Mutex
	tasks map[string]*compile.PipelineMetrics
}

var (
	lateRecordsDesc = prometheus.NewDesc(metrics.Namespace+"_window_late_records_total",
		"Records the pipeline's window steps took as later than their allowed lateness, and its interval-join, window-join and temporal-join steps as later than the watermark (sent to the late topic, or dropped).", []string{"job_name"}, nil)
	duplicatesDesc = prometheus.NewDesc(metrics.Namespace+"_dedupe_duplicates_dropped_total",
		"Records the pipeline's dedupe steps dropped as duplicates (its rate is the duplicate rate).", []string{"job_name"}, nil)
)

// add shows task's counters; the returned function removes them.
func (pm *pipelineMetrics) add(task string, m *compile.PipelineMetrics) func() error {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	if pm.tasks == nil {
		pm.tasks = map[string]*compile.PipelineMetrics{}
	}
	pm.tasks[task] = m
	return func() error {
		pm.mu.Lock()
		defer pm.mu.Unlock()
		if pm.tasks[task] == m {
			delete(pm.tasks, task)
		}
		return nil
	}
}

func (pm *pipelineMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- lateRecordsDesc
	ch <- duplicatesDesc
}

func (pm *pipelineMetrics) Collect(ch chan<- prometheus.Metric) {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	for task, m := range pm.tasks {
		ch <- prometheus.MustNewConstMetric(lateRecordsDesc, prometheus.CounterValue, float64(m.LateRecords.Load()), task)
		ch <- prometheus.MustNewConstMetric(duplicatesDesc, prometheus.CounterValue, float64(m.DuplicatesDropped.Load()), task)
	}
}
