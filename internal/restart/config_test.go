package restart

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestWithDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   Config
		want Config
	}{
		{
			name: "empty config is Flink's checkpointing default, exponential-delay",
			in:   Config{},
			want: Config{Strategy: ExponentialDelay, InitialBackoff: time.Second, MaxBackoff: time.Minute,
				Multiplier: 1.5, Jitter: 0.1, ResetThreshold: time.Hour},
		},
		{
			name: "none has nothing to fill",
			in:   Config{Strategy: None},
			want: Config{Strategy: None},
		},
		{
			name: "fixed-delay fills only its own fields",
			in:   Config{Strategy: FixedDelay},
			want: Config{Strategy: FixedDelay, Attempts: 1, Delay: time.Second},
		},
		{
			name: "failure-rate fills only its own fields",
			in:   Config{Strategy: FailureRate},
			want: Config{Strategy: FailureRate, MaxFailuresPerInterval: 1, FailureRateInterval: time.Minute, Delay: time.Second},
		},
		{
			name: "set fields are kept",
			in:   Config{Strategy: FixedDelay, Attempts: 5, Delay: 3 * time.Second},
			want: Config{Strategy: FixedDelay, Attempts: 5, Delay: 3 * time.Second},
		},
		{
			name: "exponential-delay keeps set fields and fills the rest",
			in:   Config{Strategy: ExponentialDelay, InitialBackoff: 2 * time.Second, Multiplier: 2, AttemptsBeforeReset: 4},
			want: Config{Strategy: ExponentialDelay, InitialBackoff: 2 * time.Second, MaxBackoff: time.Minute,
				Multiplier: 2, Jitter: 0.1, ResetThreshold: time.Hour, AttemptsBeforeReset: 4},
		},
		{
			name: "NoDelay keeps a zero delay",
			in:   Config{Strategy: FixedDelay, NoDelay: true},
			want: Config{Strategy: FixedDelay, Attempts: 1, NoDelay: true},
		},
		{
			name: "NoJitter keeps a zero jitter",
			in:   Config{Strategy: ExponentialDelay, NoJitter: true},
			want: Config{Strategy: ExponentialDelay, InitialBackoff: time.Second, MaxBackoff: time.Minute,
				Multiplier: 1.5, NoJitter: true, ResetThreshold: time.Hour},
		},
		{
			name: "strategy names are case-insensitive",
			in:   Config{Strategy: " Fixed-Delay "},
			want: Config{Strategy: FixedDelay, Attempts: 1, Delay: time.Second},
		},
		{
			name: "Flink alias off",
			in:   Config{Strategy: "off"},
			want: Config{Strategy: None},
		},
		{
			name: "Flink alias failurerate",
			in:   Config{Strategy: "failurerate"},
			want: Config{Strategy: FailureRate, MaxFailuresPerInterval: 1, FailureRateInterval: time.Minute, Delay: time.Second},
		},
		{
			name: "unknown strategy is left for Validate",
			in:   Config{Strategy: "fixd-delay", Attempts: 0},
			want: Config{Strategy: "fixd-delay"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in.WithDefaults()
			if got != tt.want {
				t.Fatalf("WithDefaults()\n got  %+v\n want %+v", got, tt.want)
			}
			if again := got.WithDefaults(); again != got {
				t.Fatalf("WithDefaults is not idempotent:\n once  %+v\n twice %+v", got, again)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		// want lists substrings the error must contain; nil means valid.
		want []string
	}{
		{name: "zero config", cfg: Config{}},
		{name: "none", cfg: Config{Strategy: None}},
		{name: "fixed-delay", cfg: Config{Strategy: FixedDelay, Attempts: 3, Delay: 10 * time.Second}},
		{name: "fixed-delay without delay", cfg: Config{Strategy: FixedDelay, NoDelay: true}},
		{name: "failure-rate", cfg: Config{Strategy: FailureRate, MaxFailuresPerInterval: 3, FailureRateInterval: 5 * time.Minute}},
		{name: "exponential-delay constant backoff", cfg: Config{Strategy: ExponentialDelay, Multiplier: 1}},
		{name: "exponential-delay full jitter", cfg: Config{Jitter: 1}},
		{name: "exponential-delay no jitter", cfg: Config{NoJitter: true}},
		{name: "initial equals max", cfg: Config{InitialBackoff: time.Minute, MaxBackoff: time.Minute}},
		{name: "alias", cfg: Config{Strategy: "exponentialdelay"}},
		{
			name: "fields of another strategy are not range-checked",
			cfg:  Config{Strategy: FixedDelay, Multiplier: 0.5, Jitter: 7},
		},
		{
			name: "unknown strategy lists the valid ones",
			cfg:  Config{Strategy: "fixd-delay"},
			want: []string{`restart.strategy "fixd-delay" is not a restart strategy`, "none, fixed-delay, failure-rate, exponential-delay"},
		},
		{
			name: "negative delay",
			cfg:  Config{Strategy: FixedDelay, Delay: -time.Second},
			want: []string{"restart.delay must not be negative (got -1s)"},
		},
		{
			name: "negative duration is caught for any strategy",
			cfg:  Config{Strategy: None, FailureRateInterval: -time.Minute},
			want: []string{"restart.failure-rate-interval must not be negative (got -1m)"},
		},
		{
			name: "negative attempts",
			cfg:  Config{Strategy: FixedDelay, Attempts: -2},
			want: []string{"restart.attempts must not be negative (got -2)"},
		},
		{
			name: "negative max failures",
			cfg:  Config{Strategy: FailureRate, MaxFailuresPerInterval: -1},
			want: []string{"restart.max-failures-per-interval must not be negative (got -1)"},
		},
		{
			name: "negative attempts before reset",
			cfg:  Config{AttemptsBeforeReset: -1},
			want: []string{"restart.attempts-before-reset must not be negative (got -1)"},
		},
		{
			name: "negative backoffs and threshold",
			cfg:  Config{InitialBackoff: -time.Second, MaxBackoff: -time.Minute, ResetThreshold: -time.Hour},
			want: []string{"restart.initial-backoff must not be negative (got -1s)",
				"restart.max-backoff must not be negative (got -1m)",
				"restart.reset-threshold must not be negative (got -1h)"},
		},
		{
			name: "multiplier below 1",
			cfg:  Config{Multiplier: 0.5},
			want: []string{"restart.multiplier must be at least 1", "(got 0.5)"},
		},
		{
			name: "multiplier NaN",
			cfg:  Config{Multiplier: math.NaN()},
			want: []string{"restart.multiplier must be at least 1", "(got NaN)"},
		},
		{
			name: "jitter above 1",
			cfg:  Config{Jitter: 1.5},
			want: []string{"restart.jitter must be a fraction between 0 and 1", "(got 1.5)"},
		},
		{
			name: "jitter negative",
			cfg:  Config{Jitter: -0.1},
			want: []string{"restart.jitter must be a fraction between 0 and 1", "(got -0.1)"},
		},
		{
			name: "jitter and NoJitter both set",
			cfg:  Config{Jitter: 0.2, NoJitter: true},
			want: []string{"restart.jitter is 0.2 but NoJitter turns jitter off"},
		},
		{
			name: "delay and NoDelay both set",
			cfg:  Config{Strategy: FailureRate, Delay: time.Second, NoDelay: true},
			want: []string{"restart.delay is 1s but NoDelay asks for no delay"},
		},
		{
			name: "max below initial",
			cfg:  Config{InitialBackoff: 2 * time.Minute, MaxBackoff: 90 * time.Second},
			want: []string{"restart.max-backoff (1m30s) is shorter than restart.initial-backoff (2m)"},
		},
		{
			name: "max below initial names the default",
			cfg:  Config{InitialBackoff: 2 * time.Minute},
			want: []string{"restart.max-backoff (1m, the default) is shorter than restart.initial-backoff (2m)"},
		},
		{
			name: "all problems are reported at once",
			cfg:  Config{Multiplier: 0.9, Jitter: 2, Delay: -time.Second},
			want: []string{"restart.multiplier", "restart.jitter", "restart.delay"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want an error containing %q", tt.want)
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("Validate() = %v, does not wrap ErrInvalidConfig", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q\nwant it to contain %q", err, w)
				}
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	tests := []struct {
		cfg  Config
		want string
	}{
		{Config{}, "exponential-delay (initial 1s, x1.5, max 1m, jitter 10%, reset after 1h)"},
		{Config{InitialBackoff: 500 * time.Millisecond, MaxBackoff: 90 * time.Second, Multiplier: 2, Jitter: 0.25,
			ResetThreshold: 2*time.Hour + 30*time.Minute, AttemptsBeforeReset: 5},
			"exponential-delay (initial 500ms, x2, max 1m30s, jitter 25%, reset after 2h30m, at most 5 attempts before reset)"},
		{Config{NoJitter: true, AttemptsBeforeReset: 1},
			"exponential-delay (initial 1s, x1.5, max 1m, no jitter, reset after 1h, at most 1 attempt before reset)"},
		{Config{Strategy: None}, "none (every failure fails the job)"},
		{Config{Strategy: FixedDelay}, "fixed-delay (up to 1 attempt, delay 1s)"},
		{Config{Strategy: FixedDelay, Attempts: 3, NoDelay: true}, "fixed-delay (up to 3 attempts, delay 0s)"},
		{Config{Strategy: FailureRate}, "failure-rate (at most 1 failure per 1m, delay 1s)"},
		{Config{Strategy: FailureRate, MaxFailuresPerInterval: 3, FailureRateInterval: 10 * time.Minute, Delay: 5 * time.Second},
			"failure-rate (at most 3 failures per 10m, delay 5s)"},
		{Config{Strategy: "bogus"}, `unknown restart strategy "bogus"`},
	}
	for _, tt := range tests {
		if got := tt.cfg.Describe(); got != tt.want {
			t.Errorf("%+v.Describe()\n got  %q\n want %q", tt.cfg, got, tt.want)
		}
	}
}

// Each problem is a *FieldError naming its key, so a job file can point at
// the line; the sentences start with the key.
func TestValidateFieldErrors(t *testing.T) {
	err := Config{Multiplier: 0.5, MaxBackoff: time.Second, InitialBackoff: 5 * time.Second, AttemptsBeforeReset: -1}.Validate()
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Validate() = %v, does not wrap ErrInvalidConfig", err)
	}
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("Validate() = %T, want the problems joined", err)
	}
	var got []FieldError
	for _, e := range joined.Unwrap() {
		var fe *FieldError
		if !errors.As(e, &fe) {
			t.Fatalf("problem %v is a %T, not a *FieldError", e, e)
		}
		if !errors.Is(e, ErrInvalidConfig) || e.Error() != ErrInvalidConfig.Error()+": "+fe.Msg {
			t.Errorf("problem %q does not read \"invalid restart config: \" + Msg, or does not wrap ErrInvalidConfig", e)
		}
		got = append(got, *fe)
	}
	want := []FieldError{
		{keyAttemptsBeforeReset, "restart.attempts-before-reset must not be negative (got -1)"},
		{keyMultiplier, "restart.multiplier must be at least 1 so the backoff never shrinks (got 0.5); 1 keeps it constant"},
		{keyMaxBackoff, "restart.max-backoff (1s) is shorter than restart.initial-backoff (5s); raise the maximum or lower the initial backoff"},
	}
	if len(got) != len(want) {
		t.Fatalf("problems %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("problem %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("Config{}.Validate() = %v", err)
	}
}
