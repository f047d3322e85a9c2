package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
)

// OverheadPair is one pair of pass-through runs over the same input, one
// plain and one with the metrics collector registered and gathered every
// 100 ms: their wall-clock times and the CPU time this process (job,
// clients and embedded broker) spent in each.
type OverheadPair struct {
	MetricsFirst         bool
	Plain, Metrics       time.Duration
	PlainCPU, MetricsCPU time.Duration
}

// Ratio is the metrics run's throughput over the plain run's.
func (p OverheadPair) Ratio() float64 { return p.Plain.Seconds() / p.Metrics.Seconds() }

// CPURatio is the plain run's CPU time over the metrics run's: below 1
// when metrics cost CPU.
func (p OverheadPair) CPURatio() float64 { return p.PlainCPU.Seconds() / p.MetricsCPU.Seconds() }

// RunOverhead measures what metrics cost the pass-through: pairs pairs of
// runs over one input, in the order plain-metrics, metrics-plain,
// plain-metrics, … so that a drift of the machine, or the second run of a
// pair being slower, weighs on both sides alike. Every run copies the
// input to its own topic, and each output is verified like Run's.
func RunOverhead(ctx context.Context, cfg Config, pairs int) ([]OverheadPair, error) {
	if pairs < 1 {
		return nil, fmt.Errorf("bench: %d pairs of runs: want at least 1", pairs)
	}
	b, closeBroker, err := newBench(cfg)
	if err != nil {
		return nil, err
	}
	defer closeBroker()
	cfg = b.cfg
	b.prefix = "onceflow-overhead-" + fmt.Sprint(time.Now().UnixNano())
	b.input = b.topic("in")
	cl, err := b.client()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if err := createTopic(ctx, adm, b.input, cfg.Partitions); err != nil {
		return nil, err
	}
	if err := b.produceInput(ctx, cl, adm); err != nil {
		return nil, err
	}
	run := func(name string, fn func(ctx context.Context, out string) error) (wall, cpu time.Duration, err error) {
		out := b.topic(name)
		if err := createTopic(ctx, adm, out, cfg.Partitions); err != nil {
			return 0, 0, err
		}
		cpu0, start := processCPU(), time.Now()
		if err := fn(ctx, out); err != nil {
			return 0, 0, fmt.Errorf("bench: %s: %w", name, err)
		}
		wall, cpu = time.Since(start), processCPU()-cpu0
		if err := verifyOutput(ctx, b.brokers, out, cfg.Records, countOnly{}); err != nil {
			return 0, 0, fmt.Errorf("bench: %s: %w", name, err)
		}
		// Many runs' outputs would not fit in the embedded broker's memory.
		if _, err := adm.DeleteTopics(ctx, out); err != nil {
			return 0, 0, fmt.Errorf("bench: delete %s: %w", out, err)
		}
		return wall, cpu, nil
	}
	var ps []OverheadPair
	for i := range pairs {
		p := OverheadPair{MetricsFirst: i%2 == 1}
		plain := func() (err error) {
			name := fmt.Sprintf("plain-%d", i)
			p.Plain, p.PlainCPU, err = run(name, func(ctx context.Context, out string) error {
				return b.runJob(ctx, name, out, func(s flow.Stream[kafka.Record]) flow.Stream[kafka.Record] { return s })
			})
			return err
		}
		withMetrics := func() (err error) {
			name := fmt.Sprintf("metrics-%d", i)
			p.Metrics, p.MetricsCPU, err = run(name, func(ctx context.Context, out string) error {
				return b.runPassThroughMetricsAs(ctx, name, out)
			})
			return err
		}
		first, second := plain, withMetrics
		if p.MetricsFirst {
			first, second = withMetrics, plain
		}
		if err := first(); err != nil {
			return nil, err
		}
		if err := second(); err != nil {
			return nil, err
		}
		b.logf("pair %d/%d: plain %v, metrics %v: ratio %.3f (CPU %.3f)", i+1, pairs, p.Plain.Round(time.Millisecond), p.Metrics.Round(time.Millisecond), p.Ratio(), p.CPURatio())
		ps = append(ps, p)
	}
	return ps, nil
}

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// OverheadSummary condenses pairs: the median and the range of the
// per-pair ratios, the ratio of the summed times, and a 95 % interval of
// the median from resampling the pairs.
type OverheadSummary struct {
	Pairs            int
	Median, Min, Max float64
	// Pooled is the summed plain time over the summed metrics time.
	Pooled float64
	// Low and High bound a 95 % bootstrap interval of the median.
	Low, High float64
	// GeoMean is the geometric mean of the ratios, GeoLow and GeoHigh a
	// 95 % bootstrap interval of it.
	GeoMean, GeoLow, GeoHigh float64
	// The same of the CPU ratios.
	CPUMedian, CPUPooled, CPULow, CPUHigh float64
	// The median ratio of the pairs run plain first, and metrics first.
	PlainFirstMedian, MetricsFirstMedian float64
}

