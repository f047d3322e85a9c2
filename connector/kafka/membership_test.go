package kafka

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

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
