package checkpoint

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var randomSeed = flag.Uint64("checkpoint.seed", 0, "seed for TestRandomInputs; 0 picks one from the clock")

// TestRandomInputs feeds random input sequences under random configurations
// and checks the protocol invariants after every step. The seed is printed;
// rerun a failure with -checkpoint.seed=N.
func TestRandomInputs(t *testing.T) {
	seed := *randomSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -checkpoint.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	runs, steps := 300, 400
	if testing.Short() {
		runs = 50
	}
	for run := range runs {
		m := newModel(t, rng, fmt.Sprintf("seed %d run %d", seed, run))
		for step := range steps {
			m.randomStep(step)
		}
		m.drain()
	}
}

// model plays the engine's run loop with random timing and random
// participant behaviour, and keeps its own account of every checkpoint to
// check the Coordinator against.
type model struct {
	t    *testing.T
	rng  *rand.Rand
	name string
	cfg  Config
	c    *Coordinator
	now  time.Time
	log  []string // inputs and actions, printed on failure

	participants  int
	lastTriggered int64
	lastCommitID  int64            // highest id in a Commit action
	inFlight      int64            // id of the Commit awaiting CommitDone, 0 if none
	pending       map[int64]bool   // triggered, not settled
	settled       map[int64]string // "committed" or "aborted"
	savepoints    map[int64]bool   // ids returned by TriggerSavepoint
	lastCommitted int64
	failJobs      int
	// doomed are the checkpoints pending when a commit failed: their epochs
	// build on the lost output, so the same input must abort all of them.
	doomed []int64
}

func newModel(t *testing.T, rng *rand.Rand, name string) *model {
	interval := []time.Duration{0, time.Second, 2 * time.Second}[rng.IntN(3)]
	timeout := []time.Duration{2 * time.Second, 5 * time.Second}[rng.IntN(2)]
	cfg := Config{
		Interval:          interval,
		Timeout:           timeout,
		MinPause:          []time.Duration{0, 500 * time.Millisecond, 3 * time.Second}[rng.IntN(3)],
		MaxConcurrent:     1 + rng.IntN(3),
		TolerableFailures: []int{-1, 0, 2, 5}[rng.IntN(4)],
	}
	last := int64(rng.IntN(3)) * 10
	m := &model{
		t: t, rng: rng, name: name, cfg: cfg.WithDefaults(), now: t0,
		participants:  1 + rng.IntN(3),
		lastTriggered: last,
		lastCommitID:  last,
		lastCommitted: last,
		pending:       map[int64]bool{},
		settled:       map[int64]string{},
		savepoints:    map[int64]bool{},
	}
	m.c = NewCoordinator(cfg, last, m.participants, t0)
	m.logf("config %+v, participants %d, last committed %d", m.cfg, m.participants, last)
	return m
}

func (m *model) logf(format string, args ...any) {
	m.log = append(m.log, fmt.Sprintf(format, args...))
}

func (m *model) fatalf(format string, args ...any) {
	m.t.Helper()
	tail := m.log
	if len(tail) > 40 {
		tail = tail[len(tail)-40:]
	}
	m.t.Fatalf("%s: %s\nlast inputs and actions:\n%s", m.name, fmt.Sprintf(format, args...), joinLines(tail))
}

func joinLines(lines []string) string {
	var s string
	for _, l := range lines {
		s += "  " + l + "\n"
	}
	return s
}

