package flow

import (
	"fmt"

	"github.com/onceflow/onceflow/internal/engine"
)

// ErrorPolicy says what happens to a record whose function returned an
// error (a poison record: it would fail again after every restart).
type ErrorPolicy int

const (
	// FailOnError fails the task; the restart strategy decides what happens
	// next, unless the error wraps ErrUnrecoverable: a function that knows
	// the record fails the same way every time returns
	// Unrecoverable(err), and the job stops with the error instead of
	// restarting into the same record. The default: nothing is dropped
	// without the user saying so.
	FailOnError ErrorPolicy = iota
	// SkipOnError drops the record, counts it (Stats.RecordsSkipped) and
	// logs it with its position.
	SkipOnError
	// DeadLetterOnError sends the record and its error to the failure
	// stream TryMap returns; connect it to a sink (for Kafka, a dead-letter
	// topic written in the same transaction as the main output).
	DeadLetterOnError
)

func (p ErrorPolicy) String() string {
	switch p {
	case FailOnError:
		return "fail"
	case SkipOnError:
		return "skip"
	case DeadLetterOnError:
		return "dead-letter"
	}
	return fmt.Sprintf("ErrorPolicy(%d)", int(p))
}

// ParseErrorPolicy parses "fail", "skip" or "dead-letter".
func ParseErrorPolicy(s string) (ErrorPolicy, error) {
	switch s {
	case "fail", "":
		return FailOnError, nil
	case "skip":
		return SkipOnError, nil
	case "dead-letter":
		return DeadLetterOnError, nil
	}
	return 0, fmt.Errorf("unknown error policy %q: use fail, skip or dead-letter", s)
}

// Failure is a record whose function failed, with the error.
type Failure[T any] struct {
	Record T
	Err    error
}

// TryMap transforms each record with f, which may fail. A failed record is
// handled by policy; the second stream carries the failures when policy is
// DeadLetterOnError (it is empty otherwise, and may be left unconnected).
// Both streams are chained to the operator: no extra goroutine or copy
// between subtasks.
func TryMap[T, U any](s Stream[T], f func(T) (U, error), policy ErrorPolicy, opts ...OpOption) (Stream[U], Stream[Failure[T]]) {
	both := Stream[engine.TryResult[T, U]]{engine.AddTryMap(s.n, f, int(policy), nodeOpts(opts)...)}
	name, uid := both.n.Name(), both.n.UID()
	good := FlatMap(both, func(r engine.TryResult[T, U], out Collector[U]) {
		if r.Err == nil {
			out.Emit(r.Out)
		}
	}, Name(name+"-ok"), UID(uid+"-ok"))
	bad := FlatMap(both, func(r engine.TryResult[T, U], out Collector[Failure[T]]) {
		if r.Err != nil {
			out.Emit(Failure[T]{Record: r.In, Err: r.Err})
		}
	}, Name(name+"-failures"), UID(uid+"-failures"))
	return good, bad
}
