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
	// StateBytes is the size of all the keyed state files it needs.
	StateBytes int64
	// WrittenBytes is the part of StateBytes it wrote: all of it with the
	// memory backend, only new files with Pebble's incremental snapshots.
	WrittenBytes int64
	// Records is how many records the sinks wrote in the epochs it
	// committed.
	Records int64
	// Alignment is the longest time a subtask spent aligning its barriers
	// (from the first input's barrier to the last's).
	Alignment time.Duration
	// CommitDuration is how long the commit point took (Kafka: the
	// transaction's offsets and EndTxn; a database: its COMMIT).
	CommitDuration time.Duration
	Time           time.Time
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
	// AfterCrash is true for the first restore of a process that followed
	// one that did not stop gracefully (it counts as a restart).
	AfterCrash bool
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

// engineHooks turns the user's hooks into the engine's callbacks: each
// event calls, in registration order, every hook implementing its
// interface; an event no hook implements stays nil.
func engineHooks(hooks []Hook) engine.Hooks {
	return engine.Hooks{
		CheckpointStarted: each(hooks, func(v HookCheckpointStarted, e engine.CheckpointStarted) {
			v.OnCheckpointStarted(CheckpointStarted(e))
		}),
		CheckpointCompleted: each(hooks, func(v HookCheckpointCompleted, e engine.CheckpointCompleted) {
			v.OnCheckpointCompleted(CheckpointCompleted(e))
		}),
		CheckpointFailed: each(hooks, func(v HookCheckpointFailed, e engine.CheckpointFailed) {
			v.OnCheckpointFailed(CheckpointFailed(e))
		}),
		Restored:   each(hooks, func(v HookRestored, e engine.Restored) { v.OnRestored(Restored(e)) }),
		Restarting: each(hooks, func(v HookRestarting, e engine.Restarting) { v.OnRestarting(Restarting(e)) }),
		JobEnded:   each(hooks, func(v HookJobEnded, e engine.JobEnded) { v.OnJobEnded(JobEnded(e)) }),
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
