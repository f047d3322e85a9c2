package engine

import (
	"errors"
	"fmt"
)

// The sentinels flow re-exports (flow.ErrInvalidJob, ...); the engine wraps
// them so that errors.Is works on either name.
var (
	// ErrInvalidJob is wrapped by every error that rejects a job definition
	// before it runs.
	ErrInvalidJob = errors.New("invalid job")
	// ErrRestoreRefused is wrapped by errors that stop a job before it
	// starts because restoring its state would be wrong.
	ErrRestoreRefused = errors.New("restore refused")
	// ErrUnrecoverable is wrapped by errors that restarting cannot fix.
	ErrUnrecoverable = errors.New("unrecoverable")
	// ErrRejected is wrapped by the error of a sink writer that cannot
	// write one record (a value its destination refuses) and wrote
	// nothing of it: the sink's rejected-record policy decides.
	ErrRejected = errors.New("record rejected by the sink")
)

// Rejected marks err with ErrRejected (and ErrUnrecoverable: the record
// is rejected again after a restart); nil for nil.
func Rejected(err error) error {
	if err == nil || errors.Is(err, ErrRejected) {
		return err
	}
	return &rejectedError{err}
}

type rejectedError struct{ err error }

func (e *rejectedError) Error() string { return e.err.Error() }

func (e *rejectedError) Unwrap() []error { return []error{ErrRejected, ErrUnrecoverable, e.err} }

// Unrecoverable marks err with ErrUnrecoverable; nil for nil.
func Unrecoverable(err error) error {
	if err == nil || errors.Is(err, ErrUnrecoverable) {
		return err
	}
	return &unrecoverableError{err}
}

type unrecoverableError struct{ err error }

func (e *unrecoverableError) Error() string { return e.err.Error() }

func (e *unrecoverableError) Unwrap() []error { return []error{ErrUnrecoverable, e.err} }

// TaskError is a failure of user code or a connector inside a subtask.
type TaskError struct {
	Operator string // uid of the task's head operator
	Subtask  int
	Position string // the record or source position being processed, if known
	Panic    any    // the panic value, when user code panicked
	Stack    []byte
	Err      error
}

func (e *TaskError) Error() string {
	s := fmt.Sprintf("task %s[%d]", e.Operator, e.Subtask)
	if e.Position != "" {
		s += " at " + e.Position
	}
	if e.Panic != nil {
		return fmt.Sprintf("%s: panic: %v", s, e.Panic)
	}
	return fmt.Sprintf("%s: %v", s, e.Err)
}

func (e *TaskError) Unwrap() error { return e.Err }
