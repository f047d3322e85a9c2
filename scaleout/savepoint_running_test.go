package scaleout_test

import (
	"context"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/scaleout"
	"github.com/onceflow/onceflow/state"
)

// countStages is a job of two stages: the first re-keys its input by
// key into the repartition topic repart, the second counts each key and
// writes the count.
func countStages(repart, out string) []scaleout.Stage {
	return []scaleout.Stage{
		{Topics: []string{"in"}, Build: func(tk *scaleout.Task) (*flow.Env, error) {
			env := flow.New(append(tk.Options(), flow.Checkpointing(100*time.Millisecond))...)
			src, err := tk.Source(kafka.SourceConfig{StartupMode: kafka.StartEarliest})
			if err != nil {
				return nil, err
			}
			in := flow.From(env, src, flow.UID("in"))
			return env, tk.Repartition(in, 1, func(r kafka.Record) string { return string(r.Key) })
		}},
		{Topics: []string{repart}, Build: func(tk *scaleout.Task) (*flow.Env, error) {
			env := flow.New(append(tk.Options(), flow.Checkpointing(100*time.Millisecond))...)
			src, err := tk.Source(kafka.SourceConfig{})
			if err != nil {
				return nil, err
			}
			sink, err := tk.Sink(kafka.SinkConfig{Topic: out})
			if err != nil {
				return nil, err
			}
			counts := flow.Process(flow.KeyBy(flow.From(env, src, flow.UID("in")), func(r kafka.Record) string { return string(r.Key) }), "count",
				func(s *state.Store) flow.ProcessFunc[kafka.Record, kafka.Record] {
					n := state.NewValue[int64](s, "n")
					return func(_ flow.Context, r kafka.Record, out flow.Collector[kafka.Record]) error {
						v, _ := n.Get()
						n.Set(v + 1)
						out.Emit(kafka.Record{Key: r.Key, Value: strconv.AppendInt(nil, v+1, 10)})
						return nil
					}
				}, flow.UID("count"))
			flow.To(counts, sink, flow.UID("out"))
			return env, nil
		}},
	}
}

