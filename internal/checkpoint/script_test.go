package checkpoint

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// t0 is the fake clock's origin; scripts give times as offsets from it.
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

// short renders an action compactly for scripts: "trigger 3", "commit 3
// savepoint", "abort 4 declined", "abort 5 commit-failed-by-4", "failjob 4".
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
		case errors.Is(ae, ErrExpired):
			b.WriteString(" expired")
		case errors.Is(ae, ErrDeclined):
			b.WriteString(" declined")
		case errors.Is(ae, ErrCommitFailed) && ae.Cause != 0:
			fmt.Fprintf(&b, " commit-failed-by-%d", ae.Cause)
		case errors.Is(ae, ErrCommitFailed):
			b.WriteString(" commit-failed")
		default:
			fmt.Fprintf(&b, " %v", ae.Reason)
		}
	}
	return b.String()
}

func shortAll(as []Action) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = short(a)
	}
	return out
}

// run executes a script, one command per line, each optionally followed by
// "=> action, action" listing exactly the actions Ready must return after it
// (no "=>" means none). Commands:
//
//	tick 1500ms            set the clock to t0+1500ms and Tick
//	ack ID P...            Ack from each listed participant
//	ackall ID              Ack from every participant
//	decline ID P [reason]  Decline
//	done ID [@1s]          CommitDone success, at the clock or at t0+1s
//	fail ID [reason]       CommitDone failure at the clock
//	savepoint ID           TriggerSavepoint, which must return ID
//	pending [ID...]        Pending() must equal the list
//	committed ID           LastCommitted() must equal ID
//	failed                 JobFailed() must be true
//
// Blank lines and lines starting with # are skipped.
func (h *harness) run(script string) {
	h.t.Helper()
	for n, line := range strings.Split(script, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cmd, wantText, hasWant := strings.Cut(line, "=>")
		var want []string
		if hasWant {
			for w := range strings.SplitSeq(wantText, ",") {
				want = append(want, strings.Join(strings.Fields(w), " "))
			}
		}
		h.step(n+1, strings.Fields(cmd))
		if got := shortAll(h.c.Ready()); !slices.Equal(got, want) {
			h.t.Fatalf("line %d %q:\n got actions %q\nwant actions %q", n+1, line, got, want)
		}
	}
}

func (h *harness) step(n int, f []string) {
	h.t.Helper()
	id := func(i int) int64 {
		h.t.Helper()
		if len(f) <= i {
			h.t.Fatalf("line %d: %s needs more arguments", n, f[0])
		}
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			h.t.Fatalf("line %d: %v", n, err)
		}
		return v
	}
	at := func(s string) time.Time {
		h.t.Helper()
		d, err := time.ParseDuration(s)
		if err != nil {
			h.t.Fatalf("line %d: %v", n, err)
		}
		return t0.Add(d)
	}
	reason := func(i int) error {
		if len(f) > i {
			return errors.New(strings.Join(f[i:], " "))
		}
		return errors.New("test failure")
	}
	switch f[0] {
	case "tick":
		h.now = at(f[1])
		h.c.Tick(h.now)
	case "ack":
		for i := 2; i < len(f); i++ {
			h.c.Ack(id(1), int(id(i)))
		}
	case "ackall":
		for p := range h.c.participants {
			h.c.Ack(id(1), p)
		}
	case "decline":
		h.c.Decline(id(1), int(id(2)), reason(3))
	case "done":
		if len(f) > 2 {
			h.now = at(strings.TrimPrefix(f[2], "@"))
		}
		h.c.CommitDone(id(1), nil, h.now)
	case "fail":
		h.c.CommitDone(id(1), reason(2), h.now)
	case "savepoint":
		if got := h.c.TriggerSavepoint(h.now); got != id(1) {
			h.t.Fatalf("line %d: TriggerSavepoint returned %d, want %d", n, got, id(1))
		}
	case "pending":
		want := []int64{}
		for i := 1; i < len(f); i++ {
			want = append(want, id(i))
		}
		if got := h.c.Pending(); !slices.Equal(got, want) {
			h.t.Fatalf("line %d: Pending() = %v, want %v", n, got, want)
		}
	case "committed":
		if got := h.c.LastCommitted(); got != id(1) {
			h.t.Fatalf("line %d: LastCommitted() = %d, want %d", n, got, id(1))
		}
	case "failed":
		if !h.c.JobFailed() {
			h.t.Fatalf("line %d: JobFailed() = false, want true", n)
		}
	default:
		h.t.Fatalf("line %d: unknown command %q", n, f[0])
	}
}
