package kafka

import (
	"context"
	"maps"
	"slices"
	"time"
)

// discoveryTimeout bounds one partition discovery (a topic listing and the
// offsets of what it found).
const discoveryTimeout = 10 * time.Second

func (r *reader) discovers() bool { return r.src.cfg.DiscoveryInterval > 0 && !r.src.cfg.Bounded }

// discover lists the source's partitions. It first checks the topic ids of
// the topics the reader reads or has parked: a changed id means the topic
// was deleted and created again, and OnTopicRecreated decides (fail: an
// unrecoverable error; read earliest: the reader reads the new topic from
// its earliest offset, in place). Then, if addNew, the owned partitions
// that appeared since the last look start: a parked one at its position,
// any other at the earliest offset. It returns the recreated topics it
// read anew.
func (r *reader) discover(ctx context.Context, addNew bool) ([]string, error) {
	dctx, cancel := context.WithTimeout(ctx, discoveryTimeout)
	defer cancel()
	all, ids, err := r.src.listSplits(dctx, r.adm)
	if err != nil {
		return nil, err
	}
	old := map[string]topicID{} // recreated topic -> the id the reader had
	for _, m := range []map[split]position{r.pos, r.parked} {
		for s, p := range m {
			if isRecreated(p.id, ids, s.topic) {
				old[s.topic] = p.id
			}
		}
	}
	recreated := slices.Sorted(maps.Keys(old))
	if len(recreated) > 0 {
		if r.src.cfg.OnTopicRecreated == RecreatedFail {
			t := recreated[0]
			return nil, recreatedError(t, old[t], ids[t], "the source read it with topic id")
		}
		if err := r.readRecreated(dctx, recreated, old, ids, all); err != nil {
			return nil, err
		}
	}
	if !addNew {
		return recreated, nil
	}
	var mine, resumed []split
	for _, s := range all {
		if r.known[s] {
			continue
		}
		r.known[s] = true
		if !r.owns(s) {
			continue
		}
		if p, ok := r.parked[s]; ok {
			delete(r.parked, s)
			if id := ids[s.topic]; !id.isZero() {
				p.id = id
			}
			r.pos[s] = p
			resumed = append(resumed, s)
			r.log.Info("a parked partition is listed again; reading resumes at its checkpointed offset", "partition", s.String(), "offset", p.next)
			continue
		}
		mine = append(mine, s)
	}
	r.consume(resumed)
	if len(mine) == 0 {
		return recreated, nil
	}
	start, err := r.listed(dctx, mine, r.adm.ListStartOffsets)
	if err != nil {
		for _, s := range mine {
			delete(r.known, s) // retry them next time
		}
		return recreated, err
	}
	for _, s := range mine {
		r.log.Info("discovered a new partition; reading it from the earliest offset", "partition", s.String())
		r.pos[s] = position{next: start[s], end: -1, id: ids[s.topic]}
	}
	r.consume(mine)
	return recreated, nil
}

// readRecreated reads the recreated topics anew (OnTopicRecreated
// RecreatedReadEarliest): each owned split the new topic has restarts at
// its earliest offset (a bounded source ends at the new topic's current
// end), the others and parked ones of those topics are dropped. old holds
// the ids the reader had, ids the current ones, all the listed splits.
func (r *reader) readRecreated(ctx context.Context, topics []string, old, ids map[string]topicID, all []split) error {
	listed := make(map[split]bool, len(all))
	for _, s := range all {
		listed[s] = true
	}
	var reset []split
	for s := range r.pos {
		if !old[s.topic].isZero() && listed[s] {
			reset = append(reset, s)
		}
	}
	sortSplits(reset)
	start, err := r.listed(ctx, reset, r.adm.ListStartOffsets)
	if err != nil {
		return err
	}
	var end map[split]int64
	if r.src.cfg.Bounded {
		if end, err = r.endOffsets(ctx, reset); err != nil {
			return err
		}
	}
	// kgo keeps the old topic id until the topic is purged from the
	// client; purging also drops what it fetched and buffered.
	r.cl.PurgeTopicsFromClient(topics...)
	for _, s := range slices.SortedFunc(maps.Keys(r.pos), compareSplits) {
		if old[s.topic].isZero() {
			continue
		}
		p := r.pos[s]
		delete(r.pos, s)
		delete(r.ends, s)
		if !listed[s] {
			delete(r.known, s)
			r.log.Warn("topic was deleted and created again (its topic id changed), and the new topic has no such partition: dropping it; if the partition is added, discovery reads it from its earliest offset",
				"partition", s.String(), "old_topic_id", p.id.String(), "new_topic_id", ids[s.topic].String(), "offset", p.next)
			continue
		}
		np := position{next: start[s], end: -1, id: ids[s.topic]}
		if end != nil {
			np.end = end[s]
		}
		r.pos[s] = np
		r.log.Warn("topic was deleted and created again (its topic id changed); OnTopicRecreated is RecreatedReadEarliest, so the partition is read from the new topic's earliest offset: the old topic's records from the offset reached on are gone",
			"partition", s.String(), "old_topic_id", p.id.String(), "new_topic_id", ids[s.topic].String(),
			"offset", p.next, "earliest_offset", start[s])
	}
	for _, s := range slices.SortedFunc(maps.Keys(r.parked), compareSplits) {
		if old[s.topic].isZero() {
			continue
		}
		p := r.parked[s]
		delete(r.parked, s)
		r.log.Warn("a parked partition belongs to a topic that was deleted and created again (its topic id changed): dropping its position; discovery reads the new topic's partition from its earliest offset",
			"partition", s.String(), "old_topic_id", p.id.String(), "new_topic_id", ids[s.topic].String(), "offset", p.next)
	}
	for s := range r.known {
		if !old[s.topic].isZero() && !listed[s] {
			delete(r.known, s)
		}
	}
	r.consume(reset)
	r.updateLag()
	return nil
}
