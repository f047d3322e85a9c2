package kafka

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/flow"
)

// Watermark markers carry event time across a scale-out repartition topic
// (docs/design.md, "Scale-out"): each task writing the topic puts, at
// every checkpoint and inside that checkpoint's transaction, a marker
// into every partition of the topic with its own watermark; the task
// reading a partition keeps each writer's newest and takes the smallest.
// So markers are exactly once like the records, and seen only once
// committed. A marker is a record with the HeaderWatermark header, an
// empty key and value; every Source skips such records as data.

// HeaderWatermark marks a watermark marker record. Its value is the
// writing task's name, a space, and its watermark in milliseconds since
// the Unix epoch, or "idle".
const HeaderWatermark = "onceflow.watermark"

const markIdle = "idle"

// encodeMark is a marker's header value.
func encodeMark(from string, wm int64, idle bool) []byte {
	b := append([]byte(from), ' ')
	if idle {
		return append(b, markIdle...)
	}
	return strconv.AppendInt(b, wm, 10)
}

// decodeMark reads a marker's header value.
func decodeMark(v []byte) (flow.UpstreamMark, error) {
	s := string(v)
	i := strings.LastIndexByte(s, ' ')
	if i <= 0 {
		return flow.UpstreamMark{}, fmt.Errorf("watermark marker %q names no upstream task", s)
	}
	m := flow.UpstreamMark{Upstream: s[:i]}
	if s[i+1:] == markIdle {
		m.Idle = true
		return m, nil
	}
	wm, err := strconv.ParseInt(s[i+1:], 10, 64)
	if err != nil {
		return flow.UpstreamMark{}, fmt.Errorf("watermark marker %q: %w", s, err)
	}
	m.Watermark = wm
	return m, nil
}

// markOf returns the marker header of a fetched record, if it is a
// marker: written in a transaction, with no key and no value, as the
// sink writes them. Any other record is data, whatever its headers.
func markOf(kr *kgo.Record) ([]byte, bool) {
	if !kr.Attrs.IsTransactional() || len(kr.Key) != 0 || len(kr.Value) != 0 {
		return nil, false
	}
	for _, h := range kr.Headers {
		if h.Key == HeaderWatermark {
			return h.Value, true
		}
	}
	return nil, false
}

// takeMark takes a marker the reader met in its input: with Upstreams
// set, its watermark is kept for the engine (flow.UpstreamReader);
// otherwise it is skipped.
func (r *reader) takeMark(kr *kgo.Record, v []byte) {
	if len(r.src.cfg.Upstreams) == 0 {
		return
	}
	m, err := decodeMark(v)
	if err != nil {
		r.log.Warn("skipped a damaged watermark marker in a repartition topic", "topic", kr.Topic, "partition", kr.Partition, "offset", kr.Offset, "err", err)
		return
	}
	// Per partition: a task's marker in one partition says nothing of
	// its records still unread in another.
	m.Upstream = upstreamIn(m.Upstream, SplitOf(Record{Topic: kr.Topic, Partition: kr.Partition}))
	if r.marks == nil {
		r.marks = map[string]flow.UpstreamMark{}
	}
	// Only the newest of a task's marks matters (watermarks never go
	// back; idleness is its latest word), so marks read between two
	// looks of the engine take no more memory than one per task.
	if old, ok := r.marks[m.Upstream]; ok && m.Idle {
		m.Watermark = old.Watermark
	} else if ok && old.Watermark > m.Watermark {
		m.Watermark = old.Watermark
	}
	r.marks[m.Upstream] = m
}

// upstreamIn names upstream task u as the writer of split s: the
// reader keeps a watermark per task and partition.
func upstreamIn(u, s string) string { return u + "@" + s }

