package flow

import (
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow/internal/checkpoint"
	"github.com/onceflow/onceflow/internal/checkpoint/storage"
	"github.com/onceflow/onceflow/internal/engine"
	"github.com/onceflow/onceflow/internal/restart"
)

// Option configures an Env.
type Option func(*Env)

// Job names the job. The name scopes its checkpoints under the state
// directory (and, for Kafka, its transactional ids). Default "job".
func JobName(name string) Option { return func(c *Env) { c.g.Cfg.Job = name } }

// Parallelism sets the default parallelism of sources that do not suggest
// one; other operators inherit their input's. Default 1.
func Parallelism(n int) Option { return func(c *Env) { c.g.Cfg.Parallelism = n } }

// MaxParallelism sets the number of key groups keyed state is sharded into:
// the upper bound for any keyed operator's parallelism. It cannot change once
// the job has checkpoints. Default 128.
func MaxParallelism(n int) Option { return func(c *Env) { c.g.Cfg.MaxParallelism = n } }

// Checkpointing turns on periodic checkpoints every interval. Default: off
// (bounded jobs still commit their sinks once at the end of input).
func Checkpointing(interval time.Duration) Option {
	return func(c *Env) { c.g.Cfg.Checkpoint.Interval = interval }
}

// CheckpointingMode is the consistency checkpoints give: ExactlyOnce
// (aligned barriers, the default) or AtLeastOnce (no alignment: lower
// latency under backpressure, records may be replayed into the state and
// the output after a failure).
type CheckpointingMode = checkpoint.Mode

// The checkpointing modes.
const (
	ExactlyOnce = checkpoint.ExactlyOnce
	AtLeastOnce = checkpoint.AtLeastOnce
)

// CheckpointMode selects the checkpointing mode. Default ExactlyOnce.
func CheckpointMode(m CheckpointingMode) Option { return func(c *Env) { c.g.Cfg.Checkpoint.Mode = m } }

// CheckpointTimeout aborts a checkpoint that has not completed after d.
// Default 10 minutes.
func CheckpointTimeout(d time.Duration) Option {
	return func(c *Env) { c.g.Cfg.Checkpoint.Timeout = d }
}

// MinPauseBetweenCheckpoints is the least time from the end of one checkpoint
// to the start of the next. Default 0.
func MinPauseBetweenCheckpoints(d time.Duration) Option {
	return func(c *Env) { c.g.Cfg.Checkpoint.MinPause = d }
}

// MaxConcurrentCheckpoints bounds checkpoints in flight. Default 1.
func MaxConcurrentCheckpoints(n int) Option {
	return func(c *Env) { c.g.Cfg.Checkpoint.MaxConcurrent = n }
}

// TolerableCheckpointFailures is how many consecutive checkpoints may fail
// (time out or be declined) before the job fails over. Default 0.
func TolerableCheckpointFailures(n int) Option {
	return func(c *Env) { c.g.Cfg.Checkpoint.TolerableFailures = n }
}

// RetainedCheckpoints is how many committed checkpoints are kept on disk.
// Default 1.
func RetainedCheckpoints(n int) Option { return func(c *Env) { c.g.Cfg.Checkpoint.NumRetained = n } }

// CheckpointSettings are all checkpoint options at once, with Flink's names
// and defaults: Interval (0: off), Mode, Timeout (10 min), MinPause (0),
// MaxConcurrent (1), TolerableFailures (0; -1 tolerates any number),
// NumRetained (1). A zero field means its default.
type CheckpointSettings = checkpoint.Config

// CheckpointConfig sets all checkpoint options at once (the YAML layer uses
// it); it replaces what the other checkpoint options set before it.
func CheckpointConfig(cc CheckpointSettings) Option { return func(c *Env) { c.g.Cfg.Checkpoint = cc } }

// StateDir is where checkpoints are stored (under DIR/<job>). Required when
// checkpointing is on. Default: none.
func StateDir(dir string) Option { return func(c *Env) { c.g.Cfg.StateDir = dir } }

// State backends for StateBackend.
const (
	// MemoryBackend keeps keyed state in the Go heap as Go values: the
	// fastest for state that fits in memory; every checkpoint writes all
	// of it.
	MemoryBackend = engine.BackendMemory
	// PebbleBackend keeps keyed state in a Pebble database per keyed
	// subtask on local disk (under StateDir/<job>/db): state larger than
	// memory, incremental checkpoints that write only new files, and TTL
	// entries removed from disk as they expire.
	PebbleBackend = engine.BackendPebble
)

// StateBackend chooses where keyed state lives: MemoryBackend (default) or
// PebbleBackend. A checkpoint restores into the backend that took it;
// savepoints restore into either (docs/design.md, "State backends").
func StateBackend(name string) Option { return func(c *Env) { c.g.Cfg.StateBackend = name } }

// CheckpointStore is where a job's checkpoints live (the local directory
// by default). Package checkpoint/s3 provides one on S3-compatible object
// storage.
type CheckpointStore = storage.Storage

