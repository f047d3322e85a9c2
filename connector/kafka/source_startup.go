package kafka

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/testbreak"
)

func (r *reader) init(ctx context.Context, restored map[string][]byte) error {
	all, ids, err := r.src.listSplits(ctx, r.adm)
	if err != nil {
		return err
	}
	var owned []split
	for _, s := range all {
		r.known[s] = true
		if r.owns(s) {
			owned = append(owned, s)
		}
	}
	if len(owned) == 0 {
		r.log.Warn("kafka source subtask owns no partition and stays idle: the source's parallelism is above its partition count", "partitions", len(all), "parallelism", r.sc.Parallelism)
	}
	if len(restored) > 0 && !testbreak.Is(testbreak.OffsetsOutsideTxn) {
		err = r.restore(ctx, owned, ids, restored)
	} else {
		err = r.startup(ctx, owned, ids)
	}
	if err != nil {
		return err
	}
	r.raiseToMinOffsets()
	if r.src.cfg.Bounded {
		if err := r.fixEnds(ctx); err != nil {
			return err
		}
		if len(restored) > 0 && len(r.pos) > 0 {
			done := true
			for _, p := range r.pos {
				done = done && p.next >= p.end
			}
			if done {
				// A run of a finished bounded job: it keeps the end offsets
				// of its first start (SourceConfig.Bounded), so it reads
				// nothing, however many records came since. Say so.
				r.log.Warn("kafka source: bounded, restored from a checkpoint whose partitions are all read to the end offsets of the job's first start: nothing to read; records written since are not read by this job (start it from a new state directory or savepoint to read them)",
					"partitions", len(r.pos))
			}
		}
	}
	r.consume(slices.Collect(maps.Keys(r.pos)))
	if r.discovers() {
		r.nextDiscovery = time.Now().Add(r.src.cfg.DiscoveryInterval)
	}
	if len(r.pos) == 0 {
		r.lag.Store(0) // nothing to read, nothing to be behind on
	}
	return nil
}

// raiseToMinOffsets moves each position below SourceConfig.MinOffsets up
// to it.
func (r *reader) raiseToMinOffsets() {
	for s, p := range r.pos {
		if m, ok := r.src.cfg.MinOffsets[s.topic][s.partition]; ok && p.next < m {
			r.log.Info("kafka source: skipping to the partition's lowest offset to read (SourceConfig.MinOffsets)", "partition", s.String(), "from", p.next, "to", m)
			p.next = m
			r.pos[s] = p
		}
	}
}

// restore takes the positions of the owned splits from restored. Splits
// the checkpoint does not know are new since it was taken: they start at
// the earliest offset, as discovery would have started them. Owned splits
// the checkpoint has a position for that are not listed now are parked.
// A position whose topic id differs from the listed topic's belongs to a
// topic that was deleted and created again: OnTopicRecreated decides.
func (r *reader) restore(ctx context.Context, owned []split, ids map[string]topicID, restored map[string][]byte) error {
	byKey := make(map[split]position, len(restored))
	for k, v := range restored {
		s, err := parseSplit(k)
		if err != nil {
			return fmt.Errorf("restored source state: %w", err)
		}
		p, err := decodePosition(v)
		if err != nil {
			return fmt.Errorf("restored source state of %s: %w", s, err)
		}
		byKey[s] = p
	}
	keys := slices.SortedFunc(maps.Keys(byKey), compareSplits)
	// The checkpointed topic ids of the recreated topics this subtask
	// reads.
	recreated := map[string]topicID{}
	for _, s := range keys {
		if p := byKey[s]; r.owns(s) && isRecreated(p.id, ids, s.topic) {
			recreated[s.topic] = p.id
		}
	}
	if len(recreated) > 0 && r.src.cfg.OnTopicRecreated == RecreatedFail {
		t := slices.Min(slices.Collect(maps.Keys(recreated)))
		return recreatedError(t, recreated[t], ids[t], "the checkpoint being restored has positions for topic id")
	}
	var fresh []split
	for _, s := range owned {
		p, ok := byKey[s]
		if !ok || !recreated[s.topic].isZero() {
			fresh = append(fresh, s)
			continue
		}
		if id := ids[s.topic]; !id.isZero() {
			p.id = id // the same, or adopted by a position without one
		}
		r.pos[s] = p
	}
	for _, s := range keys {
		if r.known[s] || !r.owns(s) {
			continue
		}
		p := byKey[s]
		if old := recreated[s.topic]; !old.isZero() {
			r.log.Warn("the checkpoint has a position for a partition of a topic that was deleted and created again, and the new topic has no such partition: dropping it; if the partition is added, discovery reads it from its earliest offset",
				"partition", s.String(), "old_topic_id", old.String(), "new_topic_id", ids[s.topic].String(), "checkpointed_offset", p.next)
			continue
		}
		why := "its topic is not listed: deleted, or no longer named by Topics or TopicRegex"
		if _, ok := ids[s.topic]; ok {
			why = "its topic has no such partition now"
		}
		r.log.Warn("the checkpoint has a position for a partition the source does not list now; parking it: every checkpoint keeps its position, and when partition discovery lists it again reading resumes there",
			"partition", s.String(), "reason", why, "offset", p.next)
		r.parked[s] = p
	}
	if len(fresh) == 0 {
		return nil
	}
	start, err := r.listed(ctx, fresh, r.adm.ListStartOffsets)
	if err != nil {
		return err
	}
	for _, s := range fresh {
		p, ok := byKey[s]
		switch {
		case !ok:
			r.log.Info("partition is not in the checkpoint; reading it from the earliest offset", "partition", s.String())
		default:
			r.log.Warn("topic was deleted and created again since the checkpoint (its topic id changed); OnTopicRecreated is RecreatedReadEarliest, so the partition is read from the new topic's earliest offset: the old topic's records after the checkpointed offset are gone",
				"partition", s.String(), "old_topic_id", p.id.String(), "new_topic_id", ids[s.topic].String(),
				"checkpointed_offset", p.next, "earliest_offset", start[s])
		}
		r.pos[s] = position{next: start[s], end: -1, id: ids[s.topic]}
	}
	return nil
}

