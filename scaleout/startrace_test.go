package scaleout_test

import (
	"context"
	"net"
	"path/filepath"
	"strconv"
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
