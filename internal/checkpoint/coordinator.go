// Package checkpoint decides when checkpoints start, when they are complete
// and when they fail.
//
// The Coordinator is a step-function state machine in the style of
// etcd-io/raft: it does no I/O, reads no clock and starts no goroutines.
// Inputs are method calls (time passing, acknowledgements, commit results);
// outputs are Actions that pile up until the caller drains them with Ready.
// The engine's run loop owns the timers and channels, performs each Action
// and feeds the results back. Because nothing inside is concurrent or
// time-dependent, every protocol path can be tested step by step with plain
// time.Time values.
//
// A checkpoint goes through these phases:
//
//	queued (savepoints only) → acking → acked → committing → committed
//	acking  → aborted   timeout or decline
//	acked   → aborted   decline (it is waiting for an earlier commit)
//	committing → aborted   CommitDone with an error; every later pending
//	                       checkpoint is aborted with it
//
// Commits happen one at a time in id order: checkpoint n+1 is not committed
// before checkpoint n is committed or aborted, because the commit point of
// n+1 (a Kafka transaction or a manifest) records progress that includes
// epoch n.
//
// The Coordinator is not safe for concurrent use; the run loop owns it.
// Inputs that describe a transition the protocol cannot produce (a
// CommitDone for a checkpoint that is not committing, an Ack from a
// participant that does not exist) panic with a message naming the
// transition: they are bugs in the caller, not events to recover from.
package checkpoint

import (
	"fmt"
	"time"
)

// phase of a triggered checkpoint.
type phase int

const (
	// acking: waiting for every participant's Ack; Timeout applies.
	acking phase = iota
	// acked: all participants acknowledged; waiting for every earlier
	// checkpoint to settle before its commit is emitted.
	acked
	// committing: Commit was emitted and CommitDone has not arrived yet. The
	// outcome is unknown, so nothing may abort it.
	committing
)

type pendingCheckpoint struct {
	id          int64
	savepoint   bool
	triggeredAt time.Time
	acked       []bool // indexed by participant
	numAcked    int
	phase       phase
}

// Stats are counters for metrics, the CLI and the UI.
type Stats struct {
	// Triggered counts Trigger actions.
	Triggered int64
	// Completed counts committed checkpoints and savepoints.
	Completed int64
	// Failed counts aborted checkpoints and savepoints, for any reason,
	// including those aborted because an earlier one failed to commit.
	Failed int64
	// ConsecutiveFailures is what is compared with Config.TolerableFailures:
	// failures since the last committed periodic checkpoint (see
	// Coordinator for what counts).
	ConsecutiveFailures int
	// LastCompletedDuration is the time from trigger to CommitDone of the
	// most recently committed checkpoint.
	LastCompletedDuration time.Duration
	// LastFailure is the error of the most recent Abort, nil if none.
	LastFailure error
}

// Coordinator runs the checkpoint protocol for one job instance. Create it
// with NewCoordinator.
//
// What counts towards Config.TolerableFailures: a periodic checkpoint that
// expires or is declined, and any failed commit (periodic or savepoint),
// counted once even when it takes later checkpoints down with it. A savepoint
// that expires or is declined is reported to whoever asked for it but does
// not count: a user's request should not restart a healthy job. Only a
// committed periodic checkpoint resets the count, for the same reason in
// reverse: an occasional savepoint must not hide a job whose periodic
// checkpoints keep failing.
type Coordinator struct {
	cfg          Config
	participants int

	// now is the latest time passed to any input. Ack and Decline carry no
	// time and use it; the run loop ticks often enough for that to be close.
	now time.Time

	nextID        int64
	lastCommitted int64

	lastTrigger time.Time
	// lastFinish is when the last checkpoint was committed or aborted;
	// finished is false until one has been, so that MinPause does not delay
	// the first checkpoint.
	lastFinish time.Time
	finished   bool

	// pending holds triggered checkpoints in ascending id order. Only
	// pending[0] can be committing.
	pending []*pendingCheckpoint
	// queued holds savepoint ids waiting for a free slot. Their ids are all
	// lower than any id not yet handed out, and periodic checkpoints wait
	// while the queue is not empty, so triggers stay in id order.
	queued []int64

	outbox []Action
	failed bool
	stats  Stats
}

