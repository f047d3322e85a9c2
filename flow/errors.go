package flow

import "github.com/onceflow/onceflow/internal/engine"

// ErrInvalidJob is wrapped by every error that rejects a job definition
// before it runs.
var ErrInvalidJob = engine.ErrInvalidJob

// ErrRestoreRefused is wrapped by errors that stop a job before it starts
// because restoring its state would be wrong (damaged checkpoint, state for
// operators that no longer exist, changed max parallelism, a commit record
// that does not match what the state directory holds: docs/design.md,
// "Recovery decisions"). Restarting does not help; the error says what does.
var ErrRestoreRefused = engine.ErrRestoreRefused

// ErrUnrecoverable is wrapped by errors that restarting the job cannot fix:
// a poison record under the fail policy, a startup mode that finds no
// offset to start from with no fallback, credentials the brokers refuse. The
// restart strategy does not retry them: the job stops and Run returns the
// error, so a supervisor sees an exit with the reason instead of a job that
// restarts forever.
var ErrUnrecoverable = engine.ErrUnrecoverable

// Unrecoverable marks err so that the job does not restart on it (see
// ErrUnrecoverable). Connectors and user code use it for failures that
// come back the same after every restart. It returns nil for nil.
func Unrecoverable(err error) error { return engine.Unrecoverable(err) }

// TaskError is a failure of user code or a connector inside a subtask:
// Operator (the uid of the task's head operator), Subtask, Position (the
// record or source position being processed, if known), Panic and Stack
// (when user code panicked) and Err.
type TaskError = engine.TaskError

// ErrRejected is wrapped by the error of a sink writer that cannot write a
// record (a value its destination refuses) and wrote nothing of it; the
// sink's OnRejected policy decides what happens. It implies
// ErrUnrecoverable: the record is rejected again after a restart.
var ErrRejected = engine.ErrRejected

// Rejected marks err as a rejected record (see ErrRejected); nil for nil.
func Rejected(err error) error { return engine.Rejected(err) }
