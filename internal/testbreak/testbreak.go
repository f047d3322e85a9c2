// Package testbreak holds test-only switches that break the exactly-once
// protocol on purpose, so the proof suite can show that its checker catches
// a broken engine. They are read from ONCEFLOW_TEST_BREAK (comma-separated)
// and must never be set in production: the engine logs a loud warning when
// one is.
package testbreak

import (
	"os"
	"strings"
)

// The switches.
const (
	// OffsetsOutsideTxn commits source offsets with a separate,
	// non-transactional client before the transaction commits.
	OffsetsOutsideTxn = "offsets-outside-txn"
	// NoFencing gives every incarnation a fresh transactional id, so a
	// zombie is never fenced and an old open transaction is never aborted.
	NoFencing = "no-fencing"
	// NoRewind restores state but not source positions after a failure.
	NoRewind = "no-rewind"
)

// EnvVar names the environment variable.
const EnvVar = "ONCEFLOW_TEST_BREAK"

var active = parse(os.Getenv(EnvVar))

func parse(s string) map[string]bool {
	m := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			m[f] = true
		}
	}
	return m
}

// Is reports whether switch name is on.
func Is(name string) bool { return active[name] }

// Any reports whether any switch is on.
func Any() bool { return len(active) > 0 }

// Set replaces the active switches (tests in one process).
func Set(names ...string) { active = parse(strings.Join(names, ",")) }