// Summarize computes the summary of ps.
func Summarize(ps []OverheadPair) OverheadSummary {
	s := OverheadSummary{Pairs: len(ps)}
	if len(ps) == 0 {
		return s
	}
	var rs, cs, plainFirst, metricsFirst []float64
	var plain, met, plainCPU, metCPU float64
	for _, p := range ps {
		rs = append(rs, p.Ratio())
		cs = append(cs, p.CPURatio())
		plain += p.Plain.Seconds()
		met += p.Metrics.Seconds()
		plainCPU += p.PlainCPU.Seconds()
		metCPU += p.MetricsCPU.Seconds()
		if p.MetricsFirst {
			metricsFirst = append(metricsFirst, p.Ratio())
		} else {
			plainFirst = append(plainFirst, p.Ratio())
		}
	}
	s.Median, s.Min, s.Max = median(rs), slices.Min(rs), slices.Max(rs)
	s.Pooled = plain / met
	s.Low, s.High = bootstrap(rs, median)
	logs := make([]float64, len(rs))
	for i, r := range rs {
		logs[i] = math.Log(r)
	}
	meanExp := func(xs []float64) float64 {
		var sum float64
		for _, x := range xs {
			sum += x
		}
		return math.Exp(sum / float64(len(xs)))
	}
	s.GeoMean = meanExp(logs)
	s.GeoLow, s.GeoHigh = bootstrap(logs, meanExp)
	s.CPUMedian, s.CPUPooled = median(cs), plainCPU/metCPU
	s.CPULow, s.CPUHigh = bootstrap(cs, median)
	s.MetricsFirstMedian, s.PlainFirstMedian = median(metricsFirst), median(plainFirst)
	return s
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// bootstrap is a 95 % percentile-bootstrap interval of stat over xs
// (2000 resamples, a fixed generator so a run's report is reproducible
// from its pairs).
func bootstrap(xs []float64, stat func([]float64) float64) (low, high float64) {
	const n = 2000
	seed := uint64(0x9e3779b97f4a7c15)
	next := func() uint64 { // splitmix64
		seed += 0x9e3779b97f4a7c15
		z := seed
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		return z ^ (z >> 31)
	}
	meds := make([]float64, n)
	sample := make([]float64, len(xs))
	for i := range meds {
		for j := range sample {
			sample[j] = xs[next()%uint64(len(xs))]
		}
		meds[i] = stat(sample)
	}
	slices.Sort(meds)
	return meds[n*25/1000], meds[n*975/1000-1]
}

// FormatOverhead renders ps and their summary.
func FormatOverhead(ps []OverheadPair) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%4s  %-13s  %9s  %9s  %6s  %9s  %9s  %6s\n", "pair", "order", "plain", "metrics", "ratio", "plain CPU", "metr. CPU", "CPU")
	for i, p := range ps {
		order := "plain first"
		if p.MetricsFirst {
			order = "metrics first"
		}
		fmt.Fprintf(&sb, "%4d  %-13s  %9s  %9s  %6.3f  %9s  %9s  %6.3f\n", i+1, order, p.Plain.Round(time.Millisecond), p.Metrics.Round(time.Millisecond), p.Ratio(),
			p.PlainCPU.Round(time.Millisecond), p.MetricsCPU.Round(time.Millisecond), p.CPURatio())
	}
	s := Summarize(ps)
	fmt.Fprintf(&sb, "throughput ratio (metrics / plain): median %.3f (95%% interval %.3f–%.3f), pooled %.3f, range %.3f–%.3f; median plain first %.3f, metrics first %.3f\n",
		s.Median, s.Low, s.High, s.Pooled, s.Min, s.Max, s.PlainFirstMedian, s.MetricsFirstMedian)
	fmt.Fprintf(&sb, "geometric mean of the ratios %.3f (95%% interval %.3f–%.3f) over %d pairs\n", s.GeoMean, s.GeoLow, s.GeoHigh, s.Pairs)
	fmt.Fprintf(&sb, "CPU ratio (plain / metrics): median %.3f (95%% interval %.3f–%.3f), pooled %.3f\n", s.CPUMedian, s.CPULow, s.CPUHigh, s.CPUPooled)
	return sb.String()
}