// CheckpointStorage keeps the job's checkpoints in the store open returns
// for the job (stateDir is StateDir). Storages plug in this way so that a
// program keeping checkpoints locally links no object-storage client:
// s3.Checkpoints (package checkpoint/s3) is one.
func CheckpointStorage(open func(stateDir, job string) (CheckpointStore, error)) Option {
	return func(c *Env) { c.g.Cfg.OpenStorage = open }
}

// CheckpointsIn keeps the job's checkpoints in the local directory
// dir/<job> instead of StateDir/<job>: a directory several machines mount
// (scale-out instances share their tasks' checkpoints there). StateDir
// still holds the instance lock and the state backend's working files.
func CheckpointsIn(dir string) Option {
	return func(c *Env) {
		c.g.Cfg.OpenStorage = func(_, job string) (storage.Storage, error) {
			return storage.Open(filepath.Join(dir, job))
		}
	}
}

// FencedCheckpointIDs starts every run's checkpoint ids above its commit
// point's fence epoch (the Kafka producer's epoch, shifted left 32 bits),
// so that a fenced zombie of the job on another machine, still writing
// into the same checkpoint storage, never writes into a directory its
// successor uses. The ids become large; scale-out tasks use it
// (docs/design.md, "Scale-out").
func FencedCheckpointIDs() Option { return func(c *Env) { c.g.Cfg.FencedCheckpointIDs = true } }

// StateMemory is the memory budget of the Pebble backend, in bytes: block
// cache and memtables of all the job's keyed subtasks. Default 256 MiB.
func StateMemory(bytes int64) Option { return func(c *Env) { c.g.Cfg.StateMemory = bytes } }

// RestartConfig selects a restart strategy and tunes it; a zero field means
// the strategy's default (Flink's). Its fields:
//
//	Strategy                 RestartStrategy (NoRestart, FixedDelay, FailureRate, ExponentialDelay)
//	Attempts                 fixed-delay: restarts before giving up (1)
//	Delay, NoDelay           fixed-delay and failure-rate: pause before a restart (1s); NoDelay for none
//	MaxFailuresPerInterval   failure-rate: failures tolerated per interval (1)
//	FailureRateInterval      failure-rate: the interval (1 min)
//	InitialBackoff           exponential-delay: first pause (1s)
//	MaxBackoff               exponential-delay: longest pause (1 min)
//	Multiplier               exponential-delay: growth per failure (1.5)
//	Jitter, NoJitter         exponential-delay: random spread (0.1); NoJitter for none
//	ResetThreshold           exponential-delay: time without failure that resets the backoff (1h)
//	AttemptsBeforeReset      exponential-delay: restarts before giving up, 0 for no limit
//
// Config.Validate rejects impossible combinations with a sentence naming
// the job-file key.
type RestartConfig = restart.Config

// RestartStrategy names a restart strategy.
type RestartStrategy = restart.Kind

// The restart strategies (Flink's, with its defaults).
const (
	// NoRestart fails the job at the first failure.
	NoRestart = restart.None
	// FixedDelay restarts up to Attempts times (1), Delay (1s) apart.
	FixedDelay = restart.FixedDelay
	// FailureRate restarts after Delay (1s) as long as at most
	// MaxFailuresPerInterval (1) failures happened within
	// FailureRateInterval (1 min).
	FailureRate = restart.FailureRate
	// ExponentialDelay restarts after a backoff that grows from
	// InitialBackoff (1s) by Multiplier (1.5) up to MaxBackoff (1 min),
	// with Jitter (0.1), reset after ResetThreshold (1h) without failure.
	ExponentialDelay = restart.ExponentialDelay
)

// Restart sets the restart strategy. Default: exponential-delay when
// checkpointing is on, none when it is off (as in Flink). Errors that a
// restart cannot fix (ErrUnrecoverable, a refused restore, an invalid job)
// are never retried.
func Restart(rc RestartConfig) Option {
	return func(c *Env) { c.g.Cfg.Restart = rc; c.g.Cfg.RestartSet = true }
}

// RestartedBy hands the job's restarts to its caller, who restarts it
// under a strategy of its own: the job runs no restart strategy (Restart
// is ignored), a failure ends it (Job.Wait returns the error, which a
// restart might mend unless errors.Is finds ErrUnrecoverable,
// ErrRestoreRefused or ErrInvalidJob), and its log says that who (a
// phrase, such as "the scale-out instance") decides whether it restarts,
// not that restarts are off. Scale-out tasks run with it: their instance
// restarts them while it owns their partitions (docs/design.md,
// "Scale-out").
func RestartedBy(who string) Option { return func(c *Env) { c.g.Cfg.RestartedBy = who } }

// FromSavepoint starts the job from the savepoint (or retained checkpoint)
// in dir instead of the job's own latest checkpoint. Default: none.
func FromSavepoint(dir string) Option { return func(c *Env) { c.g.Cfg.FromSavepoint = dir } }

// AllowNonRestoredState lets a job start from a savepoint that holds state
// for operators the job no longer has; that state is dropped. Default: off,
// such a start fails naming the operators.
func AllowNonRestoredState() Option { return func(c *Env) { c.g.Cfg.AllowNonRestored = true } }

