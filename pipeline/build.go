package pipeline

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/state"
)

// Operator is what an operator does to each record, written against Record
// so that it runs over any record type. Spec.Build returns it, and the Go
// entry points (Dedupe, Count, ExtractKey) apply it. Exactly one of
// Process and Map is set.
type Operator struct {
	// Process makes a keyed operator: the stream is partitioned by the
	// record key (RecordAccess.Key), and Process runs once per subtask, and
	// again after every restore, to create the state handles on st (keyed
	// state, scoped to the current record's key and checkpointed under the
	// step's id). The function it returns handles one record: it may change
	// it and returns whether it goes on (false drops it). An error fails
	// the task; the restart strategy decides what happens next.
	Process func(st *state.Store) func(r Record) (keep bool, err error)
	// Map makes a stateless operator that changes each record in place.
	// An error makes the record a poison record, which the error policy
	// handles (Env.Policy): fail the job, skip it, or send it to the
	// failure stream (dead-letter). Return flow.Unrecoverable(err) when
	// the record fails the same way every time, so that the fail policy
	// stops the job instead of restarting into it.
	Map func(r Record) error
	// Each makes a stateless operator that emits zero or more records per
	// record: it may change r and call emit to send r as it is then,
	// any number of times. Errors are handled as Map's.
	Each func(r Record, emit func()) error
	// KeyBy is what a keyed operator (Process) partitions by; nil or the
	// record key (Expr.IsRecordKey) partitions by RecordAccess.Key. A
	// record whose key expression fails is a poison record, handled as
	// Map's errors are.
	KeyBy *Expr
	// Prepare, for a keyed operator, computes from a record what Process
	// needs of it (its expressions' values) before the exchange, in a
	// stateless step: a record it fails on is a poison record, handled
	// as Map's errors are, so Process only sees records it can take.
	// Process reads the result with Record.Prepared.
	Prepare func(r Record) (any, error)
	// Timed makes a keyed operator with event-time timers, like Process
	// (and with KeyBy and Prepare as for Process): it runs once per
	// subtask and after every restore, and returns the functions that
	// handle a record and a due timer of a key.
	Timed func(st *state.Store) Timed
	// Uses is the set of RecordAccess functions the operator calls (a
	// keyed operator also needs Key); they are checked when the operator
	// is applied.
	Uses Access
	// Union makes the operator of a step with several inputs that merges
	// them unchanged (Spec.Inputs ManyInputs).
	Union bool
	// Two makes a keyed operator of two inputs (Spec.Inputs 2): records of
	// the first input are partitioned by KeyBy, of the second by
	// KeyByRight, so a key's records of both sides meet in one subtask and
	// share its state and its key group. It runs once per subtask and
	// after every restore, like Process.
	Two        func(st *state.Store) TwoInputs
	KeyByRight *Expr
	// PrepareRight is Prepare for the second input of a Two operator
	// (Prepare is the first input's).
	PrepareRight func(r Record) (any, error)
	// NullKeyNone: a record whose KeyBy (KeyByRight) expression is null
	// or missing has no key, as SQL's NULL equals nothing: Two's
	// functions do not see it (a join pairs it with nothing). Without
	// it, such a record is a poison record.
	NullKeyNone bool
	// TakesRetractions: a keyed operator that folds a changelog's
	// retractions in (RowKind). Without it, a retraction reaching the
	// operator is a poison record, never a silent add.
	TakesRetractions bool
	// Batch makes a stateless operator that handles records in batches
	// of up to BatchSize, in order (flow.MapBatches): Prepare, when set,
	// runs on each record first in a step of its own (a record it fails
	// on is a poison record, handled as Map's errors are) and Batch reads
	// its result with Record.Prepared. Batch may change each record and
	// calls emit to send one as it is then, any number of times, in
	// order. An error from Batch fails the task (the restart strategy
	// decides; the records are replayed from the last checkpoint), never
	// the records: it is for an outside system that did not answer.
	Batch     func(batch []Record, emit func(Record)) error
	BatchSize int
	// Reporter, when set, reports the operator's metrics
	// (flow.MetricsReporter); only for Batch.
	Reporter flow.MetricsReporter
}

