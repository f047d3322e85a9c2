package api

import (
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
)

// A process that follows a crash counts a restart (restarts_total, the
// UI's header); /exceptions must show why, or the header's count has no
// entry to explain it.
func TestRestoreAfterCrashIsAnException(t *testing.T) {
	h := NewHistory(10)
	h.OnRestored(flow.Restored{Job: "j", ID: 3, Time: time.Now()})
	if restarts, _ := h.exceptions(); len(restarts) != 0 {
		t.Fatalf("a restore after a graceful stop is no exception, got %+v", restarts)
	}
	h.OnRestored(flow.Restored{Job: "j", ID: 7, Time: time.Now(), AfterCrash: true})
	restarts, _ := h.exceptions()
	if len(restarts) != 1 {
		t.Fatalf("exceptions after a restore that followed a crash: %+v, want one", restarts)
	}
	for _, want := range []string{"process restarted after a crash", "restored checkpoint 7"} {
		if !strings.Contains(restarts[0].Message, want) {
			t.Errorf("exception %q does not say %q", restarts[0].Message, want)
		}
	}
}

// A checkpoint in progress shows how long it has been running (Flink's
// end_to_end_duration does), not 0 ms: a checkpoint stuck behind a
// blocked sink must look stuck, in /checkpoints and in the UI.
func TestCheckpointInProgressShowsItsElapsedTime(t *testing.T) {
	h := NewHistory(10)
	h.OnCheckpointStarted(flow.CheckpointStarted{Job: "j", ID: 5, Time: time.Now().Add(-90 * time.Second)})
	for _, c := range h.checkpointsCopy() {
		if c.Status != "IN_PROGRESS" || c.DurationMs < 90_000 || c.DurationMs > 100_000 {
			t.Errorf("history: checkpoint %d %s for %d ms, want IN_PROGRESS for about 90000 ms", c.ID, c.Status, c.DurationMs)
		}
	}
	if c, ok := h.checkpoint(5); !ok || c.DurationMs < 90_000 {
		t.Errorf("details of checkpoint 5: %+v, want about 90000 ms elapsed", c)
	}
}
