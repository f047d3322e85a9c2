package kafka

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/state"
)

// The handbook's partition change on a running event-time job
// (docs/design.md, "The Kafka source"): partitions are added while it
// runs; the records written to them are read within the discovery
// interval and counted exactly once; the ones not older than the
// watermark complete their windows, none dropped as late; the ones older
// than the watermark are counted and warned about, naming the partition.
func TestPartitionsAddedWhileRunning(t *testing.T) {
	t.Parallel() // a broker of its own, no failpoint: it mostly waits (discovery, sessions, timeouts)
	c := startBroker(t, map[string]int32{"ev": 1, "win": 1})
	src := newSource(t, SourceConfig{Client: c.client(), Topics: []string{"ev"}, DiscoveryInterval: time.Second})
	sink, err := NewSink(SinkConfig{Client: c.client(), Topic: "win", OffsetsOf: []*Source{src}})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	var logs syncBuffer
	env := flow.New(flow.JobName("grow"), flow.StateDir(t.TempDir()),
		flow.Checkpointing(50*time.Millisecond), flow.Logger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	in := flow.From(env, src, flow.UID("src"), flow.WithParallelism(1), flow.WithWatermarks(flow.Watermarks[Record]{
		Timestamp: func(r Record) int64 { return r.Timestamp.UnixMilli() },
		Split:     SplitOf,
		Interval:  20 * time.Millisecond,
	}))
	// A one-second tumbling count per key; a record whose window the
	// watermark has passed comes out as "late".
	keyed := flow.KeyBy(in, func(r Record) string { return string(r.Key) })
	windows := flow.ProcessWithTimers(keyed, "count", func(s *state.Store) (flow.ProcessFunc[Record, Record], flow.TimerFunc[Record]) {
		n := state.NewMap[int64, int64](s, "n")
		return func(ctx flow.Context, r Record, out flow.Collector[Record]) error {
				start := r.Timestamp.UnixMilli() / 1000 * 1000
				if start+999 <= ctx.Watermark() {
					out.Emit(Record{Key: []byte(ctx.Key()), Value: []byte("late " + string(r.Value))})
					return nil
				}
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
	cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	base := time.UnixMilli(1_600_000_000_000)
	produce := func(p int32, ms int64, v string) {
		t.Helper()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "ev", Partition: p, Key: []byte("k"), Value: []byte(v), Timestamp: base.Add(time.Duration(ms) * time.Millisecond)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// Event time 0..2.9s on partition 0: windows 0s and 1s fire.
	for i := range 30 {
		produce(0, int64(i)*100, "p0-"+strconv.Itoa(i))
	}
	waitFor(t, 20*time.Second, "the first windows", func() bool { return len(c.ReadCommitted(t, "win")) >= 2 })

	if _, err := c.Admin(t).CreatePartitions(kafkatest.Context(t), 1, "ev"); err != nil {
		t.Fatal(err)
	}
	added := time.Now()
	// A new producer: the first one's metadata does not know partition 1.
	cl = c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	// Written before the job found the partition: three records older
	// than the watermark (window 0s, which fired).
	for i := range 3 {
		produce(1, int64(i)*100, "old-"+strconv.Itoa(i))
	}
	waitFor(t, 5*time.Second, "read of the added partition", func() bool { return job.Stats().RecordsIn >= 33 })
	t.Logf("read the added partition's records %v after it was added", time.Since(added).Round(time.Millisecond))
	// Once it is read, the partition holds event time back like the
	// others: its records of 3..4.9s are on time, next to partition 0's.
	for i := 30; i < 50; i++ {
		produce(0, int64(i)*100, "p0-"+strconv.Itoa(i))
		produce(1, int64(i)*100, "p1-"+strconv.Itoa(i))
	}
	total := int64(30 + 3 + 40)
	waitFor(t, 10*time.Second, "every record", func() bool { return job.Stats().RecordsIn >= total })
	// Close windows up to 4.9s on both partitions.
	produce(0, 10_000, "end-0")
	produce(1, 10_000, "end-1")
	total += 2
	want := map[string]int64{"0": 10, "1000": 10, "2000": 10, "3000": 20, "4000": 20}
	got := map[string]int64{}
	var late []string
	waitFor(t, 20*time.Second, "windows 0..4s", func() bool {
		clear(got)
		late = late[:0]
		for _, r := range c.ReadCommittedRecords(t, "win") {
			v := string(r.Value)
			if l, ok := strings.CutPrefix(v, "late "); ok {
				late = append(late, l)
				continue
			}
			start, n, _ := strings.Cut(v, "=")
			st, _ := strconv.ParseInt(start, 10, 64)
			cnt, _ := strconv.ParseInt(n, 10, 64)
			got[strconv.FormatInt(st-base.UnixMilli(), 10)] += cnt
		}
		return len(got) >= len(want)
	})
	// The next checkpoint after discovery holds the added partition's
	// position: its offsets are committed with it, so a restore resumes
	// there and onceflow lag shows it.
	waitFor(t, 10*time.Second, "a checkpoint with the added partition's position", func() bool {
		return src.CommittedOffsets()[Partition{"ev", 1}] == 24 && c.GroupOffsets(t, "onceflow-grow", "ev")[1].At == 24
	})
	var srcLate int64 = -1
	for _, ts := range job.Stats().Tasks {
		if ts.UID == "src" {
			srcLate = ts.LateRecords
		}
	}
	cancel()
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	for w, n := range want {
		if got[w] != n {
			t.Errorf("window %sms counted %d records, want %d (every on-time record once)", w, got[w], n)
		}
	}
	if len(got) != len(want) {
		t.Errorf("windows %v, want %v", got, want)
	}
	if strings.Join(late, ",") != "old-0,old-1,old-2" {
		t.Errorf("late records %q, want the three old ones of the added partition", late)
	}
	if srcLate != 3 {
		t.Errorf("the source task counted %d late records, want 3", srcLate)
	}
	warned := false
	for _, l := range strings.Split(logs.String(), "\n") {
		warned = warned || strings.Contains(l, "level=WARN") && strings.Contains(l, "split=ev/1") && strings.Contains(l, "late_records=3") && strings.Contains(l, "discovery-interval")
	}
	if !warned {
		t.Errorf("no warning naming partition ev/1, its 3 late records and what to do; the log:\n%s", logs.String())
	}
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