// TwoInputs are the functions of a keyed operator of two inputs: one per
// input, each handling a record of the current key (Record.GroupKey).
// out.Forward sends the record being handled; out.Emit a new one. clk is
// the operator's event time (the smaller of the two inputs' watermarks:
// docs/design.md, "Multi-input nodes") and registers its timers.
type TwoInputs struct {
	OnLeft, OnRight func(r Record, clk Clock, out Out) error
	// OnTimer handles a due event-time timer of key; nil when the
	// operator registers none.
	OnTimer func(key string, at int64, clk Clock, out Out) error
	// OnNoKey, when set, handles a record whose key expression gave no
	// key (Operator.NullKeyNone) of the left input (isLeft) or the right;
	// there is no current key, so it must not touch state. Nil: such
	// records are dropped.
	OnNoKey func(r Record, isLeft bool, out Out) error
}

// Timed are the functions of a keyed operator with timers.
type Timed struct {
	// OnRecord handles a record of the current key. out.Forward sends
	// the record on as r has it then; out.Emit sends a new one.
	OnRecord func(r Record, clk Clock, out Out) error
	// OnTimer handles a due event-time timer of key (its state is the
	// current key's).
	OnTimer func(key string, at int64, clk Clock, out Out) error
	// OnProcessingTimer handles a due processing-time timer of key; nil
	// when the operator registers none.
	OnProcessingTimer func(key string, at int64, clk Clock, out Out) error
}

// Clock is event time as a timed operator sees it, in ms since the Unix
// epoch.
type Clock interface {
	// Watermark is the operator's current watermark: no record at or
	// before it is expected any more.
	Watermark() int64
	// RegisterEventTimeTimer makes OnTimer run for the current key when
	// the watermark reaches at (once per key and time).
	RegisterEventTimeTimer(at int64)
	// DeleteEventTimeTimer removes the current key's timer at at.
	DeleteEventTimeTimer(at int64)
	// ProcessingTime is the job's clock, in ms.
	ProcessingTime() int64
	// RegisterProcessingTimeTimer makes OnProcessingTimer run for the
	// current key when the clock reaches at (once per key and time).
	RegisterProcessingTimeTimer(at int64)
	// DeleteProcessingTimeTimer removes the current key's
	// processing-time timer at at.
	DeleteProcessingTimeTimer(at int64)
}

// Out is where a timed operator sends records.
type Out interface {
	// Forward sends the record being handled, as it is now.
	Forward()
	// Emit sends a new record (RecordAccess.New).
	Emit(key, value []byte, timestamp int64)
	// EmitRetraction sends a new record that retracts the row value
	// (RowDelete: RecordAccess.New, then WithRowKind).
	EmitRetraction(key, value []byte, timestamp int64)
}

// Env is what steps are built with besides their params.
type Env struct {
	// Time is the expression of a record's event time the job's
	// watermarks follow, which window uses; default "timestamp".
	Time string
	// InputTimes are, for the first step of a stream of several inputs,
	// each input's event-time expression when the inputs' sources differ
	// (docs/design.md, "Named streams": event time per source); ""
	// (or none): Time. interval-join's left-time and right-time default
	// to them.
	InputTimes []string
	// Policy is what stateless operators (extract-key) do with a record
	// they cannot process. Default flow.FailOnError.
	Policy flow.ErrorPolicy
	// Counter returns the counter the caller keeps for the named event
	// (such as DuplicatesDropped), or nil. Nil: no counters.
	Counter func(name string) *atomic.Int64
}

func (e Env) counter(name string) *atomic.Int64 {
	if e.Counter == nil {
		return nil
	}
	return e.Counter(name)
}

// Step is one configured operator of a pipeline.
type Step struct {
	// Op is the operator's registered name.
	Op string
	// Params are the step's fields; missing ones take their defaults.
	Params Params
	// UID is the step's id, which names its state in checkpoints. Empty:
	// its default id (see IDs).
	UID string
}

// IDs returns the id of each step: its UID if set, else its operator's
// DefaultID, with "#n" appended for the n-th step (n >= 2) with the same
// DefaultID. Steps with an explicit UID count among the n, so giving one
// of them a uid does not move the others:
//
//	dedupe {ttl: 1h}             -> dedupe:record.key
//	count {uid: c}               -> c
//	dedupe {ttl: 2h}             -> dedupe:record.key#2
//	extract-key {json-field: a}  -> extract-key:a
//
// An id is derived from what a step is, not where it is, so inserting,
// removing or reordering other steps keeps it.
func IDs(steps []Step) []string {
	ids := make([]string, len(steps))
	seen := map[string]int{}
	for i, st := range steps {
		base := st.Op
		if spec, ok := Lookup(st.Op); ok {
			base = spec.DefaultID(st.Params)
		}
		seen[base]++
		switch {
		case st.UID != "":
			ids[i] = st.UID
		case seen[base] > 1:
			ids[i] = base + "#" + strconv.Itoa(seen[base])
		default:
			ids[i] = base
		}
	}
	return ids
}

