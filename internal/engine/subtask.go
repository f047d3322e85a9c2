package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow/internal/barrier"
	"github.com/onceflow/onceflow/internal/failpoint"
)

var errAttemptCanceled = errors.New("attempt canceled")

type mailKind uint8

const (
	mailTrigger   mailKind = iota // inject barrier (sources)
	mailCommitted                 // checkpoint committed: commit sinks, notify sources
	mailStop                      // end the stream (sources)
	mailAborted                   // checkpoint aborted while the job goes on
	mailWakeup                    // nothing; re-arms the wake-up channel
	mailTimers                    // a processing-time timer may be due
)

type mail struct {
	kind mailKind
	b    barrier.Barrier
}

// subtask is one parallel instance of a task (a chain of operators) running
// in its own goroutine.
type subtask struct {
	att        *attempt
	head       *Node
	index, par int
	mail       *mailbox[mail]
	onCommit   []func(ctx context.Context, id int64)
	onAbort    []func(ctx context.Context, id int64)
	onTimers   []func()
	onClose    []func(failed bool)
	in         atomic.Int64 // records taken in by the head
	// late counts the records a source dated at or before the watermark
	// it had already emitted (wmGen.record).
	late atomic.Int64
	// watermark is the subtask's input watermark (a source: the one it
	// emits), NoWatermark before any; for Stats.
	watermark atomic.Int64
	out       atomic.Int64 // records written by sinks in this chain
	// backpressured is how long, in nanoseconds, the subtask waited for
	// room in an exchange channel.
	backpressured atomic.Int64
	// idle is how long, in nanoseconds, the subtask waited for input (a
	// source: polls that returned no record).
	idle atomic.Int64
	// bpSince and idleSince are when the wait in progress began (unix
	// nanoseconds; 0: none), so Stats counts a long wait before it ends.
	bpSince, idleSince atomic.Int64
	// alignCP is the newest checkpoint whose barriers the subtask aligned,
	// alignNs how long that took: from the first input's barrier to the
	// last's.
	alignCP, alignNs atomic.Int64
	// barrierCP is the newest checkpoint whose barrier reached the
	// subtask's operators (a source: went in; a receiver: aligned on all
	// its inputs), barrierAt when (unix nanoseconds): the checkpoint's
	// barrier delay (docs/design.md, "Checkpoints under backpressure").
	barrierCP, barrierAt atomic.Int64
	started              time.Time
	sampling
	// describe and describeRecord name the record being processed when
	// user code fails (set by the head of the chain).
	describe       func() string
	describeRecord func() any
	// source subtasks only
	// barrierWaiting is set before the coordinator posts a trigger or a
	// stop, and cleared when the mail is taken: a Yielder's Poll stops
	// emitting when it is set.
	barrierWaiting atomic.Bool
	onTrigger      func(b barrier.Barrier)
	onStop         func()
}

// handleMail runs what the coordinator posted.
func (st *subtask) handleMail() {
	select {
	case <-st.mail.Wake():
	default:
	}
	// Cleared before the mail is taken: a trigger posted after this is
	// either taken now (the flag then stops one poll early for nothing)
	// or sets it again.
	st.barrierWaiting.Store(false)
	for _, m := range st.mail.Drain() {
		switch m.kind {
		case mailTrigger:
			if st.onTrigger != nil {
				st.onTrigger(m.b)
			}
		case mailCommitted:
			for _, f := range st.onCommit {
				f(st.att.ctx, m.b.ID)
			}
		case mailAborted:
			for _, f := range st.onAbort {
				f(st.att.ctx, m.b.ID)
			}
		case mailStop:
			if st.onStop != nil {
				st.onStop()
			}
		case mailTimers:
			for _, f := range st.onTimers {
				f()
			}
		}
	}
}

