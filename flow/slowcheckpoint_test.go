package flow_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A checkpoint that runs past half its timeout is logged at WARN while it
// runs, so a sink blocked by a table lock shows in the log before the
// checkpoint is aborted (docs/design.md, "Metrics and the REST API").
func TestSlowCheckpointIsLoggedAtHalfItsTimeout(t *testing.T) {
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	src := flowtest.NewSource(flowtest.Split(make([]int, 3), 1), flowtest.PerPoll(1))
	env := flow.New(flow.JobName("slow"), flow.Logger(log), flow.StateDir(t.TempDir()),
		flow.Checkpointing(20*time.Millisecond), flow.CheckpointTimeout(2*time.Second))
	var once sync.Once
	// Rebalance ends the source's chain: the source takes the checkpoint
	// while the task after the exchange is blocked.
	in := flow.Map(flow.Rebalance(flow.From(env, src, flow.UID("src"))), func(x int) int {
		// Blocks the chain, barriers included, for 1.5 s once: past half
		// the timeout (1 s), within it.
		once.Do(func() { time.Sleep(1500 * time.Millisecond) })
		return x
	})
	flow.To(in, flowtest.NewSink[int](), flow.UID("sink"))
	j, err := env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	var warned string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, "half its timeout") {
			warned = l
		}
	}
	if warned == "" {
		t.Fatalf("no WARN about a checkpoint past half its timeout:\n%s", logs.String())
	}
	// It names what the checkpoint waits for: the operators whose
	// subtasks have not acknowledged it, the blocked task's sink among
	// them, and not the source, whose task took it.
	if !strings.Contains(warned, "waiting_for=") || !strings.Contains(warned, "sink subtask 0") || strings.Contains(warned, "src subtask 0") {
		t.Errorf("the WARN does not name the operators the checkpoint waits for (the sink, not the source): %s", warned)
	}
	if strings.Contains(logs.String(), "checkpoint aborted") {
		t.Errorf("the checkpoint was aborted; the test wants one that is slow, not expired:\n%s", logs.String())
	}
}