// NewCoordinator returns a Coordinator for a job whose last committed
// checkpoint is lastCommitted (0 if none); new checkpoint ids continue from
// lastCommitted+1. participants is how many Acks complete a checkpoint;
// participants are numbered 0..participants-1. now is the current time: the
// first periodic checkpoint is due one Interval later.
//
// cfg is completed with WithDefaults. NewCoordinator panics if cfg does not
// validate, participants < 1 or lastCommitted < 0: the caller validates
// user input before it gets here.
func NewCoordinator(cfg Config, lastCommitted int64, participants int, now time.Time) *Coordinator {
	if err := cfg.Validate(); err != nil {
		panic(fmt.Sprintf("checkpoint: NewCoordinator with a config that does not validate (call Config.Validate first): %v", err))
	}
	if participants < 1 {
		panic(fmt.Sprintf("checkpoint: NewCoordinator with %d participants; a checkpoint needs at least one", participants))
	}
	if lastCommitted < 0 {
		panic(fmt.Sprintf("checkpoint: NewCoordinator with last committed checkpoint %d; ids start at 1 and 0 means none", lastCommitted))
	}
	return &Coordinator{
		cfg:           cfg.WithDefaults(),
		participants:  participants,
		now:           now,
		nextID:        lastCommitted + 1,
		lastCommitted: lastCommitted,
		lastTrigger:   now,
	}
}

// Config returns the configuration in effect, defaults applied.
func (c *Coordinator) Config() Config { return c.cfg }

// Tick tells the Coordinator that time has passed. It aborts checkpoints that
// have waited for acknowledgements for Timeout or longer, then triggers at
// most what free slots allow: first queued savepoints (regardless of Interval
// and MinPause), then one periodic checkpoint if Interval has elapsed since
// the previous trigger and MinPause since the previous checkpoint finished.
// A Tick after a long gap triggers one periodic checkpoint, not one per
// missed interval.
//
// Time that goes backwards is treated as no time passing.
func (c *Coordinator) Tick(now time.Time) {
	if c.failed {
		return
	}
	c.observe(now)
	c.expire()
	if c.failed {
		return
	}
	c.triggerDue()
}

// TriggerSavepoint queues a savepoint and returns its id; the Trigger action
// for that id follows on the first Tick that finds fewer than MaxConcurrent
// checkpoints pending. The id is handed out now so the caller can report the
// outcome (the Commit or Abort with that id, both with Savepoint set) to
// whoever asked. Savepoints work even when Interval is 0.
//
// After FailJob it returns 0 and queues nothing.
func (c *Coordinator) TriggerSavepoint(now time.Time) int64 {
	if c.failed {
		return 0
	}
	c.observe(now)
	id := c.nextID
	c.nextID++
	c.queued = append(c.queued, id)
	return id
}

// Ack records that participant finished its part of checkpoint id (its
// snapshot is written, its sink is prepared). The last Ack makes the
// checkpoint ready to commit; its Commit is emitted as soon as every earlier
// checkpoint is committed or aborted.
//
// Acks for ids that are unknown, aborted, already fully acknowledged or
// committed are ignored, as are duplicates: late messages are normal after
// an abort. An Ack from a participant outside 0..participants-1 panics.
func (c *Coordinator) Ack(id int64, participant int) {
	c.checkParticipant("Ack", id, participant)
	if c.failed {
		return
	}
	p := c.find(id)
	if p == nil || p.phase != acking || p.acked[participant] {
		return
	}
	p.acked[participant] = true
	p.numAcked++
	if p.numAcked == c.participants {
		p.phase = acked
		c.advance()
	}
}

// Decline records that participant could not do its part of checkpoint id;
// the checkpoint is aborted with an *AbortError wrapping ErrDeclined and err.
// Other pending checkpoints are not affected. Declines for ids that are
// unknown, already settled or committing are ignored (a committing
// checkpoint's fate is decided by its CommitDone). A participant outside
// 0..participants-1 panics.
func (c *Coordinator) Decline(id int64, participant int, err error) {
	c.checkParticipant("Decline", id, participant)
	if c.failed {
		return
	}
	p := c.find(id)
	if p == nil || p.phase == committing {
		return
	}
	c.abort(p, &AbortError{ID: id, Savepoint: p.savepoint, Reason: ErrDeclined, Participant: participant, Err: err}, !p.savepoint)
}

