// Package restart decides whether, and after how long, a failed job is
// restarted. It implements Apache Flink's restart strategies (none,
// fixed-delay, failure-rate, exponential-delay) with Flink's defaults.
//
// A Strategy is a pure state machine: it never sleeps, starts no goroutines
// and reads no clock. The job runner reports each failure with the time it
// happened and acts on the returned Decision:
//
//	d := strategy.OnFailure(now)
//	if !d.Restart {
//		// fail the job for good; d.Reason tells the user why
//	}
//	// wait d.Delay (on the runner's own timer), then restart from the
//	// last committed checkpoint
//
// Because time is an input, every sequence of failures can be replayed
// step by step in tests.
package restart

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/onceflow/onceflow/internal/durfmt"
)

// Kind names a restart strategy. The values are Flink's names for them.
type Kind string

// The restart strategies.
const (
	// None never restarts: the first failure fails the job.
	None Kind = "none"
	// FixedDelay restarts up to Config.Attempts times, Config.Delay apart.
	FixedDelay Kind = "fixed-delay"
	// FailureRate restarts after Config.Delay as long as no more than
	// Config.MaxFailuresPerInterval failures happened within the last
	// Config.FailureRateInterval.
	FailureRate Kind = "failure-rate"
	// ExponentialDelay restarts with a backoff that grows by
	// Config.Multiplier per failure up to Config.MaxBackoff and falls back to
	// Config.InitialBackoff once the job has run for Config.ResetThreshold.
	// It is Flink's default when checkpointing is enabled, and ours.
	ExponentialDelay Kind = "exponential-delay"
)

// kinds lists the valid strategies in the order error messages show them.
var kinds = []Kind{None, FixedDelay, FailureRate, ExponentialDelay}

// aliases maps the other spellings Flink accepts for restart-strategy.type
// to our canonical names, so a Flink user's habits keep working.
var aliases = map[string]Kind{
	"off":              None,
	"disable":          None,
	"fixeddelay":       FixedDelay,
	"failurerate":      FailureRate,
	"exponentialdelay": ExponentialDelay,
}

// Flink's defaults (restart-strategy.* in Flink 1.19+/2.x).
const (
	defaultAttempts               = 1
	defaultDelay                  = time.Second
	defaultMaxFailuresPerInterval = 1
	defaultFailureRateInterval    = time.Minute
	defaultInitialBackoff         = time.Second
	defaultMaxBackoff             = time.Minute
	defaultMultiplier             = 1.5
	defaultJitter                 = 0.1
	defaultResetThreshold         = time.Hour
)

// Configuration keys as the pipeline YAML spells them. Validation errors and
// refusal reasons name these, because the person reading them edits YAML.
const (
	keyStrategy               = "restart.strategy"
	keyAttempts               = "restart.attempts"
	keyDelay                  = "restart.delay"
	keyMaxFailuresPerInterval = "restart.max-failures-per-interval"
	keyFailureRateInterval    = "restart.failure-rate-interval"
	keyInitialBackoff         = "restart.initial-backoff"
	keyMaxBackoff             = "restart.max-backoff"
	keyMultiplier             = "restart.multiplier"
	keyJitter                 = "restart.jitter"
	keyResetThreshold         = "restart.reset-threshold"
	keyAttemptsBeforeReset    = "restart.attempts-before-reset"
)

// ErrInvalidConfig is wrapped by every error Config.Validate and New return,
// so callers can tell a configuration mistake from other failures with
// errors.Is.
var ErrInvalidConfig = errors.New("invalid restart config")

