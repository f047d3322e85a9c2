package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/broker"
)

// testCtx bounds a test, so a broker that stops answering fails it instead
// of hanging it.
func testCtx(tb testing.TB) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

type cluster struct {
	b    *broker.Broker
	addr string
}

func startBroker(tb testing.TB, topics map[string]int32) cluster {
	tb.Helper()
	b := broker.StartForTest(tb, broker.Config{Topics: topics})
	return cluster{b: b, addr: b.Addr()}
}

func (c cluster) client() ClientConfig { return ClientConfig{Brokers: []string{c.addr}} }

func (c cluster) kgo(tb testing.TB, opts ...kgo.Opt) *kgo.Client {
	tb.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.addr), kgo.RetryTimeout(5 * time.Second)}, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(cl.Close)
	return cl
}

func (c cluster) admin(tb testing.TB) *kadm.Client { return kadm.NewClient(c.kgo(tb)) }

// produce writes values to topic/partition with a plain producer, one
// record each, with keys k<value> and the given timestamp (zero: now).
func (c cluster) produce(tb testing.TB, topic string, partition int32, ts time.Time, values ...string) {
	tb.Helper()
	cl := c.kgo(tb, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var rs []*kgo.Record
	for _, v := range values {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: partition, Key: []byte("k" + v), Value: []byte(v), Timestamp: ts})
	}
	if err := cl.ProduceSync(testCtx(tb), rs...).FirstErr(); err != nil {
		tb.Fatalf("produce: %v", err)
	}
}

// readCommitted returns the values of every record in topic (all
// partitions) as read_committed sees them, ordered by partition then
// offset. It reads up to the last stable offsets, so it needs every
// transaction on the topic to be ended.
func (c cluster) readCommitted(tb testing.TB, topic string) []string {
	tb.Helper()
	var out []string
	for _, r := range c.readCommittedRecords(tb, topic) {
		out = append(out, string(r.Value))
	}
	return out
}

// readCommittedRecords is readCommitted returning the records.
func (c cluster) readCommittedRecords(tb testing.TB, topic string) []*kgo.Record {
	tb.Helper()
	ctx := testCtx(tb)
	adm := c.admin(tb)
	ends, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		tb.Fatal(err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	cl := c.kgo(tb, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	byPart := map[int32][]*kgo.Record{}
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			tb.Fatalf("reading %s: %v (missing partitions %v)", topic, err, want)
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

// groupOffsets returns group's committed offsets of topic.
func (c cluster) groupOffsets(tb testing.TB, group, topic string) map[int32]kadm.OffsetResponse {
	tb.Helper()
	resps, err := c.admin(tb).FetchOffsets(testCtx(tb), group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return nil
	}
	if err != nil {
		tb.Fatal(err)
	}
	out := map[int32]kadm.OffsetResponse{}
	resps.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic {
			out[o.Partition] = o
		}
	})
	return out
}

func values(n int, prefix string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%03d", prefix, i)
	}
	return out
}

func newSource(tb testing.TB, cfg SourceConfig) *Source {
	tb.Helper()
	s, err := NewSource(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func openReader(tb testing.TB, s *Source, subtask, par int, restored map[string][]byte) flow.SourceReader[Record] {
	tb.Helper()
	r, err := s.Open(testCtx(tb), flow.SourceContext{Job: "job", UID: "src", Subtask: subtask, Parallelism: par, Logger: slog.New(slog.DiscardHandler)}, restored)
	if err != nil {
		tb.Fatalf("open subtask %d: %v", subtask, err)
	}
	tb.Cleanup(func() { r.Close() })
	return r
}

// pollN polls r until it emitted n records and returns their values.
func pollN(tb testing.TB, r flow.SourceReader[Record], n int) []string {
	tb.Helper()
	ctx := testCtx(tb)
	var got []string
	for len(got) < n {
		err := r.Poll(ctx, func(rec Record) { got = append(got, string(rec.Value)) })
		if err != nil {
			tb.Fatalf("poll after %q: %v", got, err)
		}
	}
	return got
}

// pollToEOF polls a bounded reader until io.EOF.
func pollToEOF(tb testing.TB, r flow.SourceReader[Record]) []string {
	tb.Helper()
	ctx := testCtx(tb)
	var got []string
	for {
		err := r.Poll(ctx, func(rec Record) { got = append(got, string(rec.Value)) })
		if errors.Is(err, io.EOF) {
			return got
		}
		if err != nil {
			tb.Fatalf("poll after %q: %v", got, err)
		}
	}
}

func sourceContext(subtask, par int) flow.SourceContext {
	return flow.SourceContext{Job: "job", UID: "src", Subtask: subtask, Parallelism: par, Logger: slog.New(slog.DiscardHandler)}
}

func startBrokerCfg(tb testing.TB, maxTxn time.Duration) cluster {
	tb.Helper()
	b := broker.StartForTest(tb, broker.Config{TxnMaxTimeout: maxTxn})
	return cluster{b: b, addr: b.Addr()}
}
