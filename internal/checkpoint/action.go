package checkpoint

import "fmt"

// ActionKind says what the caller must do for an Action.
type ActionKind int

// The zero ActionKind is deliberately not a valid kind, so that a forgotten
// field shows up as "ActionKind(0)" instead of an accidental Trigger.
const (
	// Trigger: start checkpoint ID: inject barrier ID at the sources (for a
	// savepoint, a savepoint barrier). Participants answer with Ack or
	// Decline.
	Trigger ActionKind = iota + 1
	// Commit: every participant has acknowledged checkpoint ID and every
	// earlier checkpoint is settled; perform the commit point (the Kafka
	// transaction or the manifest write) and report it with CommitDone.
	Commit
	// Abort: checkpoint ID will not complete (Err says why, as an
	// *AbortError). Throw away what was prepared for it. When
	// errors.Is(Err, ErrCommitFailed), the epoch's output is lost and the
	// runtime must replay from LastCommitted.
	Abort
	// FailJob: too many checkpoints failed in a row; the job must fail and go
	// through its restart strategy. ID is the checkpoint whose failure
	// crossed the limit. The Coordinator ignores every input afterwards.
	FailJob
)

// String returns the kind's name, e.g. "Commit".
func (k ActionKind) String() string {
	switch k {
	case Trigger:
		return "Trigger"
	case Commit:
		return "Commit"
	case Abort:
		return "Abort"
	case FailJob:
		return "FailJob"
	}
	return fmt.Sprintf("ActionKind(%d)", int(k))
}

// Action is one output of the Coordinator, drained with Ready. The caller
// performs actions in the order Ready returns them.
type Action struct {
	Kind ActionKind
	// ID is the checkpoint the action is about.
	ID int64
	// Savepoint is true when checkpoint ID was requested with
	// TriggerSavepoint (Trigger, Commit and Abort).
	Savepoint bool
	// Err is the reason of an Abort (an *AbortError) or a FailJob (wraps
	// ErrTooManyFailures and the last failure); nil otherwise.
	Err error
}

// String renders the action for logs and test failures, e.g.
// "Commit 7 (savepoint)" or "Abort 8: checkpoint 8 declined by participant 1".
func (a Action) String() string {
	s := fmt.Sprintf("%v %d", a.Kind, a.ID)
	if a.Savepoint {
		s += " (savepoint)"
	}
	if a.Err != nil {
		s += ": " + a.Err.Error()
	}
	return s
}