// CommitDone reports the outcome of the commit point of checkpoint id, which
// must be the checkpoint of the last Commit action still in flight; anything
// else panics.
//
// On success id becomes LastCommitted and the next checkpoint, if already
// fully acknowledged, gets its Commit. On failure id is aborted with
// ErrCommitFailed, and so is every other pending checkpoint: their epochs
// build on id's output, which is now lost. The runtime must then replay from
// LastCommitted (restore state, rewind sources) before the next checkpoint
// can mean anything.
func (c *Coordinator) CommitDone(id int64, err error, now time.Time) {
	if c.failed {
		return
	}
	if len(c.pending) == 0 || c.pending[0].phase != committing {
		panic(fmt.Sprintf("checkpoint: CommitDone(%d) while no commit is in flight", id))
	}
	p := c.pending[0]
	if p.id != id {
		panic(fmt.Sprintf("checkpoint: CommitDone(%d) while the commit in flight is checkpoint %d", id, p.id))
	}
	c.observe(now)
	if err != nil {
		c.commitFailed(p, err)
		return
	}
	c.pending = c.pending[1:]
	c.lastCommitted = id
	c.lastFinish, c.finished = c.now, true
	c.stats.Completed++
	c.stats.LastCompletedDuration = c.now.Sub(p.triggeredAt)
	if !p.savepoint {
		c.stats.ConsecutiveFailures = 0
	}
	c.advance()
}

// Ready returns the actions produced since the last call, oldest first, and
// empties the outbox. The caller owns the returned slice.
func (c *Coordinator) Ready() []Action {
	out := c.outbox
	c.outbox = nil
	return out
}

// LastCommitted returns the id of the last committed checkpoint, 0 if none.
// After FailJob it is no longer updated; recovery reads the durable truth.
func (c *Coordinator) LastCommitted() int64 { return c.lastCommitted }

// Pending returns the ids of triggered checkpoints that are neither committed
// nor aborted, ascending. Queued savepoints are not included.
func (c *Coordinator) Pending() []int64 {
	ids := make([]int64, len(c.pending))
	for i, p := range c.pending {
		ids[i] = p.id
	}
	return ids
}

// Stats returns a snapshot of the counters.
func (c *Coordinator) Stats() Stats { return c.stats }

// JobFailed reports whether FailJob has been emitted. From then on every
// input is ignored.
func (c *Coordinator) JobFailed() bool { return c.failed }

// NextDeadline returns the earliest time at which a Tick could produce an
// action, so that the run loop can arm one timer instead of polling; ok is
// false when only other inputs can produce actions. A Tick at any other time
// is harmless.
func (c *Coordinator) NextDeadline() (t time.Time, ok bool) {
	if c.failed {
		return time.Time{}, false
	}
	consider := func(d time.Time) {
		if !ok || d.Before(t) {
			t, ok = d, true
		}
	}
	for _, p := range c.pending {
		if p.phase == acking {
			consider(p.triggeredAt.Add(c.cfg.Timeout))
		}
	}
	if len(c.pending) < c.cfg.MaxConcurrent {
		if len(c.queued) > 0 {
			consider(c.now)
		} else if d, enabled := c.nextPeriodic(); enabled {
			consider(d)
		}
	}
	return t, ok
}

// observe advances the coordinator's clock; it never goes back.
func (c *Coordinator) observe(now time.Time) {
	if now.After(c.now) {
		c.now = now
	}
}

func (c *Coordinator) checkParticipant(input string, id int64, participant int) {
	if participant < 0 || participant >= c.participants {
		panic(fmt.Sprintf("checkpoint: %s(%d) from participant %d, but participants are 0..%d", input, id, participant, c.participants-1))
	}
}

func (c *Coordinator) find(id int64) *pendingCheckpoint {
	for _, p := range c.pending {
		if p.id == id {
			return p
		}
	}
	return nil
}

// nextPeriodic returns when the next periodic checkpoint is due, ignoring
// free slots; enabled is false when periodic checkpoints are off.
func (c *Coordinator) nextPeriodic() (due time.Time, enabled bool) {
	if c.cfg.Interval <= 0 {
		return time.Time{}, false
	}
	due = c.lastTrigger.Add(c.cfg.Interval)
	if c.finished {
		if pause := c.lastFinish.Add(c.cfg.MinPause); pause.After(due) {
			due = pause
		}
	}
	return due, true
}

func (c *Coordinator) triggerDue() {
	for len(c.pending) < c.cfg.MaxConcurrent && len(c.queued) > 0 {
		id := c.queued[0]
		c.queued = c.queued[1:]
		c.trigger(id, true)
	}
	if len(c.pending) >= c.cfg.MaxConcurrent || len(c.queued) > 0 {
		return
	}
	if due, enabled := c.nextPeriodic(); enabled && !c.now.Before(due) {
		id := c.nextID
		c.nextID++
		c.trigger(id, false)
	}
}

