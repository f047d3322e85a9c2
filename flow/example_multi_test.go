package flow_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
	"github.com/onceflow/onceflow/state"
)

type Order struct {
	User string
	Item string
}

type Profile struct {
	User string
	Name string
}

// A join of two streams by user: each order is emitted with its user's
// name once both have arrived, whichever came first.
func ExampleCoProcess() {
	orders := flowtest.NewSource(flowtest.Split([]Order{{"u1", "book"}, {"u2", "pen"}, {"u1", "lamp"}, {"u3", "cup"}}, 2))
	profiles := flowtest.NewSource(flowtest.Split([]Profile{{"u1", "Ann"}, {"u2", "Bob"}}, 1))
	sink := flowtest.NewSink[string]()

	env := flow.New(flow.JobName("enrich"), flow.Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	byUser := flow.Connect(
		flow.KeyBy(flow.From(env, orders), func(o Order) string { return o.User }),
		flow.KeyBy(flow.From(env, profiles), func(p Profile) string { return p.User }))
	joined := flow.CoProcess(byUser, "enrich", func(s *state.Store) flow.CoProcessFuncs[Order, Profile, string] {
		name := state.NewValue[string](s, "name")
		waiting := state.NewList[string](s, "waiting") // items before the name
		return flow.CoProcessFuncs[Order, Profile, string]{
			OnLeft: func(ctx flow.Context, o Order, out flow.Collector[string]) error {
				if n, ok := name.Get(); ok {
					out.Emit(n + " bought a " + o.Item)
					return nil
				}
				waiting.Add(o.Item)
				return nil
			},
			OnRight: func(ctx flow.Context, p Profile, out flow.Collector[string]) error {
				name.Set(p.Name)
				items := waiting.Get()
				for _, it := range items {
					out.Emit(p.Name + " bought a " + it)
				}
				waiting.Clear()
				return nil
			},
		}
	}, flow.WithParallelism(2))
	flow.To(joined, sink)
	if err := env.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	got := sink.Committed()
	sort.Strings(got)
	for _, s := range got {
		fmt.Println(s)
	}
	// Output:
	// Ann bought a book
	// Ann bought a lamp
	// Bob bought a pen
}
