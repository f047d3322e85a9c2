package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/onceflow/onceflow/internal/barrier"
	"github.com/onceflow/onceflow/internal/checkpoint"
	"github.com/onceflow/onceflow/internal/checkpoint/storage"
	"github.com/onceflow/onceflow/internal/failpoint"
)

// loop is the coordinator's run loop: it owns the Coordinator, timers, acks
// and requests, and performs the commit point. It returns nil when the job
// ended (input exhausted, stop requested) and the reason otherwise.
func (att *attempt) loop(ctx context.Context, coord *checkpoint.Coordinator, allDone <-chan struct{}) error {
	j := att.job
	cfg := att.cfg
	pending := map[int64]*pendingCP{}
	defer func() {
		// Whoever asked for a savepoint that did not complete must hear so.
		for _, p := range pending {
			att.replySavepoint(p, "", errors.New("the attempt ended (failure or stop) before the savepoint completed; trigger it again"))
		}
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	sourcesLeft := len(att.sources)
	stopping := false // a final checkpoint is in flight
	ended := false    // the final checkpoint committed; the sources are ending
	ctxDone := ctx.Done()
	stopCh := j.stop
	var stopDeadline <-chan struct{}
	// carry is the output of aborted checkpoints' epochs: the next commit
	// commits it.
	var carry int64

	endSources := func() {
		for _, st := range att.sources {
			st.barrierWaiting.Store(true)
			st.mail.Post(mail{kind: mailStop})
		}
	}
	beginStop := func(final *request) {
		if stopping {
			return
		}
		stopping = true
		id := coord.TriggerSavepoint(cfg.Clock())
		p := &pendingCP{id: id, final: true, req: final}
		if final != nil {
			p.savepoint = true
		}
		pending[id] = p
		stopDeadline = j.hardStop.Done()
		att.log.Info("stopping: taking a final checkpoint", "checkpoint", id)
	}
	defer j.inFlight.Store(0)
	for {
		j.inFlight.Store(int64(len(pending)))
		now := cfg.Clock()
		coord.Tick(now)
		for _, a := range coord.Ready() {
			switch a.Kind {
			case checkpoint.Trigger:
				p := pending[a.ID]
				if p == nil {
					p = &pendingCP{id: a.ID}
					pending[a.ID] = p
				}
				p.started = now
				p.ops = map[string]*storage.OperatorState{}
				cfg.Hooks.started(CheckpointStarted{Job: cfg.Job, ID: a.ID, Savepoint: a.Savepoint, Time: now})
				for _, st := range att.sources {
					// Only a savepoint the user asked for needs keyed state in
					// the portable format; a plain stop's final checkpoint
					// is incremental like any other.
					st.barrierWaiting.Store(true)
					st.mail.Post(mail{kind: mailTrigger, b: barrier.Barrier{ID: a.ID, Savepoint: p.savepoint}})
				}
			case checkpoint.Commit:
				p := pending[a.ID]
				delete(pending, a.ID)
				if ended {
					continue // after the final checkpoint nothing else commits
				}
				cctx, cancel := att.commitContext(p)
				err := att.commit(cctx, p, carry)
				cancel()
				coord.CommitDone(a.ID, err, cfg.Clock())
				if err != nil {
					// The commit point failed: the epoch's output is gone
					// (or unknown). Replay from the last committed checkpoint.
					j.cpFailed.Add(1)
					cfg.Hooks.failed(CheckpointFailed{Job: cfg.Job, ID: a.ID, Savepoint: p.savepoint, Err: err, Time: time.Now()})
					att.replySavepoint(p, "", err)
					return &commitError{id: a.ID, err: err}
				}
				carry = 0
				for _, st := range att.subtasks {
					st.mail.Post(mail{kind: mailCommitted, b: barrier.Barrier{ID: a.ID}})
				}
				if p.final {
					ended = true
					endSources()
				}
			case checkpoint.Abort:
				p := pending[a.ID]
				delete(pending, a.ID)
				j.cpFailed.Add(1)
				if p != nil {
					carry += p.out
				}
				att.log.Warn("checkpoint aborted", "checkpoint", a.ID, "reason", a.Err)
				cfg.Hooks.failed(CheckpointFailed{Job: cfg.Job, ID: a.ID, Savepoint: a.Savepoint, Err: a.Err, Time: time.Now()})
				if cfg.CommitPoint != nil {
					if an, ok := cfg.CommitPoint.Unwrap().(AbortNotifier); ok {
						an.CheckpointAborted(att.ctx, a.ID)
					}
				}
				for _, st := range att.subtasks {
					st.mail.Post(mail{kind: mailAborted, b: barrier.Barrier{ID: a.ID}})
				}
				if p != nil {
					att.replySavepoint(p, "", a.Err)
					if p.final {
						return fmt.Errorf("final checkpoint %d failed: %w", a.ID, a.Err)
					}
				}
			case checkpoint.FailJob:
				return a.Err
			}
		}
		d, ok := coord.NextDeadline()
		if half, found := att.warnSlow(pending, cfg.Clock()); found && (!ok || half.Before(d)) {
			d, ok = half, true
		}
		if ok {
			wait := d.Sub(cfg.Clock())
			if wait < time.Millisecond {
				wait = time.Millisecond
			}
			timer.Reset(wait)
		} else {
			timer.Reset(time.Hour)
		}
		// Accept savepoint requests only when none is in flight.
		reqs := j.reqs
		if stopping {
			reqs = nil
		}
		select {
		case <-timer.C:
		case a := <-att.acks:
			p := pending[a.cp]
			if a.err != nil {
				coord.Decline(a.cp, a.part, a.err)
				continue
			}
			if p != nil {
				p.out += a.out
				if p.acked == nil {
					p.acked = map[int]bool{}
				}
				p.acked[a.part] = true
			} else {
				// A late ack of an aborted checkpoint: its epoch's output
				// commits with the next checkpoint.
				carry += a.out
			}
			if p != nil && p.ops != nil && a.uid != "" {
				op := p.ops[a.uid]
				if op == nil {
					op = &storage.OperatorState{}
					p.ops[a.uid] = op
				}
				if a.keyed != nil {
					op.Keyed = append(op.Keyed, *a.keyed)
				}
				if a.db != nil {
					op.DB = append(op.DB, *a.db)
				}
				for k, v := range a.blobs {
					if op.Blobs == nil {
						op.Blobs = map[string][]byte{}
					}
					op.Blobs[k] = v
				}
			}
			coord.Ack(a.cp, a.part)
		case err := <-att.failures:
			return err
		case <-att.finished:
			sourcesLeft--
			if sourcesLeft == 0 {
				beginStop(nil)
			}
		case r := <-reqs:
			if r.stop {
				beginStop(&r)
				continue
			}
			id := coord.TriggerSavepoint(cfg.Clock())
			pending[id] = &pendingCP{id: id, savepoint: true, req: &r}
		case <-ctxDone:
			ctxDone = nil
			beginStop(nil)
		case <-stopCh:
			stopCh = nil
			beginStop(nil)
		case <-stopDeadline:
			return fmt.Errorf("the final checkpoint did not complete within the stop timeout %v; stopped without it (the next start resumes from the last committed checkpoint)", att.cfg.StopTimeout)
		case <-allDone:
			if stopping {
				return nil
			}
			// A task that failed ended the others: its error, ready at
			// the same time, is the reason (select picks at random).
			select {
			case err := <-att.failures:
				return err
			default:
			}
			return errors.New("every task ended without a final checkpoint")
		case <-att.ctx.Done():
			return errAttemptCanceled
		}
	}
}

// warnSlow logs, once per checkpoint, a checkpoint that has run for half
// its timeout: a sink stalled on a lock or an operator stuck on a call
// shows in the log while it happens, not only when the checkpoint is
// aborted (docs/design.md, "Metrics and the REST API"). next is when the
// next checkpoint still unwarned reaches half its timeout.
func (att *attempt) warnSlow(pending map[int64]*pendingCP, now time.Time) (next time.Time, found bool) {
	half := att.cfg.Checkpoint.Timeout / 2
	if half <= 0 {
		return time.Time{}, false
	}
	for _, p := range pending {
		if p.warned || p.started.IsZero() {
			continue
		}
		at := p.started.Add(half)
		if now.Before(at) {
			if !found || at.Before(next) {
				next, found = at, true
			}
			continue
		}
		p.warned = true
		att.log.Warn("checkpoint running past half its timeout: the operators in waiting_for have not taken it (blocked or slow: a locked table, an unreachable system); GET /jobs/JOB shows the tasks' busy and backpressured time and each operator's share of it, and the checkpoint is aborted at the timeout",
			"checkpoint", p.id, "running_for", now.Sub(p.started).Round(time.Millisecond), "timeout", att.cfg.Checkpoint.Timeout,
			"waiting_for", att.unacked(p, 8))
	}
	return next, found
}

// unacked names, up to max, the operator subtasks that have not
// acknowledged p ("sink subtask 0, ..."), in graph order.
func (att *attempt) unacked(p *pendingCP, max int) string {
	var names []string
	more := 0
	for _, n := range att.job.g.nodes {
		for i := 0; i < att.par[n]; i++ {
			if p.acked[att.partOf(n, i)] {
				continue
			}
			if len(names) == max {
				more++
				continue
			}
			names = append(names, fmt.Sprintf("%s subtask %d", n.uid, i))
		}
	}
	s := strings.Join(names, ", ")
	if more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}

// commitContext bounds the commit point of p: the checkpoint's timeout
// counts from its trigger to its commit (at least a second is left for the
// commit itself), and a graceful stop that ran out of time cancels it.
// Every call the commit point makes to an external system inherits the
// deadline, so a broker that stops answering fails the checkpoint instead
// of blocking the job, its stop and its restarts.
func (att *attempt) commitContext(p *pendingCP) (context.Context, context.CancelFunc) {
	deadline := p.started.Add(att.cfg.Checkpoint.Timeout)
	if now := time.Now(); deadline.Before(now.Add(time.Second)) {
		deadline = now.Add(time.Second)
	}
	ctx, cancel := context.WithDeadline(att.ctx, deadline)
	stop := context.AfterFunc(att.job.hardStop, cancel)
	return ctx, func() { stop(); cancel() }
}

// commit performs the commit point of checkpoint p; carry is the output of
// aborted checkpoints' epochs that it commits too.
func (att *attempt) commit(ctx context.Context, p *pendingCP, carry int64) error {
	j := att.job
	cfg := att.cfg
	counters := j.counters()
	counters.CheckpointsCompleted++
	counters.RecordsCommitted += carry + p.out
	m := &storage.Manifest{
		Version:        storage.ManifestVersion,
		Job:            cfg.Job,
		CheckpointID:   p.id,
		CreatedAt:      cfg.Clock(),
		MaxParallelism: cfg.MaxParallelism,
		Operators:      p.ops,
		Incarnation:    att.incarnation,
		StateID:        j.stateID,
		Final:          p.final,
		Counters:       counters,
		Origin:         att.origin,
	}
	for uid, op := range m.Operators {
		if n := j.g.uids[uid]; n != nil {
			op.Parallelism = att.par[n]
			op.Layout = n.layout
		}
	}
	var commitDur time.Duration
	switch {
	case att.store == nil && cfg.CommitPoint != nil:
		return errors.New("the commit point needs a state directory for the checkpoint manifest: set flow.StateDir")
	case att.store == nil:
		// No state directory: nothing can be recovered, but sinks still
		// commit (bounded jobs without checkpointing).
	case cfg.CommitPoint != nil:
		m.CommitPoint = cfg.CommitPoint.Name()
		sum, err := att.store.WritePending(m)
		if err != nil {
			return err
		}
		rec := CommitRecord{Job: cfg.Job, Checkpoint: p.id, Manifest: sum, Incarnation: att.incarnation, StateID: j.stateID, Time: time.Now()}
		if err := cfg.CommitPoint.Commit(ctx, rec); err != nil {
			return err
		}
		commitDur = time.Since(rec.Time)
		// The checkpoint is committed. Confirming it in the store is a
		// follow-up step that recovery repeats (LoadCommitted), so a
		// failure here fails over without undoing the checkpoint.
		if err := att.store.Confirm(p.id, sum); err != nil {
			att.failTask(fmt.Errorf("checkpoint %d committed but confirming its manifest failed (recovery confirms it): %w", p.id, err))
		}
	default:
		start := time.Now()
		if err := att.store.Commit(m); err != nil {
			return err
		}
		commitDur = time.Since(start)
	}
	j.committed.Add(carry + p.out)
	if err := failpoint.Inject(failpoint.AfterCommitPoint); err != nil {
		// Past the commit point nothing may undo the checkpoint: an
		// injected error here fails the job over, and recovery redoes the
		// post-commit steps.
		j.committedThisRun.Store(true)
		att.failTask(fmt.Errorf("after the commit point of checkpoint %d: %w", p.id, err))
		return nil
	}
	dur := cfg.Clock().Sub(p.started)
	j.cpDone.Add(1)
	j.lastCP.Store(p.id)
	j.lastDur.Store(int64(dur))
	j.committedThisRun.Store(true)
	att.log.Debug("checkpoint committed", "checkpoint", p.id, "duration", dur)
	size, written := stateBytes(m)
	align := att.alignment(p.id)
	delay := att.barrierDelay(p.id, p.started)
	j.lastSize.Store(size)
	j.lastWritten.Store(written)
	j.lastAlign.Store(int64(align))
	j.lastDelay.Store(int64(delay))
	j.lastCommit.Store(int64(commitDur))
	j.lastAt.Store(time.Now().UnixNano())
	cfg.Hooks.completed(CheckpointCompleted{Job: cfg.Job, ID: p.id, Savepoint: p.savepoint, Duration: dur, StateBytes: size, WrittenBytes: written, Records: carry + p.out,
		Alignment: align, BarrierDelay: delay, CommitDuration: commitDur, Time: time.Now()})
	if p.savepoint && p.req != nil {
		if att.store == nil {
			att.replySavepoint(p, "", errors.New("savepoints need a state directory: set flow.StateDir"))
		} else if sp, err := att.store.CopyTo(m, p.req.dir); err != nil {
			att.replySavepoint(p, "", fmt.Errorf("checkpoint %d committed but copying it into savepoint %s failed: %w", p.id, p.req.dir, err))
		} else {
			att.log.Info("savepoint written", "checkpoint", p.id, "dir", sp.Dir)
			att.replySavepoint(p, sp.Dir, nil)
		}
	}
	if att.store != nil {
		if _, err := att.store.GC(cfg.Checkpoint.NumRetained); err != nil {
			att.log.Warn("removing old checkpoints failed; they are retried after the next checkpoint", "err", err)
		}
	}
	return nil
}

// alignment is the longest barrier alignment of checkpoint id among the
// subtasks (those that have aligned a later one since do not count).
func (att *attempt) alignment(id int64) time.Duration {
	var d time.Duration
	for _, st := range att.subtasks {
		if st.alignCP.Load() == id {
			d = max(d, time.Duration(st.alignNs.Load()))
		}
	}
	return d
}

// barrierDelay is the longest time checkpoint id's barrier took from its
// trigger to reach the operators of a subtask (those that have taken a
// later one since do not count).
func (att *attempt) barrierDelay(id int64, started time.Time) time.Duration {
	var d time.Duration
	for _, st := range att.subtasks {
		if st.barrierCP.Load() == id {
			d = max(d, time.Duration(st.barrierAt.Load()-started.UnixNano()))
		}
	}
	return d
}

func (att *attempt) replySavepoint(p *pendingCP, path string, err error) {
	if p == nil || p.req == nil {
		return
	}
	select {
	case p.req.reply <- savepointResult{path: path, err: err}:
	default:
	}
	p.req = nil
}

// stateBytes returns the size of every state file checkpoint m needs, and
// of those it wrote itself (with incremental snapshots, the files it
// shares with earlier checkpoints are not written again).
func stateBytes(m *storage.Manifest) (size, written int64) {
	for _, op := range m.Operators {
		for _, f := range op.Keyed {
			size += f.Size
			written += f.Size
		}
		for _, db := range op.DB {
			for _, f := range db.Files {
				size += f.Size
				if !f.Shared || strings.HasPrefix(f.Path, storage.SharedName(m.CheckpointID, "")) {
					written += f.Size
				}
			}
		}
	}
	return size, written
}