func (c *Coordinator) trigger(id int64, savepoint bool) {
	if n := len(c.pending); n > 0 && c.pending[n-1].id >= id {
		panic(fmt.Sprintf("checkpoint: trigger of checkpoint %d after checkpoint %d; ids must increase", id, c.pending[n-1].id))
	}
	c.pending = append(c.pending, &pendingCheckpoint{
		id:          id,
		savepoint:   savepoint,
		triggeredAt: c.now,
		acked:       make([]bool, c.participants),
	})
	c.lastTrigger = c.now
	c.stats.Triggered++
	c.outbox = append(c.outbox, Action{Kind: Trigger, ID: id, Savepoint: savepoint})
}

// expire aborts every checkpoint still waiting for acknowledgements after
// Timeout. It stops early if that fails the job.
func (c *Coordinator) expire() {
	for i := 0; i < len(c.pending) && !c.failed; {
		p := c.pending[i]
		if p.phase != acking || c.now.Before(p.triggeredAt.Add(c.cfg.Timeout)) {
			i++
			continue
		}
		// abort removes pending[i]; the next one slides into place.
		c.abort(p, &AbortError{ID: p.id, Savepoint: p.savepoint, Reason: ErrExpired, Participant: -1, Timeout: c.cfg.Timeout}, !p.savepoint)
	}
}

// advance emits the Commit of the oldest pending checkpoint once it is fully
// acknowledged. Only the oldest may commit, which keeps commits in id order
// and at most one in flight.
func (c *Coordinator) advance() {
	if len(c.pending) == 0 || c.pending[0].phase != acked {
		return
	}
	p := c.pending[0]
	p.phase = committing
	c.outbox = append(c.outbox, Action{Kind: Commit, ID: p.id, Savepoint: p.savepoint})
}

// abort removes p (which must not be committing), emits its Abort and, if
// counts, charges a failure; then lets the next checkpoint commit.
func (c *Coordinator) abort(p *pendingCheckpoint, err *AbortError, counts bool) {
	if p.phase == committing {
		panic(fmt.Sprintf("checkpoint: abort of checkpoint %d while its commit is in flight", p.id))
	}
	c.remove(p)
	c.aborted(p, err)
	if counts {
		c.countFailure(p, err)
	}
	if !c.failed {
		c.advance()
	}
}

// commitFailed aborts p and every other pending checkpoint, charging one
// failure.
func (c *Coordinator) commitFailed(p *pendingCheckpoint, cause error) {
	victims := c.pending
	c.pending = nil
	first := &AbortError{ID: p.id, Savepoint: p.savepoint, Reason: ErrCommitFailed, Participant: -1, Err: cause}
	for _, v := range victims {
		if v == p {
			c.aborted(v, first)
			continue
		}
		c.aborted(v, &AbortError{ID: v.id, Savepoint: v.savepoint, Reason: ErrCommitFailed, Participant: -1, Cause: p.id, Err: cause})
	}
	c.countFailure(p, first)
}

func (c *Coordinator) remove(p *pendingCheckpoint) {
	for i, q := range c.pending {
		if q == p {
			c.pending = append(c.pending[:i:i], c.pending[i+1:]...)
			return
		}
	}
	panic(fmt.Sprintf("checkpoint: removing checkpoint %d, which is not pending", p.id))
}

// aborted records the end of an already removed checkpoint and emits its
// Abort.
func (c *Coordinator) aborted(p *pendingCheckpoint, err *AbortError) {
	c.lastFinish, c.finished = c.now, true
	c.stats.Failed++
	c.stats.LastFailure = err
	c.outbox = append(c.outbox, Action{Kind: Abort, ID: p.id, Savepoint: p.savepoint, Err: err})
}

func (c *Coordinator) countFailure(p *pendingCheckpoint, err error) {
	c.stats.ConsecutiveFailures++
	tolerable := c.cfg.TolerableFailures
	if tolerable < 0 || c.stats.ConsecutiveFailures <= tolerable {
		return
	}
	c.failed = true
	c.outbox = append(c.outbox, Action{Kind: FailJob, ID: p.id, Savepoint: p.savepoint, Err: tooManyFailures(c.stats.ConsecutiveFailures, tolerable, err)})
}

func tooManyFailures(n, tolerable int, last error) error {
	var what string
	if n == 1 {
		what = "1 checkpoint failed and no failed checkpoints are tolerated"
	} else {
		what = fmt.Sprintf("%d checkpoints failed in a row, more than the %d tolerated", n, tolerable)
	}
	return fmt.Errorf("%w: %s; last failure: %w; fix the cause, or raise the tolerable failed checkpoints setting (-1 tolerates any number)", ErrTooManyFailures, what, last)
}
