package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow/internal/checkpoint"
	"github.com/onceflow/onceflow/internal/checkpoint/storage"
	"github.com/onceflow/onceflow/internal/dirlock"
	"github.com/onceflow/onceflow/internal/restart"
	"github.com/onceflow/onceflow/internal/testbreak"
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
	LastCheckpointStateBytes   int64
	LastCheckpointWrittenBytes int64
	LastCheckpointAlignment    time.Duration
	// LastCheckpointBarrierDelay is its longest barrier delay
	// (CheckpointCompleted.BarrierDelay).
	LastCheckpointBarrierDelay   time.Duration
	LastCheckpointCommitDuration time.Duration
	LastCheckpointTime           time.Time
	// LastRestoreTime is when the current (or last) attempt restored a
	// checkpoint or savepoint; zero when none was restored.
	LastRestoreTime time.Time
	// Tasks has one entry per task (a chain of operators) of the running
	// attempt, nil when none runs.
	Tasks []TaskStats
}

// TaskStats are one task's counters (flow.TaskStats).
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

// OperatorStats is one operator of a task and the share of the task's
// time spent in it, found by sampling (docs/design.md, "Metrics and the
// REST API").
type OperatorStats struct {
	UID, Name string
	// Share is the fraction of the task's sampled time, over the last
	// 5 s, that its subtasks spent in this operator (0 to 1). The rest of
	// the time is Idle and Backpressured, in the same window.
	Share float64
	// Samples counts the 10 ms samples that found a subtask in this
	// operator, this attempt.
	Samples int64
}

// RunningJob is a running job; flow.Job wraps it.
type RunningJob struct {
	g    *Graph
	cfg  Config
	log  *slog.Logger
	reqs chan request
	done chan struct{}
	err  error

	stopOnce sync.Once
	stop     chan struct{}
	// hardStop is canceled when a graceful stop has run out of time
	// (StopTimeout less the time kept for cleanup): a commit stuck on an
	// unreachable system gives up then.
	hardStop context.Context

	// stateID identifies the state directory (storage.Store.StateID).
	stateID string
	// root is the job's state directory (STATE_DIR/JOB), "" without one.
	root string

	mu       sync.Mutex
	cur      *attempt
	restarts atomic.Int64
	cpDone   atomic.Int64
	cpFailed atomic.Int64
	lastCP   atomic.Int64
	lastDur  atomic.Int64
	restored atomic.Int64
	// restoredAt: unix nanoseconds of the last restore, 0 for none.
	restoredAt atomic.Int64
	// The newest committed checkpoint's figures (Stats.LastCheckpoint*).
	inFlight, lastSize, lastWritten, lastAlign, lastDelay, lastCommit, lastAt atomic.Int64
	// committed counts records of committed checkpoints.
	committed atomic.Int64
	// base holds the counters restored from the first checkpoint this
	// process restored (set once, before the first attempt runs).
	baseMu  sync.Mutex
	base    storage.Counters
	baseSet bool
	// skipped and deadLettered count poison records over the job's life
	// (a replayed record counts again).
	skipped      atomic.Int64
	deadLettered atomic.Int64
	inBase       atomic.Int64 // records counted by finished attempts
	outBase      atomic.Int64
	// attemptRan is true once the current attempt's tasks started (its
	// recovery is over).
	attemptRan atomic.Bool
	// committedThisRun is true once the job committed a checkpoint of its
	// own; from then on it restores from its own checkpoints, not from
	// FromSavepoint.
	committedThisRun atomic.Bool
}

type request struct {
	dir   string
	stop  bool
	reply chan savepointResult
}

type savepointResult struct {
	path string
	err  error
}

