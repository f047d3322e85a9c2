package kafka

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/onceflow/onceflow/internal/kafkatest"
)

// recorder keeps what a member was told.
type recorder struct {
	mu                      sync.Mutex
	assigned, revoked, lost []Partition
}

func (r *recorder) config(c cluster, name string) MembershipConfig {
	add := func(to *[]Partition) func(context.Context, []Partition) {
		return func(_ context.Context, ps []Partition) {
			r.mu.Lock()
			defer r.mu.Unlock()
			*to = append(*to, ps...)
		}
	}
	return MembershipConfig{Client: c.client(), Group: "g", Topics: []string{"in"}, Instance: name,
		SessionTimeout: 6 * time.Second, OnAssigned: add(&r.assigned), OnRevoked: add(&r.revoked), OnLost: add(&r.lost)}
}

func waitOwned(t *testing.T, what string, ms []*Membership, want []int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got []int
		for _, m := range ms {
			got = append(got, len(m.Owned()))
		}
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: members own %v partitions, want %v", what, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Two members share the partitions; when one leaves, the other is given
// its partitions after they were revoked from it; no record is fetched.
func TestMembershipSharesPartitions(t *testing.T) {
	t.Parallel() // a broker of its own, no failpoint: it mostly waits (discovery, sessions, timeouts)
	for _, next := range []bool{false, true} {
		t.Run(map[bool]string{false: "classic", true: "kip-848"}[next], func(t *testing.T) {
			t.Parallel()
			testMembership(t, next)
		})
	}
}

func testMembership(t *testing.T, nextGen bool) {
	c := startBroker(t, map[string]int32{"in": 4})
	c.produceValues(t, "in", 0, time.Time{}, values(10, "v")...)
	var ra, rb recorder
	cfgA, cfgB := ra.config(c, "a"), rb.config(c, "b")
	cfgA.NextGen, cfgB.NextGen = nextGen, nextGen
	a, err := NewMembership(cfgA)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	waitOwned(t, "one member", []*Membership{a}, []int{4})
	if want := map[bool]string{false: "classic, cooperative-sticky", true: "consumer (KIP-848)"}[nextGen]; a.Protocol() != want {
		t.Fatalf("protocol %q, want %q", a.Protocol(), want)
	}
	b, err := NewMembership(cfgB)
	if err != nil {
		t.Fatal(err)
	}
	waitOwned(t, "two members", []*Membership{a, b}, []int{2, 2})
	if gen, member := b.Generation(); gen < 1 || member == "" {
		t.Errorf("generation %d, member %q after joining", gen, member)
	}
	ra.mu.Lock()
	if len(ra.revoked) != 2 {
		t.Errorf("a had %v revoked when b joined, want two partitions", ra.revoked)
	}
	ra.mu.Unlock()
	b.Close()
	waitOwned(t, "b left", []*Membership{a}, []int{4})
	rb.mu.Lock()
	if len(rb.revoked) != 2 || len(rb.lost) != 0 {
		t.Errorf("b leaving: revoked %v, lost %v; want its two partitions revoked", rb.revoked, rb.lost)
	}
	rb.mu.Unlock()
	offs := c.GroupOffsets(t, "g", "in")
	for p, o := range offs {
		if o.At >= 0 {
			t.Errorf("the member committed offset %d of partition %d: it must commit nothing", o.At, p)
		}
	}
}

// Partitions added to the topics are assigned within seconds with the
// default settings (not after the client's 5-minute metadata refresh),
// under both protocols.
func TestMembershipGetsAddedPartitions(t *testing.T) {
	t.Parallel() // a broker of its own, no failpoint: it mostly waits (discovery, sessions, timeouts)
	for _, next := range []bool{false, true} {
		t.Run(map[bool]string{false: "classic", true: "kip-848"}[next], func(t *testing.T) {
			t.Parallel()
			c := startBroker(t, map[string]int32{"in": 2})
			var r recorder
			cfg := r.config(c, "a")
			cfg.NextGen = next
			m, err := NewMembership(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			waitOwned(t, "joined", []*Membership{m}, []int{2})
			if _, err := c.Admin(t).CreatePartitions(kafkatest.Context(t), 2, "in"); err != nil {
				t.Fatal(err)
			}
			added := time.Now()
			waitOwned(t, "partitions added", []*Membership{m}, []int{4})
			t.Logf("assigned the added partitions %v after they were added", time.Since(added).Round(time.Millisecond))
		})
	}
}

// A member commits offsets with their metadata to its group, where a
// plain commit (generation -1, no member: what a source does without a
// Kafka sink) is refused while the group has members; once the member
// left, its commits land nowhere.
func TestMembershipCommitsOffsets(t *testing.T) {
	t.Parallel() // a broker of its own, no failpoint
	for _, next := range []bool{false, true} {
		t.Run(map[bool]string{false: "classic", true: "kip-848"}[next], func(t *testing.T) {
			t.Parallel()
			c := startBroker(t, map[string]int32{"in": 2, "other": 1})
			var r recorder
			cfg := r.config(c, "a")
			cfg.NextGen = next
			m, err := NewMembership(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			waitOwned(t, "one member", []*Membership{m}, []int{2})
			ctx := t.Context()
			plain := kadm.Offsets{}
			plain.Add(kadm.Offset{Topic: "in", Partition: 0, At: 3, LeaderEpoch: -1})
			resp, err := c.Admin(t).CommitOffsets(ctx, "g", plain)
			if err == nil {
				err = resp.Error()
			}
			if err == nil {
				t.Fatal("a plain offset commit into a group with a member was accepted: the member's commit would not be needed")
			}
			// "other" is not among the member's topics: a task reading
			// partition p of several topics commits them all.
			offs := map[Partition]int64{{"in", 0}: 5, {"in", 1}: 7, {"other", 0}: 2}
			if err := m.CommitOffsets(ctx, offs, "onceflow:job-in-0:42"); err != nil {
				t.Fatal(err)
			}
			for topic, want := range map[string]map[int32]int64{"in": {0: 5, 1: 7}, "other": {0: 2}} {
				got := c.GroupOffsets(t, "g", topic)
				for p, at := range want {
					if o := got[p]; o.At != at || o.Metadata != "onceflow:job-in-0:42" {
						t.Errorf("%s/%d: committed %d with metadata %q, want %d with the checkpoint's", topic, p, o.At, o.Metadata, at)
					}
				}
			}
			m.Close()
			if err := m.CommitOffsets(ctx, map[Partition]int64{{"in", 0}: 9}, "onceflow:job-in-0:43"); err == nil {
				t.Error("a member that left the group committed offsets")
			}
			if o := c.GroupOffsets(t, "g", "in")[0]; o.At != 5 {
				t.Errorf("in/0 at %d after the member left, want 5", o.At)
			}
		})
	}
}
