package flow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
	"github.com/onceflow/onceflow/internal/restart"
	"github.com/onceflow/onceflow/state"
)

// tev is an event with an event time, read from split Split.
type tev struct {
	Key   string
	TS    int64
	Split int
	Seq   int
}

// wres is one window's result.
type wres struct {
	Key   string
	Start int64
	N     int64
	// Late counts records that came after the window fired (the
	// operator below emits them as results with N 0 and Late 1).
	Late int64
}

const winSize = 1000 // ms

// timedEvents returns splits of events whose time moves forward with a
// jitter of up to jitter ms (out of order within that bound), keys
// spread, and a per-split sequence.
func timedEvents(rng *rand.Rand, splits, perSplit, keys int, jitter int64) [][]tev {
	out := make([][]tev, splits)
	for s := range out {
		base := int64(1_700_000_000_000)
		for i := 0; i < perSplit; i++ {
			base += int64(rng.IntN(20))
			ts := base - rng.Int64N(jitter+1)
			out[s] = append(out[s], tev{Key: "k" + strconv.Itoa(rng.IntN(keys)), TS: ts, Split: s, Seq: i})
		}
	}
	return out
}

// tumblingCount is a tumbling-window count per key written with timers:
// the state the window package's operator keeps, in miniature.
func tumblingCount(s *state.Store) (flow.ProcessFunc[tev, wres], flow.TimerFunc[wres]) {
	counts := state.NewMap[int64, int64](s, "counts")
	onRecord := func(ctx flow.Context, e tev, out flow.Collector[wres]) error {
		start := e.TS - e.TS%winSize
		if start+winSize-1 <= ctx.Watermark() {
			out.Emit(wres{Key: ctx.Key(), Start: start, Late: 1})
			return nil
		}
		n, _ := counts.Get(start)
		counts.Put(start, n+1)
		ctx.RegisterEventTimeTimer(start + winSize - 1)
		return nil
	}
	onTimer := func(ctx flow.Context, out flow.Collector[wres]) error {
		start := ctx.Timer().At - winSize + 1
		n, ok := counts.Get(start)
		if !ok {
			return fmt.Errorf("timer at %d of key %s has no window", ctx.Timer().At, ctx.Key())
		}
		counts.Delete(start)
		out.Emit(wres{Key: ctx.Key(), Start: start, N: n})
		return nil
	}
	return onRecord, onTimer
}

// expectedWindows counts events per key and window (nothing late).
func expectedWindows(splits [][]tev) map[string]int64 {
	want := map[string]int64{}
	for _, sp := range splits {
		for _, e := range sp {
			want[e.Key+"@"+strconv.FormatInt(e.TS-e.TS%winSize, 10)]++
		}
	}
	return want
}

// checkWindows asserts each window was emitted once with its count, and
// nothing was late.
func checkWindows(t *testing.T, got []wres, want map[string]int64) {
	t.Helper()
	seen := map[string]int64{}
	for _, r := range got {
		id := r.Key + "@" + strconv.FormatInt(r.Start, 10)
		if r.Late > 0 {
			t.Fatalf("record for window %s came late (watermark past it): the out-of-orderness bound was broken", id)
		}
		if _, dup := seen[id]; dup {
			t.Fatalf("window %s emitted twice", id)
		}
		seen[id] = r.N
	}
	if !reflect.DeepEqual(seen, want) {
		missing, wrong := 0, 0
		for id, n := range want {
			if g, ok := seen[id]; !ok {
				missing++
			} else if g != n {
				wrong++
			}
		}
		t.Fatalf("windows: %d emitted, %d expected; %d missing, %d with a wrong count", len(seen), len(want), missing, wrong)
	}
}

func windowJob(src flow.Source[tev], sink flow.Sink[wres], opts ...flow.Option) *flow.Env {
	env := flow.New(append([]flow.Option{flow.JobName("win"), quiet()}, opts...)...)
	in := flow.From(env, src, flow.UID("src"), flow.WithWatermarks(flow.Watermarks[tev]{
		Timestamp:         func(e tev) int64 { return e.TS },
		Split:             func(e tev) string { return flowtest.SplitName(e.Split) },
		MaxOutOfOrderness: 300 * time.Millisecond,
		Interval:          time.Millisecond,
	}))
	keyed := flow.KeyBy(in, func(e tev) string { return e.Key })
	flow.To(flow.ProcessWithTimers(keyed, "windows", tumblingCount, flow.WithParallelism(2)), sink, flow.UID("sink"))
	return env
}

