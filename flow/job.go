package flow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/onceflow/onceflow/internal/engine"
)

// Stats is a snapshot of a running job's counters. Counters marked
// "job life" continue across restarts and processes: the checkpoints carry
// them. The others count this process only.
type Stats struct {
	RecordsIn int64 // records read by sources (this process)
	// RecordsOut counts records written to sinks by this process,
	// including those of epochs whose commit later failed and that were
	// written again after a restore.
	RecordsOut int64
	// RecordsCommitted counts records written in checkpoints that
	// committed (job life): what readers of the output see.
	RecordsCommitted       int64
	CheckpointsCompleted   int64         // job life
	CheckpointsFailed      int64         // job life
	LastCheckpoint         int64         // id of the newest committed checkpoint
	LastCheckpointDuration time.Duration // trigger to commit
	// Restarts counts failovers inside this process plus starts of a
	// process after one that did not stop gracefully (job life).
	Restarts            int64
	RestoredCheckpoint  int64 // id of the checkpoint or savepoint the current (or last) attempt restored, 0 for none
	RecordsSkipped      int64 // poison records dropped by TryMap with SkipOnError
	RecordsDeadLettered int64 // poison records sent to a dead-letter stream by TryMap
	Running             bool
	// CheckpointsInProgress counts checkpoints triggered and neither
	// committed nor aborted.
	CheckpointsInProgress int64
	// The newest committed checkpoint: its state size, the part of it it
	// wrote, the longest barrier alignment of its subtasks, how long its
	// commit point took, and when it committed (zero: none yet in this
	// process).
	LastCheckpointStateBytes     int64
	LastCheckpointWrittenBytes   int64
	LastCheckpointAlignment      time.Duration
	LastCheckpointCommitDuration time.Duration
	LastCheckpointTime           time.Time
	// LastRestoreTime is when the current (or last) attempt restored a
	// checkpoint or savepoint; zero when none was restored.
	LastRestoreTime time.Time
	// Tasks has one entry per task (a chain of operators) of the running
	// attempt, nil when none runs.
	Tasks []TaskStats
}

// TaskStats are the counters of one task: operators chained in one
// goroutine per subtask, named by the task's first operator.
type TaskStats struct {
	UID         string // uid of the task's first operator
	Name        string
	Parallelism int
	// RecordsIn counts the records the task took in (a source: read);
	// RecordsOut those its sinks wrote; both this attempt.
	RecordsIn, RecordsOut int64
	// Backpressured is how long the task's subtasks waited, in all, for
	// room in the channels to the next task.
	Backpressured time.Duration
	// Idle is how long they waited for input (a source: polls that
	// returned no record), Busy the rest of their time, Elapsed the sum
	// of their running times in this attempt: Busy + Idle + Backpressured
	// = Elapsed. Busy/Elapsed is Flink's busy time ratio.
	Idle, Busy, Elapsed time.Duration
	// Watermark is the task's input watermark (Flink's
	// currentInputWatermark), the smallest of its subtasks', in ms since
	// the Unix epoch; NoWatermark while a subtask has none, and always
	// for a job without event time (flow.WithWatermarks).
	Watermark int64
	// LateRecords counts, for a source task with event time, the records
	// it dated at or before the watermark it had already emitted, this
	// attempt: event-time operators downstream take them as late. The
	// records of a partition added while the job runs and written before
	// discovery found it are such (docs/design.md, "The Kafka source");
	// the source logs a warning naming the split.
	LateRecords int64
	// Operators are the task's operators in chain order, the task's own
	// first, each with the share of the task's time its subtasks spent in
	// it over the last 5 s: a blocked sink shows near 1, the source
	// chained before it near 0. Found by sampling every 10 ms, not by
	// reading the clock per record (docs/design.md, "Metrics and the REST
	// API").
	Operators []OperatorStats
}

// OperatorStats is one operator of a task and its share of the task's
// time (TaskStats.Operators).
type OperatorStats = engine.OperatorStats

// Job is a running job.
type Job struct {
	j *engine.Job
	g *engine.Graph
}

