package checkpoint

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestModeStringAndParse(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Mode
		wantErr bool
	}{
		{in: "exactly-once", want: ExactlyOnce},
		{in: "at-least-once", want: AtLeastOnce},
		{in: "EXACTLY_ONCE", want: ExactlyOnce},
		{in: " At_Least_Once ", want: AtLeastOnce},
		{in: "", wantErr: true},
		{in: "exactly-twice", wantErr: true},
	} {
		got, err := ParseMode(tc.in)
		if tc.wantErr {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("ParseMode(%q) error = %v, want one wrapping ErrInvalidConfig", tc.in, err)
			}
			if err != nil && !strings.Contains(err.Error(), "use exactly-once or at-least-once") {
				t.Errorf("ParseMode(%q) error %q does not say what to use", tc.in, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseMode(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}

	for _, m := range []Mode{ExactlyOnce, AtLeastOnce} {
		text, err := m.MarshalText()
		if err != nil {
			t.Fatalf("%v.MarshalText: %v", m, err)
		}
		var back Mode
		if err := back.UnmarshalText(text); err != nil || back != m {
			t.Errorf("round trip of %v through %q gave %v, %v", m, text, back, err)
		}
		if string(text) != m.String() {
			t.Errorf("MarshalText %q differs from String %q", text, m.String())
		}
	}
	if got := Mode(7).String(); got != "Mode(7)" {
		t.Errorf("Mode(7).String() = %q", got)
	}
	if _, err := Mode(7).MarshalText(); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("Mode(7).MarshalText error = %v, want ErrInvalidConfig", err)
	}
	var m Mode = AtLeastOnce
	if err := m.UnmarshalText([]byte("bogus")); err == nil || m != AtLeastOnce {
		t.Errorf("UnmarshalText(bogus) = %v and changed the mode to %v", err, m)
	}
}

func TestConfigWithDefaults(t *testing.T) {
	got := Config{}.WithDefaults()
	want := Config{
		Interval:          0,
		Mode:              ExactlyOnce,
		Timeout:           10 * time.Minute,
		MinPause:          0,
		MaxConcurrent:     1,
		TolerableFailures: 0,
		NumRetained:       1,
	}
	if got != want {
		t.Errorf("Config{}.WithDefaults() = %+v, want Flink's defaults %+v", got, want)
	}
	if got.Enabled() {
		t.Error("the zero Config has periodic checkpoints enabled; Flink's default is off")
	}

	set := Config{Interval: time.Second, Mode: AtLeastOnce, Timeout: time.Minute, MinPause: time.Second, MaxConcurrent: 3, TolerableFailures: -1, NumRetained: 5}
	if got := set.WithDefaults(); got != set {
		t.Errorf("WithDefaults changed explicit values: %+v -> %+v", set, got)
	}
	neg := Config{Timeout: -1, MaxConcurrent: -1, NumRetained: -1}
	if got := neg.WithDefaults(); got != neg {
		t.Errorf("WithDefaults replaced negative values, hiding them from Validate: %+v -> %+v", neg, got)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		// want lists substrings the error must contain; nil means valid.
		want []string
	}{
		{name: "zero", cfg: Config{}},
		{name: "typical", cfg: Config{Interval: 10 * time.Second, Timeout: time.Minute, MinPause: time.Second, MaxConcurrent: 2, TolerableFailures: 3, NumRetained: 3}},
		{name: "unlimited failures", cfg: Config{TolerableFailures: -1}},
		{name: "timeout equals interval", cfg: Config{Interval: time.Second, Timeout: time.Second}},
		{name: "interval below default timeout", cfg: Config{Interval: 9 * time.Minute}},
		{name: "negative interval", cfg: Config{Interval: -time.Second},
			want: []string{"checkpoint interval -1s is negative", "set 0 to turn periodic checkpoints off"}},
		{name: "negative timeout", cfg: Config{Timeout: -time.Second},
			want: []string{"checkpoint timeout -1s is negative", "0 for the default 10m0s"}},
		{name: "negative min pause", cfg: Config{MinPause: -time.Millisecond},
			want: []string{"checkpoint min pause -1ms is negative"}},
		{name: "negative max concurrent", cfg: Config{MaxConcurrent: -2},
			want: []string{"max concurrent checkpoints -2 is negative", "set 1 or more"}},
		{name: "tolerable below -1", cfg: Config{TolerableFailures: -2},
			want: []string{"tolerable failed checkpoints -2 is invalid", "-1 for unlimited"}},
		{name: "negative retained", cfg: Config{NumRetained: -1},
			want: []string{"retained checkpoints -1 is negative"}},
		{name: "unknown mode", cfg: Config{Mode: Mode(9)},
			want: []string{"unknown checkpointing mode 9"}},
		{name: "timeout shorter than interval", cfg: Config{Interval: time.Second, Timeout: 500 * time.Millisecond},
			want: []string{"checkpoint timeout 500ms is shorter than the interval 1s", "set timeout >= interval"}},
		{name: "default timeout shorter than interval", cfg: Config{Interval: 20 * time.Minute},
			want: []string{"checkpoint timeout 10m0s is shorter than the interval 20m0s"}},
		{name: "every problem at once", cfg: Config{Interval: -1, MinPause: -1, MaxConcurrent: -1},
			want: []string{"interval", "min pause", "max concurrent"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Validate(%+v) = %v, want nil", tc.cfg, err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate(%+v) = %v, want an error wrapping ErrInvalidConfig", tc.cfg, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// Each problem is a *FieldError naming the key it is about, so a job file
// can point at its line; a problem of two settings together names the
// section.
func TestConfigValidateFieldErrors(t *testing.T) {
	err := Config{Interval: 10 * time.Second, Timeout: 5 * time.Second, MaxConcurrent: -2, NumRetained: -1}.Validate()
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("Validate() = %v (%T), want the problems joined", err, err)
	}
	want := []FieldError{
		{"checkpointing.max-concurrent", "max concurrent checkpoints -2 is negative: set 1 or more, or 0 for the default 1"},
		{"checkpointing.retained", "retained checkpoints -1 is negative: set 1 or more, or 0 for the default 1"},
		{"checkpointing", "checkpoint timeout 5s is shorter than the interval 10s: checkpoints slower than 5s are abandoned although the next one would not be triggered before 10s anyway (the two values are easily swapped); set timeout >= interval"},
	}
	problems := joined.Unwrap()
	if len(problems) != len(want) {
		t.Fatalf("problems %v, want %d", problems, len(want))
	}
	for i, e := range problems {
		var fe *FieldError
		if !errors.As(e, &fe) {
			t.Fatalf("problem %v is a %T, not a *FieldError", e, e)
		}
		if *fe != want[i] {
			t.Errorf("problem %d = %+v, want %+v", i, *fe, want[i])
		}
		if !errors.Is(e, ErrInvalidConfig) || e.Error() != "invalid checkpoint config: "+fe.Msg {
			t.Errorf("problem %q does not read \"invalid checkpoint config: \" + Msg, or does not wrap ErrInvalidConfig", e)
		}
	}
}

func TestValidMaxParallelism(t *testing.T) {
	for n, want := range map[int]bool{-1: false, 0: false, 1: true, 128: true, 32768: true, 32769: false} {
		if got := ValidMaxParallelism(n); got != want {
			t.Errorf("ValidMaxParallelism(%d) = %v, want %v", n, got, want)
		}
	}
}
