package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow/internal/checkpoint"
	"github.com/onceflow/onceflow/internal/checkpoint/storage"
	"github.com/onceflow/onceflow/internal/restart"
	"github.com/onceflow/onceflow/state"
)

// Config is a job's configuration; flow's options set its fields (their
// documentation is there).
type Config struct {
	Job            string
	Parallelism    int
	MaxParallelism int
	Checkpoint     checkpoint.Config
	StateDir       string
	Restart        restart.Config
	RestartSet     bool
	// RestartedBy, when set, names who restarts the job instead of its
	// Restart strategy (flow.RestartedBy): a failure ends the run.
	RestartedBy      string
	FromSavepoint    string
	AllowNonRestored bool
	AllowFallback    bool
	StartFresh       bool
	// StartReason says why StartFresh is set when no flag set it (an
	// offsets reset), for the log; "" names the flags.
	StartReason     string
	ResumeLatest    bool
	Logger          *slog.Logger
	BatchSize       int
	ChannelCapacity int
	// InflightTarget is how long the records queued towards a receiver
	// subtask of an exchange may take it to process, measured from its
	// throughput (docs/design.md, "Checkpoints under backpressure"); 0:
	// only ChannelCapacity bounds them.
	InflightTarget time.Duration
	Clock          func() time.Time
	StatusInterval time.Duration
	StopTimeout    time.Duration
	// SlowOperatorWarning is how long one call into an operator (a
	// sink's write, prepare or commit, a function on a record) may run
	// before it is logged at WARN, and again every three times as long
	// while it lasts; default 10 s (docs/design.md, "Metrics and the REST
	// API").
	SlowOperatorWarning time.Duration
	CommitPoint         JobCommitPoint
	Hooks               Hooks
	// OpenStorage opens where the job's checkpoints live, given StateDir
	// and the job's name; default: a local directory StateDir/<job>
	// (storage.Open). Object storage plugs in here.
	OpenStorage func(stateDir, job string) (storage.Storage, error)
	// StateBackend is where keyed state lives: BackendMemory (default) or
	// BackendPebble.
	StateBackend string
	// StateMemory is the Pebble backend's memory budget in bytes (block
	// cache and memtables of all the job's keyed subtasks); 0: 256 MiB.
	StateMemory int64
	// FencedCheckpointIDs starts each attempt's checkpoint ids at its
	// commit point's fence epoch << 32 at least (FenceEpocher), for jobs
	// whose storage a fenced zombie on another machine may still write to
	// (scale-out tasks).
	FencedCheckpointIDs bool
	// Counters are counters over the job's life by name
	// (flow.JobLifeCounter): the checkpoints carry their values.
	Counters map[string]*atomic.Int64
	// Errs collects mistakes found while the graph was built; Start
	// reports them with the rest.
	Errs []error
}

// DefaultConfig returns the defaults flow documents.
func DefaultConfig() Config {
	return Config{
		Job:                 "job",
		Parallelism:         1,
		MaxParallelism:      state.DefaultMaxParallelism,
		BatchSize:           512,
		ChannelCapacity:     8,
		InflightTarget:      100 * time.Millisecond,
		Clock:               time.Now,
		StopTimeout:         time.Minute,
		SlowOperatorWarning: 10 * time.Second,
		OpenStorage:         openLocal,
		StateBackend:        BackendMemory,
	}
}

// Validate checks the configuration on its own (not the graph).
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.Job == "" {
		add("job name is empty: pass flow.JobName(\"name\")")
	}
	if c.Parallelism < 1 {
		add("parallelism %d is below 1: use 1 or more", c.Parallelism)
	}
	if !checkpoint.ValidMaxParallelism(c.MaxParallelism) {
		add("max parallelism %d is out of range: use %d..%d (default 128)", c.MaxParallelism, checkpoint.MinMaxParallelism, checkpoint.MaxMaxParallelism)
	}
	if err := c.Checkpoint.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Checkpoint.Interval > 0 && c.StateDir == "" {
		add("checkpointing is on but no state directory is set: pass flow.StateDir(dir) so checkpoints survive a restart")
	}
	if c.FromSavepoint != "" && c.StateDir == "" {
		add("starting from a savepoint needs a state directory for the job's own checkpoints: pass flow.StateDir(dir)")
	}
	if c.RestartSet {
		if err := c.Restart.WithDefaults().Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.StartFresh && c.ResumeLatest {
		add("StartFresh and ResumeLatestCheckpoint exclude each other: choose one")
	}
	if _, linked := state.LookupDBBackend(c.StateBackend); !linked {
		switch c.StateBackend {
		case "", BackendMemory:
		case BackendPebble:
			// Backends plug in as database/sql drivers do, so a program
			// that keeps state in memory links no Pebble.
			add("state backend %q is not linked into this program: import _ %q", c.StateBackend, "github.com/onceflow/onceflow/state/pebblestate")
		default:
			add("state backend %q is unknown: use %q, or %q with the package state/pebblestate imported", c.StateBackend, BackendMemory, BackendPebble)
		}
	}
	if c.StateMemory < 0 {
		add("state memory budget %d is negative", c.StateMemory)
	}
	if c.StopTimeout <= 0 {
		add("stop timeout %v is not positive", c.StopTimeout)
	}
	if c.BatchSize < 1 {
		add("batch size %d is below 1", c.BatchSize)
	}
	if c.InflightTarget < 0 {
		add("in-flight target %v is negative: use 0 (off) or more", c.InflightTarget)
	}
	if c.ChannelCapacity < 1 {
		add("channel capacity %d is below 1", c.ChannelCapacity)
	}
	errs = append(errs, c.Errs...)
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidJob, errors.Join(errs...))
}

func openLocal(stateDir, job string) (storage.Storage, error) {
	return storage.Open(filepath.Join(stateDir, job))
}
