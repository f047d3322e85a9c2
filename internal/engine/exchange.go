package engine

import (
	"reflect"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow/internal/barrier"
	"github.com/onceflow/onceflow/internal/failpoint"
	"github.com/onceflow/onceflow/state"
)

// exchangeImpl is an edge between two tasks that are not chained: every
// sender subtask has a bounded channel to every receiver subtask, so a slow
// receiver blocks its senders (backpressure) and alignment can block one
// sender's channel without blocking the others.
type exchangeImpl interface {
	// writer returns the typed input (input[T]) that sender subtask i pushes into.
	writer(st *subtask) any
	// receive runs receiver subtask st, pushing into in (input[T] or
	// keyedInput[T]) until every sender ended; it returns when they all did.
	receive(st *subtask, in any)
	// port returns receiver subtask st's channels as one input of a
	// multi-input node, delivering into in.
	port(st *subtask, in any) inPort
}

// exchangeFunc creates the typed channels of an exchange edge between
// senders and receivers subtasks.
type exchangeFunc func(att *attempt, senders, receivers int) exchangeImpl

type exMsg[T any] struct {
	sender int
	recs   []T
	keys   []string
	kgs    []int32
	isCtl  bool
	c      ctl
}

type exchange[T any] struct {
	att       *attempt
	chans     [][]chan exMsg[T] // [receiver][sender]
	free      []chan exMsg[T]   // per sender: batches handed back by receivers
	rx        []*inflight       // per receiver: the records in flight to it
	key       func(T) string
	receivers int
}

// inflight bounds the records queued towards one receiver subtask of an
// exchange by time, not by count (docs/design.md, "Checkpoints under
// backpressure"): the receiver measures the records it takes per second
// of its busy time (not of the wall clock: a receiver that waits for
// input because its queues are short must not shrink them further), and
// each of its channels may hold what it takes in the in-flight target
// divided among its channels (at least minInflight records, at most the
// channel's capacity in batches). A barrier behind them then waits about
// the target at each exchange, whatever the job's throughput.
type inflight struct {
	// queued is per sender the records sent and not yet taken; space
	// is poked after every take, for a sender waiting for room.
	queued []atomic.Int64
	space  []chan struct{}
	// limit is the records a channel may hold; the receiver sets it.
	limit atomic.Int64
	// The receiver's window of measurement.
	target, max      int64 // target in ns; max records per channel
	winStart         time.Time
	winRecs, senders int64
	// idle is the receiver's idle time (subtask.idle, set when it
	// starts receiving), winIdle its value when the window began.
	idle    *atomic.Int64
	winIdle int64
}

// minInflight is the fewest records a channel may hold: below it the cost
// of a message per few records would slow the job down more than the
// barrier gains.
const minInflight = 64

// inflightWindow is how often a receiver measures its throughput.
const inflightWindow = 100 * time.Millisecond

func newInflight(senders int, target time.Duration, max int64) *inflight {
	f := &inflight{queued: make([]atomic.Int64, senders), space: make([]chan struct{}, senders), target: int64(target), max: max, senders: int64(senders), idle: new(atomic.Int64)}
	for s := range f.space {
		f.space[s] = make(chan struct{}, 1)
	}
	// Until the receiver has measured its rate, the floor: a backlog read
	// after a restore must not fill the channels with more than the first
	// checkpoint can wait for, before anyone knows how slow the receiver
	// is (Pebble's caches are cold then).
	f.limit.Store(min(max, minInflight))
	if target <= 0 {
		f.limit.Store(max)
	}
	return f
}

// taken is called by the receiver for every batch of n records it took
// from sender s.
func (f *inflight) taken(s, n int, now time.Time) {
	f.queued[s].Add(-int64(n))
	select {
	case f.space[s] <- struct{}{}:
	default:
	}
	if f.target <= 0 {
		return
	}
	if f.winStart.IsZero() {
		f.winStart, f.winIdle = now, f.idle.Load()
	}
	f.winRecs += int64(n)
	if el := now.Sub(f.winStart); el >= inflightWindow {
		// Records per channel taken in the target time at the rate of
		// the window's busy time.
		idle := f.idle.Load()
		busy := max(int64(el)-(idle-f.winIdle), int64(time.Millisecond))
		lim := f.winRecs * f.target / busy / f.senders
		f.limit.Store(min(f.max, max(minInflight, lim)))
		f.winStart, f.winIdle, f.winRecs = now, idle, 0
	}
}

// reserve waits until sender s may send n more records (a channel holding
// nothing always may) and counts them in flight. It returns the limit,
// for the sender's next batch size.
func (f *inflight) reserve(st *subtask, s, n int) int {
	q := &f.queued[s]
	for {
		cur, lim := q.Load(), f.limit.Load()
		if cur == 0 || cur+int64(n) <= lim {
			q.Add(int64(n))
			return int(lim)
		}
		start := time.Now()
		st.bpSince.Store(start.UnixNano())
		select {
		case <-f.space[s]:
			st.bpSince.Store(0)
			st.backpressured.Add(int64(time.Since(start)))
		case <-st.att.ctx.Done():
			panic(errAttemptCanceled)
		}
	}
}

