package state_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
	"github.com/onceflow/onceflow/state"
)

// visit is the input record of the examples in this file.
type visit struct {
	User string
	Page string
}

// quietLogger discards the job's logs, so that the examples print only
// their results.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// A Value holds one value per key. Here the key is the event id, and the
// value remembers that the id was seen: the job drops duplicates. State
// handles are created in the setup function of flow.Process and are scoped
// to the key of the record being processed; checkpoints save them.
func ExampleNewValue() {
	type event struct{ ID, What string }
	src := flowtest.NewSource([][]event{{{"e1", "signup"}, {"e2", "login"}, {"e1", "signup"}, {"e3", "logout"}, {"e2", "login"}}})
	sink := flowtest.NewSink[event]()

	env := flow.New(flow.Logger(quietLogger()))
	byID := flow.KeyBy(flow.From(env, src), func(e event) string { return e.ID })
	unique := flow.Process(byID, "dedupe", func(s *state.Store) flow.ProcessFunc[event, event] {
		seen := state.NewValue[bool](s, "seen")
		return func(_ flow.Context, e event, out flow.Collector[event]) error {
			if _, dup := seen.Get(); dup {
				return nil
			}
			seen.Set(true)
			out.Emit(e)
			return nil
		}
	})
	flow.To(unique, sink)

	if err := env.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sink.Committed())
	// Output:
	// [{e1 signup} {e2 login} {e3 logout}]
}

// A Map holds a map per key: here, per user, the number of visits of each
// page.
func ExampleNewMap() {
	src := flowtest.NewSource([][]visit{{{"ann", "/"}, {"bob", "/"}, {"ann", "/docs"}, {"ann", "/"}}})
	sink := flowtest.NewSink[string]()

	env := flow.New(flow.Logger(quietLogger()))
	byUser := flow.KeyBy(flow.From(env, src), func(v visit) string { return v.User })
	report := flow.Process(byUser, "pages", func(s *state.Store) flow.ProcessFunc[visit, string] {
		visits := state.NewMap[string, int](s, "visits") // page -> visits, per user
		return func(ctx flow.Context, v visit, out flow.Collector[string]) error {
			n, _ := visits.Get(v.Page)
			visits.Put(v.Page, n+1)
			out.Emit(fmt.Sprintf("%s: %s %d time(s), %d distinct page(s)", ctx.Key(), v.Page, n+1, visits.Len()))
			return nil
		}
	})
	flow.To(report, sink)

	if err := env.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(strings.Join(sink.Committed(), "\n"))
	// Output:
	// ann: / 1 time(s), 1 distinct page(s)
	// bob: / 1 time(s), 1 distinct page(s)
	// ann: /docs 1 time(s), 2 distinct page(s)
	// ann: / 2 time(s), 2 distinct page(s)
}

// A List holds a list per key: here, per user, the last two pages visited.
func ExampleNewList() {
	src := flowtest.NewSource([][]visit{{{"ann", "/a"}, {"ann", "/b"}, {"bob", "/x"}, {"ann", "/c"}}})
	sink := flowtest.NewSink[string]()

	env := flow.New(flow.Logger(quietLogger()))
	byUser := flow.KeyBy(flow.From(env, src), func(v visit) string { return v.User })
	recent := flow.Process(byUser, "recent", func(s *state.Store) flow.ProcessFunc[visit, string] {
		pages := state.NewList[string](s, "pages")
		return func(ctx flow.Context, v visit, out flow.Collector[string]) error {
			pages.Add(v.Page)
			if all := pages.Get(); len(all) > 2 {
				pages.Update(all[len(all)-2:])
			}
			out.Emit(fmt.Sprintf("%s %v", ctx.Key(), pages.Get()))
			return nil
		}
	})
	flow.To(recent, sink)

	if err := env.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(strings.Join(sink.Committed(), "\n"))
	// Output:
	// ann [/a]
	// ann [/a /b]
	// bob [/x]
	// ann [/b /c]
}

// WithTTL makes state entries expire some time after they were last
// written (processing time): here a user's session ends after 30 minutes
// without a visit. Expired entries read as absent and are dropped from the
// next checkpoint.
//
// The example replaces the job's clock (flow.Clock) with one that moves
// only when a "tick" record says so, to show expiry without waiting. That
// clock also times checkpoints, so the checkpoint timeout must cover its
// jumps: the final checkpoint of the bounded input may be under way while
// the ticks are processed.
func ExampleWithTTL() {
	type event struct {
		User, Page string
		Tick       time.Duration // a clock tick, not a visit
	}
	var now atomic.Int64 // the fake clock, in nanoseconds
	now.Store(time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }

	src := flowtest.NewSource([][]event{{
		{User: "ann", Page: "/a"},
		{Tick: 10 * time.Minute},
		{User: "ann", Page: "/b"}, // 10 minutes later: same session
		{Tick: 45 * time.Minute},
		{User: "ann", Page: "/c"}, // 45 minutes later: the session expired
	}})
	sink := flowtest.NewSink[string]()

	env := flow.New(flow.Clock(clock), flow.CheckpointTimeout(24*time.Hour), flow.Logger(quietLogger()))
	byUser := flow.KeyBy(flow.From(env, src), func(e event) string { return e.User })
	sessions := flow.Process(byUser, "sessions", func(s *state.Store) flow.ProcessFunc[event, string] {
		last := state.NewValue[string](s, "last-page", state.WithTTL(30*time.Minute))
		return func(ctx flow.Context, e event, out flow.Collector[string]) error {
			if e.Tick > 0 {
				now.Add(int64(e.Tick))
				return nil
			}
			if prev, ok := last.Get(); ok {
				out.Emit(fmt.Sprintf("%s: %s after %s", ctx.Key(), e.Page, prev))
			} else {
				out.Emit(fmt.Sprintf("%s: %s starts a session", ctx.Key(), e.Page))
			}
			last.Set(e.Page) // writing restarts the 30 minutes
			return nil
		}
	})
	flow.To(sessions, sink)

	if err := env.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(strings.Join(sink.Committed(), "\n"))
	// Output:
	// ann: /a starts a session
	// ann: /b after /a
	// ann: /c starts a session
}
