package pipeline

import (
	"errors"
	"fmt"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/state"
)

// Steps with several inputs (docs/design.md, "Named streams"): a stream of
// a job may read more than one input; its first step then takes them all
// (union merges them, join pairs the records of two by key), and the steps
// after it take one, as in any pipeline.

// BuildFrom is Build over the inputs ins of a stream: with one input it is
// Build; with more, the first step must be an operator that takes that
// many inputs (Spec.Inputs). The error is a *StepError (Index 0 when the
// inputs do not fit the first step).
func BuildFrom[T any](ins []flow.Stream[T], acc RecordAccess[T], steps []Step, env Env) (flow.Stream[T], []flow.Stream[flow.Failure[T]], error) {
	switch {
	case len(ins) == 0:
		return flow.Stream[T]{}, nil, errors.New("a stream needs an input")
	case len(ins) == 1:
		return Build(ins[0], acc, steps, env)
	case len(steps) == 0:
		return ins[0], nil, fmt.Errorf("%d inputs and no step: the first step of a stream with several inputs says how to combine them (union, or join for two)", len(ins))
	}
	ids := IDs(steps)
	st := steps[0]
	fail := func(err error) (flow.Stream[T], []flow.Stream[flow.Failure[T]], error) {
		return ins[0], nil, &StepError{Index: 0, Op: st.Op, Err: err}
	}
	spec, op, err := buildStep(st, len(ins), env)
	if err != nil {
		return fail(err)
	}
	var s flow.Stream[T]
	var failures []flow.Stream[flow.Failure[T]]
	switch {
	case op.Union:
		s = flow.Union(ins[0], ins[1:]...)
	case op.Two != nil && len(ins) == 2:
		var bad []flow.Stream[flow.Failure[T]]
		if s, bad, err = applyTwo(ins[0], ins[1], acc, spec.Name, ids[0], op, env.Policy, layoutOf(spec, st)...); err != nil {
			return fail(err)
		}
		if env.Policy == flow.DeadLetterOnError {
			failures = append(failures, bad...)
		}
	default:
		return fail(fmt.Errorf("the operator's spec takes %s, and its Build returned neither Union nor Two", spec.InputsText()))
	}
	rest := make([]Step, len(steps)-1)
	for i, st := range steps[1:] {
		st.UID = ids[i+1] // the ids of the whole stream's steps
		rest[i] = st
	}
	out, more, err := Build(s, acc, rest, env)
	if se := (*StepError)(nil); errors.As(err, &se) {
		se.Index++
		return ins[0], nil, se
	}
	return out, append(failures, more...), err
}

// applyTwo adds the keyed operator of two inputs op: a stateless step per
// input evaluates its key (a record it fails on goes to the error policy
// like any poison record), and both keyed streams meet in one CoProcess
// under uid.
func applyTwo[T any](l, r flow.Stream[T], acc RecordAccess[T], name, uid string, op Operator, policy flow.ErrorPolicy, opts ...flow.OpOption) (flow.Stream[T], []flow.Stream[flow.Failure[T]], error) {
	uses := op.Uses | UsesKey
	for _, k := range []*Expr{op.KeyBy, op.KeyByRight} {
		if k != nil {
			uses |= k.access()
		}
	}
	if missing := acc.missing(uses); len(missing) > 0 {
		verb := "are"
		if len(missing) == 1 {
			verb = "is"
		}
		return l, nil, fmt.Errorf("%s %s nil: %s needs them", describeAccessList(missing), verb, name)
	}
	right := op
	right.KeyBy, right.Prepare = op.KeyByRight, op.PrepareRight
	left := op
	wl, badL := flow.TryMap(l, keyStep(acc, name+" (left)", left), policy, flow.UID(uid+"/key-left"), flow.Name(name+" left key"))
	wr, badR := flow.TryMap(r, keyStep(acc, name+" (right)", right), policy, flow.UID(uid+"/key-right"), flow.Name(name+" right key"))
	byKey := func(k keyed[T]) string { return k.key }
	c := flow.Connect(flow.KeyBy(wl, byKey), flow.KeyBy(wr, byKey))
	out := flow.CoProcess(c, uid, func(st *state.Store) flow.CoProcessFuncs[keyed[T], keyed[T], T] {
		fns := op.Two(st)
		h := &handle[T]{acc: &acc}
		tc := &timedCtx[T]{h: h}
		side := func(f func(Record, Clock, Out) error, isLeft bool) flow.ProcessFunc[keyed[T], T] {
			return func(ctx flow.Context, k keyed[T], out flow.Collector[T]) error {
				if k.null && fns.OnNoKey == nil {
					return nil // no key: it meets nothing (Operator.NullKeyNone)
				}
				h.rec, h.group, h.prep = k.rec, k.key, k.prep
				tc.ctx, tc.out, tc.inRecord = ctx, out, true
				var err error
				if k.null {
					err = fns.OnNoKey(h, isLeft, tc)
				} else {
					err = f(h, tc, tc)
				}
				var zero T
				h.rec, h.prep, tc.inRecord = zero, nil, false // do not hold on to the record
				return err
			}
		}
		cf := flow.CoProcessFuncs[keyed[T], keyed[T], T]{OnLeft: side(fns.OnLeft, true), OnRight: side(fns.OnRight, false)}
		if fns.OnTimer != nil {
			onTimer := fns.OnTimer
			cf.OnTimer = func(ctx flow.Context, out flow.Collector[T]) error {
				tc.ctx, tc.out = ctx, out
				if tm := ctx.Timer(); tm.Domain == state.ProcessingTime {
					return fmt.Errorf("a processing-time timer at %d is due and %s registers none", tm.At, name)
				}
				return onTimer(ctx.Key(), ctx.Timer().At, tc, tc)
			}
		}
		return cf
	}, append([]flow.OpOption{flow.Name(name)}, opts...)...)
	return out, []flow.Stream[flow.Failure[T]]{badL, badR}, nil
}

var unionSpec = Spec{
	Name:    "union",
	Summary: "Merges the records of a stream's inputs, unchanged, into one stream (SQL's UNION ALL).",
	Doc: "Only the first step of a stream whose `from:` names two or more inputs. Records of different inputs " +
		"come in no particular order; the records of one input keep theirs. It keeps no state; its checkpoint " +
		"barrier waits for every input, so a checkpoint holds each input's position consistently.",
	Stateful: false,
	Inputs:   ManyInputs,
	Props:    keepsKeys,
	Build:    func(Params, Env) (Operator, error) { return Operator{Union: true}, nil },
	Describe: func(Params) string { return "union of the inputs" },
	GoFunc:   "flow.Union",
	Example:  "- union: {}",
}

func init() { Register(unionSpec) }
