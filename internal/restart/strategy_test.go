package restart

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// t0 is an arbitrary start; steps give failure times as offsets from it.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// step is one failure at t0+at and the decision it must produce.
type step struct {
	at   time.Duration
	want Decision
}

func newStrategy(tb testing.TB, cfg Config, seed uint64) Strategy {
	tb.Helper()
	s, err := New(cfg, rand.New(rand.NewPCG(seed, seed)))
	if err != nil {
		tb.Fatalf("New(%+v): %v", cfg, err)
	}
	return s
}

// run feeds the steps to s in order and compares every decision.
func run(tb testing.TB, s Strategy, steps []step) {
	tb.Helper()
	for i, st := range steps {
		got := s.OnFailure(t0.Add(st.at))
		if got != st.want {
			tb.Fatalf("step %d (failure at +%v):\n got  %+v\n want %+v", i, st.at, got, st.want)
		}
	}
}

func restart(delay time.Duration, attempt int) Decision {
	return Decision{Restart: true, Delay: delay, Attempt: attempt}
}

func TestNew(t *testing.T) {
	t.Run("invalid config", func(t *testing.T) {
		s, err := New(Config{Strategy: "sometimes"}, nil)
		if !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("New() error = %v, want ErrInvalidConfig", err)
		}
		if s != nil {
			t.Fatalf("New() returned a strategy %v alongside an error", s)
		}
	})
	t.Run("nil rand gets a seeded one", func(t *testing.T) {
		s, err := New(Config{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		d := s.OnFailure(t0)
		// Default initial 1s with 10% jitter, never below the initial.
		if !d.Restart || d.Delay < time.Second || d.Delay > 1100*time.Millisecond {
			t.Fatalf("first failure: %+v, want a restart after 1s..1.1s", d)
		}
	})
	t.Run("String shows config and state", func(t *testing.T) {
		s := newStrategy(t, Config{Strategy: FixedDelay, Attempts: 2}, 1)
		s.OnFailure(t0)
		want := "fixed-delay (up to 2 attempts, delay 1s): 1 of 2 attempts used"
		if got := s.String(); got != want {
			t.Fatalf("String() = %q, want %q", got, want)
		}
	})
}

func TestNone(t *testing.T) {
	s := newStrategy(t, Config{Strategy: None}, 1)
	refused := Decision{Attempt: 1, Reason: "none: restarts are turned off, so the first failure fails the job; " +
		"set restart.strategy to fixed-delay, failure-rate or exponential-delay to restart automatically"}
	run(t, s, []step{
		{0, refused},
		{time.Hour, refused},
	})
}

func TestFixedDelay(t *testing.T) {
	t.Run("defaults allow one restart", func(t *testing.T) {
		s := newStrategy(t, Config{Strategy: FixedDelay}, 1)
		run(t, s, []step{
			{0, restart(time.Second, 1)},
			{time.Minute, Decision{Attempt: 2, Reason: "fixed-delay: 1 of 1 restart attempts used; raise restart.attempts or fix the cause"}},
		})
	})
	t.Run("attempts are used up and stay used up", func(t *testing.T) {
		s := newStrategy(t, Config{Strategy: FixedDelay, Attempts: 3, Delay: 2 * time.Second}, 1)
		refused := Decision{Attempt: 4, Reason: "fixed-delay: 3 of 3 restart attempts used; raise restart.attempts or fix the cause"}
		run(t, s, []step{
			{0, restart(2*time.Second, 1)},
			// Fixed-delay never forgives: days of healthy running do not
			// give attempts back (that is what failure-rate is for).
			{48 * time.Hour, restart(2*time.Second, 2)},
			{96 * time.Hour, restart(2*time.Second, 3)},
			{97 * time.Hour, refused},
			{98 * time.Hour, refused},
		})
	})
	t.Run("NoDelay restarts immediately", func(t *testing.T) {
		s := newStrategy(t, Config{Strategy: FixedDelay, Attempts: 2, NoDelay: true}, 1)
		run(t, s, []step{
			{0, restart(0, 1)},
			{0, restart(0, 2)},
		})
	})
}

func TestFailureRate(t *testing.T) {
	t.Run("defaults tolerate one failure per minute", func(t *testing.T) {
		s := newStrategy(t, Config{Strategy: FailureRate}, 1)
		run(t, s, []step{
			{0, restart(time.Second, 1)},
			{61 * time.Second, restart(time.Second, 2)},
			{90 * time.Second, Decision{Attempt: 3, Reason: "failure-rate: 2 failures within 1m exceed the limit of 1; " +
				"raise restart.max-failures-per-interval or restart.failure-rate-interval, or fix the cause"}},
		})
	})
	t.Run("window slides", func(t *testing.T) {
		s := newStrategy(t, Config{Strategy: FailureRate, MaxFailuresPerInterval: 2, FailureRateInterval: time.Minute, Delay: 5 * time.Second}, 1)
		refused := Decision{Attempt: 5, Reason: "failure-rate: 3 failures within 1m exceed the limit of 2; " +
			"raise restart.max-failures-per-interval or restart.failure-rate-interval, or fix the cause"}
		run(t, s, []step{
			{0, restart(5*time.Second, 1)},
			{50 * time.Second, restart(5*time.Second, 2)},  // window: 0s, 50s
			{70 * time.Second, restart(5*time.Second, 3)},  // 0s slid out; window: 50s, 70s
			{111 * time.Second, restart(5*time.Second, 4)}, // 50s slid out; window: 70s, 111s
			{120 * time.Second, refused},                   // window: 70s, 111s, 120s
			{time.Hour, refused},                           // exhausted for good
		})
	})
	t.Run("a failure exactly one interval ago still counts", func(t *testing.T) {
		s := newStrategy(t, Config{Strategy: FailureRate, FailureRateInterval: time.Minute}, 1)
		run(t, s, []step{
			{0, restart(time.Second, 1)},
			{time.Minute, Decision{Attempt: 2, Reason: "failure-rate: 2 failures within 1m exceed the limit of 1; " +
				"raise restart.max-failures-per-interval or restart.failure-rate-interval, or fix the cause"}},
		})
	})
	t.Run("one nanosecond later it does not", func(t *testing.T) {
		s := newStrategy(t, Config{Strategy: FailureRate, FailureRateInterval: time.Minute}, 1)
		run(t, s, []step{
			{0, restart(time.Second, 1)},
			{time.Minute + 1, restart(time.Second, 2)},
		})
	})
	t.Run("burst within the limit", func(t *testing.T) {
		s := newStrategy(t, Config{Strategy: FailureRate, MaxFailuresPerInterval: 3, NoDelay: true}, 1)
		run(t, s, []step{
			{0, restart(0, 1)},
			{0, restart(0, 2)},
			{0, restart(0, 3)},
			{0, Decision{Attempt: 4, Reason: "failure-rate: 4 failures within 1m exceed the limit of 3; " +
				"raise restart.max-failures-per-interval or restart.failure-rate-interval, or fix the cause"}},
		})
	})
}

func TestExponentialDelay(t *testing.T) {
	t.Run("backoff grows to the cap", func(t *testing.T) {
		s := newStrategy(t, Config{InitialBackoff: time.Second, MaxBackoff: 10 * time.Second, Multiplier: 2, NoJitter: true}, 1)
		// Each failure comes one minute after the previous one: well after
		// its restart, well before the 1h reset.
		run(t, s, []step{
			{0, restart(time.Second, 1)},
			{1 * time.Minute, restart(2*time.Second, 2)},
			{2 * time.Minute, restart(4*time.Second, 3)},
			{3 * time.Minute, restart(8*time.Second, 4)},
			{4 * time.Minute, restart(10*time.Second, 5)},
			{5 * time.Minute, restart(10*time.Second, 6)},
		})
	})
	t.Run("Flink defaults", func(t *testing.T) {
		s := newStrategy(t, Config{NoJitter: true}, 1)
		run(t, s, []step{
			{0, restart(time.Second, 1)},
			{1 * time.Minute, restart(1500*time.Millisecond, 2)},
			{2 * time.Minute, restart(2250*time.Millisecond, 3)},
			{3 * time.Minute, restart(3375*time.Millisecond, 4)},
		})
		// 1.5^k passes 60 at k=11 (86.5s), so the 12th restart hits the cap.
		for i := 5; i <= 11; i++ {
			s.OnFailure(t0.Add(time.Duration(i) * time.Minute))
		}
		run(t, s, []step{{12 * time.Minute, restart(time.Minute, 12)}})
		// Multiplier^k overflows nanoseconds for large k; the cap must hold.
		// Failures are 2m apart now, so each comes after the 1m restart.
		for i := 13; i < 200; i++ {
			if d := s.OnFailure(t0.Add(12*time.Minute + time.Duration(i-12)*2*time.Minute)); d.Delay != time.Minute || d.Attempt != i {
				t.Fatalf("failure %d: %+v, want the 1m cap", i, d)
			}
		}
	})
	t.Run("reset threshold counts running time after the restart", func(t *testing.T) {
		s := newStrategy(t, Config{InitialBackoff: time.Second, MaxBackoff: time.Minute, Multiplier: 2, ResetThreshold: time.Hour, NoJitter: true}, 1)
		run(t, s, []step{
			{0, restart(time.Second, 1)},                  // restarts at +1s
			{10 * time.Second, restart(2*time.Second, 2)}, // restarts at +12s
			// Ran 1h minus 1ns since the restart at +12s: no reset.
			{12*time.Second + time.Hour - 1, restart(4*time.Second, 3)}, // restarts at +1h16s-1ns
			// Ran exactly 1h since that restart: reset to the initial backoff.
			{2*time.Hour + 16*time.Second - 1, restart(time.Second, 1)},
			{2*time.Hour + time.Minute, restart(2*time.Second, 2)},
		})
	})
	t.Run("backoff wait does not count as running", func(t *testing.T) {
		// A long backoff followed by a failure one threshold after the
		// failure, but less after the restart, must not reset.
		s := newStrategy(t, Config{InitialBackoff: time.Minute, MaxBackoff: time.Hour, Multiplier: 2, ResetThreshold: 10 * time.Minute, NoJitter: true}, 1)
		run(t, s, []step{
			{0, restart(time.Minute, 1)},                 // restarts at +1m
			{2 * time.Minute, restart(2*time.Minute, 2)}, // restarts at +4m
			{12 * time.Minute, restart(4*time.Minute, 3)},
		})
	})
	t.Run("failures before the restart is due are merged", func(t *testing.T) {
		s := newStrategy(t, Config{InitialBackoff: 10 * time.Second, MaxBackoff: time.Minute, Multiplier: 2, NoJitter: true}, 1)
		merged := func(delay time.Duration, attempt int, reason string) Decision {
			return Decision{Restart: true, Delay: delay, Attempt: attempt, Reason: reason}
		}
		run(t, s, []step{
			{0, restart(10*time.Second, 1)}, // restart due at +10s
			{0, merged(10*time.Second, 1, "exponential-delay: failure arrived before restart 1 was due; merged into it")},
			{4 * time.Second, merged(6*time.Second, 1, "exponential-delay: failure arrived before restart 1 was due; merged into it")},
			{10 * time.Second, merged(0, 1, "exponential-delay: failure arrived before restart 1 was due; merged into it")},
			// After the restart the backoff grows by one step only.
			{10*time.Second + 1, restart(20*time.Second, 2)},
		})
	})
	t.Run("attempts before reset", func(t *testing.T) {
		cfg := Config{InitialBackoff: time.Second, Multiplier: 2, ResetThreshold: time.Hour, AttemptsBeforeReset: 2, NoJitter: true}
		refused := Decision{Attempt: 3, Reason: "exponential-delay: 2 of 2 restart attempts used without the job running 1h to reset them; " +
			"raise restart.attempts-before-reset or fix the cause"}

		s := newStrategy(t, cfg, 1)
		run(t, s, []step{
			{0, restart(time.Second, 1)},
			{time.Minute, restart(2*time.Second, 2)},
			{2 * time.Minute, refused},
			// Exhausted for good, even after a threshold's worth of time.
			{5 * time.Hour, refused},
		})

		// A reset in between gives the attempts back.
		s = newStrategy(t, cfg, 1)
		run(t, s, []step{
			{0, restart(time.Second, 1)},
			{time.Minute, restart(2*time.Second, 2)},
			{2 * time.Hour, restart(time.Second, 1)},
			{2*time.Hour + time.Minute, restart(2*time.Second, 2)},
			{2*time.Hour + 2*time.Minute, refused},
		})
	})
}

func TestExponentialDelayJitter(t *testing.T) {
	cfg := Config{InitialBackoff: time.Second, MaxBackoff: 8 * time.Second, Multiplier: 2, Jitter: 0.25}
	// Without jitter the k-th restart waits 1s, 2s, 4s, 8s (cap), 8s.
	bases := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second}
	const runs = 2000

	lo := make([]time.Duration, len(bases))
	hi := make([]time.Duration, len(bases))
	for seed := range uint64(runs) {
		s := newStrategy(t, cfg, seed)
		for k, base := range bases {
			d := s.OnFailure(t0.Add(time.Duration(k) * time.Minute))
			if !d.Restart || d.Attempt != k+1 {
				t.Fatalf("seed %d failure %d: %+v, want restart attempt %d", seed, k+1, d, k+1)
			}
			// ±25% of the base, but never outside [initial, max].
			minD := max(base-base/4, cfg.InitialBackoff)
			maxD := min(base+base/4, cfg.MaxBackoff)
			if d.Delay < minD || d.Delay > maxD {
				t.Fatalf("seed %d failure %d: delay %v outside [%v, %v]", seed, k+1, d.Delay, minD, maxD)
			}
			if seed == 0 || d.Delay < lo[k] {
				lo[k] = d.Delay
			}
			if seed == 0 || d.Delay > hi[k] {
				hi[k] = d.Delay
			}
		}
	}
	// The jitter must actually spread the delays over (nearly) the whole
	// allowed range, on both sides of the base where the bounds allow it.
	for k, base := range bases {
		wantLo := max(base-base/4, cfg.InitialBackoff)
		wantHi := min(base+base/4, cfg.MaxBackoff)
		slack := base / 50
		if lo[k] > wantLo+slack || hi[k] < wantHi-slack {
			t.Errorf("failure %d: delays spread over [%v, %v], want close to [%v, %v]", k+1, lo[k], hi[k], wantLo, wantHi)
		}
	}

	t.Run("same seed, same delays", func(t *testing.T) {
		a, b := newStrategy(t, cfg, 42), newStrategy(t, cfg, 42)
		for k := range 10 {
			now := t0.Add(time.Duration(k) * time.Minute)
			if da, db := a.OnFailure(now), b.OnFailure(now); da != db {
				t.Fatalf("failure %d: %+v != %+v with the same seed", k+1, da, db)
			}
		}
	})
}

func TestRefusalReasonsAreSentences(t *testing.T) {
	// Every refusal must tell the user what happened and what to change.
	cfgs := []Config{
		{Strategy: None},
		{Strategy: FixedDelay},
		{Strategy: FailureRate},
		{AttemptsBeforeReset: 1},
	}
	for _, cfg := range cfgs {
		s := newStrategy(t, cfg, 1)
		var d Decision
		for i := 0; i < 3 && (i == 0 || d.Restart); i++ {
			d = s.OnFailure(t0.Add(time.Duration(i) * time.Second * 2))
		}
		if d.Restart {
			t.Fatalf("%s: still restarting after 3 quick failures", cfg.Describe())
		}
		if d.Delay != 0 {
			t.Errorf("%s: refusal has delay %v, want 0", cfg.Describe(), d.Delay)
		}
		prefix := string(cfg.WithDefaults().Strategy) + ": "
		if !strings.HasPrefix(d.Reason, prefix) || !strings.Contains(d.Reason, "restart.") {
			t.Errorf("%s: reason %q should start with %q and name the setting to change", cfg.Describe(), d.Reason, prefix)
		}
	}
}
