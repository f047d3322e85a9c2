package kafka

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/kafkatest"
)

// checkpointOffsets merges what every open reader of the source recorded
// for a checkpoint, parked partitions included, in both commit modes.
func TestCheckpointOffsets(t *testing.T) {
	for _, txn := range []bool{false, true} {
		name := map[bool]string{false: "reader commits", true: "sink commits"}[txn]
		t.Run(name, func(t *testing.T) {
			c := startBroker(t, map[string]int32{"in": 2})
			c.produceValues(t, "in", 0, time.Time{}, values(3, "a")...)
			c.produceValues(t, "in", 1, time.Time{}, values(2, "b")...)
			src := newSource(t, SourceConfig{Client: c.client(), TopicRegex: "in|gone", Group: "g", DiscoveryInterval: -1})
			src.transactional = txn
			// gone/0 is parked with its owner.
			restored := map[string][]byte{"in/0": []byte("0"), "in/1": []byte("0"), "gone/0": []byte("9")}
			r0, r1 := openReader(t, src, 0, 2, restored), openReader(t, src, 1, 2, restored)
			if _, _, ok := src.checkpointOffsets(1); ok {
				t.Error("ok before any snapshot")
			}
			snap := func(r interface {
				Snapshot(int64) (map[string][]byte, error)
			}, id int64) {
				t.Helper()
				if _, err := r.Snapshot(id); err != nil {
					t.Fatal(err)
				}
			}
			snap(r0, 1)
			if _, _, ok := src.checkpointOffsets(1); ok {
				t.Error("ok although subtask 1 has no snapshot of checkpoint 1")
			}
			snap(r1, 1)
			pollN(t, r0, owned(r0, 3, 2))
			pollN(t, r1, owned(r1, 3, 2))
			snap(r0, 2)
			snap(r1, 2)

			group, offs, ok := src.checkpointOffsets(1)
			want := map[split]int64{{"in", 0}: 0, {"in", 1}: 0, {"gone", 0}: 9}
			if !ok || group != "g" || !maps.Equal(offs, want) {
				t.Errorf("checkpoint 1: %q %v %v, want g %v", group, offs, ok, want)
			}
			_, offs, ok = src.checkpointOffsets(2)
			want = map[split]int64{{"in", 0}: 3, {"in", 1}: 2, {"gone", 0}: 9}
			if !ok || !maps.Equal(offs, want) {
				t.Errorf("checkpoint 2: %v %v, want %v", offs, ok, want)
			}

			// Committing 1 prunes it and keeps 2.
			for _, r := range []any{r0, r1} {
				if err := r.(*reader).CheckpointCommitted(kafkatest.Context(t), 1); err != nil {
					t.Fatal(err)
				}
			}
			if _, _, ok := src.checkpointOffsets(1); ok {
				t.Error("checkpoint 1 still there after it committed")
			}
			if _, _, ok := src.checkpointOffsets(2); !ok {
				t.Error("checkpoint 2 gone after checkpoint 1 committed")
			}
			// The reader commits only what it reads to the group, and
			// only when no sink does.
			got := c.GroupOffsets(t, "g", "in")
			if txn && len(got) > 0 {
				t.Errorf("the reader committed %v although a sink commits the offsets", got)
			}
			if !txn && (got[0].At != 0 || got[1].At != 0 || got[0].Metadata != "onceflow:job:1") {
				t.Errorf("group offsets %v, want in/0 and in/1 at 0 for checkpoint 1", got)
			}
			if g := c.GroupOffsets(t, "g", "gone"); len(g) > 0 {
				t.Errorf("the reader committed the parked partition: %v", g)
			}

			// Checkpoints that never commit are not kept forever.
			for id := int64(3); id <= 40; id++ {
				snap(r0, id)
				snap(r1, id)
			}
			for id, want := range map[int64]bool{2: false, 24: false, 25: true, 40: true} {
				if _, _, ok := src.checkpointOffsets(id); ok != want {
					t.Errorf("checkpoint %d kept: %v, want %v (the newest %d)", id, ok, want, maxSnapshots)
				}
			}
			// A closed reader no longer counts.
			r1.Close()
			want = map[split]int64{}
			for s, p := range r0.(*reader).pos {
				want[s] = p.next
			}
			for s, p := range r0.(*reader).parked {
				want[s] = p.next
			}
			_, offs, ok = src.checkpointOffsets(40)
			if !ok || !maps.Equal(offs, want) {
				t.Errorf("after subtask 1 closed: %v %v, want subtask 0's offsets %v", offs, ok, want)
			}
		})
	}
}

// owned returns how many of the records (a on in/0, b on in/1) r reads.
func owned(r any, a, b int) int {
	n := 0
	for s := range r.(*reader).pos {
		n += map[int32]int{0: a, 1: b}[s.partition]
	}
	return n
}

// With SourceConfig.GroupCommit (a scale-out task without a Kafka sink)
// the reader commits a committed checkpoint's offsets through it, not
// with a plain commit of its own; CommittedOffsets, which the
// repartition purge reads, follows only a commit that succeeded.
func TestGroupCommitHook(t *testing.T) {
	c := startBroker(t, map[string]int32{"in": 2})
	c.produceValues(t, "in", 0, time.Time{}, values(3, "a")...)
	type call struct {
		offs map[Partition]int64
		meta string
	}
	var calls []call
	var fail error
	src := newSource(t, SourceConfig{Client: c.client(), Topics: []string{"in"}, Group: "g", DiscoveryInterval: -1,
		Partitions: map[string][]int32{"in": {0}},
		GroupCommit: func(_ context.Context, offs map[Partition]int64, meta string) error {
			calls = append(calls, call{maps.Clone(offs), meta})
			return fail
		}})
	r := openReader(t, src, 0, 1, nil)
	pollN(t, r, 3)
	for id := int64(1); id <= 2; id++ {
		if _, err := r.Snapshot(id); err != nil {
			t.Fatal(err)
		}
	}
	fail = errors.New("not a member")
	if err := r.(*reader).CheckpointCommitted(kafkatest.Context(t), 1); err == nil || !strings.Contains(err.Error(), "not a member") {
		t.Errorf("a failed group commit: %v", err)
	}
	if got := src.CommittedOffsets(); len(got) != 0 {
		t.Errorf("committed offsets %v after the group commit failed, want none", got)
	}
	fail = nil
	if err := r.(*reader).CheckpointCommitted(kafkatest.Context(t), 2); err != nil {
		t.Fatal(err)
	}
	want := map[Partition]int64{{"in", 0}: 3}
	if len(calls) != 2 || !maps.Equal(calls[1].offs, want) || calls[1].meta != "onceflow:job:2" {
		t.Errorf("group commits %+v, want the second of %v with the metadata of checkpoint 2", calls, want)
	}
	if got := src.CommittedOffsets(); !maps.Equal(got, want) {
		t.Errorf("committed offsets %v, want %v", got, want)
	}
	if got := c.GroupOffsets(t, "g", "in"); len(got) > 0 {
		t.Errorf("the reader committed %v itself although GroupCommit does", got)
	}
}
