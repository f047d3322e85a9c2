package kafka

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// cluster is a test broker (the test kit's cluster: Client, Admin,
// ReadCommitted, GroupOffsets...) with the connector's client
// configuration for it.
type cluster struct{ kafkatest.Cluster }

// startBroker starts an embedded broker with topics for the test.
func startBroker(tb testing.TB, topics map[string]int32) cluster {
	tb.Helper()
	return cluster{kafkatest.Start(tb, broker.Config{Topics: topics})}
}

func (c cluster) client() ClientConfig { return ClientConfig{Brokers: []string{c.Addr}} }

// produceValues writes values to topic/partition with a plain producer,
// one record each, with keys k<value> and the given timestamp (zero: now).
func (c cluster) produceValues(tb testing.TB, topic string, partition int32, ts time.Time, values ...string) {
	tb.Helper()
	var rs []*kgo.Record
	for _, v := range values {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: partition, Key: []byte("k" + v), Value: []byte(v), Timestamp: ts})
	}
	c.ProduceRecords(tb, rs...)
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
	r, err := s.Open(kafkatest.Context(tb), flow.SourceContext{Job: "job", UID: "src", Subtask: subtask, Parallelism: par, Logger: slog.New(slog.DiscardHandler)}, restored)
	if err != nil {
		tb.Fatalf("open subtask %d: %v", subtask, err)
	}
	tb.Cleanup(func() { r.Close() })
	return r
}

// pollN polls r until it emitted n records and returns their values.
func pollN(tb testing.TB, r flow.SourceReader[Record], n int) []string {
	tb.Helper()
	ctx := kafkatest.Context(tb)
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
	ctx := kafkatest.Context(tb)
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
