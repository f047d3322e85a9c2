package flow

import "errors"

// ErrUnrecoverable is wrapped by errors that restarting the job cannot fix:
// a poison record under the fail policy, a startup mode that finds no
// offset to start from with no fallback, credentials the brokers refuse. The
// restart strategy does not retry them: the job stops and Run returns the
// error, so a supervisor sees an exit with the reason instead of a job that
// restarts forever.
var ErrUnrecoverable = errors.New("unrecoverable")

// Unrecoverable marks err so that the job does not restart on it (see
// ErrUnrecoverable). Connectors and user code use it for failures that
// come back the same after every restart. It returns nil for nil.
func Unrecoverable(err error) error {
	if err == nil || errors.Is(err, ErrUnrecoverable) {
		return err
	}
	return &unrecoverableError{err}
}

type unrecoverableError struct{ err error }

func (e *unrecoverableError) Error() string { return e.err.Error() }

func (e *unrecoverableError) Unwrap() []error { return []error{ErrUnrecoverable, e.err} }