// Out-of-order events within the bound, three splits into two keyed
// subtasks through an exchange: every window fires once with its full
// count (the bounded input's end fires the last ones), against a
// brute-force count of the input.
func TestEventTimeWindowsFireOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	splits := timedEvents(rng, 3, 3000, 50, 250)
	sink := flowtest.NewSink[wres]()
	env := windowJob(flowtest.NewSource(splits, flowtest.PerPoll(50)), sink, flow.Checkpointing(5*time.Millisecond), flow.StateDir(t.TempDir()))
	if err := env.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := sink.Err(); err != nil {
		t.Fatal(err)
	}
	checkWindows(t, sink.Committed(), expectedWindows(splits))
}

// Windows fire while the job runs, before its input ends: the watermark
// follows the records, and a split that never delivers holds it back
// until it goes idle.
func TestIdleSplitReleasesEventTime(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	splits := timedEvents(rng, 2, 2000, 10, 50)
	splits = append(splits, nil) // split-2 has nothing, ever
	for _, idle := range []time.Duration{0, 100 * time.Millisecond} {
		t.Run("idle-timeout="+idle.String(), func(t *testing.T) {
			sink := flowtest.NewSink[wres]()
			env := flow.New(flow.JobName("idle"), quiet(), flow.Checkpointing(5*time.Millisecond), flow.StateDir(t.TempDir()), flow.Parallelism(1))
			// One source subtask reads the three splits, slowly enough
			// that the two with records stay active for a second.
			in := flow.From(env, flowtest.NewSource(splits, flowtest.Unbounded(), flowtest.PerPoll(4)), flow.WithParallelism(1), flow.WithWatermarks(flow.Watermarks[tev]{
				Timestamp:   func(e tev) int64 { return e.TS },
				Split:       func(e tev) string { return flowtest.SplitName(e.Split) },
				IdleTimeout: idle,
				Interval:    time.Millisecond,
			}))
			var n atomic.Int64
			slow := flow.Map(in, func(e tev) tev {
				if n.Add(1)%4 == 0 {
					time.Sleep(time.Millisecond)
				}
				return e
			})
			flow.To(flow.ProcessWithTimers(flow.KeyBy(slow, func(e tev) string { return e.Key }), "windows", tumblingCount), sink)
			job, err := env.Start(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				job.Stop()
				_ = job.Wait()
			}()
			if idle == 0 {
				// All input read, checkpoints committed: still no window,
				// the empty split holds event time at its start.
				waitFor(t, "the input read", func() bool { return job.Stats().RecordsIn == 4000 })
				time.Sleep(300 * time.Millisecond)
				if n := len(sink.Committed()); n != 0 {
					t.Fatalf("%d windows fired while a split that never delivered held event time back", n)
				}
				return
			}
			waitFor(t, "windows to fire", func() bool { return len(sink.Committed()) > 10 })
			// Every task shows the event time it reached.
			for _, task := range job.Stats().Tasks {
				if task.Watermark < 1_700_000_000_000 || task.Watermark == flow.MaxWatermark {
					t.Errorf("task %s: watermark %d in Stats while windows fire", task.UID, task.Watermark)
				}
			}
		})
	}
}

// A restart in the middle of open windows: the timers and the watermark
// come back from the checkpoint (at another parallelism too), and every
// window is emitted exactly once in the committed output.
func TestEventTimeAcrossFailovers(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	splits := timedEvents(rng, 3, 4000, 40, 250)
	// Each record at a multiple of 700 in its split fails its attempt
	// once: about 17 failovers, each with progress before it.
	var mu sync.Mutex
	failed := map[[2]int]bool{}
	sink := flowtest.NewSink[wres]()
	env := flow.New(flow.JobName("win-fail"), quiet(), flow.Checkpointing(3*time.Millisecond), flow.StateDir(t.TempDir()),
		flow.Restart(restart.Config{Strategy: restart.FixedDelay, Attempts: 100, Delay: time.Millisecond}))
	in := flow.From(env, flowtest.NewSource(splits, flowtest.PerPoll(20)), flow.WithWatermarks(flow.Watermarks[tev]{
		Timestamp:         func(e tev) int64 { return e.TS },
		Split:             func(e tev) string { return flowtest.SplitName(e.Split) },
		MaxOutOfOrderness: 300 * time.Millisecond,
		Interval:          time.Millisecond,
	}))
	failing := flow.Map(in, func(e tev) tev {
		if e.Seq%700 == 699 {
			mu.Lock()
			first := !failed[[2]int{e.Split, e.Seq}]
			failed[[2]int{e.Split, e.Seq}] = true
			mu.Unlock()
			if first {
				panic("injected failure")
			}
		}
		return e
	})
	flow.To(flow.ProcessWithTimers(flow.KeyBy(failing, func(e tev) string { return e.Key }), "windows", tumblingCount, flow.WithParallelism(2)), sink)
	job, err := env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	if job.Stats().Restarts < 3 {
		t.Fatalf("%d restarts: the test did not fail over mid-stream", job.Stats().Restarts)
	}
	if err := sink.Err(); err != nil {
		t.Fatal(err)
	}
	checkWindows(t, sink.Committed(), expectedWindows(splits))
}

