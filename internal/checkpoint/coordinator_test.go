package checkpoint

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestScenarios walks the coordinator through the protocol step by step.
// Each script line says what happens and exactly which actions must follow.
func TestScenarios(t *testing.T) {
	for _, tc := range []struct {
		name          string
		cfg           Config
		lastCommitted int64
		participants  int
		script        string
	}{
		{
			name: "interval measured from the previous trigger", participants: 2,
			cfg: Config{Interval: time.Second},
			script: `
				tick 999ms
				tick 1s        => trigger 1
				ack 1 0
				ack 1 1        => commit 1
				done 1 @1200ms
				committed 1
				tick 1999ms
				tick 2s        => trigger 2
				ackall 2       => commit 2
				done 2
				tick 2999ms
				tick 3s        => trigger 3`,
		},
		{
			name: "ids continue after the last committed checkpoint", participants: 1, lastCommitted: 41,
			cfg: Config{Interval: time.Second},
			script: `
				committed 41
				tick 1s        => trigger 42
				ackall 42      => commit 42
				done 42
				committed 42`,
		},
		{
			name: "min pause counts from the end of the previous checkpoint", participants: 1,
			cfg: Config{Interval: time.Second, MinPause: 500 * time.Millisecond},
			script: `
				# no checkpoint has finished yet, so the first one is not delayed
				tick 1s        => trigger 1
				ackall 1       => commit 1
				done 1 @1800ms
				# the interval has elapsed at 2s, the pause only at 2.3s
				tick 2s
				tick 2299ms
				tick 2300ms    => trigger 2
				ackall 2       => commit 2
				done 2 @2400ms
				# now the interval (from the trigger at 2.3s) is the later bound
				tick 2900ms
				tick 3299ms
				tick 3300ms    => trigger 3`,
		},
		{
			name: "min pause also counts from an abort", participants: 1,
			cfg: Config{Interval: time.Second, MinPause: 2 * time.Second, TolerableFailures: -1},
			script: `
				tick 1s        => trigger 1
				tick 1500ms
				decline 1 0    => abort 1 declined
				tick 2s
				tick 3499ms
				tick 3500ms    => trigger 2`,
		},
		{
			name: "max concurrent 1 waits for the pending checkpoint", participants: 1,
			cfg: Config{Interval: time.Second},
			script: `
				tick 1s        => trigger 1
				tick 2s
				tick 5s
				pending 1
				ackall 1       => commit 1
				tick 6s
				done 1 @6500ms
				# one trigger for the slot, not one per missed interval
				tick 6500ms    => trigger 2
				tick 7s
				pending 2`,
		},
		{
			name: "max concurrent 2 overlaps checkpoints but commits in order", participants: 2,
			cfg: Config{Interval: time.Second, MaxConcurrent: 2},
			script: `
				tick 1s        => trigger 1
				tick 2s        => trigger 2
				tick 3s
				tick 4s
				pending 1 2
				ackall 2
				ack 1 1
				ack 1 0        => commit 1
				tick 5s
				done 1         => commit 2
				tick 5500ms    => trigger 3
				tick 6s
				pending 2 3
				done 2
				tick 6500ms    => trigger 4
				committed 2`,
		},
		{
			name: "a long gap triggers only one checkpoint even with free slots", participants: 1,
			cfg: Config{Interval: time.Second, MaxConcurrent: 3},
			script: `
				tick 10s       => trigger 1
				tick 10999ms
				tick 11s       => trigger 2`,
		},
		{
			name: "commits wait for earlier checkpoints and go one at a time", participants: 1,
			cfg: Config{Interval: time.Second, MaxConcurrent: 3},
			script: `
				tick 1s        => trigger 1
				tick 2s        => trigger 2
				tick 3s        => trigger 3
				ackall 3
				ackall 2
				ackall 1       => commit 1
				done 1         => commit 2
				done 2         => commit 3
				done 3
				committed 3
				pending`,
		},
		{
			name: "timeout aborts and frees the slot in the same tick", participants: 2,
			cfg: Config{Interval: time.Second, Timeout: 2 * time.Second, TolerableFailures: -1},
			script: `
				tick 1s        => trigger 1
				ack 1 0
				tick 2999ms
				tick 3s        => abort 1 expired, trigger 2
				# late messages for the expired checkpoint are normal
				ack 1 1
				decline 1 0
				pending 2
				ackall 2       => commit 2
				done 2
				committed 2`,
		},
		{
			name: "timeout does not cover a checkpoint that is fully acknowledged", participants: 1,
			cfg: Config{Interval: time.Second, Timeout: 2 * time.Second, MaxConcurrent: 2},
			script: `
				tick 1s        => trigger 1
				ackall 1       => commit 1
				tick 2s        => trigger 2
				ackall 2
				# 1 is committing for longer than the timeout, 2 waits for it
				tick 10s
				pending 1 2
				done 1 @11s    => commit 2
				done 2
				committed 2`,
		},
		{
			name: "an expired oldest checkpoint lets the next one commit", participants: 2,
			cfg: Config{Interval: time.Second, Timeout: 3 * time.Second, MaxConcurrent: 2, TolerableFailures: 1},
			script: `
				tick 1s        => trigger 1
				tick 2s        => trigger 2
				ackall 2
				ack 1 0
				# the freed slot is refilled in the same tick
				tick 4s        => abort 1 expired, commit 2, trigger 3
				done 2
				committed 2`,
		},
		{
			name: "tolerable failures 0 fails the job on the first failure", participants: 2,
			cfg: Config{Interval: time.Second},
			script: `
				tick 1s        => trigger 1
				decline 1 1 disk full => abort 1 declined, failjob 1
				failed
				# the job is restarting: nothing more happens
				tick 10s
				ackall 1
				decline 1 0
				pending`,
		},
		{
			name: "tolerable failures 2 allows two in a row and a commit resets the count", participants: 1,
			cfg: Config{Interval: time.Second, Timeout: time.Second, TolerableFailures: 2},
			script: `
				tick 1s        => trigger 1
				decline 1 0    => abort 1 declined
				tick 2s        => trigger 2
				tick 3s        => abort 2 expired, trigger 3
				ackall 3       => commit 3
				done 3
				tick 4s        => trigger 4
				decline 4 0    => abort 4 declined
				tick 5s        => trigger 5
				ackall 5       => commit 5
				fail 5         => abort 5 commit-failed
				tick 6s        => trigger 6
				tick 7s        => abort 6 expired, failjob 6
				failed`,
		},
		{
			name: "tolerable failures -1 never fails the job", participants: 1,
			cfg: Config{Interval: time.Second, Timeout: time.Second, TolerableFailures: -1},
			script: `
				tick 1s        => trigger 1
				tick 2s        => abort 1 expired, trigger 2
				tick 3s        => abort 2 expired, trigger 3
				tick 4s        => abort 3 expired, trigger 4
				decline 4 0    => abort 4 declined
				tick 5s        => trigger 5
				ackall 5       => commit 5
				fail 5         => abort 5 commit-failed
				tick 6s        => trigger 6
				ackall 6       => commit 6
				done 6
				committed 6`,
		},
		{
			name: "a decline aborts only its own checkpoint", participants: 2,
			cfg: Config{Interval: time.Second, MaxConcurrent: 3, TolerableFailures: -1},
			script: `
				tick 1s        => trigger 1
				tick 2s        => trigger 2
				tick 3s        => trigger 3
				ackall 3
				decline 2 1    => abort 2 declined
				pending 1 3
				ackall 1       => commit 1
				done 1         => commit 3
				done 3
				committed 3`,
		},
		{
			name: "a decline of a fully acknowledged checkpoint still aborts it before its commit", participants: 1,
			cfg: Config{Interval: time.Second, MaxConcurrent: 2, TolerableFailures: -1},
			script: `
				tick 1s        => trigger 1
				tick 2s        => trigger 2
				ackall 2
				decline 2 0    => abort 2 declined
				ackall 1       => commit 1
				# once the commit is in flight only CommitDone decides
				decline 1 0
				done 1
				committed 1`,
		},
		{
			name: "a failed commit aborts every later pending checkpoint", participants: 2,
			cfg: Config{Interval: time.Second, MaxConcurrent: 3, TolerableFailures: -1},
			script: `
				tick 1s        => trigger 1
				tick 2s        => trigger 2
				tick 3s        => trigger 3
				ackall 1       => commit 1
				ackall 2
				ack 3 0
				fail 1 broker down => abort 1 commit-failed, abort 2 commit-failed-by-1, abort 3 commit-failed-by-1
				pending
				committed 0
				# late acks for the aborted ones are ignored
				ack 3 1
				ackall 2
				tick 3999ms
				tick 4s        => trigger 4
				ackall 4       => commit 4
				done 4
				committed 4`,
		},
		{
			name: "a failed commit with no tolerance aborts everything then fails the job", participants: 1,
			cfg: Config{Interval: time.Second, MaxConcurrent: 2},
			script: `
				tick 1s        => trigger 1
				tick 2s        => trigger 2
				ackall 1       => commit 1
				fail 1         => abort 1 commit-failed, abort 2 commit-failed-by-1, failjob 1
				failed
				tick 5s`,
		},
		{
			name: "a failed commit counts once, not once per aborted checkpoint", participants: 1,
			cfg: Config{Interval: time.Second, MaxConcurrent: 3, TolerableFailures: 1},
			script: `
				tick 1s        => trigger 1
				tick 2s        => trigger 2
				tick 3s        => trigger 3
				ackall 1       => commit 1
				fail 1         => abort 1 commit-failed, abort 2 commit-failed-by-1, abort 3 commit-failed-by-1
				tick 4s        => trigger 4
				decline 4 0    => abort 4 declined, failjob 4`,
		},
		{
			name: "savepoint when periodic checkpoints are off", participants: 2,
			cfg: Config{},
			script: `
				tick 1h
				savepoint 1
				savepoint 2
				# queued savepoints trigger on the next tick, not before
				pending
				tick 1h        => trigger 1 savepoint
				ackall 1       => commit 1 savepoint
				done 1
				tick 1h        => trigger 2 savepoint
				ackall 2       => commit 2 savepoint
				done 2
				committed 2
				tick 100h`,
		},
		{
			name: "savepoint waits for a slot but ignores interval and min pause", participants: 1,
			cfg: Config{Interval: 10 * time.Second, MinPause: 10 * time.Second},
			script: `
				tick 10s       => trigger 1
				savepoint 2
				tick 11s
				ackall 1       => commit 1
				done 1 @12s
				tick 12s       => trigger 2 savepoint
				ackall 2       => commit 2 savepoint
				done 2 @13s
				# the savepoint counts as the previous trigger and finish
				tick 22999ms
				tick 23s       => trigger 3`,
		},
		{
			name: "a queued savepoint goes before a due periodic checkpoint", participants: 1,
			cfg: Config{Interval: time.Second},
			script: `
				tick 1s        => trigger 1
				savepoint 2
				ackall 1       => commit 1
				done 1
				tick 5s        => trigger 2 savepoint
				ackall 2       => commit 2 savepoint
				done 2
				tick 6s        => trigger 3`,
		},
		{
			name: "savepoint ids stay in trigger order with periodic ones", participants: 1,
			cfg: Config{Interval: time.Second, MaxConcurrent: 2},
			script: `
				tick 1s        => trigger 1
				savepoint 2
				savepoint 3
				tick 1500ms    => trigger 2 savepoint
				ackall 1       => commit 1
				done 1
				tick 2s        => trigger 3 savepoint
				ackall 3
				ackall 2       => commit 2 savepoint
				done 2         => commit 3 savepoint
				done 3
				tick 3s        => trigger 4`,
		},
		{
			name: "a declined or expired savepoint does not fail the job", participants: 1,
			cfg: Config{Timeout: time.Second},
			script: `
				savepoint 1
				tick 1s        => trigger 1 savepoint
				decline 1 0    => abort 1 savepoint declined
				savepoint 2
				tick 2s        => trigger 2 savepoint
				tick 3s        => abort 2 savepoint expired
				savepoint 3
				tick 3s        => trigger 3 savepoint
				ackall 3       => commit 3 savepoint
				done 3
				committed 3`,
		},
		{
			name: "a savepoint whose commit fails counts like any failed commit", participants: 1,
			cfg: Config{},
			script: `
				savepoint 1
				tick 1s        => trigger 1 savepoint
				ackall 1       => commit 1 savepoint
				fail 1         => abort 1 savepoint commit-failed, failjob 1 savepoint`,
		},
		{
			name: "late, duplicate and unknown acks are ignored", participants: 3,
			cfg: Config{Interval: time.Second},
			script: `
				ack 7 0
				tick 1s        => trigger 1
				ack 1 0
				ack 1 0
				ack 1 1
				ack 1 1
				ack 99 2
				pending 1
				ack 1 2        => commit 1
				ack 1 2
				done 1
				ackall 1
				decline 1 0
				committed 1`,
		},
		{
			name: "time going backwards is no time passing", participants: 1,
			cfg: Config{Interval: time.Second},
			script: `
				tick 1s        => trigger 1
				ackall 1       => commit 1
				done 1 @1500ms
				tick 500ms
				tick 1999ms
				tick 2s        => trigger 2`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.cfg, tc.lastCommitted, tc.participants)
			h.run(tc.script)
		})
	}
}

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

