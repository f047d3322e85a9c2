package kafka

import (
	"slices"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/kafkatest"
)

// The default discovery interval reacts in seconds (Flink's 5 minutes
// left records of an added partition unread for minutes), and a negative
// interval turns discovery off.
func TestDiscoveryIntervalDefault(t *testing.T) {
	cfg := SourceConfig{Topics: []string{"in"}}
	cfg.withDefaults()
	if cfg.DiscoveryInterval <= 0 || cfg.DiscoveryInterval > 30*time.Second {
		t.Errorf("resolved default discovery interval %v, want a few seconds (at most 30s)", cfg.DiscoveryInterval)
	}
	off := SourceConfig{Topics: []string{"in"}, DiscoveryInterval: -1}
	off.withDefaults()
	if off.DiscoveryInterval >= 0 {
		t.Errorf("a negative discovery interval resolved to %v; it must stay negative (discovery off)", off.DiscoveryInterval)
	}
}

// With default settings, records written to a partition added while the
// source runs are read within 30 seconds.
func TestDiscoveryDefaultReadsAddedPartition(t *testing.T) {
	t.Parallel() // a broker of its own, no failpoint: it mostly waits (discovery, sessions, timeouts)
	c := startBroker(t, map[string]int32{"in": 1})
	c.produceValues(t, "in", 0, time.Time{}, "p0")
	src := newSource(t, SourceConfig{Client: c.client(), Topics: []string{"in"}})
	r := openReader(t, src, 0, 1, nil)
	if got := pollN(t, r, 1); got[0] != "p0" {
		t.Fatalf("read %q", got)
	}
	if _, err := c.Admin(t).CreatePartitions(kafkatest.Context(t), 2, "in"); err != nil {
		t.Fatal(err)
	}
	added := time.Now()
	c.produceValues(t, "in", 1, time.Time{}, "p1")
	c.produceValues(t, "in", 2, time.Time{}, "p2")
	var got []string
	for len(got) < 2 && time.Since(added) < 30*time.Second {
		if err := r.Poll(kafkatest.Context(t), func(rec Record) { got = append(got, string(rec.Value)) }); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"p1", "p2"}) {
		t.Fatalf("30s after two partitions were added the source read %q of their records, want p1 and p2", got)
	}
	t.Logf("read the added partitions' records %v after they were added", time.Since(added).Round(time.Millisecond))
}
