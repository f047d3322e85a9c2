package jobfile

import (
	"github.com/onceflow/onceflow/pipeline"
	"go.yaml.in/yaml/v3"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
)

// The decoders of the top level and of the small sections. Every decoder
// reports what it finds wrong in a single field (d.errorf) and leaves what
// spans fields to validate.go.

// decodeRoot decodes the whole file: one decoder per section.
func (d *decoder) decodeRoot(root *yaml.Node, jf *JobFile) {
	d.mapping("", root, map[string]field{
		"job":           d.str(&jf.Job),
		"kafka":         func(p string, v *yaml.Node) { d.decodeKafka(p, v, &jf.Kafka) },
		"source":        func(p string, v *yaml.Node) { d.decodeSource(p, v, &jf.Source) },
		"pipeline":      func(p string, v *yaml.Node) { d.decodePipeline(p, v, jf) },
		"sink":          func(p string, v *yaml.Node) { d.decodeSink(p, v, &jf.Sink) },
		"sources":       func(p string, v *yaml.Node) { d.decodeSources(p, v, jf) },
		"streams":       func(p string, v *yaml.Node) { d.decodeStreams(p, v, jf) },
		"sinks":         func(p string, v *yaml.Node) { d.decodeSinks(p, v, jf) },
		"errors":        func(p string, v *yaml.Node) { d.decodeErrors(p, v, &jf.Errors) },
		"checkpointing": func(p string, v *yaml.Node) { d.decodeCheckpointing(p, v, &jf.Checkpointing) },
		"state":         func(p string, v *yaml.Node) { d.decodeState(p, v, &jf.State) },
		"http": func(p string, v *yaml.Node) {
			d.mapping(p, v, map[string]field{
				"listen":     d.str(&jf.HTTP.Listen),
				"token-file": d.str(&jf.HTTP.TokenFile),
				"tls-cert":   d.str(&jf.HTTP.TLSCert),
				"tls-key":    d.str(&jf.HTTP.TLSKey),
			})
		},
		"event-time": func(p string, v *yaml.Node) { d.decodeEventTime(p, v, &jf.EventTime) },
		"scale-out": func(p string, v *yaml.Node) {
			so := &jf.ScaleOut
			so.InputKeyed = true
			d.mapping(p, v, map[string]field{
				"enabled":                d.boolean(&so.Enabled),
				"instance":               d.str(&so.Instance),
				"input-keyed":            d.boolean(&so.InputKeyed),
				"repartition-partitions": d.integer(&so.RepartitionPartitions),
				"session-timeout":        d.duration(&so.SessionTimeout),
				"group-protocol":         d.oneOf(&so.GroupProtocol, GroupProtocolConsumer, GroupProtocolClassic),
			})
		},
		"restart": func(p string, v *yaml.Node) {
			jf.RestartSet = true
			d.decodeRestart(p, v, &jf.Restart)
		},
	})
}

// decodeEventTime decodes an event-time section at path: the job's, or
// one source's of the named form.
func (d *decoder) decodeEventTime(path string, v *yaml.Node, et *EventTimeConfig) {
	et.Set = true
	d.mapping(path, v, map[string]field{
		"timestamp": func(p string, v *yaml.Node) {
			d.str(&et.Timestamp)(p, v)
			if _, err := pipeline.CompileExpr(et.Timestamp, pipeline.AnyResult); et.Timestamp != "" && err != nil {
				d.errorf(v.Line, "%s: %v", p, err)
			}
		},
		"max-out-of-orderness": func(p string, v *yaml.Node) {
			et.maxSet = true
			d.duration(&et.MaxOutOfOrderness)(p, v)
		},
		"idle-timeout": func(p string, v *yaml.Node) {
			et.idleSet = true
			d.duration(&et.IdleTimeout)(p, v)
		},
	})
}

func (d *decoder) decodeSink(path string, v *yaml.Node, s *SinkConfig) {
	// The Kafka sink's fields are decoded by its spec (source.go), the
	// other sinks' sections by theirs.
	side := kafka.Spec.Sink
	kc := connector.NewConfig(path, d.at(path))
	fields := d.connectorFields(kc, "", side.Fields)
	// Every registered sink connector with a section of its own
	// (sink.<name>) is decoded by its spec.
	for _, spec := range connector.Specs() {
		if side := spec.Sink; side != nil && side.Section == "sink."+spec.Name {
			fields[spec.Name] = func(p string, v *yaml.Node) {
				if s.Connectors == nil {
					s.Connectors = map[string]*connector.Config{}
				}
				s.Connectors[spec.Name] = d.decodeConnector(p, v, side)
			}
		}
	}
	d.mapping(path, v, fields)
	side.ApplyDefaults(kc)
	k := KafkaSinkFromConfig(kc)
	s.Topic, s.Delivery, s.MaxHeldBytes, s.TransactionTimeout = k.Topic, k.Delivery, k.MaxHeldBytes, k.TransactionTimeout
}

func (d *decoder) decodeErrors(path string, v *yaml.Node, e *ErrorsConfig) {
	var policy string
	d.mapping(path, v, map[string]field{
		"policy":            d.oneOf(&policy, errorPolicies...),
		"dead-letter-topic": d.str(&e.DeadLetterTopic),
	})
	p, err := flow.ParseErrorPolicy(policy)
	if err != nil { // unreachable: oneOf checked the spelling
		d.errorf(d.at(path+".policy"), "%v", err)
	}
	e.Policy = p
}

func (d *decoder) decodeState(path string, v *yaml.Node, s *StateConfig) {
	d.mapping(path, v, map[string]field{
		"dir":             d.str(&s.Dir),
		"max-parallelism": d.integer(&s.MaxParallelism),
		"backend":         d.oneOf(&s.Backend, BackendPebble, BackendMemory),
		"memory":          d.size(&s.Memory),
		"checkpoints":     d.str(&s.Checkpoints),
		"s3": func(p string, v *yaml.Node) {
			d.mapping(p, v, map[string]field{
				"endpoint":   d.str(&s.S3.Endpoint),
				"region":     d.str(&s.S3.Region),
				"path-style": d.boolean(&s.S3.PathStyle),
				"insecure":   d.boolean(&s.S3.Insecure),
			})
		},
	})
}
