package pipeline

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/onceflow/onceflow/internal/durfmt"
	"github.com/onceflow/onceflow/state"
)

// Cumulate windows (the window step with size and step; docs/design.md,
// "### SQL", maps SQL's CUMULATE onto them). Every size-aligned window
// [s, s+size) is emitted as [s, s+step), [s, s+2·step), … [s, s+size),
// each when the watermark passes its end.
//
// A key keeps one CumState per size window, not one set of figures per
// window end: Base holds the records of the steps no window still needs
// apart (every window those steps end is past its allowed lateness), and
// Steps the records of each later step that has some. The window ending
// at e is Base merged with the steps ending at or before e. Without
// allowed lateness a step is folded into Base when its window fires, so
// what stays apart is only the steps the watermark has not reached (the
// out-of-orderness).
//
// Timers: the window ending at e fires at e-1 and registers the next
// step's end; a record whose step comes before every step the key's
// window had registers the first of its windows not yet fired. So each
// window end has at most one timer, and there is no timer per step that
// never had a record before it. With allowed lateness one more timer,
// at size window's end - 1 + lateness, drops the state.

// cumulateShape validates cumulate windows (Step set, Size positive).
func (c WindowConfig) cumulateShape() (shape, error) {
	switch {
	case c.Slide > 0:
		return shape{}, &FieldError{Field: "step", Msg: "makes cumulate windows and cannot go with slide (sliding windows): give size and step, or size and slide"}
	case c.Step < time.Millisecond:
		return shape{}, &FieldError{Field: "step", Msg: "must be at least 1ms (event time is in milliseconds)"}
	case c.Step > c.Size:
		return shape{}, &FieldError{Field: "step", Msg: fmt.Sprintf("%s is longer than size %s: cumulate windows grow by step up to size; use a step up to the size", durfmt.Short(c.Step), durfmt.Short(c.Size))}
	case c.Size%c.Step != 0 || c.Step%time.Millisecond != 0:
		return shape{}, &FieldError{Field: "step", Msg: fmt.Sprintf("%s does not divide size %s into whole steps of milliseconds: cumulate windows grow by step up to size; choose a step that does, such as %s", durfmt.Short(c.Step), durfmt.Short(c.Size), durfmt.Short(time.Duration(gcd(c.Size.Milliseconds(), max(c.Step.Milliseconds(), 1)))*time.Millisecond))}
	case c.EarlyFiring > 0:
		return shape{}, &FieldError{Field: "early-firing", Msg: "does not go with step: cumulate windows already emit each size window's figures so far, every step; give a smaller step instead"}
	}
	return shape{size: c.Size.Milliseconds(), step: c.Step.Milliseconds()}, nil
}

// gcd is the greatest common divisor of a and b (positive).
func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// stepEnd is the end of the cumulate step holding ts: the end of the
// shortest cumulate window holding it.
func (s shape) stepEnd(ts int64) int64 {
	return (floorDiv(ts, s.step) + 1) * s.step
}

// CumState is one key's cumulate windows of one size window [Start,
// End), as kept in keyed state.
type CumState struct {
	Start, End int64
	// Seq is the number of records taken; a record's number orders
	// first() and last() across the parts.
	Seq int64
	// Base holds the records of the steps up to Base.End (Base.Start is
	// Start): the windows ending there are past their lateness, and every
	// later window holds all of them.
	Base CumPart
	// Steps hold the records of each later step that has some, oldest
	// first (Start, End: the step).
	Steps []CumPart
}

// CumPart is the figures of some records of a cumulate window.
type CumPart struct {
	WinState
	// First and Last are the numbers (CumState.Seq) of its first and
	// last record; 0 when it has none.
	First, Last int64
}

// cumulator is one subtask's cumulate window logic over the keyed state
// of the current key; windower brings the fields and the result's
// encoding.
type cumulator struct {
	*windower
	state *state.Map[int64, CumState]
}

// empty is a part without records, [start, end).
func (c *cumulator) empty(start, end int64) CumPart {
	return CumPart{WinState: WinState{Start: start, End: end, Accs: make([]Acc, len(c.fields))}}
}

// add takes one record into the windows it is not late for; false when
// it was late for all of them.
func (c *cumulator) add(key string, p winPrep, clk Clock, out Out) (bool, error) {
	wm, step := clk.Watermark(), c.sh.step
	start := floorDiv(p.ts, c.sh.size) * c.sh.size
	end := start + c.sh.size
	if fireAt(span{start, end})+c.lateness <= wm {
		return false, nil // late for its size window's longest: for all
	}
	// first: the end of the shortest window the record is not late for.
	first := c.sh.stepEnd(p.ts)
	if first-1+c.lateness <= wm {
		first = (floorDiv(wm-c.lateness+1, step) + 1) * step
	}
	cs, ok := c.state.Get(start)
	if !ok {
		cs = CumState{Start: start, End: end, Base: c.empty(start, start)}
		if c.lateness > 0 {
			clk.RegisterEventTimeTimer(fireAt(span{start, end}) + c.lateness)
		}
	}
	// The windows before the key's earliest had no timer: register the
	// first of the record's that is still to fire.
	earliest := end + 1
	if cs.Base.First != 0 {
		earliest = cs.Base.End + step
	} else if len(cs.Steps) > 0 {
		earliest = cs.Steps[0].End
	}
	cs.Seq++
	part := &cs.Base
	if pe := c.sh.stepEnd(p.ts); pe > cs.Base.End {
		i, found := slices.BinarySearchFunc(cs.Steps, pe, func(s CumPart, e int64) int { return cmp.Compare(s.End, e) })
		if !found {
			cs.Steps = slices.Insert(cs.Steps, i, c.empty(pe-step, pe))
		}
		part = &cs.Steps[i]
	}
	if err := c.take(&part.WinState, p.inputs); err != nil {
		return false, err
	}
	if part.First == 0 {
		part.First = cs.Seq
	}
	part.Last = cs.Seq
	c.state.Put(start, cs)
	// Windows that fired already (within their lateness) emit again now.
	e := first
	for ; e <= end && fireAt(span{start, e}) <= wm; e += step {
		if err := c.emitUpTo(key, cs, e, out); err != nil {
			return false, err
		}
	}
	if e <= end && c.sh.stepEnd(p.ts) < earliest {
		clk.RegisterEventTimeTimer(fireAt(span{start, e}))
	}
	return true, nil
}

