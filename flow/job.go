package flow

import (
	"context"
	"errors"
	"fmt"

	"github.com/onceflow/onceflow/internal/engine"
)

// Stats is a snapshot of a running job's counters. Counters marked
// "job life" continue across restarts and processes: the checkpoints carry
// them. The others count this process only.
type Stats = engine.Stats

// TaskStats are the counters of one task: operators chained in one
// goroutine per subtask, named by the task's first operator.
type TaskStats = engine.TaskStats

// OperatorStats is one operator of a task and its share of the task's
// time (TaskStats.Operators).
type OperatorStats = engine.OperatorStats

// Job is a running job.
type Job struct {
	j *engine.RunningJob
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
func (j *Job) Stats() Stats { return j.j.Stats() }