// AllowCheckpointFallback lets recovery skip a damaged committed checkpoint
// and use an older one. The cost: records between the two are processed
// again, and sinks that already committed their output (anything not
// idempotent) will see it twice. Default: off, recovery stops with an error
// naming the damaged file.
func AllowCheckpointFallback() Option { return func(c *Env) { c.g.Cfg.AllowFallback = true } }

// StartFresh lets a job that has no committed checkpoint start from its
// sources' startup modes even though earlier progress of the job exists:
// checkpoints in the state directory, offsets its sources committed to their
// groups, or a commit record of another installation of the job (see
// docs/design.md, "Recovery decisions"). Without it such a start is refused,
// because it would process input again that the job's output already holds,
// or skip input. It applies only when there is no checkpoint to restore, so
// leaving it set cannot throw away a checkpoint the job committed later.
// Default: off.
func StartFresh() Option { return func(c *Env) { c.g.Cfg.StartFresh = true } }

// StartFreshBecause is StartFresh set for reason, which the log names
// where it would name the --start-fresh flag (onceflow's offsets reset
// uses it: "the offsets reset in FILE ...").
func StartFreshBecause(reason string) Option {
	return func(c *Env) { c.g.Cfg.StartFresh = true; c.g.Cfg.StartReason = reason }
}

// ResumeLatestCheckpoint lets a job whose commit point has no record of it
// (a Kafka progress record that was deleted, or a switch from at-least-once
// to exactly-once delivery) restore the newest checkpoint in its state
// directory whose commit is confirmed there. Without it such a start is
// refused. It applies only when the commit point has no record. Default: off.
func ResumeLatestCheckpoint() Option { return func(c *Env) { c.g.Cfg.ResumeLatest = true } }

// Logger sets the logger. Default slog.Default().
func Logger(l *slog.Logger) Option { return func(c *Env) { c.g.Cfg.Logger = l } }

// BatchSize is how many records travel between subtasks in one message.
// Default 512.
func BatchSize(n int) Option { return func(c *Env) { c.g.Cfg.BatchSize = n } }

// ChannelCapacity is how many batches may wait between two subtasks before
// the sender blocks (backpressure). Default 8.
func ChannelCapacity(n int) Option { return func(c *Env) { c.g.Cfg.ChannelCapacity = n } }

// InflightTarget bounds the records waiting between two subtasks by time:
// each receiver measures its throughput, and its senders keep no more
// queued than it processes in d (at least 64 records a channel, at most
// ChannelCapacity batches). A checkpoint barrier waits behind those
// records, so under backpressure this bounds how long it takes to cross
// an exchange (docs/design.md, "Checkpoints under backpressure").
// Default 100ms; 0 leaves only ChannelCapacity.
func InflightTarget(d time.Duration) Option { return func(c *Env) { c.g.Cfg.InflightTarget = d } }

// Clock replaces the processing-time clock; for tests. It drives state TTL
// and checkpoint timing alike: a test that moves it forward by hours to
// expire state also times out a checkpoint in flight, unless it sets a
// longer CheckpointTimeout. Default time.Now.
func Clock(now func() time.Time) Option { return func(c *Env) { c.g.Cfg.Clock = now } }

// StatusInterval logs a status line (records, checkpoints) this often.
// Default 0: no status lines.
func StatusInterval(d time.Duration) Option { return func(c *Env) { c.g.Cfg.StatusInterval = d } }

// SlowOperatorWarning logs at WARN a call into an operator that has run
// for d (a sink's write, prepare or commit, a function on a record),
// naming the job, task, operator and call, and again every 3×d while it
// lasts. Default 10 s.
func SlowOperatorWarning(d time.Duration) Option {
	return func(c *Env) { c.g.Cfg.SlowOperatorWarning = d }
}

// StopTimeout bounds a graceful stop: if the final checkpoint has not
// committed after d, the job stops without it (nothing is lost: the next
// start resumes from the last committed checkpoint). Default 1 minute.
func StopTimeout(d time.Duration) Option { return func(c *Env) { c.g.Cfg.StopTimeout = d } }

// WithCommitPoint replaces the commit point (the atomic write of the
// checkpoint manifest) with another single atomic action, such as a Kafka
// transaction. Connectors that own the commit point set it for you.
func WithCommitPoint(cp CommitPoint) Option {
	return func(c *Env) {
		c.g.Cfg.CommitPoint = nil
		if cp != nil {
			c.g.Cfg.CommitPoint = commitPointAdapter{cp}
		}
	}
}

// JobLifeCounter makes c a counter over the job's life, like the job's
// restarts and committed records: every checkpoint stores c's value under
// name, and a new process adds the value of the checkpoint it restores to
// c before the job runs. Between checkpoints c counts live, so records a
// restore replays count again (as onceflow_records_in_total does). The CLI
// registers the job file's pipeline counters this way
// (onceflow_window_late_records_total, onceflow_dedupe_duplicates_dropped_total).
func JobLifeCounter(name string, c *atomic.Int64) Option {
	return func(e *Env) {
		if e.g.Cfg.Counters == nil {
			e.g.Cfg.Counters = map[string]*atomic.Int64{}
		}
		e.g.Cfg.Counters[name] = c
	}
}
