package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// member848 is a member of the KIP-848 consumer group "g" subscribed to
// topic "in", driven by hand with ConsumerGroupHeartbeat requests.
type member848 struct {
	cl    *kgo.Client
	id    string
	epoch int32
	owned []kmsg.ConsumerGroupHeartbeatRequestTopic
}

// heartbeat sends one heartbeat, acknowledging what the member owns, and
// takes the assignment the answer carries.
func (m *member848) heartbeat(ctx context.Context) error {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = "g", m.id, m.epoch
	req.Topics = m.owned
	if m.epoch == 0 {
		req.SubscribedTopicNames, req.RebalanceTimeoutMillis = []string{"in"}, 10_000
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	}
	resp, err := req.RequestWith(ctx, m.cl)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return err
	}
	if resp.MemberID != nil {
		m.id = *resp.MemberID
	}
	m.epoch = resp.MemberEpoch
	if resp.Assignment != nil {
		m.owned = nil
		for _, t := range resp.Assignment.Topics {
			m.owned = append(m.owned, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: t.TopicID, Partitions: t.Partitions})
		}
	}
	return nil
}

func (m *member848) partitions() int {
	n := 0
	for _, t := range m.owned {
		n += len(t.Partitions)
	}
	return n
}

// holdAll heartbeats until the member owns all n partitions of "in", or
// fails tb after within.
func (m *member848) holdAll(tb testing.TB, ctx context.Context, n int, within time.Duration) {
	tb.Helper()
	for deadline := time.Now().Add(within); m.partitions() < n; time.Sleep(100 * time.Millisecond) {
		if err := m.heartbeat(ctx); err != nil {
			tb.Fatalf("heartbeat of member %q: %v", m.id, err)
		}
		if time.Now().After(deadline) {
			tb.Fatalf("member %q holds %d of the %d partitions after %v: the others stay with nobody", m.id, m.partitions(), n, within)
		}
	}
	if err := m.heartbeat(ctx); err != nil { // acknowledge the last assignment
		tb.Fatalf("heartbeat of member %q: %v", m.id, err)
	}
}

// A member whose session runs out while the broker is down: after the
// restart its partitions go to the other members. kfake alone kept them
// owned by the expired member for good (see pruneExpiredMembers).
func TestMemberExpiredWhileDownLosesItsPartitions(t *testing.T) {
	ctx := kafkatest.Context(t)
	cfg := broker.Config{DataDir: t.TempDir(), Topics: map[string]int32{"in": 4}, GroupSessionTimeout: 2 * time.Second}
	b := kafkatest.StartBroker(t, cfg)
	addr := b.Addr()
	gone := &member848{cl: newClient(t, addr)}
	gone.holdAll(t, ctx, 4, 15*time.Second)
	if err := b.Close(); err != nil { // saves the group's members
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // the member's 2 s session runs out meanwhile
	cfg.Addr = addr
	kafkatest.StartBroker(t, cfg)
	next := &member848{cl: newClient(t, addr)}
	next.holdAll(t, ctx, 4, 15*time.Second)
}
