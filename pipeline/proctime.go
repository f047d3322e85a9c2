package pipeline

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/onceflow/onceflow/flow"
)

// Processing-time windows: the window step with `time: processing`
// (docs/design.md, "Event time and timers"; "### SQL" maps windows over a
// PROCTIME() column onto them). The event-time window logic runs
// unchanged over a clock (procClock) whose watermark is the wall clock
// less 1 ms and whose event-time timers are processing-time timers 1 ms
// later: a window [s, e) fires once the clock reaches e, when no record
// can be handled at a time inside it any more (a record handled at e-1,
// after a timer at e-1, would reopen a window that fired).
//
// A bounded input's end (the MaxWatermark that follows it) fires every
// open window, as it does event-time windows: each key with windows
// keeps one event-time timer at MaxWatermark, registered with its first
// window and deleted when its last one fires.

// endOfInput is the event time the end of a bounded input brings.
const endOfInput = math.MaxInt64

// checkProcessing refuses what does not go with processing time.
func (c WindowConfig) checkProcessing() error {
	switch {
	case c.AllowedLateness > 0:
		return &FieldError{Field: "allowed-lateness", Msg: "does not go with time: processing: no record is late for a processing-time window; leave it out"}
	case c.LateTopic != "":
		return &FieldError{Field: "late-topic", Msg: "does not go with time: processing: no record is late for a processing-time window; leave it out"}
	case c.EarlyFiring > 0:
		return &FieldError{Field: "early-firing", Msg: "does not go with time: processing: the windows fire on the clock already; use smaller windows (or cumulate windows) for earlier results"}
	}
	return nil
}

// procClock is the event-time Clock the window logic sees in processing
// time, over the operator's clock, at now: the clock is read once per
// record or timer, so that the record's time and the watermark agree (a
// second reading a millisecond later would make the record late for the
// window it was put in).
type procClock struct {
	Clock
	now int64
}

func (c procClock) Watermark() int64 { return c.now - 1 }

func (c procClock) RegisterEventTimeTimer(at int64) {
	c.Clock.RegisterProcessingTimeTimer(at + 1)
	// The key's timer for the end of a bounded input (once per key).
	c.Clock.RegisterEventTimeTimer(endOfInput)
}

func (c procClock) DeleteEventTimeTimer(at int64) { c.Clock.DeleteProcessingTimeTimer(at + 1) }

// procWindows is a window step's functions in processing time: the
// event-time ones (add, fire) over a procClock, and the windower or the
// cumulator (cw, nil for other windows) whose state they keep.
type procWindows struct {
	w    *windower
	cw   *cumulator
	add  func(key string, p winPrep, clk Clock, out Out) (bool, error)
	fire func(key string, at int64, clk Clock, out Out) error
}

func (pw procWindows) timed() Timed {
	return Timed{
		OnRecord: func(r Record, clk Clock, out Out) error {
			p := r.Prepared().(winPrep)
			p.ts = clk.ProcessingTime()
			on, err := pw.add(r.GroupKey(), p, procClock{clk, p.ts}, out)
			if err == nil && !on {
				err = fmt.Errorf("handled at %d, the record was late for its own processing-time windows", p.ts)
			}
			if err != nil {
				return flow.Unrecoverable(fmt.Errorf("record %s: window: %w", r.Position(), err))
			}
			return nil
		},
		OnProcessingTimer: func(key string, at int64, clk Clock, out Out) error {
			if err := pw.fire(key, at-1, procClock{clk, clk.ProcessingTime()}, out); err != nil {
				return err
			}
			if pw.empty() {
				clk.DeleteEventTimeTimer(endOfInput)
			}
			return nil
		},
		OnTimer: func(key string, at int64, clk Clock, out Out) error {
			if at != endOfInput {
				return fmt.Errorf("window: an event-time timer at %d in processing-time windows", at)
			}
			return pw.drain(key, clk, out)
		},
	}
}

// empty tells whether the current key has no window left.
func (pw procWindows) empty() bool {
	none := true
	if pw.cw != nil {
		pw.cw.state.All(func(int64, CumState) bool { none = false; return false })
	} else {
		pw.w.wins.All(func(int64, WinState) bool { none = false; return false })
	}
	return none
}

// drain fires every open window of the key, oldest first, at the end of
// a bounded input, and deletes their timers.
func (pw procWindows) drain(key string, clk Clock, out Out) error {
	if cw := pw.cw; cw != nil {
		var all []CumState
		cw.state.All(func(_ int64, cs CumState) bool { all = append(all, cs); return true })
		slices.SortFunc(all, func(a, b CumState) int { return cmp.Compare(a.Start, b.Start) })
		for _, cs := range all {
			// Base.End is the end of the last window that fired (or
			// the start): the windows after it are due.
			for e := cs.Base.End + cw.sh.step; e <= cs.End; e += cw.sh.step {
				if err := cw.emitUpTo(key, cs, e, out); err != nil {
					return err
				}
				clk.DeleteProcessingTimeTimer(e)
			}
			cw.state.Delete(cs.Start)
		}
		return nil
	}
	var all []WinState
	pw.w.wins.All(func(_ int64, ws WinState) bool { all = append(all, ws); return true })
	slices.SortFunc(all, func(a, b WinState) int { return cmp.Compare(a.End, b.End) })
	for _, ws := range all {
		if err := pw.w.fire(key, ws.End-1, out); err != nil {
			return err
		}
		clk.DeleteProcessingTimeTimer(ws.End)
	}
	return nil
}