// Start validates the graph and runs the job in the background. Whatever
// the user's components must learn about the job (flow.JobBinder) is done
// by the caller before.
func Start(ctx context.Context, g *Graph) (*RunningJob, error) {
	cfg := g.Cfg
	cfg.Checkpoint = cfg.Checkpoint.WithDefaults()
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := g.validate(&cfg); err != nil {
		return nil, err
	}
	if _, err := g.plan(ctx, &cfg); err != nil {
		return nil, err
	}
	if testbreak.Any() {
		cfg.Logger.Error("TEST-ONLY SWITCHES THAT BREAK EXACTLY-ONCE ARE ON (" + testbreak.EnvVar + "); never run production jobs like this")
	}
	j := &RunningJob{g: g, cfg: cfg, log: cfg.Logger.With("job", cfg.Job), reqs: make(chan request), done: make(chan struct{}), stop: make(chan struct{})}
	go func() {
		defer close(j.done)
		j.err = j.run(ctx)
		cfg.Hooks.ended(JobEnded{Job: cfg.Job, Err: j.err, Time: time.Now()})
	}()
	return j, nil
}

// Validate checks the graph and its configuration without running it and
// returns the configuration the job would run with (defaults applied, the
// commit point found).
func Validate(g *Graph) (Config, error) {
	cfg := g.Cfg
	cfg.Checkpoint = cfg.Checkpoint.WithDefaults()
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	err := g.validate(&cfg)
	return cfg, err
}

// Wait blocks until the job ends and returns why it failed, or nil.
func (j *RunningJob) Wait() error {
	<-j.done
	return j.err
}

// Name is the job's name.
func (j *RunningJob) Name() string { return j.cfg.Job }

// Checkpointing is the job's checkpoint configuration, defaults applied.
func (j *RunningJob) Checkpointing() checkpoint.Config { return j.cfg.Checkpoint }

// Done is closed when the job has ended.
func (j *RunningJob) Done() <-chan struct{} { return j.done }

// Stop asks the job to stop gracefully: a final checkpoint commits what was
// processed, then the sources end. Wait returns when it has stopped.
func (j *RunningJob) Stop() { j.stopOnce.Do(func() { close(j.stop) }) }

// TriggerSavepoint takes a savepoint of the running job into dir (a new or
// empty directory) and returns its path.
func (j *RunningJob) TriggerSavepoint(ctx context.Context, dir string) (string, error) {
	return j.savepoint(ctx, dir, false)
}

// StopWithSavepoint takes a savepoint into dir and stops the job right after
// it, so nothing is processed after the savepoint. Resume with FromSavepoint.
func (j *RunningJob) StopWithSavepoint(ctx context.Context, dir string) (string, error) {
	return j.savepoint(ctx, dir, true)
}

