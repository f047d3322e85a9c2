package flow

import (
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

// HookJobStarted is called once when the job has started, with the job:
// a hook that reads Job.Stats or Job.ReportMetrics on its own schedule (a
// metrics exporter) learns the job here.
type HookJobStarted interface {
	OnJobStarted(*Job)
}

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
type CheckpointStarted = engine.CheckpointStarted

// CheckpointCompleted is a committed checkpoint.
type CheckpointCompleted = engine.CheckpointCompleted

// CheckpointFailed is an aborted checkpoint or a failed commit.
type CheckpointFailed = engine.CheckpointFailed

// Restored is the start of an attempt from a checkpoint or savepoint.
type Restored = engine.Restored

// Restarting is a failover the restart strategy allowed.
type Restarting = engine.Restarting

// JobEnded is the end of the job; Err is nil when it finished or was
// stopped gracefully.
type JobEnded = engine.JobEnded

// WithHooks registers observers of the job (see Hook). Default: none.
func WithHooks(hooks ...Hook) Option {
	return func(e *Env) { e.hooks = append(e.hooks, hooks...) }
}

// engineHooks turns the user's hooks into the engine's callbacks: each
// event calls, in registration order, every hook implementing its
// interface; an event no hook implements stays nil.
func engineHooks(hooks []Hook) engine.Hooks {
	return engine.Hooks{
		CheckpointStarted:   each(hooks, HookCheckpointStarted.OnCheckpointStarted),
		CheckpointCompleted: each(hooks, HookCheckpointCompleted.OnCheckpointCompleted),
		CheckpointFailed:    each(hooks, HookCheckpointFailed.OnCheckpointFailed),
		Restored:            each(hooks, HookRestored.OnRestored),
		Restarting:          each(hooks, HookRestarting.OnRestarting),
		JobEnded:            each(hooks, HookJobEnded.OnJobEnded),
	}
}

// each returns a callback that calls on for every hook implementing H, or
// nil when none does.
func each[H, E any](hooks []Hook, on func(H, E)) func(E) {
	var hs []H
	for _, x := range hooks {
		if v, ok := x.(H); ok {
			hs = append(hs, v)
		}
	}
	if len(hs) == 0 {
		return nil
	}
	return func(e E) {
		for _, v := range hs {
			on(v, e)
		}
	}
}
