package scaleout_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/scaleout"
	"github.com/onceflow/onceflow/state"
)

// The start race of two instances on a fresh job, made deterministic
// with the embedded broker's request hooks: another instance creates the
// repartition topic between this instance's look (the topic is unknown)
// and its own create (TOPIC_ALREADY_EXISTS), and, in the second case, the
// brokers' metadata shows the new topic only a few requests later (as a
// Kafka broker that has not yet heard of the controller's topic answers).
// The instance must learn the topic's real partition count: the first
// stage's tasks partition by it (state.Hash(key) modulo the count), and
// a count of 0 failed every run of them (a division by zero in a job
// file's repartition step).
func TestScaleOutRepartitionTopicCreatedByAnother(t *testing.T) {
	for _, tc := range []struct {
		name string
		// hidden is how many metadata requests naming the topic, after
		// the other instance created it, answer that it has no leader yet.
		hidden int32
	}{
		{"created between look and create", 0},
		{"metadata shows it late", 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := kafkatest.Start(t, broker.Config{Topics: map[string]int32{"in": 4, "out": 4}})
			const repart = "race-by-key"
			kc := c.Broker.Cluster()
			adm := c.Admin(t)
			var raced, created atomic.Bool
			var hidden atomic.Int32
			hidden.Store(tc.hidden)
			kc.ControlKey(int16(kmsg.CreateTopics), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
				req := kreq.(*kmsg.CreateTopicsRequest)
				if len(req.Topics) != 1 || req.Topics[0].Topic != repart || raced.Swap(true) {
					return nil, nil, false // the other instance's create, or a later one
				}
				// This instance's create: the other instance's lands
				// first, then this one goes on to the broker.
				kc.SleepControl(func() {
					if _, err := adm.CreateTopic(context.Background(), 4, -1, nil, repart); err != nil {
						t.Errorf("the other instance's create: %v", err)
					}
					created.Store(true)
				})
				return nil, nil, false
			})
			kc.ControlKey(int16(kmsg.Metadata), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
				kc.KeepControl()
				req := kreq.(*kmsg.MetadataRequest)
				if !created.Load() || len(req.Topics) != 1 || req.Topics[0].Topic == nil || *req.Topics[0].Topic != repart || hidden.Add(-1) < 0 {
					return nil, nil, false
				}
				return leaderNotAvailable(kc, c.Addr, req), nil, true
			})

			var seen atomic.Int64 // the count a first-stage task saw, -1 before the first
			seen.Store(-1)
			stages := []scaleout.Stage{
				{Topics: []string{"in"}, Build: func(tk *scaleout.Task) (*flow.Env, error) {
					seen.Store(int64(tk.RepartitionPartitions(1)))
					env := flow.New(append(tk.Options(), flow.Checkpointing(100*time.Millisecond))...)
					src, err := tk.Source(kafka.SourceConfig{StartupMode: kafka.StartEarliest})
					if err != nil {
						return nil, err
					}
					return env, tk.Repartition(flow.From(env, src, flow.UID("in")), 1, func(r kafka.Record) string { return string(r.Key) })
				}},
				{Topics: []string{repart}, Build: func(tk *scaleout.Task) (*flow.Env, error) {
					env := flow.New(append(tk.Options(), flow.Checkpointing(100*time.Millisecond))...)
					src, err := tk.Source(kafka.SourceConfig{})
					if err != nil {
						return nil, err
					}
					sink, err := tk.Sink(kafka.SinkConfig{Topic: "out"})
					if err != nil {
						return nil, err
					}
					flow.To(flow.From(env, src, flow.UID("in")), sink, flow.UID("out"))
					return env, nil
				}},
			}
			dir := t.TempDir()
			in, err := scaleout.New(scaleout.Config{Job: "race", Client: kafka.ClientConfig{Brokers: []string{c.Addr}}, Instance: "a",
				StateDir: filepath.Join(dir, "state"), Checkpoints: filepath.Join(dir, "shared"), Stages: stages})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- in.Run(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("instance: %v", err)
				}
			}()
			c.Produce(t, "in", "k1", "v1", "k2", "v2", "k3", "v3")
			for deadline := time.Now().Add(20 * time.Second); seen.Load() < 0; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("no task of the first stage was built within 20s")
				}
			}
			if !raced.Load() || !created.Load() {
				t.Fatalf("the race was not staged: this instance's create seen %v, the other's create done %v", raced.Load(), created.Load())
			}
			if n := seen.Load(); n != 4 {
				t.Fatalf("the first stage's tasks partition into %d partitions of %s, want 4 (what the other instance created)", n, repart)
			}
			if left := hidden.Load(); left > 0 {
				t.Fatalf("%d of the %d hidden metadata answers were not asked for: the instance did not wait for the topic", left, tc.hidden)
			}
			// Every record goes through both stages.
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				if got := len(c.ReadCommitted(t, "out")); got == 3 {
					break
				} else if time.Now().After(deadline) {
					t.Fatalf("%d records in out after 30s, want 3; tasks: %+v", got, in.Tasks())
				}
			}
		})
	}
}

