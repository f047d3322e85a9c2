package scaleout_test

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/verify"
	"github.com/onceflow/onceflow/scaleout"
)

// A job of two stages built in Go: the input is not partitioned by key
// (records go round robin), so the first stage repartitions by key into
// the second stage's topic, where the count per key runs. Two instances
// in one process (so the race detector sees the member callbacks and the
// tasks): b joins and leaves while input comes in; the output is counted
// exactly once, and the repartition topic is purged behind its readers.
func TestScaleOutGoJobTwoStages(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{Topics: map[string]int32{"in": 4, "out": 4}, GroupSessionTimeout: 6 * time.Second})
	dir := t.TempDir()
	const repart = "gj-by-key"
	stages := countStages(repart, "out")
	type inst struct {
		in     *scaleout.Instance
		cancel context.CancelFunc
		done   chan error
	}
	start := func(name string) *inst {
		in, err := scaleout.New(scaleout.Config{Job: "gj", Client: kafka.ClientConfig{Brokers: []string{c.Addr}}, Instance: name,
			StateDir: filepath.Join(dir, "state"), Checkpoints: filepath.Join(dir, "shared"), Stages: stages})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		i := &inst{in: in, cancel: cancel, done: make(chan error, 1)}
		go func() { i.done <- in.Run(ctx) }()
		return i
	}
	stop := func(name string, i *inst) {
		i.cancel()
		select {
		case err := <-i.done:
			if err != nil {
				t.Fatalf("instance %s: %v", name, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("instance %s did not stop", name)
		}
	}
	cl := c.Client(t, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produce := func(from, n int) {
		var rs []*kgo.Record
		for i := from; i < from+n; i++ {
			rs = append(rs, &kgo.Record{Topic: "in", Key: []byte("k" + strconv.Itoa(i%40)), Value: []byte("seq-" + strconv.Itoa(i))})
		}
		if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	adm := kadm.NewClient(c.Client(t))
	caughtUp := func(what string) {
		for deadline := time.Now().Add(time.Minute); !kafkatest.CaughtUp(t.Context(), adm, "gj", "in") || !kafkatest.CaughtUp(t.Context(), adm, "gj", repart); {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not caught up within a minute", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	produce(0, 2000)
	a := start("a")
	caughtUp("a alone")
	if ts := a.in.Tasks(); len(ts) != 8 {
		t.Errorf("instance a alone runs %d tasks, want 8 (4 partitions of in, 4 of %s): %+v", len(ts), repart, ts)
	}
	b := start("b")
	produce(2000, 2000)
	time.Sleep(2 * time.Second) // b takes partitions
	produce(4000, 2000)
	caughtUp("a and b")
	if gen, _ := b.in.Generation(); gen < 0 {
		t.Errorf("instance b is not a member of the group (generation %d)", gen)
	}
	stop("b", b)
	produce(6000, 2000)
	caughtUp("a again")
	// What the second stage committed past is deleted behind it (at most
	// every 5 s, after a checkpoint).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		starts, err := adm.ListStartOffsets(t.Context(), repart)
		if err != nil {
			t.Fatal(err)
		}
		purged := false
		starts.Each(func(o kadm.ListedOffset) { purged = purged || o.Offset > 0 })
		if purged {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no record of %s was deleted within 30 s after its readers committed past them", repart)
		}
	}
	stop("a", a)
	rep, err := verify.Run(context.Background(), verify.Config{Brokers: []string{c.Addr}, Input: "in", Output: "out", Mode: verify.Count})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatal(rep)
	}
	if rep.Outputs != 8000 {
		t.Fatalf("%d counts in out, want 8000", rep.Outputs)
	}
}

// New refuses a configuration it cannot run, and says what is missing.
func TestNewRefuses(t *testing.T) {
	build := func(*scaleout.Task) (*flow.Env, error) { return nil, nil }
	ok := scaleout.Config{Job: "j", Instance: "i", StateDir: "s", Checkpoints: "c", Stages: []scaleout.Stage{{Topics: []string{"in"}, Build: build}}}
	for _, tc := range []struct {
		change func(*scaleout.Config)
		want   string
	}{
		{func(c *scaleout.Config) { c.Job = "" }, "Config.Job is empty"},
		{func(c *scaleout.Config) { c.Instance = "a/b" }, `Config.Instance "a/b" may only use`},
		{func(c *scaleout.Config) { c.StateDir = "" }, "Config.StateDir is empty"},
		{func(c *scaleout.Config) { c.Checkpoints = "" }, "Config.Checkpoints is empty"},
		{func(c *scaleout.Config) { c.Stages = nil }, "Config.Stages is empty"},
		{func(c *scaleout.Config) { c.Stages[0].Build = nil }, "stage 0 has no Build function"},
		{func(c *scaleout.Config) {
			c.Stages = append(c.Stages, scaleout.Stage{Topics: []string{"r1", "r2"}, Build: build})
		}, "stage 1 reads 2 topics"},
		{func(c *scaleout.Config) {
			c.Stages = append(c.Stages, scaleout.Stage{Topics: []string{"in"}, Build: build})
		}, "topic in is the input of stages 0 and 1"},
	} {
		cfg := ok
		cfg.Stages = append([]scaleout.Stage(nil), ok.Stages...)
		tc.change(&cfg)
		_, err := scaleout.New(cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New: %v, want an error saying %q", err, tc.want)
		}
	}
	if _, err := scaleout.New(ok); err != nil {
		t.Errorf("New(a valid config): %v", err)
	}
}

// A task whose job fails restarts with back-off while its instance owns
// the partition; a failure no restart mends (here a sink without
// exactly-once delivery) stops the instance, and Run returns it naming
// the task.
func TestTaskRestartsThenFatalStopsInstance(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{Topics: map[string]int32{"in": 1}})
	dir := t.TempDir()
	var builds atomic.Int32
	in, err := scaleout.New(scaleout.Config{Job: "fj", Client: kafka.ClientConfig{Brokers: []string{c.Addr}}, Instance: "a",
		StateDir: filepath.Join(dir, "state"), Checkpoints: filepath.Join(dir, "shared"),
		Stages: []scaleout.Stage{{Topics: []string{"in"}, Build: func(tk *scaleout.Task) (*flow.Env, error) {
			if builds.Add(1) == 1 {
				return nil, errors.New("the database is down")
			}
			if _, err := tk.Source(kafka.SourceConfig{}); err != nil {
				return nil, err
			}
			_, err := tk.Sink(kafka.SinkConfig{Topic: "out", Delivery: kafka.DeliveryAtLeastOnce})
			return nil, err
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- in.Run(context.Background()) }()
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the instance did not stop after its task's fatal error")
	}
	if !errors.Is(err, flow.ErrInvalidJob) || !strings.Contains(err.Error(), "task fj-in-0 (partition in/0)") || !strings.Contains(err.Error(), "scale-out needs exactly-once") {
		t.Fatalf("Run: %v, want flow.ErrInvalidJob naming task fj-in-0 and the exactly-once delivery it needs", err)
	}
	if n := builds.Load(); n != 2 {
		t.Fatalf("the task was built %d times, want 2 (a restart after the first failure, none after the fatal one)", n)
	}
}
