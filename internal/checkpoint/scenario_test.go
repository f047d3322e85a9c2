package checkpoint

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// t0 is the fake clock's origin; scenarios give times as offsets from it.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// harness drives a Coordinator with a fake clock.
type harness struct {
	t   testing.TB
	c   *Coordinator
	now time.Time
}

func newHarness(t testing.TB, cfg Config, lastCommitted int64, participants int) *harness {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("test config: %v", err)
	}
	return &harness{t: t, c: NewCoordinator(cfg, lastCommitted, participants, t0), now: t0}
}

// short renders an action compactly: "trigger 3", "commit 3 savepoint",
// "abort 4 declined", "abort 5 commit-failed-by-4", "failjob 4".
func short(a Action) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %d", strings.ToLower(a.Kind.String()), a.ID)
	if a.Savepoint {
		b.WriteString(" savepoint")
	}
	if a.Kind == Abort {
		var ae *AbortError
		switch {
		case !errors.As(a.Err, &ae):
			fmt.Fprintf(&b, " without *AbortError: %v", a.Err)
		case ae.ID != a.ID || ae.Savepoint != a.Savepoint:
			fmt.Fprintf(&b, " with mismatched AbortError{ID: %d, Savepoint: %v}", ae.ID, ae.Savepoint)
		default:
			b.WriteString(" " + abortReason(ae))
		}
	}
	return b.String()
}

// abortReason names why ae aborted its checkpoint: expired, declined,
// commit-failed or commit-failed-by-<the checkpoint whose commit failed>.
func abortReason(ae *AbortError) string {
	switch {
	case errors.Is(ae, ErrExpired):
		return "expired"
	case errors.Is(ae, ErrDeclined):
		return "declined"
	case errors.Is(ae, ErrCommitFailed) && ae.Cause != 0:
		return fmt.Sprintf("commit-failed-by-%d", ae.Cause)
	case errors.Is(ae, ErrCommitFailed):
		return "commit-failed"
	}
	return fmt.Sprint(ae.Reason)
}

func shortAll(as []Action) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = short(a)
	}
	return out
}

// TestScenarios walks the coordinator through the protocol step by step,
// one story per file in testdata/: each command says what happens, its
// output what the coordinator answers and exactly which actions follow.
// Rewrite the expected outputs with -update.
//
// Commands (durations are offsets from the clock's origin t0):
//
//	init participants=N [last-committed=N] [interval=D] [timeout=D]
//	     [min-pause=D] [max-concurrent=N] [tolerable-failures=N]
//	                        a new Coordinator (the first command of a story)
//	tick D                  set the clock to t0+D and Tick
//	ack ID P...             Ack from each listed participant
//	ackall ID               Ack from every participant
//	decline ID P [reason]   Decline
//	done ID [@D]            CommitDone success, at the clock or at t0+D
//	fail ID [reason]        CommitDone failure at the clock
//	savepoint               TriggerSavepoint; prints "id: <its id>"
//	pending                 prints "pending: <Pending()>" ("none" if empty)
//	committed               prints "committed: <LastCommitted()>"
//	failed                  prints "failed: <JobFailed()>"
//	deadline                prints "deadline: <NextDeadline() - t0>" or "none"
//	stats                   prints Stats(), a field a line
//
// After every command the output lists the actions Ready returns, one a
// line ("trigger 3", "abort 4 declined", "commit 5 savepoint"...).
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios in testdata/ (%v)", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			var h *harness
			runTestdata(t, file, func(d *directive) string {
				if d.cmd == "init" {
					if h != nil {
						t.Fatalf("%s: init twice: a story is one coordinator", d.pos)
					}
					h = initHarness(t, d)
					return ""
				}
				if h == nil {
					t.Fatalf("%s: %s before init", d.pos, d.cmd)
				}
				return h.do(d)
			})
		})
	}
}

