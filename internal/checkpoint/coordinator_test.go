package checkpoint

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestFailJobError(t *testing.T) {
	h := newHarness(t, Config{Interval: time.Second, TolerableFailures: 2}, 0, 2)
	diskFull := errors.New("disk full")
	for i := int64(1); i <= 3; i++ {
		h.now = h.now.Add(time.Second)
		h.c.Tick(h.now)
		h.c.Decline(i, 1, diskFull)
	}
	actions := h.c.Ready()
	last := actions[len(actions)-1]
	if last.Kind != FailJob || last.ID != 3 {
		t.Fatalf("last action = %v, want FailJob 3; all: %q", last, shortAll(actions))
	}
	for _, target := range []error{ErrTooManyFailures, ErrDeclined, diskFull} {
		if !errors.Is(last.Err, target) {
			t.Errorf("FailJob error %q does not wrap %q", last.Err, target)
		}
	}
	var ae *AbortError
	if !errors.As(last.Err, &ae) || ae.ID != 3 || ae.Participant != 1 {
		t.Errorf("FailJob error does not carry the last AbortError (got %+v)", ae)
	}
	for _, want := range []string{
		"3 checkpoints failed in a row, more than the 2 tolerated",
		"checkpoint 3 declined by participant 1: disk full",
		"raise the tolerable failed checkpoints setting",
	} {
		if !strings.Contains(last.Err.Error(), want) {
			t.Errorf("FailJob error %q does not say %q", last.Err, want)
		}
	}

	// Only once, and nothing after it.
	h.c.Tick(h.now.Add(time.Hour))
	if got := h.c.Ready(); len(got) != 0 {
		t.Errorf("actions after FailJob: %q", shortAll(got))
	}
	if got := h.c.TriggerSavepoint(h.now); got != 0 {
		t.Errorf("TriggerSavepoint after FailJob = %d, want 0", got)
	}
}

func TestFailJobErrorWithNoTolerance(t *testing.T) {
	h := newHarness(t, Config{Interval: time.Second, Timeout: time.Second}, 0, 1)
	h.c.Tick(t0.Add(time.Second))
	h.c.Tick(t0.Add(2 * time.Second))
	actions := h.c.Ready()
	if got := shortAll(actions); !slices.Equal(got, []string{"trigger 1", "abort 1 expired", "failjob 1"}) {
		t.Fatalf("actions = %q", got)
	}
	msg := actions[2].Err.Error()
	for _, want := range []string{
		"1 checkpoint failed and no failed checkpoints are tolerated",
		"checkpoint 1 expired: not every participant acknowledged it within the checkpoint timeout 1s",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("FailJob error %q does not say %q", msg, want)
		}
	}
	if !errors.Is(actions[2].Err, ErrExpired) {
		t.Errorf("FailJob error %q does not wrap ErrExpired", msg)
	}
}

func TestAbortErrors(t *testing.T) {
	broker := errors.New("broker down")
	h := newHarness(t, Config{Interval: time.Second, MaxConcurrent: 2, TolerableFailures: -1}, 0, 1)
	h.c.Tick(t0.Add(time.Second))
	h.c.Tick(t0.Add(2 * time.Second))
	h.c.Ack(1, 0)
	h.c.CommitDone(1, broker, t0.Add(2*time.Second))
	actions := h.c.Ready()
	if len(actions) != 5 {
		t.Fatalf("actions = %q", shortAll(actions))
	}
	for _, tc := range []struct {
		a      Action
		msg    string
		reason error
		cause  int64
	}{
		{actions[3], "checkpoint 1 commit failed: broker down", ErrCommitFailed, 0},
		{actions[4], "checkpoint 2 aborted: checkpoint 1, whose output it builds on, failed to commit: broker down", ErrCommitFailed, 1},
	} {
		if tc.a.Err.Error() != tc.msg {
			t.Errorf("%s: message %q, want %q", short(tc.a), tc.a.Err, tc.msg)
		}
		var ae *AbortError
		if !errors.As(tc.a.Err, &ae) || ae.Cause != tc.cause {
			t.Errorf("%s: AbortError %+v, want Cause %d", short(tc.a), ae, tc.cause)
		}
		if !errors.Is(tc.a.Err, tc.reason) || !errors.Is(tc.a.Err, broker) {
			t.Errorf("%s: %q does not wrap both %v and the commit error", short(tc.a), tc.a.Err, tc.reason)
		}
	}

	sp := &AbortError{ID: 4, Savepoint: true, Reason: ErrDeclined, Participant: 0}
	if got, want := sp.Error(), "savepoint 4 declined by participant 0"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	if errors.Is(sp, ErrExpired) || !errors.Is(sp, ErrDeclined) {
		t.Errorf("AbortError with Reason ErrDeclined and no Err matches the wrong sentinels")
	}
}