func TestStats(t *testing.T) {
	h := newHarness(t, Config{Interval: time.Second, TolerableFailures: -1}, 0, 1)
	h.run(`
		tick 1s        => trigger 1
		ackall 1       => commit 1
		done 1 @1250ms
		tick 2250ms    => trigger 2
		decline 2 0    => abort 2 declined
		tick 3250ms    => trigger 3
		tick 4s
		`)
	got := h.c.Stats()
	if got.Triggered != 3 || got.Completed != 1 || got.Failed != 1 || got.ConsecutiveFailures != 1 {
		t.Errorf("counts = %+v, want triggered 3, completed 1, failed 1, consecutive 1", got)
	}
	if got.LastCompletedDuration != 250*time.Millisecond {
		t.Errorf("LastCompletedDuration = %v, want 250ms", got.LastCompletedDuration)
	}
	if !errors.Is(got.LastFailure, ErrDeclined) {
		t.Errorf("LastFailure = %v, want the decline", got.LastFailure)
	}
	h.run(`
		ackall 3       => commit 3
		done 3 @5s`)
	got = h.c.Stats()
	if got.Completed != 2 || got.ConsecutiveFailures != 0 || got.LastCompletedDuration != 1750*time.Millisecond {
		t.Errorf("after the second commit: %+v, want completed 2, consecutive 0, duration 1.75s", got)
	}
}