// StepError is the error of Build about one step.
type StepError struct {
	// Index is the step's position in the list given to Build.
	Index int
	Op    string
	Err   error
}

func (e *StepError) Error() string {
	return fmt.Sprintf("pipeline step %d (%s): %v", e.Index, e.Op, e.Err)
}

// Unwrap returns Err.
func (e *StepError) Unwrap() error { return e.Err }

// Build applies steps to s in order, each with the id IDs gives it; no
// steps returns s unchanged (pass-through). Each step's params get their
// defaults and are checked (Spec.Check) first. Under
// flow.DeadLetterOnError the returned failure streams, one per stateless
// step, carry the records those steps could not process and must be
// connected to a sink; otherwise there are none. The error is a
// *StepError.
func Build[T any](s flow.Stream[T], acc RecordAccess[T], steps []Step, env Env) (flow.Stream[T], []flow.Stream[flow.Failure[T]], error) {
	ids := IDs(steps)
	var failures []flow.Stream[flow.Failure[T]]
	for i, st := range steps {
		fail := func(err error) (flow.Stream[T], []flow.Stream[flow.Failure[T]], error) {
			return s, nil, &StepError{Index: i, Op: st.Op, Err: err}
		}
		spec, op, err := buildStep(st, 1, env)
		if err != nil {
			return fail(err)
		}
		if keyedOp := op.Process != nil || op.Timed != nil; spec.Stateful != keyedOp {
			return fail(fmt.Errorf("the operator's spec says stateful %v, and its Build returned an operator with Process or Timed %v", spec.Stateful, keyedOp))
		}
		out, bad, err := apply(s, acc, spec.Name, ids[i], op, env.Policy, layoutOf(spec, st)...)
		if err != nil {
			return fail(err)
		}
		s = out
		if bad != nil && env.Policy == flow.DeadLetterOnError {
			failures = append(failures, *bad)
		}
	}
	return s, failures, nil
}

// layoutOf is the flow.StateLayout option of step st of spec (none when
// the spec declares no StateFields).
func layoutOf(spec Spec, st Step) []flow.OpOption {
	if l := spec.StateLayout(spec.WithDefaults(st.Params)); l != "" {
		return []flow.OpOption{flow.StateLayout(l)}
	}
	return nil
}

// buildStep looks up st's operator, checks that it takes inputs streams
// and its params (defaults applied), and builds it.
func buildStep(st Step, inputs int, env Env) (Spec, Operator, error) {
	spec, ok := Lookup(st.Op)
	if !ok {
		return spec, Operator{}, fmt.Errorf("unknown operator %q; supported operators: %s", st.Op, strings.Join(Names(), ", "))
	}
	switch {
	case spec.TakesInputs(inputs):
	case inputs == 1:
		return spec, Operator{}, fmt.Errorf("%s takes %s: it can only be the first step of a stream whose from: names them", st.Op, spec.InputsText())
	default:
		return spec, Operator{}, fmt.Errorf("%s takes %s and the stream has %d: combine them with union (any number) or join (two) first", st.Op, spec.InputsText(), inputs)
	}
	p := spec.WithDefaults(st.Params)
	if err := spec.Check(p); err != nil {
		return spec, Operator{}, err
	}
	op, err := spec.Build(p, env)
	return spec, op, err
}