// fire handles the key's timer at at: the window ending at at+1 fires
// (and registers the next step's), and with allowed lateness the state
// of the size window whose lateness ends at at goes.
func (c *cumulator) fire(key string, at int64, clk Clock, out Out) error {
	size, step := c.sh.size, c.sh.step
	e := at + 1
	start := floorDiv(at, size) * size
	if (e-start)%step == 0 {
		if cs, ok := c.state.Get(start); ok {
			c.fold(&cs, at)
			if err := c.emitUpTo(key, cs, e, out); err != nil {
				return err
			}
			switch {
			case e < cs.End:
				clk.RegisterEventTimeTimer(at + step)
				c.state.Put(start, cs)
			case c.lateness == 0:
				c.state.Delete(start)
			default:
				c.state.Put(start, cs)
			}
		}
	}
	if c.lateness > 0 {
		end := at + 1 - c.lateness
		if s := end - size; floorDiv(s, size)*size == s {
			if cs, ok := c.state.Get(s); ok && cs.End == end {
				c.state.Delete(s)
			}
		}
	}
	return nil
}

// fold merges into Base the steps whose windows are all past their
// lateness at at: those ending at or before the last window end e with
// e - 1 + lateness <= at.
func (c *cumulator) fold(cs *CumState, at int64) {
	upTo := floorDiv(at-c.lateness+1, c.sh.step) * c.sh.step
	if upTo <= cs.Base.End {
		return
	}
	n := 0
	for n < len(cs.Steps) && cs.Steps[n].End <= upTo {
		c.mergePart(&cs.Base, cs.Steps[n])
		n++
	}
	cs.Steps = cs.Steps[n:]
	cs.Base.End = min(upTo, cs.End)
}

// mergePart merges part m into p: first() and last() by record number.
func (c *cumulator) mergePart(p *CumPart, m CumPart) {
	if m.First == 0 {
		return
	}
	c.mergeAccs(&p.WinState, m.WinState, p.First == 0 || m.First < p.First, m.Last > p.Last)
	if p.First == 0 || m.First < p.First {
		p.First = m.First
	}
	p.Last = max(p.Last, m.Last)
}

// emitUpTo emits the window [cs.Start, e): Base and the steps up to e.
// A window without records emits nothing.
func (c *cumulator) emitUpTo(key string, cs CumState, e int64, out Out) error {
	w := cs.Base
	if len(cs.Steps) > 0 && cs.Steps[0].End <= e {
		w.Accs = slices.Clone(w.Accs)
		w.Distinct = slices.Clone(w.Distinct)
		for _, s := range cs.Steps {
			if s.End > e {
				break
			}
			c.mergePart(&w, s)
		}
	}
	if w.First == 0 {
		return nil
	}
	w.Start, w.End = cs.Start, e
	return c.emit(key, w.WinState, out, true)
}

// cumCodec writes a CumState for keyed state:
//
//	0x01 (format) | varint Start | varint End | varint Seq
//	| uvarint parts (Base, then Steps) | per part: varint First
//	| varint Last | uvarint length | the part's WinState (winCodec)
type cumCodec struct{}

const cumFormat = 1

func (cumCodec) Append(dst []byte, cs CumState) []byte {
	dst = append(dst, cumFormat)
	dst = binary.AppendVarint(dst, cs.Start)
	dst = binary.AppendVarint(dst, cs.End)
	dst = binary.AppendVarint(dst, cs.Seq)
	dst = binary.AppendUvarint(dst, uint64(1+len(cs.Steps)))
	var buf []byte
	for i := -1; i < len(cs.Steps); i++ {
		p := cs.Base
		if i >= 0 {
			p = cs.Steps[i]
		}
		dst = binary.AppendVarint(dst, p.First)
		dst = binary.AppendVarint(dst, p.Last)
		buf = winCodec{}.Append(buf[:0], p.WinState)
		dst = binary.AppendUvarint(dst, uint64(len(buf)))
		dst = append(dst, buf...)
	}
	return dst
}

func (cumCodec) Decode(src []byte) (CumState, error) {
	var cs CumState
	r := winReader{b: src}
	if r.byte() != cumFormat {
		return cs, fmt.Errorf("%w: unknown cumulate format", errWinState)
	}
	cs.Start, cs.End, cs.Seq = r.varint(), r.varint(), r.varint()
	n := r.count()
	if n == 0 && r.err == nil {
		r.err = fmt.Errorf("%w: a cumulate window without its base", errWinState)
	}
	for i := 0; i < n && r.err == nil; i++ {
		var p CumPart
		p.First, p.Last = r.varint(), r.varint()
		b := r.bytes()
		if r.err != nil {
			break
		}
		ws, err := winCodec{}.Decode(b)
		if err != nil {
			return cs, err
		}
		p.WinState = ws
		if i == 0 {
			cs.Base = p
		} else {
			cs.Steps = append(cs.Steps, p)
		}
	}
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("%w: %d bytes after it", errWinState, len(r.b))
	}
	return cs, r.err
}