// initHarness reads init's key=value arguments.
func initHarness(t *testing.T, d *directive) *harness {
	t.Helper()
	var (
		cfg          Config
		last         int64
		participants int
	)
	for _, a := range d.args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			t.Fatalf("%s: init argument %q: want key=value", d.pos, a)
		}
		var err error
		switch k {
		case "participants":
			participants, err = strconv.Atoi(v)
		case "last-committed":
			last, err = strconv.ParseInt(v, 10, 64)
		case "interval":
			cfg.Interval, err = time.ParseDuration(v)
		case "timeout":
			cfg.Timeout, err = time.ParseDuration(v)
		case "min-pause":
			cfg.MinPause, err = time.ParseDuration(v)
		case "max-concurrent":
			cfg.MaxConcurrent, err = strconv.Atoi(v)
		case "tolerable-failures":
			cfg.TolerableFailures, err = strconv.Atoi(v)
		default:
			t.Fatalf("%s: unknown init argument %q", d.pos, k)
		}
		if err != nil {
			t.Fatalf("%s: init %s: %v", d.pos, a, err)
		}
	}
	if participants == 0 {
		t.Fatalf("%s: init needs participants=N", d.pos)
	}
	return newHarness(t, cfg, last, participants)
}

// do runs one command and returns what it prints, then the actions Ready
// returns after it.
func (h *harness) do(d *directive) string {
	h.t.Helper()
	f := d.args
	arg := func(i int) string {
		h.t.Helper()
		if len(f) <= i {
			h.t.Fatalf("%s: %s needs more arguments", d.pos, d.cmd)
		}
		return f[i]
	}
	id := func(i int) int64 {
		h.t.Helper()
		v, err := strconv.ParseInt(arg(i), 10, 64)
		if err != nil {
			h.t.Fatalf("%s: %v", d.pos, err)
		}
		return v
	}
	at := func(s string) time.Time {
		h.t.Helper()
		dur, err := time.ParseDuration(s)
		if err != nil {
			h.t.Fatalf("%s: %v", d.pos, err)
		}
		return t0.Add(dur)
	}
	reason := func(i int) error {
		if len(f) > i {
			return errors.New(strings.Join(f[i:], " "))
		}
		return errors.New("test failure")
	}
	var out []string
	switch d.cmd {
	case "tick":
		h.now = at(arg(0))
		h.c.Tick(h.now)
	case "ack":
		for i := 1; i < len(f); i++ {
			h.c.Ack(id(0), int(id(i)))
		}
	case "ackall":
		for p := range h.c.participants {
			h.c.Ack(id(0), p)
		}
	case "decline":
		h.c.Decline(id(0), int(id(1)), reason(2))
	case "done":
		if len(f) > 1 {
			h.now = at(strings.TrimPrefix(f[1], "@"))
		}
		h.c.CommitDone(id(0), nil, h.now)
	case "fail":
		h.c.CommitDone(id(0), reason(1), h.now)
	case "savepoint":
		out = append(out, fmt.Sprintf("id: %d", h.c.TriggerSavepoint(h.now)))
	case "pending":
		p := "none"
		if ids := h.c.Pending(); len(ids) > 0 {
			p = strings.Trim(fmt.Sprint(ids), "[]")
		}
		out = append(out, "pending: "+p)
	case "committed":
		out = append(out, fmt.Sprintf("committed: %d", h.c.LastCommitted()))
	case "failed":
		out = append(out, fmt.Sprintf("failed: %v", h.c.JobFailed()))
	case "deadline":
		dl := "none"
		if next, ok := h.c.NextDeadline(); ok {
			dl = next.Sub(t0).String()
		}
		out = append(out, "deadline: "+dl)
	case "stats":
		s := h.c.Stats()
		failure := "none"
		var ae *AbortError
		if errors.As(s.LastFailure, &ae) {
			failure = abortReason(ae) + ": " + s.LastFailure.Error()
		} else if s.LastFailure != nil {
			failure = "not an *AbortError: " + s.LastFailure.Error()
		}
		out = append(out,
			fmt.Sprintf("triggered: %d", s.Triggered),
			fmt.Sprintf("completed: %d", s.Completed),
			fmt.Sprintf("failed: %d", s.Failed),
			fmt.Sprintf("consecutive-failures: %d", s.ConsecutiveFailures),
			fmt.Sprintf("last-completed-duration: %v", s.LastCompletedDuration),
			"last-failure: "+failure)
	default:
		h.t.Fatalf("%s: unknown command %q", d.pos, d.cmd)
	}
	return strings.Join(append(out, shortAll(h.c.Ready())...), "\n")
}
