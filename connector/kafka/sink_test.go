package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/restart"
)

func newSink(tb testing.TB, cfg SinkConfig) *Sink {
	tb.Helper()
	s, err := NewSink(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func openWriter(tb testing.TB, s *Sink, subtask, par int) flow.SinkWriter[Record] {
	tb.Helper()
	w, err := s.Open(kafkatest.Context(tb), flow.SinkContext{Job: s.cfg.Job, UID: "sink", Subtask: subtask, Parallelism: par, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatalf("open writer: %v", err)
	}
	return w
}

func write(tb testing.TB, w flow.SinkWriter[Record], vals ...string) {
	tb.Helper()
	for _, v := range vals {
		if err := w.Write(kafkatest.Context(tb), Record{Key: []byte(v), Value: []byte(v)}); err != nil {
			tb.Fatalf("write %s: %v", v, err)
		}
	}
}

func prepare(tb testing.TB, w flow.SinkWriter[Record], id int64) {
	tb.Helper()
	if _, err := w.Prepare(kafkatest.Context(tb), id); err != nil {
		tb.Fatalf("prepare %d: %v", id, err)
	}
}

func TestSinkCommitPoint(t *testing.T) {
	c := startBroker(t, map[string]int32{"out": 2})
	ctx := kafkatest.Context(t)
	sink := newSink(t, SinkConfig{Client: c.client(), Job: "j", Topic: "out"})
	cp := sink.CommitPoint()
	if r, err := cp.Recover(ctx); err != nil || r.Checkpoint != 0 {
		t.Fatalf("Recover on a fresh job = %d, %v; want 0", r.Checkpoint, err)
	}
	w0, w1 := openWriter(t, sink, 0, 2), openWriter(t, sink, 1, 2)

	// Epoch 1; w0 reaches barrier 1 first and goes on writing epoch 2.
	write(t, w0, "e1-a")
	write(t, w1, "e1-b")
	prepare(t, w0, 1)
	write(t, w0, "e2-a")
	prepare(t, w1, 1)
	if err := cp.Commit(ctx, rec("j", 1)); err != nil {
		t.Fatalf("commit 1: %v", err)
	}
	got := sorted(c.ReadCommitted(t, "out"))
	if want := []string{"e1-a", "e1-b"}; !slices.Equal(got, want) {
		t.Errorf("after checkpoint 1: %q, want %q (epoch 2's record held back)", got, want)
	}

	// Checkpoint 2 is aborted by the engine (never committed): its epoch
	// is committed with checkpoint 3.
	write(t, w1, "e2-b")
	prepare(t, w0, 2)
	prepare(t, w1, 2)
	write(t, w0, "e3-a")
	cp.(flow.AbortNotifier).CheckpointAborted(ctx, 2)
	write(t, w1, "e3-b")
	prepare(t, w0, 3)
	write(t, w0, "e4-a") // after barrier 3: not in checkpoint 3
	prepare(t, w1, 3)
	if err := cp.Commit(ctx, rec("j", 3)); err != nil {
		t.Fatalf("commit 3: %v", err)
	}
	got = sorted(c.ReadCommitted(t, "out"))
	if want := []string{"e1-a", "e1-b", "e2-a", "e2-b", "e3-a", "e3-b"}; !slices.Equal(got, want) {
		t.Errorf("after checkpoint 3: %q, want %q", got, want)
	}
	if r, err := cp.Peek(ctx); err != nil || r.Checkpoint != 3 {
		t.Errorf("Peek = %d, %v; want 3", r.Checkpoint, err)
	}
	// Closing the writers aborts the open transaction with e4-a.
	w0.Close()
	w1.Close()
	if r, err := newSink(t, SinkConfig{Client: c.client(), Job: "j"}).CommitPoint().Recover(ctx); err != nil || r.Checkpoint != 3 {
		t.Errorf("Recover after restart = %d, %v; want 3", r.Checkpoint, err)
	}
	if got := c.ReadCommitted(t, "out"); slices.Contains(got, "e4-a") {
		t.Errorf("uncommitted epoch visible: %q", got)
	}
}

// A second instance of the job fences the first: the first's commit fails
// and its records never become visible.
func TestSinkZombieIsFenced(t *testing.T) {
	c := startBroker(t, map[string]int32{"out": 1})
	ctx := kafkatest.Context(t)
	old := newSink(t, SinkConfig{Client: c.client(), Job: "j", Topic: "out"})
	if _, err := old.CommitPoint().Recover(ctx); err != nil {
		t.Fatal(err)
	}
	wOld := openWriter(t, old, 0, 1)
	write(t, wOld, "zombie")
	prepare(t, wOld, 1)

	newer := newSink(t, SinkConfig{Client: c.client(), Job: "j", Topic: "out"})
	if r, err := newer.CommitPoint().Recover(ctx); err != nil || r.Checkpoint != 0 {
		t.Fatalf("newer Recover = %d, %v; want 0", r.Checkpoint, err)
	}
	err := old.CommitPoint().Commit(ctx, rec("j", 1))
	if err == nil {
		t.Fatal("the fenced instance committed")
	}
	t.Logf("zombie's commit: %v", err)
	if !errors.Is(err, ErrFenced) {
		t.Errorf("zombie's commit error %v does not match ErrFenced", err)
	}
	if err := wOld.Write(ctx, Record{Value: []byte("more")}); err == nil {
		t.Error("the fenced writer accepted a record")
	}

	wNew := openWriter(t, newer, 0, 1)
	write(t, wNew, "newer")
	prepare(t, wNew, 1)
	if err := newer.CommitPoint().Commit(ctx, rec("j", 1)); err != nil {
		t.Fatalf("newer commit: %v", err)
	}
	if got := c.ReadCommitted(t, "out"); !slices.Equal(got, []string{"newer"}) {
		t.Errorf("read_committed %q, want only the newer instance's record", got)
	}
}

func TestSinkConfigValidation(t *testing.T) {
	cl := ClientConfig{Brokers: []string{"localhost:9092"}}
	tests := []struct {
		name    string
		cfg     SinkConfig
		wantErr string
	}{
		{"negative budget", SinkConfig{Client: cl, MaxHeldBytes: -1}, "MaxHeldBytes -1 is negative"},
		{"timeout below a millisecond", SinkConfig{Client: cl, TransactionTimeout: time.Microsecond}, "below Kafka's 1ms resolution"},
		{"no brokers", SinkConfig{}, "no Kafka brokers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewSink(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("NewSink: %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestSinkBrokerRefusesTimeout(t *testing.T) {
	b := cluster{kafkatest.Start(t, broker.Config{TxnMaxTimeout: time.Minute})}
	sink := newSink(t, SinkConfig{Client: b.client(), Job: "j", Topic: "out", TransactionTimeout: 2 * time.Minute})
	_, err := sink.CommitPoint().Recover(kafkatest.Context(t))
	if err == nil || !strings.Contains(err.Error(), "transaction.timeout.ms") || !strings.Contains(err.Error(), "transaction.max.timeout.ms") || !errors.Is(err, flow.ErrUnrecoverable) {
		t.Errorf("Recover: %v, want an unrecoverable error naming transaction.timeout.ms and transaction.max.timeout.ms", err)
	}
}

// runJob runs in -> (map) -> out through the engine and returns the job.
func runJob(t *testing.T, c cluster, maxPoll int, mapFn func(Record) Record, opts ...flow.Option) *flow.Job {
	t.Helper()
	src := newSource(t, SourceConfig{Client: c.client(), Topics: []string{"in"}, Bounded: true, MaxPollRecords: maxPoll})
	sink := newSink(t, SinkConfig{Client: c.client(), Job: "j", Topic: "out", OffsetsOf: []*Source{src}})
	env := flow.New(append([]flow.Option{
		flow.JobName("j"), flow.Checkpointing(100 * time.Millisecond), flow.StateDir(t.TempDir()),
		flow.Logger(slog.New(slog.DiscardHandler)),
	}, opts...)...)
	s := flow.From(env, src, flow.UID("kafka-in"))
	if mapFn != nil {
		s = flow.Map(s, mapFn)
	}
	flow.To(s, sink, flow.UID("kafka-out"))
	j, err := env.Start(kafkatest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// checkExactlyOnce asserts out holds each input value once and the group
// offsets are at the end of the input with checkpoint metadata.
func checkExactlyOnce(t *testing.T, c cluster, j *flow.Job, input []string, perPartition int64) {
	t.Helper()
	kafkatest.CheckExactlyOnce(t, "read_committed output", c.ReadCommitted(t, "out"), input)
	offs := c.GroupOffsets(t, "onceflow-j", "in")
	if len(offs) != 3 {
		t.Fatalf("group offsets %+v, want 3 partitions", offs)
	}
	for p, o := range offs {
		if meta := fmt.Sprintf("onceflow:j:%d", j.Stats().LastCheckpoint); o.At != perPartition || o.Metadata != meta {
			t.Errorf("group offset of in/%d = %d %q, want %d %q (the last checkpoint)", p, o.At, o.Metadata, perPartition, meta)
		}
	}
}

func produceInput(t *testing.T, c cluster, n int) []string {
	var all []string
	for p := range int32(3) {
		vs := values(n, string(rune('a'+p)))
		c.produceValues(t, "in", p, time.Time{}, vs...)
		all = append(all, vs...)
	}
	slices.Sort(all)
	return all
}

func TestExactlyOnceEndToEnd(t *testing.T) {
	c := startBroker(t, map[string]int32{"in": 3, "out": 3})
	input := produceInput(t, c, 200)
	j := runJob(t, c, 0, nil)
	if err := j.Wait(); err != nil {
		t.Fatalf("job: %v", err)
	}
	if s := j.Stats(); s.CheckpointsCompleted == 0 {
		t.Errorf("stats %+v: no checkpoint completed", s)
	}
	checkExactlyOnce(t, c, j, input, 200)
}

// A task failure after some checkpoints committed: the engine restores the
// last committed one and replays; the output is still exactly the input.
func TestExactlyOnceWithFailure(t *testing.T) {
	c := startBroker(t, map[string]int32{"in": 3, "out": 3})
	input := produceInput(t, c, 300)
	var (
		seen      atomic.Int64
		failed    atomic.Bool
		job       atomic.Pointer[flow.Job]
		lastAtErr atomic.Int64
	)
	// Small polls keep the source close to the map, so barriers do not
	// queue behind the whole input and checkpoints commit mid-run.
	j := runJob(t, c, 10, func(r Record) Record {
		if !failed.Load() {
			// Pace the first run so that checkpoints commit before
			// the failure.
			time.Sleep(time.Millisecond)
			if seen.Add(1) < 300 {
				return r
			}
			if j := job.Load(); j != nil && j.Stats().LastCheckpoint > 0 && failed.CompareAndSwap(false, true) {
				lastAtErr.Store(j.Stats().LastCheckpoint)
				panic("injected failure")
			}
		}
		return r
	}, flow.Restart(restart.Config{Strategy: restart.FixedDelay, Attempts: 3, Delay: 10 * time.Millisecond}))
	job.Store(j)
	if err := j.Wait(); err != nil {
		t.Fatalf("job: %v", err)
	}
	if s := j.Stats(); s.Restarts != 1 {
		t.Errorf("restarts = %d, want 1", s.Restarts)
	}
	if lastAtErr.Load() == 0 {
		t.Error("the failure was not injected after a committed checkpoint")
	}
	t.Logf("failed after checkpoint %d; %d records seen", lastAtErr.Load(), seen.Load())
	checkExactlyOnce(t, c, j, input, 300)
}

// With exactly-once a writer's Prepare does not wait for the broker to
// acknowledge its records: the commit point flushes them before EndTxn
// (docs/design.md, "The Kafka commit point"), so a checkpoint's barrier is
// acknowledged while they are on their way. Here the broker answers no
// produce until after Prepare returned; the commit still carries the
// record.
func TestExactlyOncePrepareDoesNotWaitForAcks(t *testing.T) {
	c := startBroker(t, map[string]int32{"out": 1})
	ctx := kafkatest.Context(t)
	sink := newSink(t, SinkConfig{Client: c.client(), Job: "j", Topic: "out"})
	cp := sink.CommitPoint()
	if _, err := cp.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	w := openWriter(t, sink, 0, 1)
	defer w.Close()
	wake := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(wake) }) }
	defer release()
	cl := c.Broker.Cluster()
	cl.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		cl.KeepControl()
		cl.SleepControl(func() { <-wake })
		return nil, nil, false
	})
	write(t, w, "r1")
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := w.Prepare(pctx, 1); err != nil {
		t.Fatalf("prepare while the broker holds the produce: %v (it waited for the acknowledgement)", err)
	}
	release()
	if err := cp.Commit(ctx, rec("j", 1)); err != nil {
		t.Fatalf("commit 1: %v", err)
	}
	if got := c.ReadCommitted(t, "out"); !slices.Equal(got, []string{"r1"}) {
		t.Fatalf("after checkpoint 1: %q, want [r1]", got)
	}
}
