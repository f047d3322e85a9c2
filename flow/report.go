package flow

// Metric is one figure a component reports about itself (a Kafka source's
// offset of one partition, a sink's transactions). Exporters add the
// job's name and the component's uid as labels; Labels must stay bounded
// (a topic and partition, never a key).
type Metric struct {
	// Name is lower_snake_case without a prefix or unit suffix beyond the
	// Prometheus conventions (_total for counters, _seconds, _bytes).
	Name string
	Help string
	// Counter marks a value that only grows (over the component's life in
	// this process); otherwise it is a gauge.
	Counter bool
	Labels  []Label
	Value   float64
	// Histogram, when set, makes the metric a histogram (Value and
	// Counter are then unused): the observations' count and sum, and
	// the cumulative count at or below each bucket's upper bound.
	Histogram *Histogram
}

// Histogram is the state of a histogram metric.
type Histogram struct {
	Count   uint64
	Sum     float64
	Buckets map[float64]uint64 // upper bound → observations at or below it
}

// Label is a name and value that tells apart the series of one Metric.
type Label struct{ Name, Value string }

// MetricsReporter is implemented by sources, sinks, commit points and
// operator functions that report figures of their own. Exporters call
// ReportMetrics on their own schedule (a scrape), from another goroutine
// than the job's: it must be safe for concurrent use and quick.
type MetricsReporter interface {
	ReportMetrics(emit func(Metric))
}

// ReportMetrics calls emit with every metric the job's components report
// (MetricsReporter), each with the uid of the operator it belongs to
// ("commit-point" for the commit point when it is no operator's).
func (j *Job) ReportMetrics(emit func(operator string, m Metric)) {
	seen := map[any]bool{}
	report := func(uid string, v any) {
		r, ok := v.(MetricsReporter)
		if !ok || seen[v] {
			return
		}
		seen[v] = true
		r.ReportMetrics(func(m Metric) { emit(uid, m) })
	}
	for _, n := range j.g.Nodes() {
		if n.Impl() != nil {
			report(n.UID(), n.Impl())
		}
	}
	if cp := j.g.CommitPointOf(); cp != nil {
		report("commit-point", cp.Unwrap())
	}
}