// run executes the subtask and turns panics into a TaskError. The returned
// error is nil when the stream ended or the attempt was canceled.
func (st *subtask) run(body func()) (err error) {
	failed := true
	defer func() {
		for i := len(st.onClose) - 1; i >= 0; i-- {
			st.onClose[i](failed)
		}
	}()
	defer func() {
		r := recover()
		if r == nil {
			failed = false
			return
		}
		if e, ok := r.(error); ok && errors.Is(e, errAttemptCanceled) {
			err = nil
			return
		}
		te := &TaskError{Operator: st.head.uid, Subtask: st.index, Position: st.position()}
		switch v := r.(type) {
		case userError:
			te.Err = v.err
		default:
			te.Panic = v
			te.Stack = debug.Stack()
			te.Err = fmt.Errorf("panic: %v", v)
		}
		err = te
		// Published before the operators close (the deferred call
		// above runs after this one): closing a shared resource, such as
		// a sink's connection, can make another subtask fail, and the
		// attempt must report this failure, the cause, not that one.
		if st.att != nil {
			st.att.failTask(err)
		}
	}()
	body()
	return nil
}

func (st *subtask) position() string {
	var s string
	if st.describe != nil {
		s = st.describe()
	}
	if st.describeRecord != nil {
		if r := st.describeRecord(); r != nil {
			rs := fmt.Sprintf("%+v", r)
			if len(rs) > 200 {
				rs = rs[:200] + "…"
			}
			if s != "" {
				s += ", "
			}
			s += "record " + rs
		}
	}
	return s
}

// runSource is the loop of a source subtask: poll, and between polls inject
// barriers and handle the coordinator's mail.
func runSource[T any](st *subtask, open SourceOpener[T], out input[T]) {
	att := st.att
	n := st.head
	sc := SourceContext{Job: att.cfg.Job, UID: n.uid, Subtask: st.index, Parallelism: st.par, RestoredCheckpoint: att.restoredID(), Checkpointing: att.cfg.Checkpoint, Logger: att.log.With("operator", n.uid, "subtask", st.index)}
	positions, times, ups, err := splitEventTime(att.sourceRestore(n.uid))
	if err != nil {
		fail(fmt.Errorf("%w: source %q: %w", ErrRestoreRefused, n.uid, err))
	}
	reader, err := open(att.ctx, sc, positions)
	if err != nil {
		fail(fmt.Errorf("open source %q subtask %d: %w", n.uid, st.index, err))
	}
	var gen *wmGen[T]
	if spec, ok := n.watermarks.(WatermarkSpec[T]); ok {
		gen = newWMGen(spec, reader, times, ups, time.Now().UnixNano())
	}
	// sendWatermark emits the subtask's watermark, or its idleness, when
	// either changed, and warns about late records.
	sendWatermark := func(now int64) {
		gen.warnLate(now, sc.Logger)
		gen.warnSilent(now, sc.Logger)
		wm, idle := gen.current(now)
		switch {
		case idle && !gen.idle:
			gen.idle = true
			out.control(ctl{kind: ctlWatermark, wm: gen.emitted, idle: true})
		case !idle && (wm > gen.emitted || gen.idle):
			gen.emitted = max(gen.emitted, wm)
			gen.idle = false
			st.watermark.Store(gen.emitted)
			out.control(ctl{kind: ctlWatermark, wm: gen.emitted})
		}
	}
	st.onClose = append(st.onClose, func(bool) {
		if err := reader.Close(); err != nil {
			att.log.Warn("closing source failed", "operator", n.uid, "subtask", st.index, "err", err)
		}
	})
	part := att.partOf(n, st.index)
	var last T
	var have bool
	if p, ok := reader.(Positioner); ok {
		st.describe = p.Position
	}
	if y, ok := reader.(Yielder); ok {
		y.SetYield(st.barrierWaiting.Load)
	}
	st.describeRecord = func() any {
		if have {
			return last
		}
		return nil
	}
	var count int64
	var polled time.Time
	emit := func(x T) {
		if count == 0 {
			// Until a poll's first record the source was waiting: idle.
			st.idle.Add(int64(time.Since(polled)))
		}
		last, have = x, true
		count++
		if gen != nil && gen.record(x) {
			st.late.Add(1)
		}
		out.push(x)
	}
	stopped := false
	st.onTrigger = func(b barrier.Barrier) {
		if stopped {
			// The final checkpoint is committed and the stream ends here;
			// a checkpoint triggered after it covers nothing.
			return
		}
		st.barrierAt.Store(time.Now().UnixNano())
		st.barrierCP.Store(b.ID)
		pos, err := reader.Snapshot(b.ID)
		if err == nil && gen != nil {
			pos = gen.snapshot(pos)
		}
		if err != nil {
			att.ack(ackMsg{cp: b.ID, part: part, err: fmt.Errorf("source %q subtask %d snapshot: %w", n.uid, st.index, err)})
		} else {
			att.ack(ackMsg{cp: b.ID, part: part, uid: n.uid, blobs: pos})
		}
		out.control(ctl{kind: ctlBarrier, b: b})
	}
	st.onCommit = append(st.onCommit, func(ctx context.Context, id int64) {
		if err := reader.CheckpointCommitted(ctx, id); err != nil {
			att.log.Warn("source could not act on a committed checkpoint", "operator", n.uid, "subtask", st.index, "checkpoint", id, "err", err)
		}
	})
	st.onStop = func() { stopped = true }
	finished := false
	for {
		st.handleMail()
		if stopped {
			out.control(ctl{kind: ctlEOS})
			return
		}
		if finished {
			select {
			case <-st.mail.Wake():
				st.mail.Post(mail{kind: mailWakeup}) // the wake-up was taken; let handleMail see there is mail
			case <-att.ctx.Done():
				panic(errAttemptCanceled)
			}
			continue
		}
		count = 0
		polled = time.Now()
		err := reader.Poll(att.ctx, emit)
		st.in.Add(count)
		if count == 0 {
			st.idle.Add(int64(time.Since(polled)))
		}
		have = false
		if att.ctx.Err() != nil {
			// The attempt ended (a failure elsewhere, a stop): a reader
			// that returns without records when its context ends would
			// otherwise be polled forever, since only pushing records
			// notices the cancellation.
			panic(errAttemptCanceled)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				finished = true
				// A bounded input is complete: every event-time timer
				// downstream is due, before the final checkpoint's
				// barrier. Without event time too: processing-time
				// windows fire at the end of their input that way.
				if gen != nil {
					st.watermark.Store(MaxWatermark)
				}
				out.control(ctl{kind: ctlWatermark, wm: MaxWatermark})
				out.control(ctl{kind: ctlFlush})
				att.sourceFinished()
				continue
			}
			fail(fmt.Errorf("source %q subtask %d: %w", n.uid, st.index, err))
		}
		if gen != nil {
			if now := time.Now().UnixNano(); gen.due(now) {
				sendWatermark(now)
			}
		}
		out.control(ctl{kind: ctlFlush})
	}
}