// Upstreams names the writers whose markers the source waits for: each
// task of SourceConfig.Upstreams in each partition the reader reads;
// flow.UpstreamReader.
func (r *reader) Upstreams() []string {
	if len(r.src.cfg.Upstreams) == 0 {
		return nil
	}
	var out []string
	for _, s := range r.AssignedSplits() {
		for _, u := range r.src.cfg.Upstreams {
			out = append(out, upstreamIn(u, s))
		}
	}
	return out
}

// TakeMarks returns the markers read since the last call, the newest per
// upstream task; flow.UpstreamReader.
func (r *reader) TakeMarks() []flow.UpstreamMark {
	if len(r.marks) == 0 {
		return nil
	}
	out := make([]flow.UpstreamMark, 0, len(r.marks))
	for _, m := range r.marks {
		out = append(out, m)
	}
	clear(r.marks)
	return out
}

// Watermark keeps the watermark reaching the sink, for the markers of its
// next checkpoint; flow.WatermarkWriter.
func (w *writer) Watermark(wm int64, idle bool) {
	w.wm, w.wmIdle = wm, idle
}

// writeMarks writes a marker with the writer's watermark into every
// partition of the sink's topic, into the checkpoint's transaction, when
// it changed since the writer's last markers (a new writer: since none,
// which the readers take as no watermark). Markers are records the
// readers keep in their checkpoints, so saying the same again adds
// nothing, and would keep the topic from ever being purged to its end. A
// checkpoint that fails does not lose them: its transaction goes on into
// the next checkpoint's, or the job fails over and a new writer marks.
func (w *writer) writeMarks(ctx context.Context) error {
	if w.wm == w.markedWM && w.wmIdle == w.markedIdle {
		return nil
	}
	w.markedWM, w.markedIdle = w.wm, w.wmIdle
	cfg := w.sink.cfg
	v := encodeMark(cfg.MarkWatermarks, w.wm, w.wmIdle)
	for p := 0; p < cfg.MarkPartitions; p++ {
		r := w.newRecord()
		r.Topic, r.Partition, r.Key, r.Value = cfg.Topic, int32(p), nil, nil
		r.Headers = []kgo.RecordHeader{{Key: HeaderWatermark, Value: v}}
		if err := w.write(ctx, r); err != nil {
			return fmt.Errorf("write the watermark marker into %s/%d: %w", cfg.Topic, p, err)
		}
	}
	return nil
}

// validateMarks checks the marker settings of a sink.
func (c *SinkConfig) validateMarks() error {
	if c.MarkWatermarks == "" {
		if c.MarkPartitions != 0 {
			return errors.New("MarkPartitions is set without MarkWatermarks: name the writing task")
		}
		return nil
	}
	switch {
	case strings.ContainsAny(c.MarkWatermarks, " \n"):
		return fmt.Errorf("MarkWatermarks %q has a space or a line break: name the writing task without", c.MarkWatermarks)
	case c.Delivery != DeliveryExactlyOnce:
		return fmt.Errorf("MarkWatermarks needs exactly-once delivery (delivery is %s): markers are written in the checkpoint's transaction", c.Delivery)
	case c.Topic == "" || !c.KeepPartition:
		return errors.New("MarkWatermarks needs one Topic and KeepPartition: markers go into every partition of the repartition topic")
	case c.MarkPartitions <= 0 || c.MarkPartitions > math.MaxInt32:
		return fmt.Errorf("MarkWatermarks needs MarkPartitions, the topic's partition count (it is %d)", c.MarkPartitions)
	}
	return nil
}

// checkMarkedOpen refuses a marking sink with more than one writer: each
// writer would mark with its own watermark under the one task name.
func (s *Sink) checkMarkedOpen(sc flow.SinkContext) error {
	if s.cfg.MarkWatermarks != "" && sc.Parallelism > 1 {
		return fmt.Errorf("the Kafka sink writes watermark markers as task %s, and runs with parallelism %d: markers need one writer; run the sink with parallelism 1: %w", s.cfg.MarkWatermarks, sc.Parallelism, flow.ErrInvalidJob)
	}
	return nil
}
