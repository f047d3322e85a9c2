package durfmt

import (
	"testing"
	"time"
)

func TestShort(t *testing.T) {
	tests := map[time.Duration]string{
		0:                                "0s",
		1500 * time.Millisecond:          "1.5s",
		time.Minute:                      "1m",
		10 * time.Minute:                 "10m",
		time.Minute + time.Second:        "1m1s",
		time.Hour:                        "1h",
		time.Hour + time.Minute:          "1h1m",
		time.Hour + time.Second:          "1h0m1s",
		-time.Minute:                     "-1m",
		24 * time.Hour:                   "24h",
		2*time.Hour + 30*time.Minute + 0: "2h30m",
	}
	for d, want := range tests {
		got := Short(d)
		if got != want {
			t.Errorf("Short(%v) = %q, want %q", d, got, want)
		}
		// A job file written with Short must read back the same value.
		if back, err := time.ParseDuration(got); err != nil || back != d {
			t.Errorf("time.ParseDuration(%q) = %v, %v; want %v", got, back, err, d)
		}
	}
}
