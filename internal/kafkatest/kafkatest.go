// Package kafkatest is the test kit for code that talks to Kafka: an
// embedded broker per test, kgo clients, producing, reading a topic back
// read_committed, group offsets, and the exactly-once checks the tests
// share.
//
// It imports package testing, so only tests may import it: the onceflow
// binary must not link it (scripts/test checks `go list -deps
// ./cmd/onceflow`). Every helper fails the test on error and undoes what it
// set up with tb.Cleanup.
package kafkatest

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/failpoint"
	"github.com/onceflow/onceflow/internal/testbreak"
)

// Timeout bounds the contexts of Context and of the helpers that talk to
// the broker, so a broker that stops answering fails the test instead of
// hanging it.
const Timeout = 30 * time.Second

// Context returns a context that ends after Timeout or when the test ends.
func Context(tb testing.TB) context.Context {
	tb.Helper()
	return ContextTimeout(tb, Timeout)
}

// ContextTimeout returns a context that ends after d or when the test ends.
func ContextTimeout(tb testing.TB, d time.Duration) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

// RequireFaults skips the test unless it was built with -tags
// onceflow_faults, which failpoints and test breaks need (./scripts/test
// builds with it; a plain `go test` does not).
func RequireFaults(tb testing.TB) {
	tb.Helper()
	if !failpoint.Available() || !testbreak.Available() {
		tb.Skip("needs failpoints: run with -tags " + failpoint.BuildTag + " (./scripts/test does)")
	}
}

// StartBroker starts an embedded broker for a test and closes it when the
// test ends. An empty cfg.Addr means "127.0.0.1:0" (a free port) rather
// than the default 9092, so tests can run in parallel; set Addr to restart
// a broker on the address an earlier one had. It fails the test if Start
// fails.
func StartBroker(tb testing.TB, cfg broker.Config) *broker.Broker {
	tb.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	b, err := broker.Start(cfg)
	if err != nil {
		tb.Fatalf("starting broker: %v", err)
	}
	tb.Cleanup(func() { b.Close() })
	return b
}

// Cluster is a broker a test talks to: clients connect to Addr. Broker is
// the embedded broker when the test started it (Start), nil for a broker
// that runs elsewhere (a Cluster{Addr: addr} literal, such as an
// `onceflow broker` process).
type Cluster struct {
	Broker *broker.Broker
	Addr   string
}

// Start starts an embedded broker for the test (StartBroker) and returns
// it as a Cluster.
func Start(tb testing.TB, cfg broker.Config) Cluster {
	tb.Helper()
	b := StartBroker(tb, cfg)
	return Cluster{Broker: b, Addr: b.Addr()}
}

// Client returns a kgo client of the cluster, closed when the test ends.
// It gives up on a request after 5 seconds of retries (every test expects
// the broker to be up) and sends no client metrics (Close would wait for a
// final push); opts come after these and may override them.
func (c Cluster) Client(tb testing.TB, opts ...kgo.Opt) *kgo.Client {
	tb.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(c.Addr),
		kgo.RetryTimeout(5 * time.Second),
		kgo.DisableClientMetrics(),
	}, opts...)...)
	if err != nil {
		tb.Fatalf("new client: %v", err)
	}
	tb.Cleanup(cl.Close)
	return cl
}

// Admin returns an admin client of the cluster, closed when the test ends.
func (c Cluster) Admin(tb testing.TB) *kadm.Client {
	tb.Helper()
	return kadm.NewClient(c.Client(tb))
}

// CreateTopic creates topic with the given partition count; a topic that
// exists already is fine.
func (c Cluster) CreateTopic(tb testing.TB, topic string, partitions int32) {
	tb.Helper()
	_, err := c.Admin(tb).CreateTopic(Context(tb), partitions, 1, nil, topic)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		tb.Fatalf("create topic %s: %v", topic, err)
	}
}

