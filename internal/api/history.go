package api

import (
	"fmt"
	"sync"
	"time"

	"github.com/onceflow/onceflow/flow"
)

// History is a job hook that keeps the recent checkpoints, restarts and
// errors for the REST API. Its zero value is not usable: call NewHistory.
type History struct {
	mu          sync.Mutex
	max         int
	checkpoints []Checkpoint // oldest first, at most max
	byID        map[int64]*Checkpoint
	restarts    []Exception // oldest first, at most max
	restored    *Restore
	ended       *Exception
	startedAt   time.Time
}

// Checkpoint is one checkpoint or savepoint as the API shows it.
type Checkpoint struct {
	ID        int64  `json:"id"`
	Status    string `json:"status"` // IN_PROGRESS, COMPLETED, FAILED
	Savepoint bool   `json:"is_savepoint"`
	// Trigger and end are unix milliseconds (Flink's convention); end 0
	// while in progress.
	TriggerTimestamp int64  `json:"trigger_timestamp"`
	EndTimestamp     int64  `json:"latest_ack_timestamp,omitempty"`
	DurationMs       int64  `json:"end_to_end_duration"`
	StateSize        int64  `json:"state_size"`
	WrittenSize      int64  `json:"checkpointed_size"`
	AlignmentMs      int64  `json:"alignment_duration"`
	BarrierDelayMs   int64  `json:"barrier_delay"`
	CommitMs         int64  `json:"commit_duration"`
	Records          int64  `json:"records_committed"`
	FailureMessage   string `json:"failure_message,omitempty"`
}

// Restore is the checkpoint or savepoint the current attempt started from.
type Restore struct {
	ID        int64  `json:"id"`
	Savepoint bool   `json:"is_savepoint"`
	Path      string `json:"external_path"`
	Timestamp int64  `json:"restore_timestamp"`
}

// Exception is a failover (or the job's end) and its cause.
type Exception struct {
	Timestamp int64  `json:"timestamp"`
	Attempt   int    `json:"attempt,omitempty"`
	DelayMs   int64  `json:"restart_delay,omitempty"`
	Message   string `json:"exception"`
}

var (
	_ flow.HookCheckpointStarted   = (*History)(nil)
	_ flow.HookCheckpointCompleted = (*History)(nil)
	_ flow.HookCheckpointFailed    = (*History)(nil)
	_ flow.HookRestored            = (*History)(nil)
	_ flow.HookRestarting          = (*History)(nil)
	_ flow.HookJobEnded            = (*History)(nil)
)

// NewHistory keeps the last max checkpoints and restarts.
func NewHistory(max int) *History {
	return &History{max: max, byID: map[int64]*Checkpoint{}, startedAt: time.Now()}
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func (h *History) OnCheckpointStarted(e flow.CheckpointStarted) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checkpoints = append(h.checkpoints, Checkpoint{ID: e.ID, Status: "IN_PROGRESS", Savepoint: e.Savepoint, TriggerTimestamp: ms(e.Time)})
	if len(h.checkpoints) > h.max {
		h.checkpoints = h.checkpoints[len(h.checkpoints)-h.max:]
	}
	h.reindex()
}

// reindex points byID at the slice's entries (append and trimming move
// them).
func (h *History) reindex() {
	clear(h.byID)
	for i := range h.checkpoints {
		h.byID[h.checkpoints[i].ID] = &h.checkpoints[i]
	}
}

func (h *History) OnCheckpointCompleted(e flow.CheckpointCompleted) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.byID[e.ID]
	if c == nil {
		return
	}
	c.Status = "COMPLETED"
	c.EndTimestamp = ms(e.Time)
	c.DurationMs = e.Duration.Milliseconds()
	c.StateSize, c.WrittenSize = e.StateBytes, e.WrittenBytes
	c.AlignmentMs, c.CommitMs = e.Alignment.Milliseconds(), e.CommitDuration.Milliseconds()
	c.BarrierDelayMs = e.BarrierDelay.Milliseconds()
	c.Records = e.Records
}

