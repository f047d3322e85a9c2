package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/flow"
)

// pollWait bounds a Poll without records, so the engine can inject
// barriers (flow.SourceReader asks for about 100ms).
const pollWait = 100 * time.Millisecond

// fetchMaxWait is how long the broker may hold a fetch without data.
const fetchMaxWait = 500 * time.Millisecond

// consume starts fetching splits from their positions, except the ones a
// bounded source has finished.
func (r *reader) consume(splits []split) {
	m := map[string]map[int32]kgo.Offset{}
	for _, s := range splits {
		p := r.pos[s]
		if p.end >= 0 && p.next >= p.end {
			continue
		}
		if m[s.topic] == nil {
			m[s.topic] = map[int32]kgo.Offset{}
		}
		m[s.topic][s.partition] = kgo.NewOffset().At(p.next)
	}
	if len(m) > 0 {
		r.cl.AddConsumePartitions(m)
	}
}

func (r *reader) finished() bool {
	if !r.src.cfg.Bounded {
		return false
	}
	for _, p := range r.pos {
		if p.next < p.end {
			return false
		}
	}
	return true
}

// Poll emits the records fetched within about 100ms. Records fetched but
// not emitted when the engine asks it to yield (a barrier is waiting:
// SetYield) stay in r.fetched, and the next Poll emits them before it
// fetches again (docs/design.md, "Checkpoints under backpressure").
func (r *reader) Poll(ctx context.Context, emit func(Record)) error {
	// The lag is updated after emitting, so it counts what was emitted,
	// whenever this poll fetched or emitted anything.
	update := len(r.fetched) > 0
	if !update {
		if r.finished() {
			return io.EOF
		}
		fetched, err := r.fetch(ctx)
		if err != nil {
			return err
		}
		update = fetched
	}
	var done map[string][]int32
	for len(r.fetched) > 0 {
		if r.yield != nil && r.yield() {
			break
		}
		fp := &r.fetched[0]
		s, complete := r.emitPart(fp, emit)
		if s != (split{}) {
			done = appendDone(done, s)
		}
		if complete {
			r.fetched[0] = fetchedPart{}
			r.fetched = r.fetched[1:]
		}
	}
	if len(r.fetched) == 0 {
		r.fetched = nil
	}
	if update {
		r.updateLag()
	}
	if len(done) > 0 {
		r.cl.RemoveConsumePartitions(done)
	}
	return nil
}

// fetchedPart is one partition's records of a fetch, emitted from next on.
type fetchedPart struct {
	s    split
	recs []*kgo.Record
	next int
}

// SetYield implements flow.Yielder.
func (r *reader) SetYield(yield func() bool) { r.yield = yield }

// fetch polls Kafka once (partition discovery and end offsets first, when
// due) and queues the fetched records in r.fetched. It reports whether the
// response carried any of the reader's partitions.
func (r *reader) fetch(ctx context.Context) (bool, error) {
	now := time.Now()
	if !r.nextDiscovery.IsZero() && !now.Before(r.nextDiscovery) {
		if _, err := r.discover(ctx, true); err != nil {
			if errors.Is(err, flow.ErrUnrecoverable) {
				return false, err
			}
			// The partitions read so far are unaffected; try again
			// at the next interval.
			r.log.Warn("kafka partition discovery failed", "err", err)
		}
		r.nextDiscovery = time.Now().Add(r.src.cfg.DiscoveryInterval)
	}
	if (len(r.pos) > 0 || len(r.known) > 0 && !r.src.cfg.Bounded) && !now.Before(r.nextLagRefresh) {
		r.refreshEnds(ctx)
		r.nextLagRefresh = time.Now().Add(lagRefreshInterval)
	}
	pctx, cancel := context.WithTimeout(ctx, pollWait)
	fs := r.cl.PollRecords(pctx, r.src.cfg.MaxPollRecords)
	cancel()
	if err := ctx.Err(); err != nil {
		return false, err
	}
	recreated, err := r.fetchErrors(ctx, fs)
	if err != nil {
		return false, err
	}
	fetched := false
	fs.EachPartition(func(fp kgo.FetchTopicPartition) {
		if recreated != nil && slices.Contains(recreated, fp.Topic) {
			return // the old topic's, fetched before it was read anew
		}
		s := split{fp.Topic, fp.Partition}
		if _, ok := r.pos[s]; !ok {
			return // not ours (any more)
		}
		end := fp.HighWatermark
		if !r.src.cfg.ReadUncommitted && fp.LastStableOffset >= 0 {
			end = fp.LastStableOffset
		}
		r.ends[s] = endOffset{end, r.endGen}
		fetched = true
		if len(fp.Records) > 0 {
			r.fetched = append(r.fetched, fetchedPart{s: s, recs: fp.Records})
		}
	})
	return fetched, nil
}