// someID picks an id to send a message about: usually a pending one, but
// also settled, never triggered and far-future ones, because late and
// stray messages must be harmless.
func (m *model) someID() int64 {
	if len(m.pending) > 0 && m.rng.IntN(4) > 0 {
		ids := make([]int64, 0, len(m.pending))
		for id := range m.pending {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		return ids[m.rng.IntN(len(ids))]
	}
	return m.lastTriggered - 3 + int64(m.rng.IntN(6))
}

func (m *model) randomStep(step int) {
	switch r := m.rng.IntN(100); {
	case r < 30:
		m.now = m.now.Add(time.Duration(m.rng.IntN(1500)) * time.Millisecond)
		m.logf("tick %v", m.now.Sub(t0))
		m.c.Tick(m.now)
	case r < 65:
		id, p := m.someID(), m.rng.IntN(m.participants)
		m.logf("ack %d %d", id, p)
		m.c.Ack(id, p)
	case r < 70:
		id, p := m.someID(), m.rng.IntN(m.participants)
		m.logf("decline %d %d", id, p)
		m.c.Decline(id, p, errors.New("random decline"))
	case r < 85:
		if m.inFlight == 0 || m.c.JobFailed() {
			return
		}
		m.commitDone(m.rng.IntN(5) > 0)
	case r < 90:
		id := m.c.TriggerSavepoint(m.now)
		m.logf("savepoint -> %d", id)
		if m.c.JobFailed() {
			if id != 0 {
				m.fatalf("TriggerSavepoint after FailJob returned %d", id)
			}
		} else {
			if id <= m.lastTriggered || m.savepoints[id] {
				m.fatalf("TriggerSavepoint returned %d, not a fresh id (last triggered %d)", id, m.lastTriggered)
			}
			m.savepoints[id] = true
		}
	default:
		// Nothing happens; the outbox is still drained and checked.
	}
	m.check()
}

func (m *model) commitDone(ok bool) {
	id := m.inFlight
	m.inFlight = 0
	var err error
	if !ok {
		err = errors.New("random commit failure")
	}
	m.logf("commit done %d err=%v", id, err)
	m.c.CommitDone(id, err, m.now)
	if ok {
		delete(m.pending, id)
		m.settled[id] = "committed"
		m.lastCommitted = id
	}
	// On failure the Abort for id must follow (check expects it because id
	// is still pending), and so must the Abort of every later checkpoint.
	if !ok {
		m.doomed = m.doomed[:0]
		for pid := range m.pending {
			m.doomed = append(m.doomed, pid)
		}
	}
}

// check drains the outbox and verifies every action and the coordinator's
// visible state against the model.
func (m *model) check() {
	m.t.Helper()
	failedBefore := m.failJobs > 0
	for _, a := range m.c.Ready() {
		m.logf("  -> %s", short(a))
		if failedBefore || m.failJobs > 0 {
			m.fatalf("action %v after FailJob", a)
		}
		switch a.Kind {
		case Trigger:
			if a.ID <= m.lastTriggered {
				m.fatalf("Trigger %d after Trigger %d: ids must increase", a.ID, m.lastTriggered)
			}
			if a.Savepoint != m.savepoints[a.ID] {
				m.fatalf("Trigger %d has Savepoint=%v, but TriggerSavepoint returned it: %v", a.ID, a.Savepoint, m.savepoints[a.ID])
			}
			m.lastTriggered = a.ID
			m.pending[a.ID] = true
		case Commit:
			if !m.pending[a.ID] {
				m.fatalf("Commit %d of a checkpoint that is not pending (settled: %q)", a.ID, m.settled[a.ID])
			}
			if a.ID <= m.lastCommitID {
				m.fatalf("Commit %d after Commit %d: commits must be in increasing id order", a.ID, m.lastCommitID)
			}
			if m.inFlight != 0 {
				m.fatalf("Commit %d while the commit of %d is in flight", a.ID, m.inFlight)
			}
			for id := range m.pending {
				if id < a.ID {
					m.fatalf("Commit %d while the earlier checkpoint %d is still pending", a.ID, id)
				}
			}
			m.lastCommitID = a.ID
			m.inFlight = a.ID
		case Abort:
			if !m.pending[a.ID] {
				m.fatalf("Abort %d of a checkpoint that is not pending (settled: %q)", a.ID, m.settled[a.ID])
			}
			if a.ID == m.inFlight {
				m.fatalf("Abort %d while its commit is in flight", a.ID)
			}
			var ae *AbortError
			if !errors.As(a.Err, &ae) || ae.ID != a.ID {
				m.fatalf("Abort %d with error %v, want an *AbortError for it", a.ID, a.Err)
			}
			delete(m.pending, a.ID)
			m.settled[a.ID] = "aborted"
		case FailJob:
			if m.cfg.TolerableFailures < 0 {
				m.fatalf("FailJob although failures are unlimited")
			}
			if !errors.Is(a.Err, ErrTooManyFailures) {
				m.fatalf("FailJob error %v does not wrap ErrTooManyFailures", a.Err)
			}
			m.failJobs++
		default:
			m.fatalf("unknown action %v", a)
		}
	}
	for _, id := range m.doomed {
		if m.settled[id] != "aborted" {
			m.fatalf("checkpoint %d was pending when an earlier commit failed, but was not aborted", id)
		}
	}
	m.doomed = m.doomed[:0]
	if m.failJobs > 0 {
		if !m.c.JobFailed() {
			m.fatalf("FailJob emitted but JobFailed() is false")
		}
		return // the coordinator's state is frozen and no longer meaningful
	}

	got := m.c.Pending()
	want := make([]int64, 0, len(m.pending))
	for id := range m.pending {
		want = append(want, id)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		m.fatalf("Pending() = %v, but triggered and not settled are %v", got, want)
	}
	if len(got) > m.cfg.MaxConcurrent {
		m.fatalf("%d checkpoints pending, more than MaxConcurrent %d", len(got), m.cfg.MaxConcurrent)
	}
	if m.c.LastCommitted() != m.lastCommitted {
		m.fatalf("LastCommitted() = %d, want %d", m.c.LastCommitted(), m.lastCommitted)
	}
	st := m.c.Stats()
	if tol := m.cfg.TolerableFailures; tol >= 0 && st.ConsecutiveFailures > tol {
		m.fatalf("%d consecutive failures, more than the %d tolerated, without FailJob", st.ConsecutiveFailures, tol)
	}
	var committed, aborted int64
	for _, s := range m.settled {
		if s == "committed" {
			committed++
		} else {
			aborted++
		}
	}
	if st.Completed != committed || st.Failed != aborted || st.Triggered != committed+aborted+int64(len(m.pending)) {
		m.fatalf("Stats %+v, want completed %d, failed %d, triggered %d", st, committed, aborted, committed+aborted+int64(len(m.pending)))
	}
}

// drain behaves like a healthy job from here on: every participant acks
// everything and commits succeed. Every pending checkpoint and every queued
// savepoint must then settle; otherwise the coordinator is stuck.
func (m *model) drain() {
	m.t.Helper()
	m.logf("drain")
	for range 1000 {
		if m.c.JobFailed() {
			return
		}
		for _, id := range m.c.Pending() {
			for p := range m.participants {
				m.c.Ack(id, p)
			}
		}
		m.check()
		if m.inFlight != 0 {
			m.commitDone(true)
			m.check()
		}
		if len(m.pending) == 0 && m.inFlight == 0 {
			waiting := false
			for id := range m.savepoints {
				if _, done := m.settled[id]; !done {
					waiting = true
				}
			}
			if !waiting {
				return
			}
		}
		m.now = m.now.Add(500 * time.Millisecond)
		m.c.Tick(m.now)
		m.check()
	}
	m.fatalf("stuck: pending %v, commit in flight %d, savepoints %v", m.c.Pending(), m.inFlight, m.savepoints)
}