func (h *History) OnCheckpointFailed(e flow.CheckpointFailed) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.byID[e.ID]
	if c == nil {
		return
	}
	c.Status = "FAILED"
	c.EndTimestamp = ms(e.Time)
	c.DurationMs = e.Time.Sub(time.UnixMilli(c.TriggerTimestamp)).Milliseconds()
	if e.Err != nil {
		c.FailureMessage = e.Err.Error()
	}
}

func (h *History) OnRestored(e flow.Restored) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.restored = &Restore{ID: e.ID, Savepoint: e.Savepoint, Path: e.Dir, Timestamp: ms(e.Time)}
	if e.AfterCrash {
		// It counts as a restart, so it is one here too.
		h.addRestart(Exception{Timestamp: ms(e.Time), Message: fmt.Sprintf(
			"process restarted after a crash (the previous process did not stop gracefully), restored checkpoint %d", e.ID)})
	}
}

func (h *History) OnRestarting(e flow.Restarting) {
	h.mu.Lock()
	defer h.mu.Unlock()
	x := Exception{Timestamp: ms(e.Time), Attempt: e.Attempt, DelayMs: e.Delay.Milliseconds()}
	if e.Err != nil {
		x.Message = e.Err.Error()
	}
	h.addRestart(x)
}

// addRestart keeps x; the caller holds h.mu.
func (h *History) addRestart(x Exception) {
	h.restarts = append(h.restarts, x)
	if len(h.restarts) > h.max {
		h.restarts = h.restarts[len(h.restarts)-h.max:]
	}
}

func (h *History) OnJobEnded(e flow.JobEnded) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e.Err != nil {
		h.ended = &Exception{Timestamp: ms(e.Time), Message: e.Err.Error()}
	}
}

// checkpointsCopy returns the kept checkpoints, newest first.
func (h *History) checkpointsCopy() []Checkpoint {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Checkpoint, len(h.checkpoints))
	now := time.Now()
	for i, c := range h.checkpoints {
		out[len(out)-1-i] = c.asOf(now)
	}
	return out
}

// asOf is c as shown at now: one in progress has been running since its
// trigger (Flink's end_to_end_duration counts so too), so one stuck
// behind a blocked sink shows its minutes instead of 0 ms.
func (c Checkpoint) asOf(now time.Time) Checkpoint {
	if c.Status == "IN_PROGRESS" {
		c.DurationMs = max(0, now.Sub(time.UnixMilli(c.TriggerTimestamp)).Milliseconds())
	}
	return c
}

func (h *History) checkpoint(id int64) (Checkpoint, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.byID[id]
	if c == nil {
		return Checkpoint{}, false
	}
	return c.asOf(time.Now()), true
}

func (h *History) exceptions() (restarts []Exception, ended *Exception) {
	h.mu.Lock()
	defer h.mu.Unlock()
	restarts = make([]Exception, len(h.restarts))
	for i, x := range h.restarts {
		restarts[len(restarts)-1-i] = x
	}
	if h.ended != nil {
		e := *h.ended
		ended = &e
	}
	return restarts, ended
}

func (h *History) restore() *Restore {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.restored == nil {
		return nil
	}
	r := *h.restored
	return &r
}

// Checkpoints are the kept checkpoints, newest first: what GET
// /jobs/{job}/checkpoints lists. A scale-out instance keeps a History per
// task and lists them together (docs/design.md, "Scale-out").
func (h *History) Checkpoints() []Checkpoint { return h.checkpointsCopy() }

// Checkpoint is the kept checkpoint id, false when it is not kept.
func (h *History) Checkpoint(id int64) (Checkpoint, bool) { return h.checkpoint(id) }

// Restored is the checkpoint or savepoint the current attempt started
// from, nil for none.
func (h *History) Restored() *Restore { return h.restore() }

// Max is how many checkpoints and restarts h keeps.
func (h *History) Max() int { return h.max }
