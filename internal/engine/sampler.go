package engine

import (
	"sync/atomic"
	"time"
)

// Where a subtask's time goes inside its chain (docs/design.md, "Metrics
// and the REST API"). The chain does not read the clock per record: each
// operator's entry stores, in one atomic word of its subtask, which
// operator runs and what it does; a sampler goroutine per attempt reads
// that word every sampleEvery, counts the samples per operator, and warns
// about a call that has not returned for Config.SlowOperatorWarning.

// activity is what an operator does when its subtask is sampled.
type activity uint8

const (
	// actNone: the subtask is in its own loop (a source's poll, an
	// exchange receiver reading its channels), counted for the task's
	// first operator and never warned about: an empty input is not stuck.
	actNone activity = iota
	actProcess
	actControl // a barrier, a watermark and the timers it fires
	actWrite
	actPrepare
	actCommit
)

var activityNames = [...]string{"poll", "process", "control", "write", "prepare", "commit"}

func (a activity) String() string { return activityNames[a] }

const (
	sampleEvery = 10 * time.Millisecond
	// sampleWindow is how many samples TaskStats.Operators' shares cover
	// (5 s, as the REST API's busy and idle ms/s).
	sampleWindow = 500
)

// sampling is a subtask's part of it. cur is written by the subtask's
// goroutine only; the sampler owns the ring and the fields after it.
type sampling struct {
	// ops are the task's operators in chain order (the head first).
	ops []*Node
	// cur is seq<<16 | activity<<8 | operator index: seq changes at every
	// entry and return, so the sampler sees that the chain moved even when
	// it is back in the same operator.
	cur atomic.Uint64
	pos uint16 // the subtask goroutine's copy of cur's low bits
	seq uint64
	// samples counts the samples per slot this attempt: one per operator,
	// then idle, then backpressured; recent counts the last sampleWindow.
	samples, recent []atomic.Int64
	ring            []uint16
	ringN, ringAt   int
	last            uint64
	changedAt       time.Time
	nextWarn        time.Time
}

func (st *subtask) initSampling(ops []*Node) {
	st.ops = ops
	st.samples = make([]atomic.Int64, len(ops)+2)
	st.recent = make([]atomic.Int64, len(ops)+2)
	st.ring = make([]uint16, sampleWindow)
}

// opIndex is n's position in the subtask's chain (build time only).
func (st *subtask) opIndex(n *Node) int {
	for i, o := range st.ops {
		if o == n {
			return i
		}
	}
	return 0
}

// enter records that the chain is now in operator idx doing a; it
// returns what to restore with leave. One atomic store: no clock read.
func (st *subtask) enter(idx int, a activity) uint16 {
	prev := st.pos
	st.pos = uint16(a)<<8 | uint16(idx&0xff)
	st.seq++
	st.cur.Store(st.seq<<16 | uint64(st.pos))
	return prev
}

func (st *subtask) leave(prev uint16) {
	st.pos = prev
	st.seq++
	st.cur.Store(st.seq<<16 | uint64(prev))
}

// marked wraps a chained operator so that handing it a record or a
// control message marks it as the subtask's current operator.
type marked[T any] struct {
	st  *subtask
	idx int
	in  input[T]
}

func (m *marked[T]) push(x T) {
	prev := m.st.enter(m.idx, actProcess)
	m.in.push(x)
	m.st.leave(prev)
}

func (m *marked[T]) control(c ctl) {
	prev := m.st.enter(m.idx, actControl)
	m.in.control(c)
	m.st.leave(prev)
}

type markedKeyed[T any] struct {
	marked[T]
	keyed keyedInput[T]
}

func (m *markedKeyed[T]) pushKeyed(key string, kg int, x T) {
	prev := m.st.enter(m.idx, actProcess)
	m.keyed.pushKeyed(key, kg, x)
	m.st.leave(prev)
}

// mark wraps op, built for node n of subtask st.
func mark[T any](st *subtask, n *Node, op input[T]) any {
	m := marked[T]{st: st, idx: st.opIndex(n), in: op}
	if k, ok := op.(keyedInput[T]); ok {
		return &markedKeyed[T]{marked: m, keyed: k}
	}
	return &m
}

// sample runs until done, every sampleEvery.
func (att *attempt) sample(done <-chan struct{}) {
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			for _, st := range att.subtasks {
				att.sampleOne(st, now)
			}
		}
	}
}

func (att *attempt) sampleOne(st *subtask, now time.Time) {
	v := st.cur.Load()
	idx, act := int(v&0xff), activity(v>>8&0xff)
	if idx >= len(st.ops) {
		idx = 0
	}
	slot, waiting := idx, true
	switch {
	case st.bpSince.Load() != 0:
		slot = len(st.ops) + 1
	case st.idleSince.Load() != 0:
		slot = len(st.ops)
	default:
		waiting = false
	}
	st.samples[slot].Add(1)
	if st.ringN == sampleWindow {
		st.recent[st.ring[st.ringAt]].Add(-1)
	} else {
		st.ringN++
	}
	st.ring[st.ringAt] = uint16(slot)
	st.recent[slot].Add(1)
	st.ringAt = (st.ringAt + 1) % sampleWindow

	if v != st.last || st.changedAt.IsZero() {
		st.last, st.changedAt, st.nextWarn = v, now, now.Add(att.cfg.SlowOperatorWarning)
		return
	}
	if act == actNone || waiting || att.cfg.SlowOperatorWarning <= 0 || now.Before(st.nextWarn) {
		return
	}
	st.nextWarn = now.Add(3 * att.cfg.SlowOperatorWarning)
	op := st.ops[idx]
	check := "the operator's function is slow or blocked (a call to an external system, a lock, a long loop): a goroutine dump (SIGQUIT) shows where"
	if op.kind == kindSink {
		check = "the sink's system is blocked or slow: a database may hold a lock on the table (PostgreSQL: pg_locks and pg_stat_activity; MySQL: SHOW PROCESSLIST), or be unreachable"
	}
	att.log.Warn("one call into an operator has been running for a long time; "+check+"; GET /jobs/JOB shows each operator's share of its task's time",
		"task", st.head.uid, "operator", op.uid, "subtask", st.index, "doing", act.String(), "running_for", now.Sub(st.changedAt).Round(time.Millisecond))
}
