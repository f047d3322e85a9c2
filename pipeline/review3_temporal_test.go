package pipeline

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/state"
)

// Review finding (review3, minor, fixed): temporal-join's OnNoKey emits a probe
// row without a key (a NULL key, or one failing left-match) padded at
// once, without asking whether it is late. The step's doc says a record of
// either input dated at or before the watermark is late: joined with
// nothing, sent to late-topic or dropped, and counted; a late probe row
// with a key is. So of two late probe rows of a LEFT temporal join, the
// one failing the ON condition of its own columns is written (padded) and
// the one passing it is dropped, and the late counter misses the first.
// Want: a late probe row without a key handled as a late one with a key.
func TestReview3TemporalJoinLateProbeWithoutKeyIsWritten(t *testing.T) {
	late := &atomic.Int64{}
	c := TemporalJoinConfig{LeftKey: "value.k", RightKey: "value.k", LeftTime: "value.t", RightTime: "value.t", Kind: JoinLeft, LeftMatch: "value.m"}
	op, err := c.operator(late)
	if err != nil {
		t.Fatal(err)
	}
	rt := state.NewRuntime(0, 127, 128, nil, nil)
	fns := op.Two(rt.Store())
	rt.Seal()
	h := &ijHarness{fakeTime: &fakeTime{rt: rt, wm: -1 << 62, timers: map[string]map[int64]bool{}, ptimers: map[string]map[int64]bool{}}, fns: fns, op: op, late: late}
	h.advance(t, 100)
	// Both probe rows are dated 50, behind the watermark 100.
	for _, v := range []string{`{"k":"a","t":50,"m":true,"n":"keyed"}`, `{"k":"a","t":50,"m":false,"n":"unmatched"}`, `{"k":null,"t":50,"m":true,"n":"nullkey"}`} {
		r := &handle[krec]{acc: &kAccess, rec: krec{Key: "a", Value: v}, group: "a"}
		k, null, err := op.KeyBy.evalKeyOrNull(r, true)
		if err != nil {
			t.Fatal(err)
		}
		if null {
			err = fns.OnNoKey(r, true, h)
		} else {
			h.setKey(k)
			if r.prep, err = op.Prepare(r); err == nil {
				err = fns.OnLeft(r, h, h)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	h.advance(t, 1000)
	if got := h.joined(t); len(got) != 0 {
		t.Errorf("late probe rows written: %v, want none (each is late)", got)
	}
	if n := late.Load(); n != 3 {
		t.Errorf("late records counted: %d, want 3", n)
	}
}

// Review finding (review3, fixed): a retraction reaching temporal-join's probe
// side fails the task with a plain error, so the job restarts and replays
// the same record into the same failure, again and again (the planner
// compiles an updating probe side: TestReview3TemporalJoinOfAnUpdatingProbeSide,
// internal/sql/planner). keyStep marks the same mistake before any other
// keyed step (a retraction into a step that takes none) unrecoverable.
// Want: unrecoverable, so the fail policy stops the job with the message.
func TestReview3TemporalJoinProbeRetractionRestartsForever(t *testing.T) {
	h := newTJ(t, JoinInner, "")
	h.setKey("a")
	r := &handle[krec]{acc: &kAccess, rec: krec{Key: "a", Value: `{"k":"a","t":5,"n":"p"}`, Headers: map[string]string{RowKindHeader: RowUpdateBefore.String()}}, group: "a"}
	p, err := h.op.Prepare(r)
	if err != nil {
		t.Fatal(err)
	}
	r.prep = p
	err = h.fns.OnLeft(r, h, h)
	if err == nil || !errors.Is(err, flow.ErrUnrecoverable) {
		t.Errorf("a -U on the probe side: %v, want an unrecoverable error", err)
	}
}