func newExchange[T any](att *attempt, senders, receivers int, key func(T) string) *exchange[T] {
	ex := &exchange[T]{att: att, key: key, receivers: receivers}
	ex.chans = make([][]chan exMsg[T], receivers)
	ex.rx = make([]*inflight, receivers)
	for r := range ex.chans {
		ex.chans[r] = make([]chan exMsg[T], senders)
		for s := range ex.chans[r] {
			ex.chans[r][s] = make(chan exMsg[T], att.cfg.ChannelCapacity)
		}
		ex.rx[r] = newInflight(senders, att.cfg.InflightTarget, int64(att.cfg.ChannelCapacity)*int64(att.cfg.BatchSize))
	}
	ex.free = make([]chan exMsg[T], senders)
	for s := range ex.free {
		ex.free[s] = make(chan exMsg[T], receivers*(att.cfg.ChannelCapacity+1))
	}
	return ex
}

type exWriter[T any] struct {
	ex     *exchange[T]
	st     *subtask
	sender int
	bufs   []exMsg[T]
	// flushAt is per receiver the batch size: the configured one, or
	// fewer records when the receiver's in-flight limit is lower.
	flushAt []int
	rr      int
	batch   int
	maxPar  int
}

func (ex *exchange[T]) writer(st *subtask) any {
	w := &exWriter[T]{ex: ex, st: st, sender: st.index, bufs: make([]exMsg[T], ex.receivers), flushAt: make([]int, ex.receivers), batch: ex.att.cfg.BatchSize, maxPar: ex.att.cfg.MaxParallelism}
	for r := range w.bufs {
		w.bufs[r] = w.newBuf()
		w.flushAt[r] = w.batch
	}
	return input[T](w)
}

func (w *exWriter[T]) newBuf() exMsg[T] {
	select {
	case m := <-w.ex.free[w.sender]:
		return m
	default:
	}
	m := exMsg[T]{sender: w.sender, recs: make([]T, 0, w.batch)}
	if w.ex.key != nil {
		m.keys = make([]string, 0, w.batch)
		m.kgs = make([]int32, 0, w.batch)
	}
	return m
}

func (w *exWriter[T]) push(x T) {
	var r int
	var b *exMsg[T]
	if w.ex.key != nil {
		k := w.ex.key(x)
		kg := state.KeyGroup(k, w.maxPar)
		r = state.SubtaskForKeyGroup(kg, w.ex.receivers, w.maxPar)
		b = &w.bufs[r]
		b.keys = append(b.keys, k)
		b.kgs = append(b.kgs, int32(kg))
	} else {
		r = w.rr
		b = &w.bufs[r]
		if len(b.recs)+1 >= w.flushAt[r] {
			w.rr = (w.rr + 1) % w.ex.receivers
		}
	}
	b.recs = append(b.recs, x)
	if len(b.recs) >= w.flushAt[r] {
		w.send(r)
	}
}

func (w *exWriter[T]) send(r int) {
	m := w.bufs[r]
	w.bufs[r] = w.newBuf()
	lim := w.ex.rx[r].reserve(w.st, w.sender, len(m.recs))
	// A quarter of the limit, so batches queue behind the one the
	// receiver processes and it never waits for the sender to fill one.
	w.flushAt[r] = max(1, min(w.batch, lim/4))
	sendMsg(w.st, w.ex.chans[r][w.sender], m)
}

// sendMsg sends m, blocking while the receiver is behind (backpressure)
// unless the attempt is canceled.
func sendMsg[T any](st *subtask, ch chan exMsg[T], m exMsg[T]) {
	select {
	case ch <- m:
	default:
		start := time.Now()
		st.bpSince.Store(start.UnixNano())
		select {
		case ch <- m:
			st.bpSince.Store(0)
			st.backpressured.Add(int64(time.Since(start)))
		case <-st.att.ctx.Done():
			panic(errAttemptCanceled)
		}
	}
}

func (w *exWriter[T]) control(c ctl) {
	for r := range w.bufs {
		if len(w.bufs[r].recs) > 0 {
			w.send(r)
		}
	}
	if c.kind == ctlFlush {
		return
	}
	for r := range w.bufs {
		sendMsg(w.st, w.ex.chans[r][w.sender], exMsg[T]{sender: w.sender, isCtl: true, c: c})
	}
}

// recycle hands a consumed batch back to its sender.
func (ex *exchange[T]) recycle(m exMsg[T]) {
	clear(m.recs) // drop references for the GC
	m.recs = m.recs[:0]
	m.keys = m.keys[:0]
	m.kgs = m.kgs[:0]
	select {
	case ex.free[m.sender] <- m:
	default:
	}
}