// Run runs the job until its input ends (bounded sources), ctx is canceled
// (then it stops gracefully: a final checkpoint commits what was processed),
// or it fails beyond what its restart strategy allows.
func (e *Env) Run(ctx context.Context) error {
	j, err := e.Start(ctx)
	if err != nil {
		return err
	}
	return j.Wait()
}

// Start validates the job and runs it in the background. Sources, sinks and
// commit points that implement JobBinder learn the job first; an error from
// them rejects the job.
func (e *Env) Start(ctx context.Context) (*Job, error) {
	cfg, err := engine.Validate(e.g)
	if err != nil {
		return nil, err
	}
	info := JobInfo{Name: cfg.Job, Checkpointing: cfg.Checkpoint, StopTimeout: cfg.StopTimeout, Logger: cfg.Logger.With("job", cfg.Job)}
	var errs []error
	bound := map[any]bool{}
	bind := func(what string, v any) {
		b, ok := v.(JobBinder)
		if !ok || bound[v] {
			return
		}
		bound[v] = true
		if err := b.BindJob(info); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		}
	}
	for _, n := range e.g.Nodes() {
		if n.Impl() != nil {
			bind(fmt.Sprintf("operator %q", n.UID()), n.Impl())
		}
	}
	if cp := e.g.CommitPointOf(); cp != nil {
		bind("the commit point", cp.Unwrap())
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalidJob, errors.Join(errs...))
	}
	e.g.Cfg.Hooks = engineHooks(e.hooks)
	j, err := engine.Start(ctx, e.g)
	if err != nil {
		return nil, err
	}
	job := &Job{j: j, g: e.g}
	for _, h := range e.hooks {
		if v, ok := h.(HookJobStarted); ok {
			v.OnJobStarted(job)
		}
	}
	return job, nil
}

// Wait blocks until the job ends and returns why it failed, or nil.
func (j *Job) Wait() error { return j.j.Wait() }

// Name is the job's name.
func (j *Job) Name() string { return j.j.Name() }

// Checkpointing is the job's checkpoint configuration, defaults applied.
func (j *Job) Checkpointing() CheckpointSettings { return j.j.Checkpointing() }

// Done is closed when the job has ended.
func (j *Job) Done() <-chan struct{} { return j.j.Done() }

// Stop asks the job to stop gracefully: a final checkpoint commits what was
// processed, then the sources end. Wait returns when it has stopped.
func (j *Job) Stop() { j.j.Stop() }

// TriggerSavepoint takes a savepoint of the running job into dir (a new or
// empty directory) and returns its path.
func (j *Job) TriggerSavepoint(ctx context.Context, dir string) (string, error) {
	return j.j.TriggerSavepoint(ctx, dir)
}

// StopWithSavepoint takes a savepoint into dir and stops the job right after
// it, so nothing is processed after the savepoint. Resume with FromSavepoint.
func (j *Job) StopWithSavepoint(ctx context.Context, dir string) (string, error) {
	return j.j.StopWithSavepoint(ctx, dir)
}

// Stats returns the job's counters.
func (j *Job) Stats() Stats {
	s := j.j.Stats()
	out := Stats{
		RecordsIn: s.RecordsIn, RecordsOut: s.RecordsOut, RecordsCommitted: s.RecordsCommitted,
		CheckpointsCompleted: s.CheckpointsCompleted, CheckpointsFailed: s.CheckpointsFailed,
		LastCheckpoint: s.LastCheckpoint, LastCheckpointDuration: s.LastCheckpointDuration,
		Restarts: s.Restarts, RestoredCheckpoint: s.RestoredCheckpoint,
		RecordsSkipped: s.RecordsSkipped, RecordsDeadLettered: s.RecordsDeadLettered, Running: s.Running,
		CheckpointsInProgress:    s.CheckpointsInProgress,
		LastCheckpointStateBytes: s.LastCheckpointStateBytes, LastCheckpointWrittenBytes: s.LastCheckpointWrittenBytes,
		LastCheckpointAlignment: s.LastCheckpointAlignment, LastCheckpointCommitDuration: s.LastCheckpointCommitDuration,
		LastCheckpointTime: s.LastCheckpointTime, LastRestoreTime: s.LastRestoreTime,
	}
	for _, t := range s.Tasks {
		out.Tasks = append(out.Tasks, TaskStats(t))
	}
	return out
}