// Ticking exactly at each deadline NextDeadline reports produces the
// action it promised, and ticking just before it does not. (What the
// deadline is at each step: testdata/next-deadline*.txt.)
func TestNextDeadline(t *testing.T) {
	h2 := newHarness(t, Config{Interval: time.Second, Timeout: 2 * time.Second, MinPause: 1500 * time.Millisecond, TolerableFailures: -1}, 0, 1)
	for range 6 {
		d, ok := h2.c.NextDeadline()
		if !ok {
			t.Fatal("no deadline while periodic checkpoints are on")
		}
		h2.c.Tick(d.Add(-time.Nanosecond))
		if got := h2.c.Ready(); len(got) != 0 {
			t.Fatalf("tick 1ns before the deadline t0+%v produced %q", d.Sub(t0), shortAll(got))
		}
		h2.c.Tick(d)
		if got := h2.c.Ready(); len(got) == 0 {
			t.Fatalf("tick at the deadline t0+%v produced nothing", d.Sub(t0))
		}
	}
}

func TestPanicsNameTheTransition(t *testing.T) {
	valid := Config{Interval: time.Second}
	for _, tc := range []struct {
		name string
		do   func(c *Coordinator)
		want string
	}{
		{"ack from negative participant", func(c *Coordinator) { c.Ack(1, -1) }, "Ack(1) from participant -1, but participants are 0..1"},
		{"ack from participant out of range", func(c *Coordinator) { c.Ack(1, 2) }, "Ack(1) from participant 2"},
		{"decline from participant out of range", func(c *Coordinator) { c.Decline(1, 5, nil) }, "Decline(1) from participant 5"},
		{"commit done with nothing in flight", func(c *Coordinator) { c.CommitDone(1, nil, t0) }, "CommitDone(1) while no commit is in flight"},
		{"commit done twice", func(c *Coordinator) {
			c.Tick(t0.Add(time.Second))
			c.Ack(1, 0)
			c.Ack(1, 1)
			c.CommitDone(1, nil, t0)
			c.CommitDone(1, nil, t0)
		}, "CommitDone(1) while no commit is in flight"},
		{"commit done for the wrong id", func(c *Coordinator) {
			c.Tick(t0.Add(time.Second))
			c.Ack(1, 0)
			c.Ack(1, 1)
			c.CommitDone(2, nil, t0)
		}, "CommitDone(2) while the commit in flight is checkpoint 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCoordinator(valid, 0, 2, t0)
			expectPanic(t, tc.want, func() { tc.do(c) })
		})
	}
	t.Run("constructor", func(t *testing.T) {
		expectPanic(t, "call Config.Validate first", func() { NewCoordinator(Config{Interval: -1}, 0, 1, t0) })
		expectPanic(t, "0 participants", func() { NewCoordinator(valid, 0, 0, t0) })
		expectPanic(t, "last committed checkpoint -1", func() { NewCoordinator(valid, -1, 1, t0) })
	})
}

func expectPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		msg, _ := r.(string)
		if r == nil || !strings.Contains(msg, want) {
			t.Errorf("panic = %v, want a message containing %q", r, want)
		}
	}()
	f()
}

func TestReadyHandsOverTheOutbox(t *testing.T) {
	h := newHarness(t, Config{Interval: time.Second, MaxConcurrent: 2}, 0, 1)
	h.c.Tick(t0.Add(time.Second))
	first := h.c.Ready()
	h.c.Tick(t0.Add(2 * time.Second))
	second := h.c.Ready()
	if got := shortAll(first); !slices.Equal(got, []string{"trigger 1"}) {
		t.Errorf("first Ready = %q; a later input changed a slice the caller owns", got)
	}
	if got := shortAll(second); !slices.Equal(got, []string{"trigger 2"}) {
		t.Errorf("second Ready = %q", got)
	}
	if got := h.c.Ready(); got != nil {
		t.Errorf("Ready on an empty outbox = %q", shortAll(got))
	}
}

func TestActionString(t *testing.T) {
	for _, tc := range []struct {
		a    Action
		want string
	}{
		{Action{Kind: Trigger, ID: 3}, "Trigger 3"},
		{Action{Kind: Commit, ID: 7, Savepoint: true}, "Commit 7 (savepoint)"},
		{Action{Kind: Abort, ID: 8, Err: &AbortError{ID: 8, Reason: ErrDeclined, Participant: 1}}, "Abort 8: checkpoint 8 declined by participant 1"},
		{Action{Kind: FailJob, ID: 9, Err: errors.New("x")}, "FailJob 9: x"},
		{Action{}, "ActionKind(0) 0"},
	} {
		if got := tc.a.String(); got != tc.want {
			t.Errorf("%#v.String() = %q, want %q", tc.a, got, tc.want)
		}
	}
}

func TestCoordinatorConfigHasDefaults(t *testing.T) {
	c := NewCoordinator(Config{Interval: time.Second, Mode: AtLeastOnce}, 0, 1, t0)
	want := Config{Interval: time.Second, Mode: AtLeastOnce, Timeout: DefaultTimeout, MaxConcurrent: DefaultMaxConcurrent, NumRetained: DefaultNumRetained}
	if got := c.Config(); got != want {
		t.Errorf("Config() = %+v, want %+v", got, want)
	}
}