// Processing-time timers fire by the clock, and are state: a job stopped
// with them pending fires them after its restart.
func TestProcessingTimeTimers(t *testing.T) {
	dir := t.TempDir()
	type fired struct{ Key string }
	build := func(src flow.Source[event], sink flow.Sink[fired], delay time.Duration) *flow.Env {
		env := flow.New(flow.JobName("pt"), quiet(), flow.Checkpointing(5*time.Millisecond), flow.StateDir(dir))
		keyed := flow.KeyBy(flow.From(env, src, flow.UID("src")), func(e event) string { return e.Key })
		flow.To(flow.ProcessWithTimers(keyed, "pt", func(s *state.Store) (flow.ProcessFunc[event, fired], flow.TimerFunc[fired]) {
			return func(ctx flow.Context, e event, out flow.Collector[fired]) error {
					ctx.RegisterProcessingTimeTimer(ctx.ProcessingTime() + delay.Milliseconds())
					return nil
				}, func(ctx flow.Context, out flow.Collector[fired]) error {
					if ctx.Timer().Domain != state.ProcessingTime {
						return fmt.Errorf("timer domain %d", ctx.Timer().Domain)
					}
					out.Emit(fired{ctx.Key()})
					return nil
				}
		}), sink, flow.UID("sink"))
		return env
	}
	sink := flowtest.NewSink[fired]()
	src := flowtest.NewSource([][]event{events(5, 1)}, flowtest.Unbounded())
	// First run: timers an hour away, then a stop (with its checkpoint).
	job, err := build(src, sink, time.Hour).Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the records", func() bool { return job.Stats().RecordsIn == 5 && job.Stats().LastCheckpoint > 0 })
	job.Stop()
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	if n := len(sink.Committed()); n != 0 {
		t.Fatalf("%d timers fired an hour early", n)
	}
	// Second run: the restored timers are due an hour from the first
	// run; a clock an hour and a minute ahead makes them due at once.
	env := build(src, sink, time.Hour)
	flow.Clock(func() time.Time { return time.Now().Add(61 * time.Minute) })(env)
	job, err = env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the restored timers to fire", func() bool { return len(sink.Committed()) == 5 })
	job.Stop()
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, f := range sink.Committed() {
		keys = append(keys, f.Key)
	}
	sort.Strings(keys)
	if want := []string{"k0", "k1", "k2", "k3", "k4"}; !reflect.DeepEqual(keys, want) {
		t.Fatalf("fired for %q, want %q", keys, want)
	}
}

// Timers in an operator built without them are refused with the way out.
func TestTimersNeedProcessWithTimers(t *testing.T) {
	env := flow.New(flow.JobName("no-timers"), quiet())
	keyed := flow.KeyBy(flow.From(env, flowtest.NewSource([][]event{events(1, 1)})), func(e event) string { return e.Key })
	flow.To(flow.Process(keyed, "p", func(s *state.Store) flow.ProcessFunc[event, event] {
		return func(ctx flow.Context, e event, out flow.Collector[event]) error {
			ctx.RegisterEventTimeTimer(1)
			return nil
		}
	}), flowtest.NewSink[event]())
	err := env.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "flow.ProcessWithTimers") {
		t.Fatalf("err = %v, want one naming flow.ProcessWithTimers", err)
	}
}

// The window crash child: the event-time job in a process the tests
// SIGKILL (or crash at a failpoint), throttled to last a second or two;
// its output goes to a file sink.
const windowChildEnv = "ONCEFLOW_WINDOW_CHILD"

func windowChildInput() [][]tev { return timedEvents(rand.New(rand.NewPCG(7, 8)), 3, 3000, 30, 250) }