// apply adds op to s as the operator name with id uid; opts come after
// the name and id, so they can override both. The failure stream is
// returned for a stateless operator.
func apply[T any](s flow.Stream[T], acc RecordAccess[T], name, uid string, op Operator, policy flow.ErrorPolicy, opts ...flow.OpOption) (flow.Stream[T], *flow.Stream[flow.Failure[T]], error) {
	uses := op.Uses
	set := 0
	for _, b := range []bool{op.Process != nil, op.Map != nil, op.Each != nil, op.Timed != nil, op.Batch != nil} {
		if b {
			set++
		}
	}
	switch {
	case set != 1:
		return s, nil, errors.New("the operator must set exactly one of Process, Map, Each, Timed and Batch")
	case op.Process != nil, op.Timed != nil:
		uses |= UsesKey
	}
	if op.KeyBy != nil {
		uses |= op.KeyBy.access()
	}
	if missing := acc.missing(uses); len(missing) == 1 {
		return s, nil, fmt.Errorf("%s is nil: %s needs it", missing[0], name)
	} else if len(missing) > 1 {
		return s, nil, fmt.Errorf("%s are nil: %s needs them", describeAccess(missing), name)
	}
	if op.Process != nil && (op.Prepare != nil || (op.KeyBy != nil && !op.KeyBy.IsRecordKey())) {
		return applyKeyed(s, acc, name, uid, op, policy, opts...)
	}
	if op.Each != nil {
		return applyEach(s, acc, name, uid, op, policy, opts...)
	}
	if op.Batch != nil {
		return applyBatch(s, acc, name, uid, op, policy, opts...)
	}
	if op.Timed != nil {
		return applyTimed(s, acc, name, uid, op, policy, opts...)
	}
	if op.Process != nil {
		setup := func(st *state.Store) flow.ProcessFunc[T, T] {
			fn := op.Process(st)
			h := &handle[T]{acc: &acc}
			return func(ctx flow.Context, rec T, out flow.Collector[T]) error {
				h.rec, h.group = rec, ctx.Key()
				if kind := h.RowKind(); !op.TakesRetractions && kind.Retracts() {
					return flow.Unrecoverable(fmt.Errorf("record %s: %s does not take retractions (this record is a %s of an updating result): a step before it emits a changelog (docs/design.md, \"Changelogs\"); aggregate it with retractions: true, or normalize it with changelog-normalize", h.Position(), name, kind))
				}
				keep, err := fn(h)
				rec = h.rec
				var zero T
				h.rec = zero // do not hold on to the record
				if err != nil {
					return err
				}
				if keep {
					out.Emit(rec)
				}
				return nil
			}
		}
		return flow.Process(flow.KeyBy(s, acc.Key), uid, setup, append([]flow.OpOption{flow.Name(name)}, opts...)...), nil, nil
	}
	f := func(rec T) (T, error) {
		h := &handle[T]{acc: &acc, rec: rec}
		if err := op.Map(h); err != nil {
			return rec, err // the record as it came, for the failure stream
		}
		return h.rec, nil
	}
	out, bad := flow.TryMap(s, f, policy, append([]flow.OpOption{flow.UID(uid), flow.Name(name)}, opts...)...)
	return out, &bad, nil
}

// keyed is a record with the key a key expression gave it and what
// Prepare computed, between the step that evaluates them and the keyed
// operator.
type keyed[T any] struct {
	key  string
	prep any
	rec  T
	// null: the key expression is null and the operator takes that as
	// no key (Operator.NullKeyNone): the record meets nothing.
	null bool
}

// applyKeyed adds op, partitioned by its key expression: a stateless step
// (uid/key) evaluates the expression once per record, so a record it
// fails on goes to the error policy like any poison record, and the
// exchange partitions by the value it gave.
func applyKeyed[T any](s flow.Stream[T], acc RecordAccess[T], name, uid string, op Operator, policy flow.ErrorPolicy, opts ...flow.OpOption) (flow.Stream[T], *flow.Stream[flow.Failure[T]], error) {
	keyOf := keyStep(acc, name, op)
	withKey, bad := flow.TryMap(s, keyOf, policy, flow.UID(uid+"/key"), flow.Name(name+" key"))
	setup := func(st *state.Store) flow.ProcessFunc[keyed[T], T] {
		fn := op.Process(st)
		h := &handle[T]{acc: &acc}
		return func(_ flow.Context, k keyed[T], out flow.Collector[T]) error {
			h.rec, h.group, h.prep = k.rec, k.key, k.prep
			keep, err := fn(h)
			rec := h.rec
			var zero T
			h.rec, h.prep = zero, nil
			if err != nil {
				return err
			}
			if keep {
				out.Emit(rec)
			}
			return nil
		}
	}
	out := flow.Process(flow.KeyBy(withKey, func(k keyed[T]) string { return k.key }), uid, setup, append([]flow.OpOption{flow.Name(name)}, opts...)...)
	return out, &bad, nil
}

// outputs are the records one input gave an Each operator: the first
// inline, so a record that gives one output allocates nothing.
type outputs[T any] struct {
	n     int
	first T
	more  []T
}

