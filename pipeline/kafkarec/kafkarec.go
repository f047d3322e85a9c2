// Package kafkarec lets the pipeline operators (package pipeline) run on
// the Kafka connector's records: Access reads and changes a kafka.Record
// for them, and ToSink readies their output for a Kafka sink. It is what
// `onceflow run` uses for job files; a Go program building a pipeline over
// a Kafka source uses it the same way:
//
//	out, failures, err := pipeline.Build(in, kafkarec.Access, steps, pipeline.Env{})
//	flow.To(flow.Map(out, kafkarec.ToSink("")), sink)
//
// It is a package of its own so that the Kafka connector does not depend
// on the expression language, nor package pipeline on Kafka.
package kafkarec

import (
	"strconv"
	"time"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/pipeline"
)

// Access is how the pipeline operators read and change a kafka.Record.
var Access = pipeline.RecordAccess[kafka.Record]{
	Key: func(r kafka.Record) string { return string(r.Key) },
	WithCount: func(r kafka.Record, n int64) kafka.Record {
		return kafka.Record{Key: r.Key, Value: FormatCount(n), Timestamp: r.Timestamp}
	},
	Value: func(r kafka.Record) []byte { return r.Value },
	WithKey: func(r kafka.Record, key []byte) kafka.Record {
		r.Key = key
		return r
	},
	Position: kafka.Record.String,
	Meta: func(r kafka.Record) pipeline.Meta {
		var ts int64
		if !r.Timestamp.IsZero() {
			ts = r.Timestamp.UnixMilli()
		}
		return pipeline.Meta{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: ts}
	},
	Headers: func(r kafka.Record) map[string]string {
		h := make(map[string]string, len(r.Headers))
		for _, x := range r.Headers {
			h[x.Key] = string(x.Value)
		}
		return h
	},
	WithValue: func(r kafka.Record, v []byte) kafka.Record {
		r.Value = v
		return r
	},
	WithTopic: func(r kafka.Record, topic string) kafka.Record {
		r.Topic, r.Partition = topic, Routed
		return r
	},
	New: func(key, value []byte, ts int64) kafka.Record {
		return kafka.Record{Key: key, Value: value, Timestamp: time.UnixMilli(ts)}
	},
	WithHeader: func(r kafka.Record, name string, v []byte) kafka.Record {
		hs := make([]kafka.Header, 0, len(r.Headers)+1)
		for _, x := range r.Headers {
			if x.Key != name {
				hs = append(hs, x)
			}
		}
		r.Headers = append(hs, kafka.Header{Key: name, Value: v})
		return r
	},
	RowKind:     RowKind,
	WithRowKind: WithRowKind,
}

// WithRowKind returns r with kind as its row kind: the header
// pipeline.RowKindHeader set, or removed for pipeline.RowAdd. The headers
// are copied, never changed in place: r may share them with a record
// already sent.
func WithRowKind(r kafka.Record, kind pipeline.RowKind) kafka.Record {
	hs := make([]kafka.Header, 0, len(r.Headers)+1)
	for _, x := range r.Headers {
		if x.Key != pipeline.RowKindHeader {
			hs = append(hs, x)
		}
	}
	if kind.Retracts() {
		hs = append(hs, kafka.Header{Key: pipeline.RowKindHeader, Value: kind.Header()})
	}
	if len(hs) == 0 {
		hs = nil
	}
	r.Headers = hs
	return r
}

// Routed is the partition of a record whose topic a pipeline step set
// (route, map's topic, window's late-topic): ToSink keeps its topic. No
// record read from Kafka has a negative partition.
const Routed = -1

// ToSink readies a record for a Kafka sink: a record read from a source
// still names its source topic and partition, and the sink would write it
// back there. A record a step routed keeps its topic; the others go to
// topic (empty: the sink's own SinkConfig.Topic).
//
// A retraction with a key (pipeline.RowKind: the old row of an updated
// group, a deleted group) becomes a tombstone, the key with no value and
// no row-kind header: a topic of upserts keyed by the key, as Kafka's
// compaction and every upsert reader (Flink's upsert-kafka, a KTable)
// take it. So a key's last record is its row, or none. An empty key (a
// one-column key whose value is the empty string) is a key too; only a
// record without one (nil) is written as it is.
func ToSink(topic string) func(kafka.Record) kafka.Record {
	return func(r kafka.Record) kafka.Record {
		if r.Partition != Routed {
			r.Topic = topic
		}
		r.Partition, r.Offset = 0, 0
		if len(r.Headers) > 0 && r.Key != nil && RowKind(r).Retracts() {
			r = WithRowKind(r, pipeline.RowAdd)
			r.Value = nil
		}
		return r
	}
}

// FormatCount is how count writes its value: a decimal number, so any
// consumer can read it without a schema.
func FormatCount(n int64) []byte { return strconv.AppendInt(nil, n, 10) }

// RowKind is the row kind of r (pipeline.RowKindHeader; none: RowAdd).
func RowKind(r kafka.Record) pipeline.RowKind {
	for i := len(r.Headers) - 1; i >= 0; i-- {
		if r.Headers[i].Key == pipeline.RowKindHeader {
			return pipeline.ParseRowKind(r.Headers[i].Value)
		}
	}
	return pipeline.RowAdd
}
