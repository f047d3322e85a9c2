package engine

import (
	"reflect"
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
	key       func(T) string
	receivers int
}

func newExchange[T any](att *attempt, senders, receivers int, key func(T) string) *exchange[T] {
	ex := &exchange[T]{att: att, key: key, receivers: receivers}
	ex.chans = make([][]chan exMsg[T], receivers)
	for r := range ex.chans {
		ex.chans[r] = make([]chan exMsg[T], senders)
		for s := range ex.chans[r] {
			ex.chans[r][s] = make(chan exMsg[T], att.cfg.ChannelCapacity)
		}
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
	rr     int
	batch  int
	maxPar int
}

func (ex *exchange[T]) writer(st *subtask) any {
	w := &exWriter[T]{ex: ex, st: st, sender: st.index, bufs: make([]exMsg[T], ex.receivers), batch: ex.att.cfg.BatchSize, maxPar: ex.att.cfg.MaxParallelism}
	for r := range w.bufs {
		w.bufs[r] = w.newBuf()
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
		if len(b.recs)+1 >= w.batch {
			w.rr = (w.rr + 1) % w.ex.receivers
		}
	}
	b.recs = append(b.recs, x)
	if len(b.recs) >= w.batch {
		w.send(r)
	}
}

func (w *exWriter[T]) send(r int) {
	m := w.bufs[r]
	w.bufs[r] = w.newBuf()
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
			st.alignCP.Store(b.ID)
			st.alignNs.Store(int64(time.Since(cs.alignStart)))
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
