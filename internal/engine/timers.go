package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/onceflow/onceflow/state"
)

// Timers of keyed operators (docs/design.md, "Event time and timers"). The
// timers themselves are keyed state (state.Timers), so checkpoints carry
// them with their key groups; the order in which they fall due is kept in
// two heaps per subtask (event time, processing time), rebuilt from the
// state after a restore. A timer deleted after it was pushed stays in its
// heap and is skipped when it comes up (the state no longer has it).

// KeyedFuncs are a keyed operator's functions: OnRecord is called with each
// record, the current key set to the record's; OnTimer with each due timer
// of a key, the current key set to it. OnTimer nil: the operator registers
// no timers.
type KeyedFuncs[T any] struct {
	OnRecord func(T) error
	OnTimer  func(tm state.Timer) error
}

// KeyedTimedSetup builds a keyed operator with timers for one subtask, like
// KeyedSetup.
type KeyedTimedSetup[T, U any] func(s *state.Store, ctx KeyedContext, out Input[U]) (KeyedFuncs[T], error)

// AddKeyedTimed adds a keyed operator whose functions may register
// event-time and processing-time timers (KeyedContext).
func AddKeyedTimed[T, U any](in *Node, uid string, key func(T) string, setup KeyedTimedSetup[T, U], opts ...NodeOption) *Node {
	return addKeyed(in, uid, key, setup, opts)
}

// errNoTimers is what registering a timer outside a timed operator fails
// with.
var errNoTimers = errors.New("timers are only available in keyed operators built with timers (flow.ProcessWithTimers): this operator has no OnTimer function")

type timerEntry struct {
	at  int64
	key string
	kg  int32
}

// timerHeap is a min-heap of timers by time, then key.
type timerHeap []timerEntry

func (h timerHeap) less(i, j int) bool {
	return h[i].at < h[j].at || h[i].at == h[j].at && h[i].key < h[j].key
}

func (h *timerHeap) push(e timerEntry) {
	*h = append(*h, e)
	q := *h
	for i := len(q) - 1; i > 0; {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (h *timerHeap) pop() timerEntry {
	q := *h
	top := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q[n] = timerEntry{}
	q = q[:n]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && q.less(l, m) {
			m = l
		}
		if r < n && q.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return top
}

// keyedTime is the event time and timers of one keyed operator subtask.
type keyedTime struct {
	wm      int64 // the operator's watermark
	timers  *state.Timers
	onTimer func(tm state.Timer) error
	ev, pt  timerHeap
	// wake posts mailTimers when the earliest processing-time timer is
	// due; wakeAt is the time it is set for (0: not set).
	wake   *time.Timer
	wakeAt int64
	// firing is the timer being handled (Domain 0: none).
	firing state.Timer
}

func (k *keyedOp[T, U]) Watermark() int64 { return k.time.wm }

func (k *keyedOp[T, U]) Timer() state.Timer { return k.time.firing }

func (k *keyedOp[T, U]) ProcessingTime() int64 { return k.st.att.cfg.Clock().UnixMilli() }

func (k *keyedOp[T, U]) register(tm state.Timer) {
	t := &k.time
	if t.timers == nil {
		fail(fmt.Errorf("operator %q: %w", k.n.uid, errNoTimers))
	}
	if !t.timers.Add(tm) {
		return
	}
	e := timerEntry{at: tm.At, key: k.store.CurrentKey(), kg: int32(k.kg)}
	if tm.Domain == state.EventTime {
		t.ev.push(e)
		return
	}
	t.pt.push(e)
	k.schedule()
}

func (k *keyedOp[T, U]) unregister(tm state.Timer) {
	if k.time.timers == nil {
		fail(fmt.Errorf("operator %q: %w", k.n.uid, errNoTimers))
	}
	k.time.timers.Remove(tm) // its heap entry is skipped when it comes up
}

func (k *keyedOp[T, U]) RegisterEventTimeTimer(at int64) {
	k.register(state.Timer{Domain: state.EventTime, At: at})
}

func (k *keyedOp[T, U]) DeleteEventTimeTimer(at int64) {
	k.unregister(state.Timer{Domain: state.EventTime, At: at})
}

func (k *keyedOp[T, U]) RegisterProcessingTimeTimer(at int64) {
	k.register(state.Timer{Domain: state.ProcessingTime, At: at})
}

func (k *keyedOp[T, U]) DeleteProcessingTimeTimer(at int64) {
	k.unregister(state.Timer{Domain: state.ProcessingTime, At: at})
}

// restoreTime sets the restored watermark and rebuilds the heaps from the
// restored timers.
func (k *keyedOp[T, U]) restoreTime() error {
	first, last := k.store.KeyGroups()
	if r := k.st.att.restored; r != nil && r.Operators[k.n.uid] != nil {
		wm, err := restoredWatermark(r.Operators[k.n.uid].Blobs, first, last)
		if err != nil {
			return fmt.Errorf("%w: operator %q: %w", ErrRestoreRefused, k.n.uid, err)
		}
		k.time.wm = wm
	}
	t := &k.time
	if t.timers == nil {
		return nil
	}
	err := t.timers.Each(func(key string, kg int, tm state.Timer) bool {
		e := timerEntry{at: tm.At, key: key, kg: int32(kg)}
		if tm.Domain == state.EventTime {
			t.ev.push(e)
		} else {
			t.pt.push(e)
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("%w: operator %q: %w", ErrRestoreRefused, k.n.uid, err)
	}
	if len(t.pt) > 0 {
		k.schedule()
	}
	return nil
}

// advance takes a new watermark: the event-time timers it passes fire, in
// time order.
func (k *keyedOp[T, U]) advance(wm int64) {
	t := &k.time
	if wm <= t.wm {
		return
	}
	t.wm = wm
	for len(t.ev) > 0 && t.ev[0].at <= t.wm {
		k.fire(t.ev.pop(), state.EventTime)
	}
}

// fireProcessing fires the processing-time timers that are due.
func (k *keyedOp[T, U]) fireProcessing() {
	t := &k.time
	t.wakeAt = 0
	now := k.ProcessingTime()
	for len(t.pt) > 0 && t.pt[0].at <= now {
		k.fire(t.pt.pop(), state.ProcessingTime)
	}
	if len(t.pt) > 0 {
		k.schedule()
	}
}

func (k *keyedOp[T, U]) fire(e timerEntry, domain uint8) {
	t := &k.time
	tm := state.Timer{Domain: domain, At: e.at}
	k.lastKey, k.kg = e.key, int(e.kg)
	k.store.SetKeyInGroup(e.key, int(e.kg))
	if !t.timers.Remove(tm) {
		return // deleted after it was registered
	}
	t.firing = tm
	err := t.onTimer(tm)
	t.firing = state.Timer{}
	if err != nil {
		fail(fmt.Errorf("operator %q timer at %d: %w", k.n.uid, tm.At, err))
	}
}

// schedule sets the wake-up for the earliest processing-time timer.
func (k *keyedOp[T, U]) schedule() {
	t := &k.time
	if len(t.pt) == 0 {
		return
	}
	at := t.pt[0].at
	if t.wakeAt != 0 && t.wakeAt <= at {
		return
	}
	t.wakeAt = at
	d := time.Duration(at-k.ProcessingTime()) * time.Millisecond
	mb := k.st.mail
	if t.wake == nil {
		t.wake = time.AfterFunc(max(d, 0), func() { mb.Post(mail{kind: mailTimers}) })
		k.st.onClose = append(k.st.onClose, func(bool) { t.wake.Stop() })
		return
	}
	t.wake.Reset(max(d, 0))
}
