package restart

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/onceflow/onceflow/internal/durfmt"
)

// Decision is a Strategy's answer to one failure.
type Decision struct {
	// Restart reports whether the job should be restarted. False means the
	// job has failed for good.
	Restart bool
	// Delay is how long to wait before restarting; zero when Restart is
	// false.
	Delay time.Duration
	// Attempt numbers this restart from 1, counting what the strategy's
	// limit counts: all failures so far, except for exponential-delay,
	// which counts from its last reset. On a refusal it is the number the
	// restart would have had.
	Attempt int
	// Reason is a sentence for the user saying why the job is not
	// restarted; always set when Restart is false. It is empty for an
	// ordinary restart and explains the few restarts that need it (an
	// exponential-delay failure merged into an already scheduled restart).
	Reason string
}

// Strategy decides, failure by failure, whether a job restarts.
//
// A Strategy is a state machine driven only by its inputs: it reads no clock
// and never blocks. It is not safe for concurrent use; the job runner's loop
// owns it. Once it has refused a restart it stays exhausted and refuses every
// later failure with the same reason, because the job has failed for good;
// running the job again takes a new Strategy from New.
type Strategy interface {
	// OnFailure records a failure that happened at now and decides what to
	// do about it. now must not go backwards between calls; a monotonic
	// reading (time.Now) is best.
	OnFailure(now time.Time) Decision
	// String describes the configuration and the current state, for logs.
	String() string
}

// New returns the Strategy cfg selects, after applying WithDefaults and
// Validate; the error wraps ErrInvalidConfig. rnd supplies exponential-delay's
// jitter; nil means a generator seeded from the current time. Pass a seeded
// one to make jitter reproducible in tests.
func New(cfg Config, rnd *rand.Rand) (Strategy, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	switch cfg.Strategy {
	case None:
		return &none{cfg: cfg}, nil
	case FixedDelay:
		return &fixedDelay{cfg: cfg}, nil
	case FailureRate:
		return &failureRate{cfg: cfg}, nil
	case ExponentialDelay:
		if rnd == nil {
			seed := uint64(time.Now().UnixNano())
			rnd = rand.New(rand.NewPCG(seed, seed>>32|seed<<32))
		}
		return &exponentialDelay{cfg: cfg, rnd: rnd}, nil
	}
	// Validate accepted the strategy, so a new Kind was added without a
	// case here.
	panic(fmt.Sprintf("restart: New has no implementation for validated strategy %q", cfg.Strategy))
}

var (
	_ Strategy = (*none)(nil)
	_ Strategy = (*fixedDelay)(nil)
	_ Strategy = (*failureRate)(nil)
	_ Strategy = (*exponentialDelay)(nil)
)

// refusal remembers the decision that exhausted a strategy, so that later
// failures get the same answer (see Strategy).
type refusal struct {
	d  Decision
	ok bool
}

func (r *refusal) set(d Decision) Decision {
	r.d, r.ok = d, true
	return d
}

type none struct {
	cfg      Config
	refusal  refusal
	failures int
}

func (s *none) OnFailure(time.Time) Decision {
	s.failures++
	if s.refusal.ok {
		return s.refusal.d
	}
	return s.refusal.set(Decision{
		Attempt: 1,
		Reason: fmt.Sprintf("none: restarts are turned off, so the first failure fails the job; set %s to %s, %s or %s to restart automatically",
			keyStrategy, FixedDelay, FailureRate, ExponentialDelay),
	})
}

func (s *none) String() string {
	return fmt.Sprintf("%s: %d failures seen", s.cfg.Describe(), s.failures)
}

type fixedDelay struct {
	cfg     Config
	refusal refusal
	used    int // restarts granted so far
}

func (s *fixedDelay) OnFailure(time.Time) Decision {
	if s.refusal.ok {
		return s.refusal.d
	}
	if s.used >= s.cfg.Attempts {
		return s.refusal.set(Decision{
			Attempt: s.used + 1,
			Reason: fmt.Sprintf("fixed-delay: %d of %d restart attempts used; raise %s or fix the cause",
				s.used, s.cfg.Attempts, keyAttempts),
		})
	}
	s.used++
	return Decision{Restart: true, Delay: s.cfg.Delay, Attempt: s.used}
}

func (s *fixedDelay) String() string {
	return fmt.Sprintf("%s: %d of %d attempts used", s.cfg.Describe(), s.used, s.cfg.Attempts)
}

type failureRate struct {
	cfg     Config
	refusal refusal
	// recent holds the times of the failures still inside the window,
	// oldest first. It never holds more than MaxFailuresPerInterval+1
	// entries: one more than that is a refusal, which stops the recording.
	recent   []time.Time
	failures int
}