// isRecreated reports whether a position on topic id old belongs to a topic
// that was deleted and created again: the topic is listed with another id.
// Unknown ids (zero) never count.
func isRecreated(old topicID, ids map[string]topicID, topic string) bool {
	cur, ok := ids[topic]
	return ok && !old.isZero() && !cur.isZero() && old != cur
}

// recreatedError is the error of OnTopicRecreated RecreatedFail.
func recreatedError(topic string, old, cur topicID, what string) error {
	return flow.Unrecoverable(fmt.Errorf("topic %q was deleted and created again: %s %s, the topic now has id %s, and OnTopicRecreated is RecreatedFail. "+
		"Either read the new topic from its earliest offset (set SourceConfig.OnTopicRecreated to RecreatedReadEarliest; in a job file source.on-topic-recreated: earliest), "+
		"or start the job over without its checkpoints, so that its startup mode decides where the new topic is read from",
		topic, what, old, cur))
}

type listFunc func(ctx context.Context, topics ...string) (kadm.ListedOffsets, error)

// listed returns one offset per split from list.
func (r *reader) listed(ctx context.Context, splits []split, list listFunc) (map[split]int64, error) {
	lo, err := r.listedOffsets(ctx, splits, list)
	if err != nil {
		return nil, err
	}
	out := make(map[split]int64, len(lo))
	for s, o := range lo {
		out[s] = o.Offset
	}
	return out, nil
}

// listedOffsets returns one listed offset per split from list, with the
// timestamp a lookup by time found.
func (r *reader) listedOffsets(ctx context.Context, splits []split, list listFunc) (map[split]kadm.ListedOffset, error) {
	if len(splits) == 0 {
		return map[split]kadm.ListedOffset{}, nil
	}
	topics := map[string]bool{}
	for _, s := range splits {
		topics[s.topic] = true
	}
	lo, err := list(ctx, slices.Sorted(maps.Keys(topics))...)
	if err != nil {
		return nil, fmt.Errorf("list offsets: %w", err)
	}
	out := make(map[split]kadm.ListedOffset, len(splits))
	for _, s := range splits {
		o, ok := lo.Lookup(s.topic, s.partition)
		if !ok {
			return nil, fmt.Errorf("list offsets: no answer for %s", s)
		}
		if o.Err != nil {
			return nil, fmt.Errorf("list offsets of %s: %w", s, o.Err)
		}
		out[s] = o
	}
	return out, nil
}

func (r *reader) endOffsets(ctx context.Context, splits []split) (map[split]int64, error) {
	if r.src.cfg.ReadUncommitted {
		return r.listed(ctx, splits, r.adm.ListEndOffsets)
	}
	return r.listed(ctx, splits, r.adm.ListCommittedOffsets)
}

// groupOffsets returns the group's committed offsets of splits; splits
// without one are absent.
func (r *reader) groupOffsets(ctx context.Context, splits []split) (map[split]int64, error) {
	resps, err := r.adm.FetchOffsets(ctx, r.group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return map[split]int64{}, nil // a group that never committed
	}
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("fetch the offsets of group %q: %w", r.group, err)
	}
	out := map[split]int64{}
	for _, s := range splits {
		if o, ok := resps.Lookup(s.topic, s.partition); ok && o.Err == nil && o.At >= 0 {
			out[s] = o.At
		}
	}
	return out, nil
}

