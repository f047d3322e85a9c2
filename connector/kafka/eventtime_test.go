package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/state"
)

// With event time a partition that never delivers holds the watermark
// back, until it goes idle: the reader lists its partitions under the
// names SplitOf gives records (AssignedSplits), so an empty one is known
// before it delivers. One source subtask reads three partitions; records
// arrive on two of them, with times moving forward; a one-second
// tumbling count fires windows while the job runs only with an idle
// timeout — or when all three deliver, which also shows the listed names
// are the records' (a listed name no record has would hold event time
// back for good).
func TestEmptyPartitionHoldsEventTimeUntilIdle(t *testing.T) {
	t.Parallel() // a broker of its own, no failpoint: it mostly waits (discovery, sessions, timeouts)
	for _, tc := range []struct {
		idle       time.Duration
		delivering int32
		fire       bool
	}{{0, 2, false}, {300 * time.Millisecond, 2, true}, {0, 3, true}} {
		idle := tc.idle
		t.Run(fmt.Sprintf("idle-timeout=%v,delivering=%d", idle, tc.delivering), func(t *testing.T) {
			c := startBroker(t, map[string]int32{"ev": 3, "win": 1})
			src := newSource(t, SourceConfig{Client: c.client(), Topics: []string{"ev"}, StartupMode: StartEarliest})
			sink, err := NewSink(SinkConfig{Client: c.client(), Topic: "win", OffsetsOf: []*Source{src}})
			if err != nil {
				t.Fatal(err)
			}
			defer sink.Close()
			env := flow.New(flow.JobName("idle"), flow.StateDir(t.TempDir()),
				flow.Checkpointing(50*time.Millisecond), flow.Logger(slog.New(slog.DiscardHandler)))
			in := flow.From(env, src, flow.UID("src"), flow.WithParallelism(1), flow.WithWatermarks(flow.Watermarks[Record]{
				Timestamp:   func(r Record) int64 { return r.Timestamp.UnixMilli() },
				Split:       SplitOf,
				IdleTimeout: idle,
				Interval:    20 * time.Millisecond,
			}))
			keyed := flow.KeyBy(in, func(r Record) string { return string(r.Key) })
			windows := flow.ProcessWithTimers(keyed, "count", func(s *state.Store) (flow.ProcessFunc[Record, Record], flow.TimerFunc[Record]) {
				n := state.NewMap[int64, int64](s, "n")
				return func(ctx flow.Context, r Record, _ flow.Collector[Record]) error {
						start := r.Timestamp.UnixMilli() / 1000 * 1000
						c, _ := n.Get(start)
						n.Put(start, c+1)
						ctx.RegisterEventTimeTimer(start + 999)
						return nil
					}, func(ctx flow.Context, out flow.Collector[Record]) error {
						start := ctx.Timer().At - 999
						c, _ := n.Get(start)
						n.Delete(start)
						out.Emit(Record{Key: []byte(ctx.Key()), Value: []byte(strconv.FormatInt(start, 10) + "=" + strconv.FormatInt(c, 10))})
						return nil
					}
			})
			flow.To(windows, sink, flow.UID("sink"))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			job, err := env.Start(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// Partitions 0 and 1 get a record every 10 ms of wall time,
			// 100 ms apart in event time; partition 2 nothing.
			cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			base := time.UnixMilli(1_600_000_000_000)
			// 2 s where no window may fire; where one must, until it does
			// (a loaded machine takes longer), at most 30 s.
			deadline := time.Now().Add(2 * time.Second)
			if tc.fire {
				deadline = time.Now().Add(30 * time.Second)
			}
			for i := 0; time.Now().Before(deadline); i++ {
				ts := base.Add(time.Duration(i) * 100 * time.Millisecond)
				for p := int32(0); p < tc.delivering; p++ {
					if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "ev", Partition: p, Key: []byte("k"), Value: []byte("v"), Timestamp: ts}).FirstErr(); err != nil {
						t.Fatal(err)
					}
				}
				if tc.fire && i%20 == 19 && len(c.ReadCommitted(t, "win")) > 0 {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			got := len(c.ReadCommitted(t, "win"))
			cancel()
			if err := job.Wait(); err != nil {
				t.Fatal(err)
			}
			switch {
			case !tc.fire && got > 0:
				t.Fatalf("%d windows fired while partition 2 never delivered and has no idle timeout", got)
			case tc.fire && got == 0:
				t.Fatal("no window fired: a partition held event time back (past its idle timeout, or under a name no record has)")
			}
		})
	}
}