func (s *failureRate) OnFailure(now time.Time) Decision {
	if s.refusal.ok {
		return s.refusal.d
	}
	s.failures++
	// As in Flink, a failure exactly FailureRateInterval ago still counts.
	keep := 0
	for keep < len(s.recent) && now.Sub(s.recent[keep]) > s.cfg.FailureRateInterval {
		keep++
	}
	s.recent = append(s.recent[keep:], now)
	if len(s.recent) > s.cfg.MaxFailuresPerInterval {
		return s.refusal.set(Decision{
			Attempt: s.failures,
			Reason: fmt.Sprintf("failure-rate: %d failures within %s exceed the limit of %d; raise %s or %s, or fix the cause",
				len(s.recent), durfmt.Short(s.cfg.FailureRateInterval), s.cfg.MaxFailuresPerInterval,
				keyMaxFailuresPerInterval, keyFailureRateInterval),
		})
	}
	return Decision{Restart: true, Delay: s.cfg.Delay, Attempt: s.failures}
}

func (s *failureRate) String() string {
	return fmt.Sprintf("%s: %d failures seen, %d in the current window", s.cfg.Describe(), s.failures, len(s.recent))
}

type exponentialDelay struct {
	cfg     Config
	rnd     *rand.Rand
	refusal refusal
	// attempts counts restarts since the last reset; the next backoff is
	// InitialBackoff * Multiplier^attempts.
	attempts int
	// nextRestart is when the last granted restart happens (its failure
	// time plus its delay); zero before the first failure.
	nextRestart time.Time
}

func (s *exponentialDelay) OnFailure(now time.Time) Decision {
	if s.refusal.ok {
		return s.refusal.d
	}
	if !s.nextRestart.IsZero() {
		// A failure before the scheduled restart has happened is part of
		// the same outage (say, several subtasks reporting one broker
		// crash). Like Flink (FLIP-364) we fold it into that restart
		// rather than growing the backoff once per report.
		if !now.After(s.nextRestart) {
			return Decision{
				Restart: true,
				Delay:   s.nextRestart.Sub(now),
				Attempt: s.attempts,
				Reason: fmt.Sprintf("exponential-delay: failure arrived before restart %d was due; merged into it",
					s.attempts),
			}
		}
		// Measured from the restart, not the failure, so that the time
		// spent waiting out the backoff does not count as running.
		if now.Sub(s.nextRestart) >= s.cfg.ResetThreshold {
			s.attempts = 0
		}
	}
	if s.cfg.AttemptsBeforeReset > 0 && s.attempts >= s.cfg.AttemptsBeforeReset {
		return s.refusal.set(Decision{
			Attempt: s.attempts + 1,
			Reason: fmt.Sprintf("exponential-delay: %d of %d restart attempts used without the job running %s to reset them; raise %s or fix the cause",
				s.attempts, s.cfg.AttemptsBeforeReset, durfmt.Short(s.cfg.ResetThreshold), keyAttemptsBeforeReset),
		})
	}
	delay := s.backoff(s.attempts)
	s.attempts++
	s.nextRestart = now.Add(delay)
	return Decision{Restart: true, Delay: delay, Attempt: s.attempts}
}

// backoff returns the delay before restart k+1 (k counted from 0 since the
// last reset): min(InitialBackoff*Multiplier^k, MaxBackoff), moved by a
// uniformly random fraction in [-Jitter, +Jitter) of itself, then kept within
// [InitialBackoff, MaxBackoff]. Unlike Flink, which jitters the uncapped
// value and so loses all jitter once that far exceeds the cap, we jitter the
// capped value: jobs that keep failing together at the cap still spread out.
func (s *exponentialDelay) backoff(k int) time.Duration {
	c := s.cfg
	// Computed in float64: Multiplier^k overflows an int64 of nanoseconds
	// long before k is large, and +Inf compares correctly.
	base := float64(c.MaxBackoff)
	if grown := float64(c.InitialBackoff) * math.Pow(c.Multiplier, float64(k)); grown < base {
		base = grown
	}
	d := base
	if c.Jitter > 0 {
		d = base * (1 + c.Jitter*(2*s.rnd.Float64()-1))
	}
	switch {
	case d >= float64(c.MaxBackoff):
		return c.MaxBackoff
	case d <= float64(c.InitialBackoff):
		return c.InitialBackoff
	}
	return time.Duration(d)
}

func (s *exponentialDelay) String() string {
	return fmt.Sprintf("%s: %d attempts since the last reset", s.cfg.Describe(), s.attempts)
}