// emitPart emits fp's records from fp.next on, until the engine asks to
// yield. Per partition, not per record, it updates the split's position:
// the map lookups and stores of a position cost more than emitting a
// record. complete reports that fp has nothing left; s is the split when
// that completed a bounded split.
func (r *reader) emitPart(fp *fetchedPart, emit func(Record)) (s split, complete bool) {
	p, ok := r.pos[fp.s]
	if !ok {
		return split{}, true // not ours any more
	}
	startNext := p.next
	i := fp.next
	for ; i < len(fp.recs); i++ {
		if i > fp.next && r.yield != nil && r.yield() {
			break
		}
		kr := fp.recs[i]
		if kr.Offset < p.next {
			continue // already passed
		}
		if p.end >= 0 && kr.Offset >= p.end {
			p.next = max(p.next, p.end)
			i = len(fp.recs)
			break
		}
		p.next = kr.Offset + 1
		if kr.Attrs.IsControl() {
			continue
		}
		if len(kr.Headers) > 0 {
			if v, ok := markOf(kr); ok {
				r.takeMark(kr, v) // a watermark marker, not data
				continue
			}
		}
		rec := Record{
			Topic: kr.Topic, Partition: kr.Partition, Offset: kr.Offset,
			Key: kr.Key, Value: kr.Value, Timestamp: kr.Timestamp,
		}
		if len(kr.Headers) > 0 {
			rec.Headers = make([]Header, len(kr.Headers))
			for i, h := range kr.Headers {
				rec.Headers[i] = Header{h.Key, h.Value}
			}
		}
		r.lastTopic, r.lastPartition, r.lastOffset = kr.Topic, kr.Partition, kr.Offset
		emit(rec)
	}
	fp.next = i
	if p.next != startNext {
		r.pos[fp.s] = p
		if p.end >= 0 && p.next >= p.end && startNext < p.end {
			s = fp.s
		}
	}
	return s, i >= len(fp.recs)
}

// fetchErrors returns the errors of fs, if any. kgo never adopts the new
// id of a topic that was deleted and created again: it stops fetching the
// topic and, after a few retries (about 10 seconds), reports
// UNKNOWN_TOPIC_ID on every poll. On that error the reader checks the
// topic ids at once instead of at the next discovery; the errors of the
// topics it found recreated and read anew are not errors, and it returns
// those topics: what fs holds of them is the old topic's.
func (r *reader) fetchErrors(ctx context.Context, fs kgo.Fetches) (recreated []string, _ error) {
	type fetchErr struct {
		topic string
		err   error
	}
	var (
		errs      []fetchErr
		unknownID bool
	)
	fs.EachError(func(t string, p int32, err error) {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return
		}
		unknownID = unknownID || errors.Is(err, kerr.UnknownTopicID)
		errs = append(errs, fetchErr{t, fmt.Errorf("read %s/%d: %w", t, p, err)})
	})
	if len(errs) == 0 {
		return nil, nil
	}
	if unknownID {
		var err error
		recreated, err = r.discover(ctx, r.discovers())
		if errors.Is(err, flow.ErrUnrecoverable) {
			return nil, err
		}
		if err != nil {
			r.log.Warn("kafka: checking the topic ids after UNKNOWN_TOPIC_ID failed", "err", err)
		}
		errs = slices.DeleteFunc(errs, func(e fetchErr) bool { return slices.Contains(recreated, e.topic) })
		if len(errs) == 0 {
			return recreated, nil
		}
	}
	joined := make([]error, len(errs))
	for i, e := range errs {
		joined[i] = e.err
	}
	return nil, r.src.cfg.Client.explain(errors.Join(joined...))
}

func appendDone(m map[string][]int32, s split) map[string][]int32 {
	if m == nil {
		m = map[string][]int32{}
	}
	m[s.topic] = append(m[s.topic], s.partition)
	return m
}