func windowChild(dir string) int {
	sink := flowtest.NewFileSink(filepath.Join(dir, "out"), func(r wres) []byte {
		b, _ := json.Marshal(r)
		return b
	})
	var n atomic.Int64
	env := flow.New(flow.JobName("crash"), quiet(), flow.Checkpointing(15*time.Millisecond), flow.StateDir(filepath.Join(dir, "state")),
		flow.RetainedCheckpoints(2), flow.Restart(restart.Config{Strategy: restart.None}))
	in := flow.From(env, flowtest.NewSource(windowChildInput(), flowtest.PerPoll(20)), flow.UID("src"), flow.WithWatermarks(flow.Watermarks[tev]{
		Timestamp:         func(e tev) int64 { return e.TS },
		Split:             func(e tev) string { return flowtest.SplitName(e.Split) },
		MaxOutOfOrderness: 300 * time.Millisecond,
		Interval:          time.Millisecond,
	}))
	throttled := flow.Map(in, func(e tev) tev {
		if n.Add(1)%10 == 0 {
			time.Sleep(time.Millisecond)
		}
		return e
	})
	keyed := flow.KeyBy(throttled, func(e tev) string { return e.Key })
	flow.To(flow.ProcessWithTimers(keyed, "windows", tumblingCount, flow.WithParallelism(2)), sink, flow.UID("sink"))
	if err := env.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

func windowOutput(t *testing.T, r *crashRun) []wres {
	lines, err := flowtest.ReadCommitted(filepath.Join(r.dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	var got []wres
	for _, l := range lines {
		var w wres
		if err := json.Unmarshal(l, &w); err != nil {
			t.Fatalf("bad output line %q: %v", l, err)
		}
		got = append(got, w)
	}
	return got
}

// SIGKILLs at random moments of an event-time job, windows open and
// firing: every window is in the committed output once, with its count.
func TestWindowsSIGKILL(t *testing.T) {
	rng := crashSeed(t)
	r := newCrashRun(t, "exactly-once")
	r.child = windowChildEnv
	for i := 0; i < crashKills(); i++ {
		r.killAfter(time.Duration(20+rng.IntN(150)) * time.Millisecond)
	}
	r.finish()
	checkWindows(t, windowOutput(t, r), expectedWindows(windowChildInput()))
}

// Crashes at every step of the commit protocol, among them between windows
// firing (their results written to the sink, prepared) and the commit
// point: the restored windows fire again and their results commit once.
func TestWindowsFailpointCrashes(t *testing.T) {
	runFailpointCrashes(t, windowChildEnv, func(t *testing.T, r *crashRun) {
		checkWindows(t, windowOutput(t, r), expectedWindows(windowChildInput()))
	})
}

// The watermark is in the checkpoint: after a restart, a record for a
// window that fired before it is late, as it was before the restart (a
// watermark starting from nothing would take it as on time, and the
// window would fire a second time).
func TestWatermarkSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	sink := flowtest.NewSink[wres]()
	run := func(split []tev, until func() bool) {
		t.Helper()
		env := flow.New(flow.JobName("wm"), quiet(), flow.Checkpointing(5*time.Millisecond), flow.StateDir(dir))
		in := flow.From(env, flowtest.NewSource([][]tev{split}, flowtest.Unbounded(), flowtest.PerPoll(1)), flow.UID("src"),
			flow.WithWatermarks(flow.Watermarks[tev]{
				Timestamp: func(e tev) int64 { return e.TS },
				Split:     func(e tev) string { return flowtest.SplitName(e.Split) },
				Interval:  time.Millisecond,
			}))
		flow.To(flow.ProcessWithTimers(flow.KeyBy(in, func(e tev) string { return e.Key }), "windows", tumblingCount), sink, flow.UID("sink"))
		job, err := env.Start(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the run's output", until)
		job.Stop()
		if err := job.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	first := []tev{{Key: "u", TS: 100}, {Key: "u", TS: 5000}}
	run(first, func() bool { return len(sink.Committed()) == 1 }) // [0, 1000) fired
	run(append(first, tev{Key: "u", TS: 200, Seq: 2}), func() bool { return len(sink.Committed()) == 2 })
	got := sink.Committed()
	if want := []wres{{Key: "u", Start: 0, N: 1}, {Key: "u", Start: 0, Late: 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("output %+v, want %+v (the window once, then the record after the restart late)", got, want)
	}
}