// A savepoint of a running job of two stages on two instances, taken
// while records keep arriving (docs/design.md, "Savepoints of the whole
// job"): the stages pause one after the other and run on, so the job's
// output stays exact (every key's counts 1..n, none twice, none
// skipped); restored after the job ran past it, each key's count ends
// at its total, neither the records in flight in the repartition topic
// at the savepoint lost nor counted twice. Taking every task's
// savepoint at once instead fails this: records between the stages are
// in neither stage's savepoint, or in both.
func TestJobSavepointRunningTwoStages(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{Topics: map[string]int32{"in": 2, "out": 2}})
	dir := t.TempDir()
	const repart = "rs-by-key"
	stages := countStages(repart, "out")
	type inst struct {
		in     *scaleout.Instance
		cancel context.CancelFunc
		done   chan error
	}
	start := func(name, from string) *inst {
		in, err := scaleout.New(scaleout.Config{Job: "rs", Client: kafka.ClientConfig{Brokers: []string{c.Addr}}, Instance: name,
			StateDir: filepath.Join(dir, "state"), Checkpoints: filepath.Join(dir, "shared"), Stages: stages, FromSavepoint: from,
			SavepointTimeout: 30 * time.Second, RepartitionPartitions: 3})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		i := &inst{in: in, cancel: cancel, done: make(chan error, 1)}
		go func() { i.done <- in.Run(ctx) }()
		return i
	}
	stop := func(is ...*inst) {
		t.Helper()
		for _, i := range is {
			i.cancel()
		}
		for _, i := range is {
			select {
			case err := <-i.done:
				if err != nil {
					t.Fatalf("instance: %v", err)
				}
			case <-time.After(time.Minute):
				t.Fatal("instance did not stop")
			}
		}
	}
	const keys = 10
	total := map[string]int{}
	var mu sync.Mutex
	next := 0
	pcl := c.Client(t)
	produce := func(n int) error {
		mu.Lock()
		defer mu.Unlock()
		var rs []*kgo.Record
		for range n {
			k := "k" + strconv.Itoa(next%keys)
			rs = append(rs, &kgo.Record{Topic: "in", Key: []byte(k), Value: []byte("v" + strconv.Itoa(next))})
			total[k]++
			next++
		}
		return pcl.ProduceSync(context.Background(), rs...).FirstErr()
	}
	adm := kadm.NewClient(c.Client(t))
	caughtUp := func(what string) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); !kafkatest.CaughtUp(t.Context(), adm, "rs", "in") || !kafkatest.CaughtUp(t.Context(), adm, "rs", repart); {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not caught up within a minute", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	running := func(what string, is ...*inst) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			n, paused := 0, 0
			for _, i := range is {
				for _, ts := range i.in.Tasks() {
					if ts.Running && ts.Savepointed == "" {
						n++
					}
					if ts.Paused {
						paused++
					}
				}
			}
			if n == 5 && paused == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d of 5 tasks run, %d paused", what, n, paused)
			}
		}
	}
	// Run 1: two instances under a steady input.
	if err := produce(200); err != nil {
		t.Fatal(err)
	}
	a, b := start("a", ""), start("b", "")
	caughtUp("run 1")
	running("run 1", a, b)
	quit := make(chan struct{})
	feeding := make(chan error, 1)
	go func() {
		for {
			select {
			case <-quit:
				feeding <- nil
				return
			case <-time.After(5 * time.Millisecond):
			}
			if err := produce(5); err != nil {
				feeding <- err
				return
			}
		}
	}()
	time.Sleep(300 * time.Millisecond)
	sp, err := b.in.Savepoint(t.Context(), "", false)
	if err != nil {
		t.Fatal(err)
	}
	m, err := scaleout.LoadJobSavepoint(sp)
	if err != nil {
		t.Fatal(err)
	}
	if m.Kind != "savepoint" || len(m.Tasks) != 5 {
		t.Fatalf("job savepoint: kind %s, %d tasks; want a savepoint of 5 tasks (2 of in, 3 of %s): %+v", m.Kind, len(m.Tasks), repart, m.Tasks)
	}
	// The job runs on: every task runs again, and counts what comes.
	running("after the savepoint", a, b)
	time.Sleep(300 * time.Millisecond)
	close(quit)
	if err := <-feeding; err != nil {
		t.Fatal(err)
	}
	if err := produce(100); err != nil {
		t.Fatal(err)
	}
	caughtUp("after the savepoint")
	stop(a, b)
	// The output of the run that paused: every key's counts 1..n.
	seq := map[string][]int{}
	for _, r := range c.ReadCommittedRecords(t, "out") {
		n, err := strconv.Atoi(string(r.Value))
		if err != nil {
			t.Fatal(err)
		}
		seq[string(r.Key)] = append(seq[string(r.Key)], n)
	}
	for k, want := range total {
		got := seq[k]
		ok := len(got) == want
		for i := 0; ok && i < len(got); i++ {
			ok = got[i] == i+1
		}
		if !ok {
			t.Errorf("key %s: the running job counted %d records as %v; want 1..%d", k, len(got), got, want)
		}
	}
	t.Logf("%d records, %d keys; the savepoint's tasks: %+v", next, keys, m.Tasks)
	// Run 2: restore the savepoint on one instance, after the job ran
	// past it. Every key's count ends at its total.
	ends, err := adm.ListEndOffsets(t.Context(), "out")
	if err != nil {
		t.Fatal(err)
	}
	r := start("a", sp)
	// The group's offsets are at the ends already: wait until the
	// restored run wrote past what the first run did.
	restored := func() (map[string]int, int) {
		last := map[string]int{}
		n := 0
		for _, r := range c.ReadCommittedRecords(t, "out") {
			if end, ok := ends.Lookup("out", r.Partition); ok && r.Offset >= end.Offset {
				v, _ := strconv.Atoi(string(r.Value))
				last[string(r.Key)] = max(last[string(r.Key)], v)
				n++
			}
		}
		return last, n
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		last, _ := restored()
		done := true
		for k, want := range total {
			done = done && last[k] >= want
		}
		if done || time.Now().After(deadline) {
			break
		}
	}
	caughtUp("restored")
	time.Sleep(time.Second)
	stop(r)
	last, n := restored()
	for k, want := range total {
		if last[k] != want {
			t.Errorf("key %s counted %d records after the restore of the running savepoint, want %d (last counts: %v, totals: %v)", k, last[k], want, last, total)
		}
	}
	if n == 0 {
		t.Errorf("the restore wrote nothing: the savepoint was taken after all input")
	}
}
