package jobfile

// A job file's sink section may name several sinks: a topic (sink.topic)
// and the sections of other sink connectors (sink.postgres, sink.mysql,
// sink.redis, any registered one's). Every sink gets every result. With
// delivery exactly-once exactly one of them is the job's commit point
// (docs/design.md, "Database sinks"): of the sinks written to, the first
// in the connectors' CommitRank order (Kafka's transaction, else Redis'
// script, else the first table's transaction, postgres before mysql); the
// others take part through prepared transactions (two-phase delivery), or
// the file is refused if they cannot (Redis).

import (
	"slices"
	"sort"

	"github.com/onceflow/onceflow/connector"
)

// SinkKafka is the Kafka sink's kind (sink.topic).
const SinkKafka = "kafka"

// legacyOrder is the order the sinks were listed and built in before
// connectors were registered: Kinds keeps it, because the sink that gets
// the uid "sink" when there is no commit point is the first listed
// (SinkConfig.UID), and checkpoints know the uids. Other connectors follow
// in CommitRank order.
var legacyOrder = []string{SinkKafka, "postgres", "mysql", "redis"}

// Kinds lists the sinks the section names: kafka (sink.topic) first, then
// the other connectors' sections (see legacyOrder).
func (s SinkConfig) Kinds() []string {
	var k []string
	if s.Topic != "" {
		k = append(k, SinkKafka)
	}
	var rest []string
	for name := range s.Connectors {
		rest = append(rest, name)
	}
	rank := func(n string) (int, int) {
		if i := slices.Index(legacyOrder, n); i >= 0 {
			return 0, i
		}
		spec, _ := connector.Lookup(n)
		return 1, spec.CommitRank
	}
	sort.Slice(rest, func(i, j int) bool {
		gi, ri := rank(rest[i])
		gj, rj := rank(rest[j])
		if gi != gj || ri != rj {
			return gi < gj || gi == gj && ri < rj
		}
		return rest[i] < rest[j]
	})
	return append(k, rest...)
}

// HasTopic reports whether the job writes to a Kafka topic.
func (s SinkConfig) HasTopic() bool { return s.Topic != "" }

// External reports whether the job writes anywhere but a topic.
func (s SinkConfig) External() bool { return len(s.Connectors) > 0 }

// CommitPoint names the sink whose commit is the job's commit point, ""
// unless delivery is exactly-once: of the sinks the section names, the
// first in the connectors' CommitRank order (package connector).
func (s SinkConfig) CommitPoint() string {
	if s.Delivery != DeliveryExactlyOnce {
		return ""
	}
	return connector.CommitPoint(s.Kinds())
}

// Role is how the sink of kind delivers: connector.ExactlyOnce as the
// commit point, connector.TwoPhase under another commit point (or the
// checkpoint manifest, when none of the sinks can be one), else the job's
// delivery.
func (s SinkConfig) Role(kind string) connector.Delivery {
	switch {
	case s.Delivery != DeliveryExactlyOnce:
		return connector.Delivery(s.Delivery)
	case s.CommitPoint() == kind:
		return connector.ExactlyOnce
	}
	return connector.TwoPhase
}
