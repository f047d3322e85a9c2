package checkpoint

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Mode is the consistency a checkpoint gives. It does not change what the
// Coordinator does; the runtime reads it to decide whether operators with
// several inputs align barriers (architecture.md, section 3.7).
type Mode int

const (
	// ExactlyOnce aligns barriers: an operator with several inputs snapshots
	// only once barrier n arrived on all of them. It is the default, as in
	// Flink (execution.checkpointing.mode: EXACTLY_ONCE).
	ExactlyOnce Mode = iota
	// AtLeastOnce skips alignment: lower latency under backpressure, but a
	// restore may replay records that already affected the state.
	AtLeastOnce
)

// String returns the mode's configuration spelling: "exactly-once" or
// "at-least-once".
func (m Mode) String() string {
	switch m {
	case ExactlyOnce:
		return "exactly-once"
	case AtLeastOnce:
		return "at-least-once"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode reads a mode as users write it. Case does not matter and
// underscores count as dashes, so Flink's EXACTLY_ONCE and AT_LEAST_ONCE are
// accepted too. An unknown spelling returns an error wrapping
// ErrInvalidConfig.
func ParseMode(s string) (Mode, error) {
	switch strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "_", "-") {
	case "exactly-once":
		return ExactlyOnce, nil
	case "at-least-once":
		return AtLeastOnce, nil
	}
	return 0, fmt.Errorf("%w: unknown checkpointing mode %q: use exactly-once or at-least-once", ErrInvalidConfig, s)
}

// MarshalText implements encoding.TextMarshaler so that a Mode reads the same
// in YAML and JSON as on the command line.
func (m Mode) MarshalText() ([]byte, error) {
	if m != ExactlyOnce && m != AtLeastOnce {
		return nil, fmt.Errorf("%w: unknown checkpointing mode %d", ErrInvalidConfig, int(m))
	}
	return []byte(m.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseMode.
func (m *Mode) UnmarshalText(text []byte) error {
	parsed, err := ParseMode(string(text))
	if err != nil {
		return err
	}
	*m = parsed
	return nil
}

// Defaults, the same as Flink's execution.checkpointing.* defaults so that
// users moving a job over find what they expect.
const (
	DefaultTimeout       = 10 * time.Minute
	DefaultMaxConcurrent = 1
	DefaultNumRetained   = 1
)

// Config holds the checkpointing options. Field docs give the Flink option a
// field mirrors and its default; the zero Config is "checkpointing off, with
// Flink's defaults for everything else" once WithDefaults is applied.
type Config struct {
	// Interval is how often a periodic checkpoint is triggered, measured from
	// the previous trigger (execution.checkpointing.interval). Default 0:
	// periodic checkpoints are off; savepoints still work. Shorter intervals
	// bound how much is replayed after a crash and how long sink output
	// waits to become visible, at the cost of more snapshot and commit work.
	Interval time.Duration

	// Mode is the consistency of a checkpoint
	// (execution.checkpointing.mode). Default ExactlyOnce.
	Mode Mode

	// Timeout is how long the participants have, from the trigger, to
	// acknowledge a checkpoint before it is aborted
	// (execution.checkpointing.timeout). Default 10m; 0 means the default.
	// It does not cover the commit point itself: once every participant has
	// acknowledged, the outcome belongs to the commit, and the caller bounds
	// that I/O and reports it with CommitDone.
	Timeout time.Duration

	// MinPause is the least time between the end (commit or abort) of one
	// checkpoint and the trigger of the next
	// (execution.checkpointing.min-pause). Default 0. Raising it guarantees
	// the job time to make progress between checkpoints when snapshots are
	// slower than the interval.
	MinPause time.Duration

	// MaxConcurrent is how many checkpoints may be in flight at once
	// (execution.checkpointing.max-concurrent-checkpoints). Default 1; 0
	// means the default. More than one lets a new checkpoint start while an
	// older one still waits for acknowledgements or its commit; commits still
	// happen one at a time in id order.
	MaxConcurrent int

	// TolerableFailures is how many periodic checkpoints may fail in a row
	// before the job fails and restarts
	// (execution.checkpointing.tolerable-failed-checkpoints). Default 0: the
	// first failure fails the job. -1 means unlimited. Timeouts, declines and
	// failed commits count; a committed periodic checkpoint resets the count
	// (Coordinator's doc says how savepoints are treated).
	TolerableFailures int

	// NumRetained is how many committed checkpoints storage keeps
	// (execution.checkpointing.num-retained). Default 1; 0 means the default.
	// The Coordinator does not use it; it is here so that all checkpointing
	// options travel together.
	NumRetained int
}

// WithDefaults returns c with every field whose zero value means "default"
// replaced by that default. Negative values are left alone for Validate to
// report.
func (c Config) WithDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxConcurrent == 0 {
		c.MaxConcurrent = DefaultMaxConcurrent
	}
	if c.NumRetained == 0 {
		c.NumRetained = DefaultNumRetained
	}
	return c
}

// Enabled reports whether periodic checkpoints are on.
func (c Config) Enabled() bool { return c.Interval > 0 }

// FieldError is one problem Validate found. Key is the configuration key
// it is about, as a job file spells it (checkpointing.timeout), or
// "checkpointing" when the problem is how two settings combine; Msg is the
// sentence saying what to change. It wraps ErrInvalidConfig.
type FieldError struct {
	Key string
	Msg string
}

func (e *FieldError) Error() string { return ErrInvalidConfig.Error() + ": " + e.Msg }

// Unwrap returns ErrInvalidConfig.
func (e *FieldError) Unwrap() error { return ErrInvalidConfig }

// Configuration keys as a job file spells them, for FieldError.Key.
const (
	keySection           = "checkpointing"
	keyInterval          = "checkpointing.interval"
	keyMode              = "checkpointing.mode"
	keyTimeout           = "checkpointing.timeout"
	keyMinPause          = "checkpointing.min-pause"
	keyMaxConcurrent     = "checkpointing.max-concurrent"
	keyTolerableFailures = "checkpointing.tolerable-failures"
	keyRetained          = "checkpointing.retained"
)

// Validate reports every problem in c, each as a *FieldError whose
// sentence says what to change, joined with errors.Join; each wraps
// ErrInvalidConfig. Zero values that mean "default" are valid; Validate
// judges c as WithDefaults would complete it.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &FieldError{Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	if c.Interval < 0 {
		bad(keyInterval, "checkpoint interval %v is negative: set 0 to turn periodic checkpoints off, or a positive duration such as 10s", c.Interval)
	}
	if c.Mode != ExactlyOnce && c.Mode != AtLeastOnce {
		bad(keyMode, "unknown checkpointing mode %d: use exactly-once or at-least-once", int(c.Mode))
	}
	if c.Timeout < 0 {
		bad(keyTimeout, "checkpoint timeout %v is negative: set a positive duration, or 0 for the default %v", c.Timeout, DefaultTimeout)
	}
	if c.MinPause < 0 {
		bad(keyMinPause, "checkpoint min pause %v is negative: set 0 for no pause, or a positive duration", c.MinPause)
	}
	if c.MaxConcurrent < 0 {
		bad(keyMaxConcurrent, "max concurrent checkpoints %d is negative: set 1 or more, or 0 for the default %d", c.MaxConcurrent, DefaultMaxConcurrent)
	}
	if c.TolerableFailures < -1 {
		bad(keyTolerableFailures, "tolerable failed checkpoints %d is invalid: set -1 for unlimited, 0 to fail the job on the first failed checkpoint, or a positive count", c.TolerableFailures)
	}
	if c.NumRetained < 0 {
		bad(keyRetained, "retained checkpoints %d is negative: set 1 or more, or 0 for the default %d", c.NumRetained, DefaultNumRetained)
	}
	d := c.WithDefaults()
	if d.Interval > 0 && d.Timeout > 0 && d.Timeout < d.Interval {
		// Either value may be the wrong one: the problem is their pair.
		bad(keySection, "checkpoint timeout %v is shorter than the interval %v: checkpoints slower than %v are abandoned although the next one would not be triggered before %v anyway (the two values are easily swapped); set timeout >= interval", d.Timeout, d.Interval, d.Timeout, d.Interval)
	}
	return errors.Join(errs...)
}

// The range of a job's max parallelism, the number of key groups its keyed
// state is sharded into. Every checkpoint records it and a restore needs
// the same, so it is checked before a job starts.
const (
	MinMaxParallelism = 1
	MaxMaxParallelism = 32768
)

// ValidMaxParallelism reports whether n is within MinMaxParallelism and
// MaxMaxParallelism.
func ValidMaxParallelism(n int) bool { return n >= MinMaxParallelism && n <= MaxMaxParallelism }
