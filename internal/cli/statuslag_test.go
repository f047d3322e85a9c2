package cli

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
)

// reportingSource is a source that reports its pending records as the
// Kafka source does when its task is blocked (it lists the end offsets
// itself at scrape time).
type reportingSource struct {
	*flowtest.Source[int]
	pending float64
}

func (s reportingSource) ReportMetrics(emit func(flow.Metric)) {
	emit(flow.Metric{Name: "source_pending_records", Value: s.pending})
}

// The status line's lag is the figure `onceflow status` and /metrics
// show (source_pending_records, which keeps growing while a blocked sink
// stops the source from polling), not the last lag a poll saw: a job
// stuck behind a locked table logged lag=0 while status said 66000.
func TestStatusLagIsThePendingRecordsTheAPIShows(t *testing.T) {
	env := flow.New(flow.JobName("lag"), flow.Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	src := reportingSource{Source: flowtest.NewSource(flowtest.Split(make([]int, 10), 1)), pending: 66000}
	flow.To(flow.From(env, flow.Source[int](src), flow.UID("src")), flowtest.NewSink[int](), flow.UID("sink"))
	j, err := env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer j.Wait()
	if got := jobLag(j); got != 66000 {
		t.Fatalf("status line lag %d, want 66000 (the source's source_pending_records)", got)
	}
}
