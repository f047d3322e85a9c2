package flow

import "fmt"

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
	e := s.n.env
	n := &node{name: "trymap", kind: kindOp, input: s.n, fanout: typedFanout[tryResult[T, U]]}
	applyOpts(e, n, opts)
	n.chain = func(st *subtask, n *node, out any) any {
		return &tryMapOp[T, U]{stateless: newStateless(st, n), n: n, f: f, policy: policy, out: out.(input[tryResult[T, U]])}
	}
	n.exchange = rebalanceOf[T]
	both := Stream[tryResult[T, U]]{e.add(n)}
	good := FlatMap(both, func(r tryResult[T, U], out Collector[U]) {
		if r.err == nil {
			out.Emit(r.out)
		}
	}, Name(n.name+"-ok"), UID(n.uid+"-ok"))
	bad := FlatMap(both, func(r tryResult[T, U], out Collector[Failure[T]]) {
		if r.err != nil {
			out.Emit(Failure[T]{Record: r.in, Err: r.err})
		}
	}, Name(n.name+"-failures"), UID(n.uid+"-failures"))
	return good, bad
}

type tryResult[T, U any] struct {
	in  T
	out U
	err error
}

type tryMapOp[T, U any] struct {
	stateless
	n      *node
	f      func(T) (U, error)
	policy ErrorPolicy
	out    input[tryResult[T, U]]
}

func (m *tryMapOp[T, U]) push(x T) {
	u, err := m.f(x)
	if err == nil {
		m.out.push(tryResult[T, U]{out: u})
		return
	}
	switch m.policy {
	case SkipOnError:
		m.st.att.job.skipped.Add(1)
		m.st.att.log.Warn("skipped a record its function rejected (error policy skip)", "operator", m.n.uid, "subtask", m.st.index, "position", m.st.position(), "err", err)
	case DeadLetterOnError:
		m.st.att.job.deadLettered.Add(1)
		m.out.push(tryResult[T, U]{in: x, err: err})
	default:
		fail(fmt.Errorf("operator %q: %w (error policy fail; set skip or dead-letter to let the job go past such records)", m.n.uid, err))
	}
}

func (m *tryMapOp[T, U]) control(c ctl) {
	m.barrier(c)
	m.out.control(c)
}
