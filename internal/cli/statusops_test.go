package cli

import (
	"context"
	"io"
	"log/slog"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
	"github.com/onceflow/onceflow/internal/api"
)

// stuckSink blocks every Write until release is closed, like a sink
// waiting on a table lock.
type stuckSink struct {
	*flowtest.Sink[int]
	release chan struct{}
}

func (s stuckSink) Open(ctx context.Context, sc flow.SinkContext) (flow.SinkWriter[int], error) {
	w, err := s.Sink.Open(ctx, sc)
	return stuckWriter{w, s.release}, err
}

type stuckWriter struct {
	flow.SinkWriter[int]
	release chan struct{}
}

func (w stuckWriter) Write(ctx context.Context, x int) error {
	<-w.release
	return w.SinkWriter.Write(ctx, x)
}

// `onceflow status` shows, per task, the share of its time in each
// chained operator (docs/design.md, "Metrics and the REST API"): a sink
// blocked in Write takes the chained source task's time, which the busy
// figure alone hid (issue 21).
func TestStatusShowsTheTimeInEachOperator(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := api.New(api.Config{Addr: "127.0.0.1:0", Job: "stuck", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	defer srv.Close()
	release := make(chan struct{})
	env := flow.New(flow.JobName("stuck"), flow.Logger(log), flow.WithHooks(srv.Hooks()...))
	flow.To(flow.From(env, flowtest.NewSource(flowtest.Split(make([]int, 10), 1)), flow.UID("src")), stuckSink{flowtest.NewSink[int](), release}, flow.UID("pg-sink"))
	ctx, cancel := context.WithCancel(context.Background())
	j, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { close(release); cancel(); _ = j.Wait() }()
	srv.Attach(j)
	time.Sleep(800 * time.Millisecond)
	code, out, errOut := runMain("status", "--api", srv.URL())
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, errOut)
	}
	m := regexp.MustCompile(`src \d+%, pg-sink (\d+)%`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("status does not show the time in each operator (want \"src N%%, pg-sink N%%\"):\n%s", out)
	}
	if pct, _ := strconv.Atoi(m[1]); pct < 80 {
		t.Errorf("status shows the blocked sink at %d%% of its task's time, want ≥ 80%%:\n%s", pct, out)
	}
}