func (j *RunningJob) savepoint(ctx context.Context, dir string, stop bool) (string, error) {
	if dir == "" {
		return "", errors.New("savepoint directory is empty: name a directory to write the savepoint into")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	r := request{dir: abs, stop: stop, reply: make(chan savepointResult, 1)}
	select {
	case j.reqs <- r:
	case <-j.done:
		return "", errors.New("the job is not running")
	case <-ctx.Done():
		return "", ctx.Err()
	}
	select {
	case res := <-r.reply:
		return res.path, res.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Stats returns the job's counters.
func (j *RunningJob) Stats() Stats {
	b := j.counters()
	s := Stats{
		RecordsIn:              j.inBase.Load(),
		RecordsOut:             j.outBase.Load(),
		RecordsCommitted:       b.RecordsCommitted,
		CheckpointsCompleted:   b.CheckpointsCompleted,
		CheckpointsFailed:      b.CheckpointsFailed,
		LastCheckpoint:         j.lastCP.Load(),
		LastCheckpointDuration: time.Duration(j.lastDur.Load()),
		Restarts:               b.Restarts,
		RestoredCheckpoint:     j.restored.Load(),
		RecordsSkipped:         j.skipped.Load(),
		RecordsDeadLettered:    j.deadLettered.Load(),

		CheckpointsInProgress:        j.inFlight.Load(),
		LastCheckpointStateBytes:     j.lastSize.Load(),
		LastCheckpointWrittenBytes:   j.lastWritten.Load(),
		LastCheckpointAlignment:      time.Duration(j.lastAlign.Load()),
		LastCheckpointBarrierDelay:   time.Duration(j.lastDelay.Load()),
		LastCheckpointCommitDuration: time.Duration(j.lastCommit.Load()),
		LastCheckpointTime:           unixNano(j.lastAt.Load()),
		LastRestoreTime:              unixNano(j.restoredAt.Load()),
	}
	j.mu.Lock()
	att := j.cur
	j.mu.Unlock()
	if att != nil {
		s.Running = true
		byHead := map[*Node]int{}
		var recent []int64 // per task, its subtasks' samples of the last 5 s
		for _, st := range att.subtasks {
			in, out := st.in.Load(), st.out.Load()
			if st.head.kind == kindSource {
				s.RecordsIn += in
			}
			s.RecordsOut += out
			i, ok := byHead[st.head]
			if !ok {
				i = len(s.Tasks)
				byHead[st.head] = i
				t := TaskStats{UID: st.head.uid, Name: st.head.name, Watermark: MaxWatermark}
				for _, n := range st.ops {
					t.Operators = append(t.Operators, OperatorStats{UID: n.uid, Name: n.name})
				}
				s.Tasks = append(s.Tasks, t)
				recent = append(recent, 0)
			}
			t := &s.Tasks[i]
			// Operator shares: the samples of the last 5 s in each
			// operator, over all of the task's samples (idle and
			// backpressured included).
			for k := range st.recent {
				n := st.recent[k].Load()
				recent[i] += n
				if k < len(t.Operators) {
					t.Operators[k].Share += float64(n)
					t.Operators[k].Samples += st.samples[k].Load()
				}
			}
			t.Watermark = min(t.Watermark, st.watermark.Load())
			t.Parallelism++
			t.RecordsIn += in
			t.RecordsOut += out
			t.LateRecords += st.late.Load()
			bp, idle := time.Duration(st.backpressured.Load()), time.Duration(st.idle.Load())
			now := time.Now()
			if since := st.bpSince.Load(); since != 0 {
				bp += max(0, now.Sub(time.Unix(0, since)))
			}
			if since := st.idleSince.Load(); since != 0 {
				idle += max(0, now.Sub(time.Unix(0, since)))
			}
			elapsed := now.Sub(st.started)
			t.Backpressured += bp
			t.Idle += idle
			t.Elapsed += elapsed
			t.Busy += max(0, elapsed-bp-idle)
		}
		for i := range s.Tasks {
			for k := range s.Tasks[i].Operators {
				if recent[i] > 0 {
					s.Tasks[i].Operators[k].Share /= float64(recent[i])
				}
			}
		}
	}
	return s
}

// unixNano is the time of n nanoseconds since the epoch, or the zero time
// for 0.
func unixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// counters returns the job-life counters: those restored plus this
// process's.
func (j *RunningJob) counters() storage.Counters {
	j.baseMu.Lock()
	b := j.base
	j.baseMu.Unlock()
	c := storage.Counters{
		Restarts:             b.Restarts + j.restarts.Load(),
		RecordsCommitted:     b.RecordsCommitted + j.committed.Load(),
		CheckpointsCompleted: b.CheckpointsCompleted + j.cpDone.Load(),
		CheckpointsFailed:    b.CheckpointsFailed + j.cpFailed.Load(),
	}
	if len(j.cfg.Counters) > 0 {
		// The registered counters hold the restored values already
		// (restoreCounters added them).
		c.Named = make(map[string]int64, len(j.cfg.Counters))
		for name, v := range j.cfg.Counters {
			c.Named[name] = v.Load()
		}
	}
	return c
}

// restoreCounters continues the counters of the first checkpoint this
// process restores (first: this is that first restore), and reports
// whether this process follows one that did
// not stop gracefully: that counts as a restart. The run record in the
// state directory (runrecord.go) tells, and carries the restarts of
// processes that died before writing a checkpoint; without one (a
// directory from before it existed) a restored checkpoint of the job's own
// that a graceful stop did not take tells.
func (j *RunningJob) restoreCounters(r recovery) (first, afterCrash bool) {
	j.baseMu.Lock()
	defer j.baseMu.Unlock()
	if j.baseSet {
		return false, false
	}
	j.baseSet = true
	if r.manifest != nil {
		j.base = r.manifest.Counters
		for name, v := range j.cfg.Counters {
			v.Add(r.manifest.Counters.Named[name])
		}
	}
	var rec runRecord
	var found bool
	if j.root != "" {
		var err error
		if rec, found, err = readRunRecord(j.root, j.stateID); err != nil {
			j.log.Warn("could not read the job's run record; restarts_total may miss restarts of processes that died before a checkpoint", "err", err)
		}
	}
	switch {
	case r.manifest != nil && !r.own:
		// A savepoint's counters: the run record is another lineage's.
	case found:
		j.base.Restarts = max(j.base.Restarts, rec.Restarts)
		afterCrash = rec.Running
	default:
		afterCrash = r.manifest != nil && !r.manifest.Final
	}
	if afterCrash {
		j.base.Restarts++
	}
	return true, afterCrash
}

func (j *RunningJob) run(ctx context.Context) error {
	rc := j.cfg.Restart
	if !j.cfg.RestartSet {
		if j.cfg.Checkpoint.Enabled() {
			rc = restart.Config{Strategy: restart.ExponentialDelay}
		} else {
			rc = restart.Config{Strategy: restart.None}
		}
	}
	strategy, err := restart.New(rc.WithDefaults(), nil)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidJob, err)
	}
	if j.cfg.StateDir != "" {
		// One live instance per state directory: a second one (or a
		// paused zombie coming back) would write the same checkpoint
		// directories and, without Kafka fencing, commit sinks twice.
		root := filepath.Join(j.cfg.StateDir, j.cfg.Job)
		if abs, err := filepath.Abs(root); err == nil {
			root = abs
		}
		if err := os.MkdirAll(root, 0o755); err != nil {
			return fmt.Errorf("%w: create state directory: %w", ErrInvalidJob, err)
		}
		release, err := dirlock.Lock(filepath.Join(root, "LOCK"))
		if err != nil {
			if errors.Is(err, dirlock.ErrLocked) {
				return fmt.Errorf("%w: state directory %s is in use by another instance of job %q (%w): stop that instance first, or give this one its own state directory", ErrInvalidJob, root, j.cfg.Job, err)
			}
			return fmt.Errorf("%w: lock state directory: %w", ErrInvalidJob, err)
		}
		defer release()
		store, err := j.cfg.OpenStorage(j.cfg.StateDir, j.cfg.Job)
		if err != nil {
			return fmt.Errorf("%w: open state directory: %w", ErrInvalidJob, err)
		}
		if j.stateID, err = store.StateID(); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidJob, err)
		}
		j.root = root
		j.log.Info("state directory", "dir", root, "state_id", j.stateID)
	}
	// A stop request cancels recovery at once (nothing to save yet) and,
	// StopTimeout less the cleanup budget later, whatever still blocks a
	// graceful stop.
	quit := make(chan struct{})
	defer close(quit)
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	hard, hardCancel := context.WithCancel(context.Background())
	defer hardCancel()
	j.hardStop = hard
	go func() {
		select {
		case <-j.stop:
			rcancel()
		case <-ctx.Done():
		case <-quit:
			return
		}
		t := time.NewTimer(j.cfg.StopTimeout - cleanupBudget(j.cfg.StopTimeout))
		defer t.Stop()
		select {
		case <-t.C:
			hardCancel()
		case <-quit:
		}
	}()
	var stopStatus func()
	if j.cfg.StatusInterval > 0 {
		stopStatus = j.statusLoop()
		defer stopStatus()
	}
	for {
		err := j.runAttempt(rctx)
		if err == nil {
			j.saveRunRecord(false)
			return nil
		}
		if errors.Is(err, ErrRestoreRefused) || errors.Is(err, ErrInvalidJob) || errors.Is(err, ErrUnrecoverable) {
			j.log.Error("job failed and will not restart: restarting cannot fix this", "err", err)
			return err
		}
		if rctx.Err() != nil {
			if !j.attemptRan.Load() {
				// Asked to stop while recovering: nothing ran,
				// nothing is lost; the next start recovers.
				j.log.Warn("stopped while the job was recovering", "err", err)
				j.saveRunRecord(false)
				return nil
			}
			j.log.Error("stopped without a final checkpoint; the next start resumes from the last committed checkpoint", "err", err)
			return fmt.Errorf("stopped without a final checkpoint (the next start resumes from the last committed checkpoint): %w", err)
		}
		if j.cfg.RestartedBy != "" {
			// Not "restarts are turned off": the caller restarts the
			// job under a strategy of its own, and says so.
			var te *TaskError
			if errors.As(err, &te) && te.Stack != nil {
				j.log.Error("job failed; "+j.cfg.RestartedBy+" decides whether it restarts", "err", err, "stack", string(te.Stack))
			} else {
				j.log.Error("job failed; "+j.cfg.RestartedBy+" decides whether it restarts", "err", err)
			}
			return fmt.Errorf("job %q failed: %w", j.cfg.Job, err)
		}
		d := strategy.OnFailure(j.cfg.Clock())
		if !d.Restart {
			j.log.Error("job failed", "err", err, "restart", d.Reason)
			return fmt.Errorf("job %q failed and will not restart (%s): %w", j.cfg.Job, d.Reason, err)
		}
		j.restarts.Add(1)
		j.saveRunRecord(true)
		j.cfg.Hooks.restarting(Restarting{Job: j.cfg.Job, Attempt: d.Attempt, Delay: d.Delay, Err: err, Time: time.Now()})
		var te *TaskError
		if errors.As(err, &te) && te.Stack != nil {
			j.log.Error("task failed; restoring the last committed checkpoint", "err", err, "attempt", d.Attempt, "delay", d.Delay, "stack", string(te.Stack))
		} else {
			j.log.Error("task failed; restoring the last committed checkpoint", "err", err, "attempt", d.Attempt, "delay", d.Delay)
		}
		select {
		case <-time.After(d.Delay):
		case <-ctx.Done():
			return nil
		case <-j.stop:
			return nil
		}
	}
}

// cleanupBudget is the part of StopTimeout kept for cleanup after a stop
// gave up on its final checkpoint (aborting an open transaction, closing
// clients), so that the whole stop ends within StopTimeout.
func cleanupBudget(stop time.Duration) time.Duration { return min(5*time.Second, stop/2) }

func (j *RunningJob) statusLoop() func() {
	t := time.NewTicker(j.cfg.StatusInterval)
	quit := make(chan struct{})
	go func() {
		defer t.Stop()
		for {
			select {
			case <-t.C:
				s := j.Stats()
				// Scoped keys as the CLI's status line (process_: this
				// process, job_: the job's life).
				j.log.Info("status", "process_records_in", s.RecordsIn, "process_records_written", s.RecordsOut, "job_records_committed", s.RecordsCommitted, "job_checkpoints", s.CheckpointsCompleted, "job_failed_checkpoints", s.CheckpointsFailed, "last_checkpoint", s.LastCheckpoint, "last_checkpoint_duration", s.LastCheckpointDuration.Round(time.Millisecond), "job_restarts", s.Restarts)
			case <-quit:
				return
			}
		}
	}()
	return func() { close(quit) }
}