// Config selects a restart strategy and tunes it. A zero field means "use the
// default", which WithDefaults fills in for the chosen strategy only; fields
// that belong to other strategies are ignored. Because zero means default,
// the two settings where zero is also a meaningful value have an explicit
// switch: NoDelay and NoJitter.
type Config struct {
	// Strategy picks the restart strategy. Default ExponentialDelay, Flink's
	// default when checkpointing is enabled (onceflow always checkpoints).
	// Matching is case-insensitive and accepts Flink's aliases ("off",
	// "disable", "fixeddelay", "failurerate", "exponentialdelay").
	Strategy Kind

	// Attempts is how many times fixed-delay restarts the job before it
	// gives up; the failure after the last attempt fails the job. Default 1
	// (Flink's restart-strategy.fixed-delay.attempts). Use None for zero.
	Attempts int
	// Delay is the pause before each fixed-delay or failure-rate restart;
	// it gives an overloaded dependency time to recover. Default 1s.
	Delay time.Duration
	// NoDelay makes fixed-delay and failure-rate restart immediately, which
	// Delay cannot express because its zero value means the default.
	// Default false.
	NoDelay bool

	// MaxFailuresPerInterval is how many failures failure-rate tolerates
	// within FailureRateInterval; one more fails the job. Default 1.
	MaxFailuresPerInterval int
	// FailureRateInterval is the length of failure-rate's sliding window.
	// A longer window catches slow crash loops but takes longer to forgive
	// old failures. Default 1m.
	FailureRateInterval time.Duration

	// InitialBackoff is exponential-delay's first delay, and the delay it
	// returns to after a reset. Default 1s.
	InitialBackoff time.Duration
	// MaxBackoff caps exponential-delay's delay, jitter included, so a job
	// in a long crash loop still retries this often. Default 1m.
	MaxBackoff time.Duration
	// Multiplier is the factor by which exponential-delay's backoff grows
	// per consecutive failure; 1 keeps it constant. Default 1.5.
	Multiplier float64
	// Jitter is the fraction (0..1) by which each exponential-delay backoff
	// is randomly moved up or down, so many jobs that failed together (a
	// broker outage) do not all restart at the same instant. Default 0.1.
	Jitter float64
	// NoJitter turns jitter off, which Jitter cannot express because its
	// zero value means the default. Default false.
	NoJitter bool
	// ResetThreshold is how long a job must run after a restart, without
	// failing, for exponential-delay to start again from InitialBackoff and
	// forget its attempts. Default 1h.
	ResetThreshold time.Duration
	// AttemptsBeforeReset caps how many exponential-delay restarts may
	// happen without a reset in between; the failure after the last one
	// fails the job. Default 0, meaning unlimited.
	AttemptsBeforeReset int
}

// WithDefaults returns c with Strategy normalized (an empty Strategy becomes
// ExponentialDelay) and every zero field of the chosen strategy set to its
// default. Fields of other strategies are left alone, so Describe shows only
// what matters. An unknown Strategy is returned unchanged for Validate to
// report. WithDefaults is idempotent.
func (c Config) WithDefaults() Config {
	c.Strategy = normalizeKind(c.Strategy)
	switch c.Strategy {
	case FixedDelay:
		if c.Attempts == 0 {
			c.Attempts = defaultAttempts
		}
		if c.Delay == 0 && !c.NoDelay {
			c.Delay = defaultDelay
		}
	case FailureRate:
		if c.MaxFailuresPerInterval == 0 {
			c.MaxFailuresPerInterval = defaultMaxFailuresPerInterval
		}
		if c.FailureRateInterval == 0 {
			c.FailureRateInterval = defaultFailureRateInterval
		}
		if c.Delay == 0 && !c.NoDelay {
			c.Delay = defaultDelay
		}
	case ExponentialDelay:
		if c.InitialBackoff == 0 {
			c.InitialBackoff = defaultInitialBackoff
		}
		if c.MaxBackoff == 0 {
			c.MaxBackoff = defaultMaxBackoff
		}
		if c.Multiplier == 0 {
			c.Multiplier = defaultMultiplier
		}
		if c.Jitter == 0 && !c.NoJitter {
			c.Jitter = defaultJitter
		}
		if c.ResetThreshold == 0 {
			c.ResetThreshold = defaultResetThreshold
		}
	}
	return c
}

func normalizeKind(k Kind) Kind {
	s := strings.ToLower(strings.TrimSpace(string(k)))
	if s == "" {
		return ExponentialDelay
	}
	if alias, ok := aliases[s]; ok {
		return alias
	}
	for _, known := range kinds {
		if s == string(known) {
			return known
		}
	}
	return k
}

// FieldError is one problem Validate found. Key is the configuration key
// it is about, as a job file spells it (restart.attempts); Msg is the
// sentence saying what to change, which starts with Key. It wraps
// ErrInvalidConfig.
type FieldError struct {
	Key string
	Msg string
}

func (e *FieldError) Error() string { return ErrInvalidConfig.Error() + ": " + e.Msg }

// Unwrap returns ErrInvalidConfig.
func (e *FieldError) Unwrap() error { return ErrInvalidConfig }