// Produce writes records with the alternating keys and values of kv to
// topic, partitioned by key (kgo's default partitioner), and waits until
// the broker acknowledged them.
func (c Cluster) Produce(tb testing.TB, topic string, kv ...string) {
	tb.Helper()
	if len(kv)%2 != 0 {
		tb.Fatalf("produce to %s: %d keys and values, want pairs", topic, len(kv))
	}
	var rs []*kgo.Record
	for i := 0; i+1 < len(kv); i += 2 {
		rs = append(rs, &kgo.Record{Key: []byte(kv[i]), Value: []byte(kv[i+1])})
	}
	if err := c.Client(tb, kgo.DefaultProduceTopic(topic)).ProduceSync(Context(tb), rs...).FirstErr(); err != nil {
		tb.Fatalf("produce to %s: %v", topic, err)
	}
}

// ProduceRecords writes rs, each to its own Topic and Partition (a manual
// partitioner), with a plain producer, and waits until the broker
// acknowledged them.
func (c Cluster) ProduceRecords(tb testing.TB, rs ...*kgo.Record) {
	tb.Helper()
	cl := c.Client(tb, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(Context(tb), rs...).FirstErr(); err != nil {
		tb.Fatalf("produce: %v", err)
	}
}

// ReadCommitted returns the values of every record in topic (all
// partitions) as read_committed sees them, ordered by partition then
// offset. See ReadCommittedRecords.
func (c Cluster) ReadCommitted(tb testing.TB, topic string) []string {
	tb.Helper()
	var out []string
	for _, r := range c.ReadCommittedRecords(tb, topic) {
		out = append(out, string(r.Value))
	}
	return out
}

// ReadCommittedRecords returns every record of topic (all partitions) that
// read_committed sees, ordered by partition then offset: everything
// committed so far, nothing twice. It reads from the start up to each
// partition's last stable offset, so a transaction still open on the topic
// hides what follows it.
func (c Cluster) ReadCommittedRecords(tb testing.TB, topic string) []*kgo.Record {
	tb.Helper()
	// Some tests read hundreds of megabytes back: on a loaded machine
	// that takes longer than one Timeout.
	ctx := ContextTimeout(tb, 4*Timeout)
	ends, err := c.Admin(tb).ListCommittedOffsets(ctx, topic)
	if err != nil {
		tb.Fatalf("last stable offsets of %s: %v", topic, err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	// Markers count as read, so a partition ending in one is done.
	cl := c.Client(tb, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	byPart := map[int32][]*kgo.Record{}
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			tb.Fatalf("reading %s: %v (partitions not read to their end: %v)", topic, err, want)
		}
		if err := fs.Err(); err != nil {
			tb.Fatalf("reading %s: %v", topic, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if e, ok := want[r.Partition]; ok && r.Offset+1 >= e {
				delete(want, r.Partition)
			}
			if !r.Attrs.IsControl() {
				byPart[r.Partition] = append(byPart[r.Partition], r)
			}
		})
	}
	var out []*kgo.Record
	for _, p := range slices.Sorted(maps.Keys(byPart)) {
		out = append(out, byPart[p]...)
	}
	return out
}

// GroupOffsets returns group's committed offsets of topic by partition;
// none for a group that never committed.
func (c Cluster) GroupOffsets(tb testing.TB, group, topic string) map[int32]kadm.OffsetResponse {
	tb.Helper()
	resps, err := c.Admin(tb).FetchOffsets(Context(tb), group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return nil
	}
	if err != nil {
		tb.Fatalf("offsets of group %s: %v", group, err)
	}
	out := map[int32]kadm.OffsetResponse{}
	resps.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic {
			out[o.Partition] = o
		}
	})
	return out
}

// CaughtUp reports whether group's committed offsets reached the end of
// every partition of topic: a job committing to group processed all of
// it. An error (a broker restarting) is "not yet".
func CaughtUp(ctx context.Context, adm *kadm.Client, group, topic string) bool {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return false
	}
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return false
	}
	done := true
	ends.Each(func(e kadm.ListedOffset) {
		if o, ok := offs.Lookup(topic, e.Partition); !ok || o.At < e.Offset {
			done = false
		}
	})
	return done
}