// leaderNotAvailable answers req as a broker that has not yet learned of
// the topics it names: each with LEADER_NOT_AVAILABLE and no partitions.
func leaderNotAvailable(kc *kfake.Cluster, addr string, req *kmsg.MetadataRequest) *kmsg.MetadataResponse {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	host, ps, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(ps)
	node := kc.CurrentNode()
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = node, host, int32(port)
	resp.Brokers = append(resp.Brokers, b)
	resp.ControllerID = node
	for _, rt := range req.Topics {
		st := kmsg.NewMetadataResponseTopic()
		st.Topic = rt.Topic
		st.ErrorCode = kerr.LeaderNotAvailable.Code
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// A task that fails restarts under the job's restart strategy
// (Config.Restart), and says so; while it waits to restart, and until
// its restarted job completed a checkpoint, its status has a problem that
// names the task and its error. With restarts off, the failure stops the
// instance: Run returns it.
func TestScaleOutTaskRestartsUnderStrategy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		restart flow.RestartConfig
		// logs must show want, and never "restarts are turned off".
		want string
		// stops: the first failure stops the instance.
		stops bool
	}{
		{"fixed-delay", flow.RestartConfig{Strategy: flow.FixedDelay, Attempts: 5, Delay: 300 * time.Millisecond}, "fixed-delay (up to 5 attempts", false},
		{"default exponential-delay", flow.RestartConfig{}, "exponential-delay (", false},
		{"none", flow.RestartConfig{Strategy: flow.NoRestart}, "none: restarts are turned off", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := kafkatest.Start(t, broker.Config{Topics: map[string]int32{"in": 1, "out": 1}})
			c.Produce(t, "in", "k1", "v1", "k2", "v2", "k3", "v3")
			var failures atomic.Int32
			failures.Store(2)
			stages := []scaleout.Stage{{Topics: []string{"in"}, Build: func(tk *scaleout.Task) (*flow.Env, error) {
				env := flow.New(append(tk.Options(), flow.Checkpointing(100*time.Millisecond))...)
				src, err := tk.Source(kafka.SourceConfig{StartupMode: kafka.StartEarliest})
				if err != nil {
					return nil, err
				}
				sink, err := tk.Sink(kafka.SinkConfig{Topic: "out"})
				if err != nil {
					return nil, err
				}
				keyed := flow.KeyBy(flow.From(env, src, flow.UID("in")), func(r kafka.Record) string { return string(r.Key) })
				out := flow.Process(keyed, "flaky", func(*state.Store) flow.ProcessFunc[kafka.Record, kafka.Record] {
					return func(_ flow.Context, r kafka.Record, out flow.Collector[kafka.Record]) error {
						if failures.Add(-1) >= 0 {
							return errors.New("flaky step failed")
						}
						out.Emit(kafka.Record{Key: r.Key, Value: r.Value})
						return nil
					}
				})
				flow.To(out, sink, flow.UID("out"))
				return env, nil
			}}}
			logs := &syncLog{}
			dir := t.TempDir()
			in, err := scaleout.New(scaleout.Config{Job: "flaky", Client: kafka.ClientConfig{Brokers: []string{c.Addr}}, Instance: "a",
				StateDir: filepath.Join(dir, "state"), Checkpoints: filepath.Join(dir, "shared"), Stages: stages, Restart: tc.restart,
				Logger: slog.New(slog.NewTextHandler(logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- in.Run(ctx) }()
			if tc.stops {
				select {
				case err := <-done:
					if err == nil || !strings.Contains(err.Error(), "will not restart") || !strings.Contains(err.Error(), "flaky step failed") {
						t.Fatalf("Run returned %v, want the task's failure, not restarted", err)
					}
					if in.Failed() == nil {
						t.Error("Failed() is nil after a task stopped the instance")
					}
				case <-time.After(30 * time.Second):
					t.Fatalf("the instance did not stop within 30s of a task failing with restarts off; logs:\n%s", logs)
				}
				if !strings.Contains(logs.String(), tc.want) {
					t.Errorf("the logs do not say %q:\n%s", tc.want, logs)
				}
				return
			}
			var problem string
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				ts := in.Tasks()
				if len(ts) == 1 && problem == "" && ts[0].Problem != "" {
					problem = ts[0].Problem
					if ts[0].LastError == "" || !strings.Contains(problem, "flaky-in-0") || !strings.Contains(problem, "flaky step failed") {
						t.Errorf("a failed task's status: %+v; want its problem to name the task and its error", ts[0])
					}
				}
				if len(ts) == 1 && problem != "" && ts[0].Problem == "" && ts[0].Restarts == 2 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the task did not fail twice and recover within 30s (first problem seen %q): %+v\nlogs:\n%s", problem, ts, logs)
				}
			}
			if got := c.ReadCommitted(t, "out"); len(got) != 3 {
				t.Errorf("out holds %q, want the 3 records once each", got)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			l := logs.String()
			if !strings.Contains(l, tc.want) || strings.Contains(l, "restarts are turned off") {
				t.Errorf("the logs do not say the task restarts under %q (or say restarts are off):\n%s", tc.want, l)
			}
		})
	}
}

// syncLog is a log destination tests read while the instance writes.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
