// Package durfmt writes durations the way people write them in job files
// and read them in logs and errors.
package durfmt

import (
	"strings"
	"time"
)

// Short is time.Duration.String without the zero tails it leaves on round
// values: "24h" and "1m" rather than "24h0m0s" and "1m0s". The result
// parses back with time.ParseDuration to the same value.
func Short(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
