// Package plan describes a job as the planner sees it: what each operator
// may do to partitioning, routing and event time (Props), and the names
// that identify state on disk. It imports only the standard library, so the
// job-file format, the SQL front end, the compiler and the engine can all
// depend on it (docs/design.md, "Packages and dependencies").
package plan

import "strings"

// Props is everything the planner may know about an operator. Operators
// declare it; the planner never reads an operator's name
// (docs/design.md, "Scale-out": where a pipeline is cut).
type Props struct {
	// Keyed: the operator keeps keyed state or timers under its uid, so its
	// input must be partitioned by Key.
	Keyed bool
	// Key is the key expression a keyed operator partitions by
	// ("record.key", "value.user_id"), as the job file writes it: equal
	// text means equal partitioning. Empty when not Keyed.
	Key string
	// RightKey is, for a keyed operator of two inputs (a join), the key
	// expression of its second input; Key is the first's.
	RightKey string
	// Keys says whether records leave with the keys they came with.
	Keys KeyEffect
	// Routes: the operator sets records' topics.
	Routes bool
	// StaticTopics are the topics it routes to that are known before the
	// job runs (route cases and default, a window's late-topic).
	StaticTopics []string
	// EventTime: the operator reads watermarks or sets event-time timers,
	// so the job needs event time.
	EventTime bool
	// StateBound says what frees a keyed operator's state ("ttl 24h",
	// "the watermark"); empty for a keyed operator: nothing does, its
	// state grows with the number of keys, and EXPLAIN says so.
	StateBound string
}

// KeyEffect says what an operator does to the partitioning of its input.
type KeyEffect uint8

const (
	// KeysLost: a key expression may give another value after the
	// operator (it changes or replaces records). The safe default.
	KeysLost KeyEffect = iota
	// KeysKept: records leave with the same fields, so a key expression
	// gives what it gave before (filter, route, dedupe).
	KeysKept
)

func (k KeyEffect) String() string {
	if k == KeysKept {
		return "keys kept"
	}
	return "keys lost"
}

// StateFileStem is the part of a keyed operator's state file names that
// comes from its uid: every character but letters, digits, '.', '_' and
// '-' becomes '_'. Two uids with one stem would write the same files, so
// the engine and the job-file checks refuse them (docs/design.md,
// "Pipeline operators").
func StateFileStem(uid string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, uid)
}