// startup positions the owned splits by the startup mode.
func (r *reader) startup(ctx context.Context, owned []split, ids map[string]topicID) error {
	cfg := r.src.cfg
	var (
		offs map[split]int64
		err  error
	)
	switch cfg.StartupMode {
	case StartEarliest:
		offs, err = r.listed(ctx, owned, r.adm.ListStartOffsets)
	case StartLatest:
		offs, err = r.endOffsets(ctx, owned)
	case StartTimestamp:
		offs, err = r.fromTimestamp(ctx, owned)
	case StartGroupOffsets:
		offs, err = r.fromGroup(ctx, owned)
	case StartSpecificOffsets:
		offs, err = r.fromSpecific(ctx, owned)
	}
	if err != nil {
		return fmt.Errorf("start from %s: %w", cfg.StartupMode, err)
	}
	for _, s := range owned {
		r.pos[s] = position{next: offs[s], end: -1, id: ids[s.topic]}
	}
	return nil
}

// fromTimestamp returns the first offset of each split whose record is at
// or after the start timestamp. The broker searches only the retained
// records, so when retention (or DeleteRecords) removed the records from
// the timestamp on, the lookup lands on the log start offset: the source
// starts there, and says that records it was asked for are gone.
func (r *reader) fromTimestamp(ctx context.Context, owned []split) (map[split]int64, error) {
	at := r.src.cfg.StartTimestamp
	ms := at.UnixMilli()
	found, err := r.listedOffsets(ctx, owned, func(ctx context.Context, topics ...string) (kadm.ListedOffsets, error) {
		return r.adm.ListOffsetsAfterMilli(ctx, ms, topics...)
	})
	if err != nil {
		return nil, err
	}
	start, err := r.listed(ctx, owned, r.adm.ListStartOffsets)
	if err != nil {
		return nil, err
	}
	out := make(map[split]int64, len(found))
	for _, s := range owned {
		o := found[s]
		out[s] = o.Offset
		// A record at exactly the timestamp is retained, and one newer
		// at the log start may have had deleted predecessors that were
		// at or after it.
		if st := start[s]; st > 0 && o.Offset == st && o.Timestamp > ms {
			r.log.Warn("the start timestamp is before the earliest retained record of the partition; starting at its log start offset, records before it were deleted by retention",
				"partition", s.String(), "start_timestamp", at, "log_start_offset", st,
				"earliest_retained_timestamp", time.UnixMilli(o.Timestamp))
		}
	}
	return out, nil
}

func (r *reader) fromGroup(ctx context.Context, owned []split) (map[split]int64, error) {
	offs, err := r.groupOffsets(ctx, owned)
	if err != nil {
		return nil, err
	}
	var missing []split
	for _, s := range owned {
		if _, ok := offs[s]; !ok {
			missing = append(missing, s)
		}
	}
	if len(missing) == 0 {
		return offs, nil
	}
	var fb map[split]int64
	switch r.src.cfg.ResetFallback {
	case ResetNone:
		// Restarting finds the same: stop with the reason.
		return nil, flow.Unrecoverable(fmt.Errorf("partition %s has no committed offset in group %q and the reset fallback is none: commit an offset for it, or choose the earliest or latest fallback", missing[0], r.group))
	case ResetLatest:
		fb, err = r.endOffsets(ctx, missing)
	default:
		fb, err = r.listed(ctx, missing, r.adm.ListStartOffsets)
	}
	if err != nil {
		return nil, err
	}
	maps.Copy(offs, fb)
	return offs, nil
}

func (r *reader) fromSpecific(ctx context.Context, owned []split) (map[split]int64, error) {
	var listed, rest []split
	for _, s := range owned {
		if _, ok := r.src.cfg.SpecificOffsets[s.topic][s.partition]; ok {
			listed = append(listed, s)
		} else {
			rest = append(rest, s)
		}
	}
	out, err := r.fromGroup(ctx, rest)
	if err != nil {
		return nil, err
	}
	start, err := r.listed(ctx, listed, r.adm.ListStartOffsets)
	if err != nil {
		return nil, err
	}
	end, err := r.listed(ctx, listed, r.adm.ListEndOffsets)
	if err != nil {
		return nil, err
	}
	for _, s := range listed {
		o := r.src.cfg.SpecificOffsets[s.topic][s.partition]
		if o < start[s] || o > end[s] {
			return nil, fmt.Errorf("offset %d for partition %s is outside its retained range %d..%d", o, s, start[s], end[s])
		}
		out[s] = o
	}
	return out, nil
}

// fixEnds gives every owned split without an end the current end offset.
func (r *reader) fixEnds(ctx context.Context) error {
	var open []split
	for s, p := range r.pos {
		if p.end < 0 {
			open = append(open, s)
		}
	}
	end, err := r.endOffsets(ctx, open)
	if err != nil {
		return fmt.Errorf("bounded source: %w", err)
	}
	for _, s := range open {
		p := r.pos[s]
		p.end = end[s]
		r.pos[s] = p
	}
	return nil
}