// Validate reports every problem with c: one *FieldError per problem,
// joined with errors.Join, each wrapping ErrInvalidConfig. It judges c as
// New would use it, that is after WithDefaults, so a zero field never
// counts as a mistake.
func (c Config) Validate() error {
	d := c.WithDefaults()
	var problems []error
	// add reports a problem about key; the sentence starts with the key.
	add := func(key, format string, args ...any) {
		problems = append(problems, &FieldError{Key: key, Msg: key + " " + fmt.Sprintf(format, args...)})
	}

	if !isKnown(d.Strategy) {
		names := make([]string, len(kinds))
		for i, k := range kinds {
			names[i] = string(k)
		}
		add(keyStrategy, "%q is not a restart strategy; use one of %s", string(c.Strategy), strings.Join(names, ", "))
	}

	// A negative value is a typo whatever the strategy, so these are checked
	// even for fields the chosen strategy ignores.
	for _, f := range []struct {
		key string
		v   time.Duration
	}{
		{keyDelay, d.Delay},
		{keyFailureRateInterval, d.FailureRateInterval},
		{keyInitialBackoff, d.InitialBackoff},
		{keyMaxBackoff, d.MaxBackoff},
		{keyResetThreshold, d.ResetThreshold},
	} {
		if f.v < 0 {
			add(f.key, "must not be negative (got %s)", durfmt.Short(f.v))
		}
	}
	for _, f := range []struct {
		key string
		v   int
	}{
		{keyAttempts, d.Attempts},
		{keyMaxFailuresPerInterval, d.MaxFailuresPerInterval},
		{keyAttemptsBeforeReset, d.AttemptsBeforeReset},
	} {
		if f.v < 0 {
			add(f.key, "must not be negative (got %d)", f.v)
		}
	}

	if (d.Strategy == FixedDelay || d.Strategy == FailureRate) && d.NoDelay && d.Delay != 0 {
		add(keyDelay, "is %s but NoDelay asks for no delay; set only one of them", durfmt.Short(d.Delay))
	}

	if d.Strategy == ExponentialDelay {
		// Written as !(x >= 1) so that NaN is rejected too.
		if !(d.Multiplier >= 1) {
			add(keyMultiplier, "must be at least 1 so the backoff never shrinks (got %s); 1 keeps it constant", formatFloat(d.Multiplier))
		}
		if !(d.Jitter >= 0 && d.Jitter <= 1) {
			add(keyJitter, "must be a fraction between 0 and 1, e.g. 0.1 for ±10%% (got %s)", formatFloat(d.Jitter))
		}
		if d.NoJitter && d.Jitter != 0 {
			add(keyJitter, "is %s but NoJitter turns jitter off; set only one of them", formatFloat(d.Jitter))
		}
		if d.InitialBackoff > 0 && d.MaxBackoff > 0 && d.MaxBackoff < d.InitialBackoff {
			add(keyMaxBackoff, "(%s%s) is shorter than %s (%s%s); raise the maximum or lower the initial backoff",
				durfmt.Short(d.MaxBackoff), defaultNote(c.MaxBackoff == 0),
				keyInitialBackoff, durfmt.Short(d.InitialBackoff), defaultNote(c.InitialBackoff == 0))
		}
	}
	return errors.Join(problems...)
}

func isKnown(k Kind) bool {
	for _, known := range kinds {
		if k == known {
			return true
		}
	}
	return false
}

func defaultNote(isDefault bool) string {
	if isDefault {
		return ", the default"
	}
	return ""
}

// Describe returns a one-line summary of the effective configuration (after
// WithDefaults) for logs, e.g.
// "exponential-delay (initial 1s, x1.5, max 1m, jitter 10%, reset after 1h)".
func (c Config) Describe() string {
	c = c.WithDefaults()
	switch c.Strategy {
	case None:
		return "none (every failure fails the job)"
	case FixedDelay:
		return fmt.Sprintf("fixed-delay (up to %s, delay %s)", plural(c.Attempts, "attempt"), durfmt.Short(c.Delay))
	case FailureRate:
		return fmt.Sprintf("failure-rate (at most %s per %s, delay %s)",
			plural(c.MaxFailuresPerInterval, "failure"), durfmt.Short(c.FailureRateInterval), durfmt.Short(c.Delay))
	case ExponentialDelay:
		jitter := "no jitter"
		if c.Jitter != 0 {
			jitter = "jitter " + formatFloat(math.Round(c.Jitter*10000)/100) + "%"
		}
		s := fmt.Sprintf("exponential-delay (initial %s, x%s, max %s, %s, reset after %s",
			durfmt.Short(c.InitialBackoff), formatFloat(c.Multiplier), durfmt.Short(c.MaxBackoff),
			jitter, durfmt.Short(c.ResetThreshold))
		if c.AttemptsBeforeReset > 0 {
			s += fmt.Sprintf(", at most %s before reset", plural(c.AttemptsBeforeReset, "attempt"))
		}
		return s + ")"
	default:
		return fmt.Sprintf("unknown restart strategy %q", string(c.Strategy))
	}
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

func formatFloat(f float64) string {
	return strconv.FormatFloat(f, 'g', -1, 64)
}
