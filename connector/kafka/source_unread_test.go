package kafka

import (
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// Records of a partition the source has not discovered yet count in its
// lag, its metrics and its pending records: lag is never 0 while records
// sit unread.
func TestLagCountsUndiscoveredPartitions(t *testing.T) {
	t.Parallel() // a broker of its own, no failpoint: it mostly waits (discovery, sessions, timeouts)
	c := startBroker(t, map[string]int32{"in": 1})
	c.produceValues(t, "in", 0, time.Time{}, "a", "b")
	src := newSource(t, SourceConfig{Client: c.client(), Topics: []string{"in"}, DiscoveryInterval: -1})
	r := openReader(t, src, 0, 1, nil)
	pollN(t, r, 2)
	if _, err := c.Admin(t).CreatePartitions(kafkatest.Context(t), 1, "in"); err != nil {
		t.Fatal(err)
	}
	c.produceValues(t, "in", 1, time.Time{}, values(5, "new")...)
	deadline := time.Now().Add(15 * time.Second)
	for src.Lag() != 5 && time.Now().Before(deadline) {
		if err := r.Poll(kafkatest.Context(t), func(rec Record) { t.Errorf("read %s with discovery off", rec) }); err != nil {
			t.Fatal(err)
		}
	}
	if l := src.Lag(); l != 5 {
		t.Fatalf("Lag() = %d with 5 records in a partition the source has not read, want 5", l)
	}
	lags := map[string]float64{}
	var pending float64 = -1
	src.ReportMetrics(func(m flow.Metric) {
		switch m.Name {
		case "source_records_lag":
			lags[m.Labels[0].Value+"/"+m.Labels[1].Value] = m.Value
		case "source_pending_records":
			pending = m.Value
		}
	})
	if lags["in/0"] != 0 || lags["in/1"] != 5 || pending != 5 {
		t.Errorf("metrics: records_lag %v, pending_records %v; want in/0 0, in/1 5, pending 5", lags, pending)
	}
}