// applyEach adds a stateless operator with zero or more outputs per
// record.
func applyEach[T any](s flow.Stream[T], acc RecordAccess[T], name, uid string, op Operator, policy flow.ErrorPolicy, opts ...flow.OpOption) (flow.Stream[T], *flow.Stream[flow.Failure[T]], error) {
	// A call's handle, outputs and emit function are taken from a pool:
	// the handle escapes (Each takes a Record), and allocating the three
	// per record cost a tenth of the CPU of a select over JSON (Nexmark
	// q0, docs/benchmarks.md). Each is synchronous: nothing holds the
	// handle after it returns.
	pool := sync.Pool{New: func() any {
		c := &eachCall[T]{}
		c.emit = func() {
			if c.out.n == 0 {
				c.out.first = c.h.rec
			} else {
				c.out.more = append(c.out.more, c.h.rec)
			}
			c.out.n++
		}
		return c
	}}
	f := func(rec T) (outputs[T], error) {
		c := pool.Get().(*eachCall[T])
		c.h = handle[T]{acc: &acc, rec: rec}
		err := op.Each(&c.h, c.emit)
		out := c.out
		c.h, c.out = handle[T]{}, outputs[T]{} // the next call starts a slice of its own: out.more goes on
		pool.Put(c)
		if err != nil {
			return outputs[T]{}, err
		}
		return out, nil
	}
	both, bad := flow.TryMap(s, f, policy, append([]flow.OpOption{flow.UID(uid), flow.Name(name)}, opts...)...)
	out := flow.FlatMap(both, func(o outputs[T], c flow.Collector[T]) {
		if o.n > 0 {
			c.Emit(o.first)
		}
		for _, r := range o.more {
			c.Emit(r)
		}
	}, flow.UID(uid+"/emit"), flow.Name(name))
	return out, &bad, nil
}

// eachCall is what applyEach needs for one record.
type eachCall[T any] struct {
	h    handle[T]
	out  outputs[T]
	emit func()
}

// applyBatch adds a stateless operator over batches of records, after a
// step that runs Prepare (a poison record goes to the error policy
// there, so the batches hold only records the operator can take).
func applyBatch[T any](s flow.Stream[T], acc RecordAccess[T], name, uid string, op Operator, policy flow.ErrorPolicy, opts ...flow.OpOption) (flow.Stream[T], *flow.Stream[flow.Failure[T]], error) {
	prep := func(rec T) (keyed[T], error) {
		if op.Prepare == nil {
			return keyed[T]{rec: rec}, nil
		}
		h := &handle[T]{acc: &acc, rec: rec}
		p, err := op.Prepare(h)
		if err != nil {
			return keyed[T]{}, err
		}
		return keyed[T]{prep: p, rec: rec}, nil
	}
	prepared, bad := flow.TryMap(s, prep, policy, flow.UID(uid+"/prepare"), flow.Name(name+" prepare"))
	f := func(batch []keyed[T], out flow.Collector[T]) error {
		// Per batch, not per operator: the subtasks share f.
		hs, recs := make([]handle[T], len(batch)), make([]Record, len(batch))
		for i, k := range batch {
			hs[i] = handle[T]{acc: &acc, rec: k.rec, prep: k.prep}
			recs[i] = &hs[i]
		}
		return op.Batch(recs, func(r Record) { out.Emit(r.(*handle[T]).rec) })
	}
	var rep flow.MetricsReporter
	if op.Reporter != nil {
		rep = op.Reporter
	}
	out := flow.MapBatches(prepared, op.BatchSize, f, rep, append([]flow.OpOption{flow.UID(uid), flow.Name(name)}, opts...)...)
	return out, &bad, nil
}

// keyStep is the function of the stateless step before a keyed
// operator: the record's key (KeyBy evaluated, or the record key) and
// what Prepare computes.
func keyStep[T any](acc RecordAccess[T], name string, op Operator) func(T) (keyed[T], error) {
	// The handle escapes (it is a Record): pooled, as applyEach's.
	pool := sync.Pool{New: func() any { return new(handle[T]) }}
	return func(rec T) (keyed[T], error) {
		h := pool.Get().(*handle[T])
		*h = handle[T]{acc: &acc, rec: rec}
		defer func() { *h = handle[T]{}; pool.Put(h) }()
		if !op.TakesRetractions {
			if kind := h.RowKind(); kind.Retracts() {
				return keyed[T]{}, flow.Unrecoverable(fmt.Errorf("record %s: %s does not take retractions (this record is a %s of an updating result): a step before it emits a changelog (docs/design.md, \"Changelogs\"); aggregate it with retractions: true, or normalize it with changelog-normalize", h.Position(), name, kind))
			}
		}
		var k string
		if op.KeyBy == nil || op.KeyBy.IsRecordKey() {
			k = acc.Key(rec)
		} else {
			var err error
			var null bool
			if k, null, err = op.KeyBy.evalKeyOrNull(h, op.NullKeyNone); err != nil {
				return keyed[T]{}, flow.Unrecoverable(fmt.Errorf("record %s: %s key: %w", h.Position(), name, err))
			}
			if null {
				return keyed[T]{null: true, rec: rec}, nil
			}
		}
		var prep any
		if op.Prepare != nil {
			var err error
			if prep, err = op.Prepare(h); err != nil {
				return keyed[T]{}, err
			}
		}
		return keyed[T]{key: k, prep: prep, rec: rec}, nil
	}
}

