package kafka

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/onceflow/onceflow/flow"
)

// Lag of caught-up readers: a fetch response carries only partitions with
// new records, so every lagRefreshInterval Poll lists the end offsets of
// the source's topics, for the partitions no fetch response carried since
// the last listing and for partitions added since the last discovery,
// waiting at most lagListTimeout for the answer.
const (
	lagRefreshInterval = 3 * time.Second
	lagListTimeout     = time.Second
)

// Lag returns how many records this process's readers of the source are
// behind the end of their partitions, summed over the partitions: the
// partition's end (the last stable offset with read_committed, else the
// high watermark; a bounded source's end offset if lower) minus the next
// offset to read, as of the latest fetch response that carried the
// partition or, for partitions without new records, the latest listing of
// end offsets (each reader's Poll lists them at most every few seconds).
// Partitions added to the topics that the readers do not read yet (before
// discovery finds them, or with discovery off) count with all their
// records from where reading them would start (docs/design.md, "The Kafka
// source"), so the lag is not 0 while records sit unread. A reader that
// owns no partition counts 0. It is -1 while no reader is
// open or one of them does not know its lag yet (before its first Poll):
// a partial sum would look like progress that is not there. Safe to call
// from any goroutine.
func (s *Source) Lag() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.readers) == 0 {
		return -1
	}
	var sum int64
	for r := range s.readers {
		l := r.lag.Load()
		if l < 0 {
			return -1
		}
		sum += l
	}
	return sum
}

// refreshEnds lists the end offsets of the splits no fetch response
// carried since the last listing, and updates the lag. A fetch response
// carries only partitions with new records, so without the listing a
// caught-up reader would never know its lag, nor see records it has not
// fetched yet. Failures leave the ends as they were.
func (r *reader) refreshEnds(ctx context.Context) {
	gen := r.endGen
	r.endGen++
	var stale []split
	for s, p := range r.pos {
		if p.end >= 0 && p.next >= p.end {
			continue // a finished bounded split is behind by nothing
		}
		if e, ok := r.ends[s]; !ok || e.gen != gen {
			stale = append(stale, s)
		}
	}
	// The topics of every split listed so far, not only the stale ones:
	// the listing covers all partitions of a topic, and so shows those
	// added since the last discovery.
	topics := map[string]bool{}
	for s := range r.known {
		topics[s.topic] = true
	}
	if len(topics) > 0 && !r.src.cfg.Bounded {
		lctx, cancel := context.WithTimeout(ctx, lagListTimeout)
		list := r.adm.ListCommittedOffsets
		if r.src.cfg.ReadUncommitted {
			list = r.adm.ListEndOffsets
		}
		lo, err := list(lctx, slices.Sorted(maps.Keys(topics))...)
		if err != nil {
			r.log.Debug("kafka: listing end offsets for the lag failed", "err", err)
		}
		for _, s := range stale {
			if o, ok := lo.Lookup(s.topic, s.partition); ok && o.Err == nil && o.Offset >= 0 {
				r.ends[s] = endOffset{off: o.Offset}
			}
		}
		if err == nil {
			r.listUnread(lctx, lo)
		}
		cancel()
	} else if len(stale) > 0 {
		lctx, cancel := context.WithTimeout(ctx, lagListTimeout)
		ends, err := r.endOffsets(lctx, stale)
		cancel()
		if err != nil {
			r.log.Debug("kafka: listing end offsets for the lag failed", "err", err)
		}
		for s, off := range ends {
			if off >= 0 {
				r.ends[s] = endOffset{off: off}
			}
		}
	}
	r.updateLag()
}

// listUnread updates r.unread from a listing of end offsets that covers
// every partition of the reader's topics: the partitions this subtask
// would own that it neither reads nor knew of, with their end and where
// reading them would start (a parked position, else the log start,
// listed once per partition).
func (r *reader) listUnread(ctx context.Context, lo kadm.ListedOffsets) {
	found := map[split]int64{}
	lo.Each(func(o kadm.ListedOffset) {
		s := split{o.Topic, o.Partition}
		if o.Err != nil || o.Offset < 0 || r.known[s] || !r.owns(s) {
			return
		}
		if ps := r.src.cfg.Partitions; ps != nil && !slices.Contains(ps[s.topic], s.partition) {
			return // another task's partition (scale-out)
		}
		if _, read := r.pos[s]; read {
			return
		}
		found[s] = o.Offset
	})
	var first []split
	for s := range found {
		if _, ok := r.unread[s]; !ok {
			if _, parked := r.parked[s]; !parked {
				first = append(first, s)
			}
		}
	}
	var starts map[split]int64
	if len(first) > 0 {
		var err error
		if starts, err = r.listed(ctx, first, r.adm.ListStartOffsets); err != nil {
			r.log.Debug("kafka: listing start offsets of partitions not read yet failed", "err", err)
			for _, s := range first {
				delete(found, s) // next time
			}
		}
	}
	next := make(map[split]progress, len(found))
	for s, end := range found {
		p, ok := r.unread[s]
		if !ok {
			p.next = starts[s]
			if pp, parked := r.parked[s]; parked {
				p.next = pp.next
			}
		}
		p.end, p.bound = end, -1
		next[s] = p
	}
	r.unread = next
}

// updateLag sums end - next over the splits with a known end; a reader
// without splits is behind by nothing.
func (r *reader) updateLag() {
	// Partitions discovery has taken since the listing are read now.
	for s := range r.unread {
		if r.known[s] {
			delete(r.unread, s)
		}
	}
	var lag int64
	for _, p := range r.unread {
		lag += max(0, p.end-p.next)
	}
	if len(r.pos) == 0 {
		r.lag.Store(lag)
		r.storeProgress()
		return
	}
	known := false
	for s, e := range r.ends {
		p, ok := r.pos[s]
		if !ok {
			continue
		}
		end := e.off
		if p.end >= 0 {
			end = min(end, p.end)
		}
		lag += max(0, end-p.next)
		known = true
	}
	if known {
		r.lag.Store(lag)
	}
	r.storeProgress()
}

