// Package testbreak holds test-only switches that break the exactly-once
// protocol on purpose, so the proof suite can show that its checker catches
// a broken engine.
//
// They exist only in binaries built with -tags onceflow_faults (the test
// suite's build: ./scripts/test), which read them from ONCEFLOW_TEST_BREAK
// (comma-separated) at start-up; the engine then logs a loud warning. In a
// default build, which is what users run, the variable is not read and Is
// and Any are constant false: no setting can switch exactly-once off.
package testbreak

import "strings"

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

// EnvVar names the environment variable, read only by binaries built with
// -tags onceflow_faults.
const EnvVar = "ONCEFLOW_TEST_BREAK"

// active holds the switches that are on; always empty without the tag.
var active map[string]bool

func parse(s string) map[string]bool {
	m := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			m[f] = true
		}
	}
	return m
}

// Available reports whether this binary was built with -tags
// onceflow_faults, so that the switches can be on. Tests that need them
// skip when it is false.
func Available() bool { return compiled }

// Is reports whether switch name is on: always false without -tags
// onceflow_faults.
func Is(name string) bool { return compiled && active[name] }

// Any reports whether any switch is on: always false without -tags
// onceflow_faults.
func Any() bool { return compiled && len(active) > 0 }

// Set replaces the active switches (tests in one process). Without -tags
// onceflow_faults it panics when asked to turn a switch on.
func Set(names ...string) {
	m := parse(strings.Join(names, ","))
	if !compiled && len(m) > 0 {
		panic("testbreak.Set: test breaks are not available: this binary was built without -tags onceflow_faults")
	}
	active = m
}
