package jobfile

import (
	"sort"

	"go.yaml.in/yaml/v3"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/connector/kafka"
)

// The Kafka source (source:, each of sources:) and the Kafka fields of
// sink: are connector sections like the others: decoded by the Kafka
// connector's spec (kafka.Spec) with the generic decoder
// (connectors.go), checked by its Validate hook, then turned into the
// SourceConfig and SinkConfig the rest of onceflow reads, by
// SourceFromConfig and KafkaSinkFromConfig, which a SQL table's decoded
// WITH options (kafka.Spec's Side.DecodeStrings) go through too.

// decodeSource decodes the source section at path into s.
func (d *decoder) decodeSource(path string, v *yaml.Node, s *SourceConfig) {
	before := len(d.errs)
	side := kafka.Spec.Source
	c := d.decodeConnector(path, v, side)
	d.report(c, splitJoined(side.Validate(c, connector.Check{})))
	// The rules that span fields are checked once the section decoded:
	// its problems are reported in line order, as a reader meets them.
	errs := d.errs[before:]
	sort.SliceStable(errs, func(i, j int) bool { return lineOf(errs[i]) < lineOf(errs[j]) })
	*s, _ = SourceFromConfig(c)
}

// SourceFromConfig is the source a decoded Kafka source section says
// (kafka.Spec.Source: a job file's source:, or a SQL table's WITH
// options), as a job file is read: fields left out stay empty, for
// ParseJobFile's defaults (SourceConfig.ApplyDefaults). The error joins
// the section's startup problems (kafka.StartupOf), *connector.FieldError
// values; what parses is returned anyway.
func SourceFromConfig(c *connector.Config) (SourceConfig, error) {
	s := SourceConfig{
		Topics:           c.List("topics"),
		TopicRegex:       c.String("topic-regex"),
		Group:            c.String("group"),
		Parallelism:      c.Int("parallelism"),
		Bounded:          c.Bool("bounded"),
		OnTopicRecreated: written(c, "on-topic-recreated"),
		Isolation:        written(c, "isolation"),
	}
	if c.Has("discovery-interval") {
		s.DiscoveryInterval = c.Duration("discovery-interval")
		if s.DiscoveryInterval == 0 {
			// Written as 0: discovery off, as a non-positive interval is in
			// Flink; the connector takes a negative interval for that.
			s.DiscoveryInterval = -1
		}
	}
	st, err := kafka.StartupOf(c)
	s.Startup = Startup{Mode: StartupMode(st.Mode), Timestamp: st.Timestamp, Offsets: st.Offsets, Reset: st.Reset}
	return s, err
}

// KafkaSinkFromConfig is the Kafka part of the sink a decoded Kafka sink
// section says (kafka.Spec.Sink: a job file's sink:, or a SQL table's
// WITH options): Topic, Delivery, MaxHeldBytes and TransactionTimeout.
// Fields left out stay empty, for ParseJobFile's defaults.
func KafkaSinkFromConfig(c *connector.Config) SinkConfig {
	s := SinkConfig{Topic: c.String("topic"), Delivery: written(c, "delivery")}
	if c.Has("max-held-bytes") {
		s.MaxHeldBytes = c.Size("max-held-bytes")
	}
	if c.Has("transaction-timeout") {
		s.TransactionTimeout = c.Duration("transaction-timeout")
	}
	return s
}

// written is a text or enum field's value if the section writes it, else
// "" (rather than its default).
func written(c *connector.Config, name string) string {
	if !c.Has(name) {
		return ""
	}
	return c.String(name)
}

// ApplyDefaults fills in what a source section leaves out, as
// ParseJobFile does; job is the job's name (the default group is
// onceflow-<job>).
func (s *SourceConfig) ApplyDefaults(job string) { applySourceDefaults(s, job) }