// storeProgress copies each split's next offset and end, the partitions
// not read yet included, for Source.ReportMetrics.
func (r *reader) storeProgress() {
	r.progressMu.Lock()
	if r.progress == nil {
		r.progress = map[split]progress{}
	}
	clear(r.progress)
	maps.Copy(r.progress, r.unread)
	for s, p := range r.pos {
		end := int64(-1)
		if e, ok := r.ends[s]; ok {
			end = e.off
			if p.end >= 0 {
				end = min(end, p.end)
			}
		}
		r.progress[s] = progress{next: p.next, end: end, bound: p.end}
	}
	r.progressAt = time.Now()
	r.progressMu.Unlock()
}

// progress is a split's position for ReportMetrics: the next offset, the
// end offset (-1: unknown) and the bound of a bounded split (-1: none).
type progress struct{ next, end, bound int64 }

// staleProgress is how old a reader's progress may be before
// ReportMetrics lists the end offsets itself: a reader blocked downstream
// (backpressure, a stuck operator) does not poll, and its lag must still
// grow while records arrive.
const staleProgress = 3 * time.Second

// refreshStale lists the end offsets of the splits of readers whose
// progress is older than staleProgress and updates those copies.
func (s *Source) refreshStale(readers []*reader) {
	for _, r := range readers {
		r.progressMu.Lock()
		stale := time.Since(r.progressAt) > staleProgress && len(r.progress) > 0
		topics := map[string]bool{}
		for sp := range r.progress {
			topics[sp.topic] = true
		}
		r.progressMu.Unlock()
		if !stale {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), lagListTimeout)
		list := r.adm.ListCommittedOffsets
		if s.cfg.ReadUncommitted {
			list = r.adm.ListEndOffsets
		}
		lo, err := list(ctx, slices.Sorted(maps.Keys(topics))...)
		cancel()
		if err != nil {
			continue
		}
		r.progressMu.Lock()
		for sp, p := range r.progress {
			if o, ok := lo.Lookup(sp.topic, sp.partition); ok && o.Err == nil && o.Offset >= 0 {
				p.end = o.Offset
				if p.bound >= 0 {
					p.end = min(p.end, p.bound)
				}
				r.progress[sp] = p
			}
		}
		r.progressMu.Unlock()
	}
}

// ReportMetrics reports, per partition this process reads (or would read:
// one added since the last discovery), the next
// offset to read (current_offset), the end offset less it (records_lag)
// and the offset last committed (committed_offset); their maximum and sum
// (records_lag_max, pending_records), and the offset commits. The names
// follow Flink's Kafka source metrics (docs/design.md, "Metrics").
func (s *Source) ReportMetrics(emit func(flow.Metric)) {
	s.mu.Lock()
	readers := slices.Collect(maps.Keys(s.readers))
	committed := maps.Clone(s.committed)
	s.mu.Unlock()
	s.refreshStale(readers)
	parts := map[split]progress{}
	for _, r := range readers {
		r.progressMu.Lock()
		maps.Copy(parts, r.progress)
		r.progressMu.Unlock()
	}
	labels := func(sp split) []flow.Label {
		return []flow.Label{{Name: "topic", Value: sp.topic}, {Name: "partition", Value: strconv.Itoa(int(sp.partition))}}
	}
	var lagMax, pending int64
	lagKnown := len(parts) > 0
	for sp, p := range parts {
		emit(flow.Metric{Name: "source_current_offset", Help: "The next offset the source reads from the partition.", Labels: labels(sp), Value: float64(p.next)})
		if p.end < 0 {
			lagKnown = false
			continue
		}
		lag := max(0, p.end-p.next)
		emit(flow.Metric{Name: "source_records_lag", Help: "Records in the partition after the source's position (end offset less current offset).", Labels: labels(sp), Value: float64(lag)})
		lagMax = max(lagMax, lag)
		pending += lag
	}
	if lagKnown {
		emit(flow.Metric{Name: "source_records_lag_max", Help: "The largest lag of a partition the source reads.", Value: float64(lagMax)})
		emit(flow.Metric{Name: "source_pending_records", Help: "Records not yet read by the source, over its partitions.", Value: float64(pending)})
	}
	for sp, off := range committed {
		emit(flow.Metric{Name: "source_committed_offset", Help: "The offset last committed for the partition with a checkpoint (to the group, or in the Kafka sink's transaction).", Labels: labels(sp), Value: float64(off)})
	}
	emit(flow.Metric{Name: "source_commits_succeeded_total", Counter: true, Help: "Checkpoints whose source offsets were committed.", Value: float64(s.commitsOK.Load())})
	emit(flow.Metric{Name: "source_commits_failed_total", Counter: true, Help: "Commits of checkpoint offsets to the group that failed.", Value: float64(s.commitsFailed.Load())})
}

// CommittedOffsets returns, per partition, the offset committed with the
// newest committed checkpoint (to the group, or in a Kafka sink's
// transaction): what a restore would resume from.
func (s *Source) CommittedOffsets() map[Partition]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[Partition]int64, len(s.committed))
	for sp, o := range s.committed {
		out[Partition{sp.topic, sp.partition}] = o
	}
	return out
}

// offsetsCommitted records offs as the partitions' committed offsets.
func (s *Source) offsetsCommitted(offs map[split]int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.committed == nil {
		s.committed = map[split]int64{}
	}
	maps.Copy(s.committed, offs)
	s.commitsOK.Add(1)
}
