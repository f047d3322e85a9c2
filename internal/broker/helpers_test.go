package broker_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/kafkatest"
)

// newClient returns a kgo client for the broker at addr that the test
// closes at its end (the kit's client: it fails fast, every test expects
// the broker to be up, and sends no client metrics, whose final push Close
// would wait for after a test stopped the broker).
func newClient(tb testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	tb.Helper()
	return kafkatest.Cluster{Addr: addr}.Client(tb, opts...)
}

// txnProducer returns a transactional producer with id txid.
func txnProducer(tb testing.TB, addr, txid string, opts ...kgo.Opt) *kgo.Client {
	tb.Helper()
	return newClient(tb, addr, append([]kgo.Opt{
		kgo.TransactionalID(txid),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	}, opts...)...)
}

// produceInTxn begins a transaction on cl and produces values to
// topic/partition 0, waiting until the broker acknowledged them. It does not
// end the transaction.
func produceInTxn(tb testing.TB, ctx context.Context, cl *kgo.Client, topic string, values ...string) {
	tb.Helper()
	if err := cl.BeginTransaction(); err != nil {
		tb.Fatalf("begin transaction: %v", err)
	}
	for _, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
			tb.Fatalf("produce %q: %v", v, err)
		}
	}
}

// endTxn flushes and ends cl's transaction, returning the EndTxn outcome.
func endTxn(ctx context.Context, cl *kgo.Client, commit bool) error {
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	return cl.EndTransaction(ctx, kgo.TransactionEndTry(commit))
}

// txnOffset is one partition's offset to commit inside a transaction.
type txnOffset struct {
	topic     string
	partition int32
	offset    int64
	metadata  string
}

// commitOffsetsInTxn adds offsets for group to cl's open transaction: the
// recipe the Kafka connector uses, because kgo's own transactional commit
// (GroupTransactSession) needs a group membership the engine does not have
// and always writes the member id as metadata. AddOffsetsToTxn enrolls the
// group in the transaction; TxnOffsetCommit with generation -1 and no member
// stages the offsets (a "simple" group, no membership checks); EndTxn then
// applies or drops them. The caller must have produced at least one record
// in the transaction: kgo's EndTransaction sends nothing for a transaction
// without produced records, which would leave the offsets hanging until the
// transaction timeout.
func commitOffsetsInTxn(ctx context.Context, cl *kgo.Client, txid, group string, offs ...txnOffset) error {
	id, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("producer id: %w", err)
	}

	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = txid, id, epoch, group
	addResp, err := add.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("AddOffsetsToTxn: %w", err)
	}
	if err := kerr.ErrorForCode(addResp.ErrorCode); err != nil {
		return fmt.Errorf("AddOffsetsToTxn: %w", err)
	}

	// TxnOffsetCommit v6 names topics by id only (KIP-1319).
	topics := make([]string, 0, len(offs))
	for _, o := range offs {
		topics = append(topics, o.topic)
	}
	details, err := kadm.NewClient(cl).ListTopics(ctx, topics...)
	if err != nil {
		return fmt.Errorf("topic ids: %w", err)
	}

	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = txid, group, id, epoch
	req.Generation, req.MemberID = -1, ""
	byTopic := map[string]int{}
	for _, o := range offs {
		i, ok := byTopic[o.topic]
		if !ok {
			t := kmsg.NewTxnOffsetCommitRequestTopic()
			t.Topic, t.TopicID = o.topic, details[o.topic].ID
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			byTopic[o.topic] = i
		}
		p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch, p.Metadata = o.partition, o.offset, -1, kmsg.StringPtr(o.metadata)
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("TxnOffsetCommit: %w", err)
	}
	var errs []error
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				errs = append(errs, fmt.Errorf("TxnOffsetCommit %s/%d: %w", t.Topic, p.Partition, err))
			}
		}
	}
	return errors.Join(errs...)
}

// readAll returns the values in topic/partition 0 as a consumer with the
// given isolation level sees them. It first appends a unique end marker with
// a plain producer and reads up to it, so "nothing more" is a fact rather
// than a timeout. It blocks while a transaction on the partition is open
// (read_committed cannot pass it), so call it only once all are ended.
func readAll(tb testing.TB, ctx context.Context, addr, topic string, isolation kgo.IsolationLevel) []string {
	tb.Helper()
	end := "end-" + rand.Text()
	p := newClient(tb, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := p.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(end)}).FirstErr(); err != nil {
		tb.Fatalf("produce end marker: %v", err)
	}
	c := newClient(tb, addr,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(isolation),
	)
	var got []string
	for {
		fs := c.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			tb.Fatalf("reading %s: %v (so far %q)", topic, err, got)
		}
		for _, e := range fs.Errors() {
			tb.Fatalf("reading %s: %v", topic, e.Err)
		}
		for _, r := range fs.Records() {
			if string(r.Value) == end {
				return got
			}
			if len(r.Value) > 4 && string(r.Value[:4]) == "end-" {
				continue // an earlier readAll's marker
			}
			got = append(got, string(r.Value))
		}
	}
}

// fetchOffset returns group's committed offset for topic/partition 0 as kadm
// FetchOffsets reports it; ok is false if there is none. A group that never
// committed is GROUP_ID_NOT_FOUND on kfake; that is "none" too.
func fetchOffset(tb testing.TB, ctx context.Context, addr, group, topic string) (off kadm.OffsetResponse, ok bool) {
	tb.Helper()
	adm := kadm.NewClient(newClient(tb, addr))
	resps, err := adm.FetchOffsets(ctx, group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return kadm.OffsetResponse{}, false
	}
	if err != nil {
		tb.Fatalf("fetch offsets of %s: %v", group, err)
	}
	if err := resps.Error(); err != nil {
		tb.Fatalf("fetch offsets of %s: %v", group, err)
	}
	return resps.Lookup(topic, 0)
}
