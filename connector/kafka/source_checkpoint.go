package kafka

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
)

// maxSnapshots bounds the checkpoints whose offsets a reader keeps until
// they commit: an aborted checkpoint never commits, so without a bound its
// entry would stay forever.
const maxSnapshots = 16

// checkpointOffsets returns the group of the source and the next offsets
// of checkpoint id, merged over this process's open readers: what each
// recorded in its Snapshot(id), parked partitions included. ok is false
// when no reader is open or one of them has no snapshot of id (it never
// took one, or dropped it: entries up to a committed checkpoint are
// dropped, and only the newest maxSnapshots are kept). Safe to call from
// any goroutine; the Kafka commit point uses it.
func (s *Source) checkpointOffsets(id int64) (group string, offs map[split]int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.readers) == 0 {
		return "", nil, false
	}
	offs = map[split]int64{}
	for r := range s.readers {
		r.snapMu.Lock()
		snap, has := r.snapshots[id]
		if has {
			maps.Copy(offs, snap.read)
			maps.Copy(offs, snap.parked)
		}
		r.snapMu.Unlock()
		if !has {
			return "", nil, false
		}
	}
	return s.group(s.job), offs, true
}

// Snapshot returns the position of every owned split, parked ones
// included, keyed "topic/partition".
func (r *reader) Snapshot(checkpointID int64) (map[string][]byte, error) {
	out := make(map[string][]byte, len(r.pos)+len(r.parked))
	snap := snapshotOffsets{read: make(map[split]int64, len(r.pos))}
	for s, p := range r.pos {
		out[s.String()] = p.encode()
		snap.read[s] = p.next
	}
	if len(r.parked) > 0 {
		snap.parked = make(map[split]int64, len(r.parked))
		for s, p := range r.parked {
			out[s.String()] = p.encode()
			snap.parked[s] = p.next
		}
	}
	r.snapMu.Lock()
	defer r.snapMu.Unlock()
	r.snapshots[checkpointID] = snap
	if len(r.snapshots) > maxSnapshots {
		ids := slices.Sorted(maps.Keys(r.snapshots))
		for _, id := range ids[:len(ids)-maxSnapshots] {
			delete(r.snapshots, id)
		}
	}
	return out, nil
}

// CheckpointCommitted commits the checkpoint's offsets to the group for
// monitoring, unless a Kafka sink already committed them in its
// transaction. Parked splits are not committed: the source does not read
// them, and Kafka refuses offsets of partitions that do not exist. The job
// never restores from these offsets.
func (r *reader) CheckpointCommitted(ctx context.Context, checkpointID int64) error {
	r.snapMu.Lock()
	snap, ok := r.snapshots[checkpointID]
	for id := range r.snapshots {
		if id <= checkpointID {
			delete(r.snapshots, id)
		}
	}
	r.snapMu.Unlock()
	r.src.mu.Lock()
	txn := r.src.transactional
	r.src.mu.Unlock()
	if !ok || len(snap.read) == 0 {
		return nil
	}
	if txn {
		// The sink's transaction committed them with the checkpoint.
		r.src.offsetsCommitted(snap.read)
		return nil
	}
	meta := offsetMetadata(r.sc.Job, checkpointID)
	var err error
	if commit := r.src.cfg.GroupCommit; commit != nil {
		offs := make(map[Partition]int64, len(snap.read))
		for s, next := range snap.read {
			offs[Partition{s.topic, s.partition}] = next
		}
		err = commit(ctx, offs, meta)
	} else {
		offs := kadm.Offsets{}
		for s, next := range snap.read {
			offs.Add(kadm.Offset{Topic: s.topic, Partition: s.partition, At: next, LeaderEpoch: -1, Metadata: meta})
		}
		var resp kadm.OffsetResponses
		resp, err = r.adm.CommitOffsets(ctx, r.group, offs)
		if err == nil {
			err = resp.Error()
		}
	}
	if err != nil {
		r.src.commitsFailed.Add(1)
		return fmt.Errorf("commit offsets of checkpoint %d to group %q: %w", checkpointID, r.group, err)
	}
	r.src.offsetsCommitted(snap.read)
	return nil
}

// Position names the record emitted last, as topic/partition@offset, ""
// before the first.
func (r *reader) Position() string {
	if r.lastTopic == "" {
		return ""
	}
	return Record{Topic: r.lastTopic, Partition: r.lastPartition, Offset: r.lastOffset}.String()
}

// offsetMetadata is the metadata of offsets committed for a checkpoint.
func offsetMetadata(job string, checkpointID int64) string {
	return offsetMetadataPrefix(job) + strconv.FormatInt(checkpointID, 10)
}

// offsetMetadataPrefix is what the metadata of every offset committed for
// a checkpoint of job starts with.
func offsetMetadataPrefix(job string) string { return "onceflow:" + job + ":" }
