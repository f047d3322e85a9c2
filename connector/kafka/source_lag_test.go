package kafka

import (
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/kafkatest"
)

// Records written after the reader caught up count as lag before the
// reader fetches them: the periodic listing of end offsets sees them.
func TestLagCountsRecordsNotYetFetched(t *testing.T) {
	c := startBroker(t, map[string]int32{"in": 2})
	c.produceValues(t, "in", 0, time.Time{}, values(3, "a")...)
	src := newSource(t, SourceConfig{Client: c.client(), Topics: []string{"in"}})
	r := openReader(t, src, 0, 1, nil)
	pollN(t, r, 3)
	rd := r.(*reader)
	ctx := kafkatest.Context(t)
	rd.refreshEnds(ctx)
	if got := src.Lag(); got != 0 {
		t.Fatalf("Lag after reading everything = %d, want 0", got)
	}
	// The reader does not poll: only the listing can see these.
	c.produceValues(t, "in", 0, time.Time{}, values(4, "b")...)
	c.produceValues(t, "in", 1, time.Time{}, values(3, "c")...)
	rd.refreshEnds(ctx)
	if got := src.Lag(); got != 7 {
		t.Errorf("Lag after 7 records were written and none read = %d, want 7", got)
	}
	// Reading them brings it back to 0.
	pollN(t, r, 7)
	if got := src.Lag(); got != 0 {
		t.Errorf("Lag after reading them = %d, want 0", got)
	}
	// A reader of no partition reports 0 before its first poll.
	idle := newSource(t, SourceConfig{Client: c.client(), Topics: []string{"in"}})
	// Two partitions, three subtasks: one owns none.
	sub := 3 - owner(split{"in", 0}, 3) - owner(split{"in", 1}, 3)
	openReader(t, idle, sub, 3, nil)
	if got := idle.Lag(); got != 0 {
		t.Errorf("Lag of a subtask that owns no partition = %d, want 0", got)
	}
}
