package flow_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
	"github.com/onceflow/onceflow/internal/checkpoint"
	"github.com/onceflow/onceflow/internal/restart"
	"github.com/onceflow/onceflow/state"
)

type event struct {
	Key string
	Seq int
}

type count struct {
	Key string
	N   int64
}

func events(keys, perKey int) []event {
	var out []event
	for i := 0; i < perKey; i++ {
		for k := 0; k < keys; k++ {
			out = append(out, event{Key: "k" + strconv.Itoa(k), Seq: i})
		}
	}
	return out
}

func countFn(s *state.Store) flow.ProcessFunc[event, count] {
	n := state.NewValue[int64](s, "n")
	return func(ctx flow.Context, e event, out flow.Collector[count]) error {
		c, _ := n.Get()
		c++
		n.Set(c)
		out.Emit(count{Key: ctx.Key(), N: c})
		return nil
	}
}

// checkCounts asserts every key's committed counts are exactly 1..want.
func checkCounts(t testing.TB, got []count, keys, want int) {
	t.Helper()
	per := map[string][]int64{}
	for _, c := range got {
		per[c.Key] = append(per[c.Key], c.N)
	}
	if len(per) != keys {
		t.Fatalf("got counts for %d keys, want %d", len(per), keys)
	}
	for k, ns := range per {
		if len(ns) != want {
			t.Fatalf("key %s: %d counts, want %d (first %v)", k, len(ns), want, ns[:min(len(ns), 10)])
		}
		for i, n := range ns {
			if n != int64(i+1) {
				t.Fatalf("key %s: count #%d is %d, want %d: a gap or a repeat", k, i, n, i+1)
			}
		}
	}
}

func TestKeyedCountBounded(t *testing.T) {
	src := flowtest.NewSource(flowtest.Split(events(10, 100), 3))
	sink := flowtest.NewSink[count]()
	env := flow.New(flow.JobName("count"))
	keyed := flow.KeyBy(flow.From(env, src), func(e event) string { return e.Key })
	flow.To(flow.Process(keyed, "count", countFn, flow.WithParallelism(2)), sink)
	if err := env.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := sink.Err(); err != nil {
		t.Fatal(err)
	}
	checkCounts(t, sink.Committed(), 10, 100)
}

func TestStatelessChain(t *testing.T) {
	var in []int
	for i := 0; i < 10000; i++ {
		in = append(in, i)
	}
	src := flowtest.NewSource(flowtest.Split(in, 2))
	sink := flowtest.NewSink[string]()
	env := flow.New()
	s := flow.Map(flow.From(env, src), func(x int) int { return x * 2 })
	s = flow.Filter(s, func(x int) bool { return x%3 == 0 })
	strs := flow.FlatMap(s, func(x int, out flow.Collector[string]) {
		out.Emit(strconv.Itoa(x))
		out.Emit("again")
	}, flow.WithParallelism(3))
	flow.To(strs, sink)
	if err := env.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := sink.Committed()
	want := 0
	for _, x := range in {
		if (x*2)%3 == 0 {
			want += 2
		}
	}
	if len(got) != want {
		t.Fatalf("got %d records, want %d", len(got), want)
	}
}

// An operator fails at seeded random records several times per run; the
// job restores its last checkpoint each time. Exactly-once: every key's
// committed counts are 1..n. At-least-once: nothing is lost.
func TestInjectedFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []flow.Option
		eo   bool
	}{
		{"exactly-once", nil, true},
		{"exactly-once-2-concurrent", []flow.Option{flow.MaxConcurrentCheckpoints(2)}, true},
		{"at-least-once", []flow.Option{flow.CheckpointMode(checkpoint.AtLeastOnce)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) { runInjectedFailures(t, tc.eo, tc.opts...) })
	}
}

func runInjectedFailures(t *testing.T, exactlyOnce bool, opts ...flow.Option) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	const keys, perKey = 20, 500
	src := flowtest.NewSource(flowtest.Split(events(keys, perKey), 4), flowtest.PerPoll(50))
	sink := flowtest.NewSink[count]()
	failures := 0
	seen := 0
	failAt := map[int]bool{}
	for i, x := 0, seed; i < 5; i++ {
		x = x*6364136223846793005 + 1442695040888963407
		failAt[int(uint64(x)%uint64(keys*perKey))] = true
	}
	env := flow.New(append([]flow.Option{quiet(), flow.JobName("eo"), flow.Checkpointing(2 * time.Millisecond), flow.StateDir(t.TempDir()),
		flow.Restart(restart.Config{Strategy: restart.FixedDelay, Attempts: 10, Delay: time.Millisecond}), flow.Parallelism(4)}, opts...)...)
	slow := flow.Map(flow.From(env, src), func(e event) event {
		if e.Seq%50 == 0 {
			time.Sleep(100 * time.Microsecond)
		}
		return e
	})
	keyed := flow.KeyBy(slow, func(e event) string { return e.Key })
	counted := flow.Process(keyed, "count", countFn, flow.WithParallelism(3))
	counted = flow.Map(counted, func(c count) count {
		seen++
		if failAt[seen] {
			delete(failAt, seen)
			failures++
			panic(fmt.Sprintf("injected failure at record %d", seen))
		}
		return c
	}, flow.WithParallelism(1))
	flow.To(counted, sink)
	job, err := env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := sink.Err(); err != nil {
		t.Fatal(err)
	}
	if failures == 0 {
		t.Fatal("no failure was injected")
	}
	if got := job.Stats().Restarts; got != int64(failures) {
		t.Fatalf("restarts %d, injected failures %d", got, failures)
	}
	if exactlyOnce {
		checkCounts(t, sink.Committed(), keys, perKey)
		return
	}
	seenCount := map[count]bool{}
	for _, c := range sink.Committed() {
		seenCount[c] = true
	}
	for k := 0; k < keys; k++ {
		for n := 1; n <= perKey; n++ {
			if !seenCount[count{Key: "k" + strconv.Itoa(k), N: int64(n)}] {
				t.Fatalf("at-least-once lost count %d of key k%d", n, k)
			}
		}
	}
}
