package flow

import (
	"time"

	"github.com/onceflow/onceflow/internal/engine"
)

// Hook observes a job. A hook is any value implementing one or more of the
// Hook* interfaces below (the franz-go idiom: small optional interfaces
// found by type assertion), registered with WithHooks. The job calls them
// from its run loop: they must return quickly and must not call back into
// the job. A Prometheus exporter, a log line or a test recorder is a hook;
// for continuous figures (records, backpressure, lag) read Job.Stats on
// its own schedule instead.
type Hook any

// HookCheckpointStarted is called when a checkpoint or savepoint is
// triggered.
type HookCheckpointStarted interface {
	OnCheckpointStarted(CheckpointStarted)
}

// HookCheckpointCompleted is called when a checkpoint committed.
type HookCheckpointCompleted interface {
	OnCheckpointCompleted(CheckpointCompleted)
}

// HookCheckpointFailed is called when a checkpoint was aborted (timed out,
// declined) or its commit failed.
type HookCheckpointFailed interface {
	OnCheckpointFailed(CheckpointFailed)
}

// HookRestored is called when an attempt starts from a checkpoint or
// savepoint.
type HookRestored interface {
	OnRestored(Restored)
}

// HookRestarting is called when the job fails over and the restart strategy
// restarts it.
type HookRestarting interface {
	OnRestarting(Restarting)
}

// HookJobEnded is called once when the job ends.
type HookJobEnded interface {
	OnJobEnded(JobEnded)
}

// CheckpointStarted is the trigger of a checkpoint or savepoint.
type CheckpointStarted struct {
	Job       string
	ID        int64
	Savepoint bool
	Time      time.Time
}

// CheckpointCompleted is a committed checkpoint.
type CheckpointCompleted struct {
	Job       string
	ID        int64
	Savepoint bool
	// Duration is from the trigger to the end of the commit point.
	Duration time.Duration
	// StateBytes is the size of the keyed state files it wrote.
	StateBytes int64
	// Records is how many records the sinks wrote in the epochs it
	// committed.
	Records int64
	Time    time.Time
}

// CheckpointFailed is an aborted checkpoint or a failed commit.
type CheckpointFailed struct {
	Job       string
	ID        int64
	Savepoint bool
	Err       error
	Time      time.Time
}

// Restored is the start of an attempt from a checkpoint or savepoint.
type Restored struct {
	Job       string
	ID        int64
	Savepoint bool
	Dir       string
	Time      time.Time
}

// Restarting is a failover the restart strategy allowed.
type Restarting struct {
	Job     string
	Attempt int
	Delay   time.Duration
	Err     error
	Time    time.Time
}

// JobEnded is the end of the job; Err is nil when it finished or was
// stopped gracefully.
type JobEnded struct {
	Job  string
	Err  error
	Time time.Time
}

// WithHooks registers observers of the job (see Hook). Default: none.
func WithHooks(hooks ...Hook) Option {
	return func(e *Env) { e.hooks = append(e.hooks, hooks...) }
}

// engineHooks turns the user's hooks into the engine's callbacks.
func engineHooks(hooks []Hook) engine.Hooks {
	var h engine.Hooks
	for _, x := range hooks {
		if v, ok := x.(HookCheckpointStarted); ok {
			prev := h.CheckpointStarted
			h.CheckpointStarted = func(e engine.CheckpointStarted) { call(prev, e); v.OnCheckpointStarted(CheckpointStarted(e)) }
		}
		if v, ok := x.(HookCheckpointCompleted); ok {
			prev := h.CheckpointCompleted
			h.CheckpointCompleted = func(e engine.CheckpointCompleted) { call(prev, e); v.OnCheckpointCompleted(CheckpointCompleted(e)) }
		}
		if v, ok := x.(HookCheckpointFailed); ok {
			prev := h.CheckpointFailed
			h.CheckpointFailed = func(e engine.CheckpointFailed) { call(prev, e); v.OnCheckpointFailed(CheckpointFailed(e)) }
		}
		if v, ok := x.(HookRestored); ok {
			prev := h.Restored
			h.Restored = func(e engine.Restored) { call(prev, e); v.OnRestored(Restored(e)) }
		}
		if v, ok := x.(HookRestarting); ok {
			prev := h.Restarting
			h.Restarting = func(e engine.Restarting) { call(prev, e); v.OnRestarting(Restarting(e)) }
		}
		if v, ok := x.(HookJobEnded); ok {
			prev := h.JobEnded
			h.JobEnded = func(e engine.JobEnded) { call(prev, e); v.OnJobEnded(JobEnded(e)) }
		}
	}
	return h
}

func call[E any](f func(E), e E) {
	if f != nil {
		f(e)
	}
}