// sinkOp drives a SinkWriter through the two-phase-commit contract.
type sinkOp[T any] struct {
	st      *subtask
	n       *Node
	idx     int // in the subtask's chain (sampling)
	part    int
	w       SinkWriter[T]
	pending []pendingHandle
	count   int64
	// written counts every record written; preparedAt is its value at the
	// last barrier, so an ack carries the epoch's output.
	written, preparedAt int64
}

func newSinkOp[T any](st *subtask, n *Node, open SinkOpener[T]) *sinkOp[T] {
	att := st.att
	sc := SinkContext{Job: att.cfg.Job, UID: n.uid, Subtask: st.index, Parallelism: st.par, RestoredCheckpoint: att.restoredID(), FirstCheckpoint: att.firstID, Checkpointing: att.cfg.Checkpoint, Logger: att.log.With("operator", n.uid, "subtask", st.index)}
	w, err := open(att.ctx, sc)
	if err != nil {
		fail(fmt.Errorf("open sink %q subtask %d: %w", n.uid, st.index, err))
	}
	op := &sinkOp[T]{st: st, n: n, idx: st.opIndex(n), part: att.partOf(n, st.index), w: w}
	st.onCommit = append(st.onCommit, op.committed)
	if an, ok := w.(AbortNotifier); ok {
		st.onAbort = append(st.onAbort, an.CheckpointAborted)
	}
	st.onClose = append(st.onClose, op.close)
	return op
}

func (s *sinkOp[T]) push(x T) {
	prev := s.st.enter(s.idx, actWrite)
	err := s.w.Write(s.st.att.ctx, x)
	s.st.leave(prev)
	if err != nil {
		if !errors.Is(err, ErrRejected) {
			fail(fmt.Errorf("sink %q write: %w", s.n.uid, err))
		}
		s.rejected(x, err)
		return
	}
	s.count++
	s.written++
	if s.count&255 == 0 {
		s.st.out.Add(256)
	}
}