// applyTimed adds a keyed operator with event-time timers (Timed), after
// the same stateless step as applyKeyed.
func applyTimed[T any](s flow.Stream[T], acc RecordAccess[T], name, uid string, op Operator, policy flow.ErrorPolicy, opts ...flow.OpOption) (flow.Stream[T], *flow.Stream[flow.Failure[T]], error) {
	keyOf := keyStep(acc, name, op)
	withKey, bad := flow.TryMap(s, keyOf, policy, flow.UID(uid+"/key"), flow.Name(name+" key"))
	setup := func(st *state.Store) (flow.ProcessFunc[keyed[T], T], flow.TimerFunc[T]) {
		fns := op.Timed(st)
		h := &handle[T]{acc: &acc}
		tc := &timedCtx[T]{h: h}
		onRecord := func(ctx flow.Context, k keyed[T], out flow.Collector[T]) error {
			h.rec, h.group, h.prep = k.rec, k.key, k.prep
			tc.ctx, tc.out, tc.inRecord = ctx, out, true
			err := fns.OnRecord(h, tc, tc)
			var zero T
			h.rec, h.prep, tc.inRecord = zero, nil, false
			return err
		}
		onTimer := func(ctx flow.Context, out flow.Collector[T]) error {
			tc.ctx, tc.out = ctx, out
			if tm := ctx.Timer(); tm.Domain == state.ProcessingTime {
				if fns.OnProcessingTimer == nil {
					return fmt.Errorf("a processing-time timer at %d is due and the operator has no OnProcessingTimer", tm.At)
				}
				return fns.OnProcessingTimer(ctx.Key(), tm.At, tc, tc)
			}
			return fns.OnTimer(ctx.Key(), ctx.Timer().At, tc, tc)
		}
		return onRecord, onTimer
	}
	out := flow.ProcessWithTimers(flow.KeyBy(withKey, func(k keyed[T]) string { return k.key }), uid, setup, append([]flow.OpOption{flow.Name(name)}, opts...)...)
	return out, &bad, nil
}

// timedCtx is the Clock and Out of a Timed operator, over the flow
// context of the call.
type timedCtx[T any] struct {
	h        *handle[T]
	ctx      flow.Context
	out      flow.Collector[T]
	inRecord bool
}

func (c *timedCtx[T]) Watermark() int64                { return c.ctx.Watermark() }
func (c *timedCtx[T]) RegisterEventTimeTimer(at int64) { c.ctx.RegisterEventTimeTimer(at) }
func (c *timedCtx[T]) DeleteEventTimeTimer(at int64)   { c.ctx.DeleteEventTimeTimer(at) }
func (c *timedCtx[T]) ProcessingTime() int64           { return c.ctx.ProcessingTime() }
func (c *timedCtx[T]) RegisterProcessingTimeTimer(at int64) {
	c.ctx.RegisterProcessingTimeTimer(at)
}
func (c *timedCtx[T]) DeleteProcessingTimeTimer(at int64) {
	c.ctx.DeleteProcessingTimeTimer(at)
}

func (c *timedCtx[T]) Forward() {
	if !c.inRecord {
		panic("pipeline: Out.Forward called from OnTimer: there is no record to forward")
	}
	c.out.Emit(c.h.rec)
}

func (c *timedCtx[T]) Emit(key, value []byte, ts int64) {
	c.out.Emit(c.h.acc.New(key, value, ts))
}

func (c *timedCtx[T]) EmitRetraction(key, value []byte, ts int64) {
	c.out.Emit(c.h.acc.WithRowKind(c.h.acc.New(key, value, ts), RowDelete))
}
