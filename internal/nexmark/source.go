package nexmark

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"strconv"

	"github.com/onceflow/onceflow/flow"
)

// Source is a bounded flow source of the first Events events of a
// generator, for runs of the engine without Kafka (docs/benchmarks.md,
// "In-process source"). It has Splits splits (default 1); split s yields
// the events numbered s, s+Splits, s+2*Splits, ..., so together they yield
// the same events whatever the split count and parallelism, each split in
// event-time order. A split's position is the count of events it has
// yielded: a restored job goes on from its checkpoint and yields nothing
// twice. Safe to reuse across restarts of a job.
//
// A subtask that reads several splits yields runs of PerPoll events from
// each in turn, so with flow.WithWatermarks allow for a
// MaxOutOfOrderness of PerPoll·Splits events of event time
// (PerPoll·Splits/EventsPerSecond seconds), or give the job a parallelism
// of Splits.
type Source struct {
	// Config configures the generator.
	Config Config
	// Events is how many events the source yields in all.
	Events int64
	// Splits is the number of splits, and the parallelism the source
	// suggests (flow.ParallelismHinter); 0 means 1.
	Splits int
	// PerPoll is how many events one Poll yields at most; 0 means 1024.
	PerPoll int
}

// ParallelismHint implements flow.ParallelismHinter: the split count.
func (s *Source) ParallelismHint(context.Context) (int, error) { return s.splits(), nil }

func (s *Source) splits() int { return max(s.Splits, 1) }

// SplitName names split i in checkpoints ("nexmark-0", ...).
func SplitName(i int) string { return "nexmark-" + strconv.Itoa(i) }

// splitEvents is how many events split i of n yields out of total.
func splitEvents(total int64, i, n int) int64 {
	if int64(i) >= total {
		return 0
	}
	return (total-int64(i)-1)/int64(n) + 1
}

// Open implements flow.Source: the reader takes the splits s with
// s % parallelism == subtask.
func (s *Source) Open(_ context.Context, sc flow.SourceContext, restored map[string][]byte) (flow.SourceReader[Event], error) {
	if s.Events < 0 {
		return nil, fmt.Errorf("nexmark: Source.Events %d is negative", s.Events)
	}
	g, err := New(s.Config)
	if err != nil {
		return nil, err
	}
	r := &reader{g: g, perPoll: s.PerPoll, n: s.splits(), last: -1}
	if r.perPoll <= 0 {
		r.perPoll = 1024
	}
	for i := sc.Subtask; i < r.n; i += sc.Parallelism {
		sp := split{index: i, end: splitEvents(s.Events, i, r.n)}
		if b, ok := restored[SplitName(i)]; ok {
			v, k := binary.Uvarint(b)
			if k != len(b) || v > uint64(sp.end) {
				return nil, fmt.Errorf("nexmark: the restored position of split %s is invalid (%d bytes); the source has %d events in %d splits", SplitName(i), len(b), s.Events, r.n)
			}
			sp.pos = int64(v)
		}
		r.splits = append(r.splits, sp)
	}
	return r, nil
}

type split struct {
	index    int
	pos, end int64 // events yielded, and to yield
}

type reader struct {
	g       *Generator
	n       int // split count
	splits  []split
	next    int // the split Poll reads next
	perPoll int
	last    int // the split read last, -1 before the first
	ev      Event
}

// Poll yields up to PerPoll events of one split, the splits taking turns.
func (r *reader) Poll(_ context.Context, emit func(Event)) error {
	for range r.splits {
		k := r.next
		sp := &r.splits[k]
		r.next = (r.next + 1) % len(r.splits)
		if sp.pos >= sp.end {
			continue
		}
		r.last = k
		for end := min(sp.pos+int64(r.perPoll), sp.end); sp.pos < end; sp.pos++ {
			r.ev = Event{}
			r.g.fill(sp.pos*int64(r.n)+int64(sp.index), &r.ev)
			emit(r.ev)
		}
		return nil
	}
	return io.EOF
}

// Position names the split and the number of the event last yielded.
func (r *reader) Position() string {
	if r.last < 0 {
		return ""
	}
	sp := r.splits[r.last]
	return SplitName(sp.index) + "@" + strconv.FormatInt((sp.pos-1)*int64(r.n)+int64(sp.index), 10)
}

func (r *reader) Snapshot(int64) (map[string][]byte, error) {
	out := make(map[string][]byte, len(r.splits))
	for _, sp := range r.splits {
		out[SplitName(sp.index)] = binary.AppendUvarint(nil, uint64(sp.pos))
	}
	return out, nil
}

func (r *reader) CheckpointCommitted(context.Context, int64) error { return nil }
func (r *reader) Close() error                                     { return nil }