// rejected applies the sink's policy to a record its writer rejected.
func (s *sinkOp[T]) rejected(x T, err error) {
	st := s.st
	switch s.n.onRejected {
	case SkipOnError:
		st.att.job.skipped.Add(1)
		st.att.log.Warn("skipped a record the sink rejected (error policy skip)", "operator", s.n.uid, "subtask", st.index, "position", st.position(), "err", err)
	case DeadLetterOnError:
		dw, ok := s.w.(DeadLetterWriter[T])
		if !ok { // refused when the job was built
			fail(fmt.Errorf("sink %q: %w (the sink keeps no dead letters)", s.n.uid, err))
		}
		if derr := dw.WriteDeadLetter(st.att.ctx, x, err); derr != nil {
			fail(fmt.Errorf("sink %q: write the dead letter of a rejected record: %w (the record: %v)", s.n.uid, derr, err))
		}
		st.att.job.deadLettered.Add(1)
	default:
		fail(fmt.Errorf("sink %q: %w (error policy fail; set skip or dead-letter to let the job go past such records)", s.n.uid, err))
	}
}

func (s *sinkOp[T]) control(c ctl) {
	switch c.kind {
	case ctlWatermark:
		if ww, ok := s.w.(WatermarkWriter); ok {
			ww.Watermark(c.wm, c.idle)
		}
	case ctlFlush:
		s.st.out.Add(s.count & 255)
		s.count &^= 255
	case ctlBarrier:
		prev := s.st.enter(s.idx, actPrepare)
		h, err := s.w.Prepare(s.st.att.ctx, c.b.ID)
		s.st.leave(prev)
		if err != nil {
			s.st.att.ack(ackMsg{cp: c.b.ID, part: s.part, err: fmt.Errorf("sink %q subtask %d prepare: %w", s.n.uid, s.st.index, err)})
			return
		}
		s.pending = append(s.pending, pendingHandle{id: c.b.ID, handle: h})
		if err := failpoint.Inject(failpoint.AfterSinkPrepare); err != nil {
			s.st.att.ack(ackMsg{cp: c.b.ID, part: s.part, err: err})
			return
		}
		out := s.written - s.preparedAt
		s.preparedAt = s.written
		s.st.att.ack(ackMsg{cp: c.b.ID, part: s.part, uid: s.n.uid, out: out, blobs: map[string][]byte{pendingBlobKey(s.st.index): encodePending(s.pending)}})
	}
}

// committed commits every prepared epoch up to id, in order.
func (s *sinkOp[T]) committed(ctx context.Context, id int64) {
	i := 0
	for ; i < len(s.pending) && s.pending[i].id <= id; i++ {
		p := s.pending[i]
		prev := s.st.enter(s.idx, actCommit)
		err := s.w.Commit(ctx, p.id, p.handle)
		s.st.leave(prev)
		if err != nil {
			// The checkpoint is committed; failing over makes recovery
			// commit the handle again from the checkpoint.
			fail(fmt.Errorf("sink %q subtask %d: commit of checkpoint %d failed after its commit point (recovery will retry it): %w", s.n.uid, s.st.index, p.id, err))
		}
	}
	s.pending = s.pending[i:]
}

func (s *sinkOp[T]) close(failed bool) {
	s.st.out.Add(s.count & 255)
	// Prepared epochs are left as they are: one of them may belong to a
	// checkpoint that is reaching its commit point right now. Recovery
	// commits those in the restored checkpoint and Open aborts the rest.
	if err := s.w.Close(); err != nil {
		s.st.att.log.Warn("closing sink failed", "operator", s.n.uid, "subtask", s.st.index, "err", err)
	}
}

// waitSelect is reflect.Select over a receive loop's cases, counting the
// time it waits as the subtask's idle time (docs/design.md, "Metrics and
// the REST API").
func (st *subtask) waitSelect(cases []reflect.SelectCase) (chosen int, v reflect.Value, ok bool) {
	waited := time.Now()
	st.idleSince.Store(waited.UnixNano())
	chosen, v, ok = reflect.Select(cases)
	st.idleSince.Store(0)
	st.idle.Add(int64(time.Since(waited)))
	return chosen, v, ok
}