func TestNextDeadline(t *testing.T) {
	h := newHarness(t, Config{Interval: time.Second, Timeout: 3 * time.Second, MinPause: 2 * time.Second, MaxConcurrent: 2, TolerableFailures: -1}, 0, 1)
	check := func(want time.Duration, wantOK bool) {
		t.Helper()
		got, ok := h.c.NextDeadline()
		if ok != wantOK || (ok && !got.Equal(t0.Add(want))) {
			t.Fatalf("NextDeadline() = t0+%v, %v; want t0+%v, %v", got.Sub(t0), ok, want, wantOK)
		}
	}
	check(time.Second, true) // first periodic trigger
	h.run(`tick 1s => trigger 1`)
	check(2*time.Second, true) // second periodic, a slot is free
	h.run(`tick 2s => trigger 2`)
	check(4*time.Second, true) // slots full: only checkpoint 1's timeout
	h.run(`ackall 1 => commit 1`)
	check(5*time.Second, true) // 1 is committing, 2's timeout remains
	h.run(`done 1 @2500ms`)
	check(4500*time.Millisecond, true) // min pause after 1 ends beats 2's timeout
	h.run(`
		savepoint 3
		decline 2 0 => abort 2 declined`)
	check(2500*time.Millisecond, true) // a queued savepoint is due now

	off := newHarness(t, Config{}, 0, 1)
	if _, ok := off.c.NextDeadline(); ok {
		t.Error("NextDeadline with checkpointing off and nothing pending reports a deadline")
	}

	// Ticking exactly at each reported deadline produces the action it
	// promised, and ticking just before it does not.
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