func (ex *exchange[T]) receive(st *subtask, in any) {
	chans := ex.chans[st.index]
	rx := ex.rx[st.index]
	rx.idle = &st.idle
	var keyed keyedInput[T]
	if ex.key != nil {
		keyed = in.(keyedInput[T])
	}
	plain := in.(input[T])
	cs := newCtlIn(st, len(chans), plain)
	al := cs.al
	var cur exMsg[T]
	var idx int
	st.describeRecord = func() any {
		if idx < len(cur.recs) {
			return cur.recs[idx]
		}
		return nil
	}
	handle := func(m exMsg[T]) (done bool) {
		if m.isCtl {
			return cs.on(m.sender, m.c)
		}
		cur = m
		st.in.Add(int64(len(m.recs)))
		if keyed != nil {
			for idx = range m.recs {
				keyed.pushKeyed(m.keys[idx], int(m.kgs[idx]), m.recs[idx])
			}
		} else {
			for idx = range m.recs {
				plain.push(m.recs[idx])
			}
		}
		idx = len(m.recs)
		cur = exMsg[T]{}
		rx.taken(m.sender, len(m.recs), time.Now())
		ex.recycle(m)
		return false
	}

	// Select over the mailbox, cancellation and every unblocked channel.
	cases := make([]reflect.SelectCase, 2+len(chans))
	cases[0] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(st.att.ctx.Done())}
	cases[1] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(st.mail.Wake())}
	for {
		// Fast path: take whatever is ready without blocking.
		progressed := false
		for s, ch := range chans {
			if al.Blocked(s) {
				continue
			}
			select {
			case m := <-ch:
				progressed = true
				if handle(m) {
					return
				}
			default:
			}
		}
		st.handleMail()
		if progressed {
			continue
		}
		plain.control(ctl{kind: ctlFlush})
		for s, ch := range chans {
			if al.Blocked(s) {
				cases[2+s].Chan = reflect.Value{}
			} else {
				cases[2+s].Chan = reflect.ValueOf(ch)
			}
			cases[2+s].Dir = reflect.SelectRecv
		}
		chosen, v, ok := st.waitSelect(cases)
		switch {
		case chosen == 0:
			panic(errAttemptCanceled)
		case chosen == 1:
			st.handleMail()
		case ok:
			if handle(v.Interface().(exMsg[T])) {
				return
			}
		}
	}
}

// controller is where a receiver hands in-band control: the typed input
// of the task's head operator.
type controller interface{ control(ctl) }

// ctlIn handles the control messages of a receiver's channels, numbered
// globally over all its inputs (docs/design.md, "Multi-input nodes"): one
// aligner and one watermark combiner over every channel.
type ctlIn struct {
	st         *subtask
	al         *barrier.Aligner
	wms        *wmCombiner
	out        controller
	alignStart time.Time
}

func newCtlIn(st *subtask, channels int, out controller) *ctlIn {
	return &ctlIn{st: st, al: barrier.NewAligner(channels, st.att.exactlyOnce()), wms: newWMCombiner(channels), out: out}
}

// on takes control message c of channel ch; it reports whether every
// channel has ended (the end of stream went downstream).
func (cs *ctlIn) on(ch int, c ctl) (done bool) {
	st, al, wms, out := cs.st, cs.al, cs.wms, cs.out
	switch c.kind {
	case ctlBarrier:
		if !al.Aligning() {
			cs.alignStart = time.Now()
		}
		for _, b := range al.OnBarrier(ch, c.b) {
			now := time.Now()
			st.alignCP.Store(b.ID)
			st.alignNs.Store(int64(now.Sub(cs.alignStart)))
			st.barrierAt.Store(now.UnixNano())
			st.barrierCP.Store(b.ID)
			if err := failpoint.Inject(failpoint.AfterAlignment); err != nil {
				fail(err)
			}
			// The coordinator posts a checkpoint's commit (or abort)
			// before it triggers the next one, so that mail is here
			// already: the operators hear of it before this barrier.
			// A two-phase sink that still held the last checkpoint's
			// locks would otherwise decline this one (docs/design.md,
			// "Database sinks").
			st.handleMail()
			out.control(ctl{kind: ctlBarrier, b: b})
		}
	case ctlWatermark:
		if w, ok := wms.onWatermark(ch, c); ok {
			if !w.idle {
				st.watermark.Store(w.wm)
			}
			out.control(w)
		}
	case ctlEOS:
		bs, all := al.OnEOS(ch)
		for _, b := range bs {
			out.control(ctl{kind: ctlBarrier, b: b})
		}
		if w, ok := wms.onEnd(ch); ok && !all {
			out.control(w)
		}
		if all {
			// Mail posted before the end of stream (the commit of
			// the final checkpoint) must not be lost.
			st.handleMail()
			out.control(ctl{kind: ctlEOS})
			return true
		}
	}
	return false
}
