package checkpoint

import (
	"errors"
	"fmt"
	"time"
)

// Sentinels. Every error this package returns or puts in an Action wraps one
// of them, so callers classify with errors.Is and never by message.
var (
	// ErrInvalidConfig is wrapped by every Config.Validate and ParseMode error.
	ErrInvalidConfig = errors.New("invalid checkpoint config")

	// ErrExpired: the participants did not all acknowledge within
	// Config.Timeout.
	ErrExpired = errors.New("checkpoint expired")
	// ErrDeclined: a participant reported that it could not do its part.
	ErrDeclined = errors.New("checkpoint declined")
	// ErrCommitFailed: the commit point failed, or a checkpoint was aborted
	// because an earlier one it builds on failed to commit. Either way the
	// output of that epoch is gone and the runtime must replay from
	// LastCommitted (see Coordinator.CommitDone).
	ErrCommitFailed = errors.New("checkpoint commit failed")

	// ErrTooManyFailures is the reason of a FailJob action.
	ErrTooManyFailures = errors.New("too many consecutive checkpoint failures")
)

// AbortError is the Err of every Abort action: which checkpoint, why (Reason
// is ErrExpired, ErrDeclined or ErrCommitFailed) and the underlying error.
// errors.Is matches both Reason and Err.
type AbortError struct {
	ID        int64
	Savepoint bool
	// Reason is one of ErrExpired, ErrDeclined, ErrCommitFailed.
	Reason error
	// Participant is the index of the participant that declined, or -1.
	Participant int
	// Timeout is the Config.Timeout that expired (ErrExpired only).
	Timeout time.Duration
	// Cause is the checkpoint whose failed commit took this one down, or 0
	// when this checkpoint failed by itself.
	Cause int64
	// Err is the error reported by the participant or the commit; nil for
	// timeouts.
	Err error
}

func (e *AbortError) kind() string {
	if e.Savepoint {
		return "savepoint"
	}
	return "checkpoint"
}

// Error tells what failed in one sentence.
func (e *AbortError) Error() string {
	var msg string
	switch {
	case errors.Is(e.Reason, ErrExpired):
		msg = fmt.Sprintf("%s %d expired: not every participant acknowledged it within the checkpoint timeout %v", e.kind(), e.ID, e.Timeout)
	case errors.Is(e.Reason, ErrDeclined):
		msg = fmt.Sprintf("%s %d declined by participant %d", e.kind(), e.ID, e.Participant)
	case errors.Is(e.Reason, ErrCommitFailed) && e.Cause != 0:
		msg = fmt.Sprintf("%s %d aborted: checkpoint %d, whose output it builds on, failed to commit", e.kind(), e.ID, e.Cause)
	case errors.Is(e.Reason, ErrCommitFailed):
		msg = fmt.Sprintf("%s %d commit failed", e.kind(), e.ID)
	default:
		msg = fmt.Sprintf("%s %d aborted: %v", e.kind(), e.ID, e.Reason)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns Reason and Err so that errors.Is sees both.
func (e *AbortError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Reason}
	}
	return []error{e.Reason, e.Err}
}
