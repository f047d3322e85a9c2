package flow_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
	"github.com/onceflow/onceflow/state"
)

type Click struct {
	User string
	Page string
}

type UserCount struct {
	User string
	N    int64
}

// A keyed running count with checkpoints, tested with the in-memory kit.
func Example() {
	dir, _ := os.MkdirTemp("", "onceflow-example")
	defer os.RemoveAll(dir)

	clicks := []Click{{"ann", "/"}, {"bob", "/a"}, {"ann", "/b"}, {"", "/bot"}, {"ann", "/c"}}
	src := flowtest.NewSource(flowtest.Split(clicks, 2))
	sink := flowtest.NewSink[UserCount]()

	env := flow.New(
		flow.JobName("clicks"),
		flow.Checkpointing(100*time.Millisecond),
		flow.StateDir(filepath.Join(dir, "state")),
		flow.Logger(slog.New(slog.NewTextHandler(io.Discard, nil))),
	)
	valid := flow.Filter(flow.From(env, src), func(c Click) bool { return c.User != "" })
	counts := flow.Process(flow.KeyBy(valid, func(c Click) string { return c.User }), "clicks-per-user",
		func(s *state.Store) flow.ProcessFunc[Click, UserCount] {
			n := state.NewValue[int64](s, "n")
			return func(ctx flow.Context, c Click, out flow.Collector[UserCount]) error {
				v, _ := n.Get()
				n.Set(v + 1)
				out.Emit(UserCount{User: ctx.Key(), N: v + 1})
				return nil
			}
		})
	flow.To(counts, sink)
	if err := env.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	got := sink.Committed()
	sort.Slice(got, func(i, j int) bool {
		if got[i].User != got[j].User {
			return got[i].User < got[j].User
		}
		return got[i].N < got[j].N
	})
	fmt.Println(got)
	// Output: [{ann 1} {ann 2} {ann 3} {bob 1}]
}
