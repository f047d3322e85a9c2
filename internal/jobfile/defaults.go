package jobfile

import (
	"strings"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/pipeline"
)

// applyDefaults fills in what the file leaves out, and resolves the paths
// it gives against its directory. It runs after decoding, before
// validate, so the checks see the job as it will run. A value the file
// gives is kept even when it is invalid: validate reports it.
func (d *decoder) applyDefaults(jf *JobFile) {
	if jf.Kafka.ClientID == "" {
		jf.Kafka.ClientID = "onceflow"
	}
	tls := &jf.Kafka.TLS
	tls.CAFile, tls.CertFile, tls.KeyFile = d.abs(tls.CAFile), d.abs(tls.CertFile), d.abs(tls.KeyFile)
	h := &jf.HTTP
	h.TokenFile, h.TLSCert, h.TLSKey = d.abs(h.TokenFile), d.abs(h.TLSCert), d.abs(h.TLSKey)

	if jf.Graph != nil {
		d.desugarGraph(jf)
		for i := range jf.Graph.Sources {
			src := &jf.Graph.Sources[i].Source
			if src.Group == "" {
				src.Group = jf.Source.Group
			}
			applySourceDefaults(src, jf.Job)
		}
	} else {
		applyPipelineDefaults(jf.Pipeline)
	}
	applySourceDefaults(&jf.Source, jf.Job)

	if jf.Sink.Delivery == "" {
		jf.Sink.Delivery = DeliveryExactlyOnce
	}
	if jf.Sink.Delivery == DeliveryExactlyOnce && jf.Sink.HasTopic() && d.at("sink.max-held-bytes") == 0 {
		jf.Sink.MaxHeldBytes = kafka.DefaultMaxHeldBytes // spelled out for describeJob
	}
	if jf.Sink.Delivery == DeliveryExactlyOnce && jf.Sink.HasTopic() && d.at("sink.transaction-timeout") == 0 {
		jf.Sink.TransactionTimeout = kafka.DefaultTransactionTimeout
	}

	if jf.State.Dir == "" {
		jf.State.Dir = DefaultStateDir
	}
	if jf.State.Backend == "" {
		jf.State.Backend = BackendPebble
	}
	if jf.State.Backend == BackendPebble && jf.State.Memory == 0 {
		jf.State.Memory = DefaultStateMemory
	}
	jf.State.Dir = d.abs(jf.State.Dir)
	if c := jf.State.Checkpoints; c != "" && !strings.Contains(c, "://") {
		jf.State.Checkpoints = d.abs(c)
	}
}

// applyPipelineDefaults gives every step its operator's defaults
// (pipeline.Spec.WithDefaults) and every step without uid: its default id
// (pipeline.IDs).
func applyPipelineDefaults(steps []Step) {
	ps := make([]pipeline.Step, len(steps))
	for i, st := range steps {
		if spec, ok := pipeline.Lookup(st.Op); ok {
			steps[i].Params = spec.WithDefaults(st.Params)
		}
		ps[i] = pipeline.Step{Op: st.Op, Params: steps[i].Params}
		if st.UIDSet {
			ps[i].UID = st.UID
		}
	}
	for i, id := range pipeline.IDs(ps) {
		steps[i].UID = id
	}
}

// applySourceDefaults fills in what a source section leaves out.
func applySourceDefaults(src *SourceConfig, job string) {
	if src.Group == "" {
		src.Group = "onceflow-" + job // the Kafka connector's default, spelled out for describeJob
	}
	if src.Startup.Mode == "" {
		src.Startup.Mode = StartEarliest
	}
	if src.Startup.Reset == "" && (src.Startup.Mode == StartGroupOffsets || src.Startup.Mode == StartSpecificOffsets) {
		src.Startup.Reset = "earliest"
	}
	if src.Isolation == "" {
		src.Isolation = IsolationReadCommitted
	}
	if src.OnTopicRecreated == "" {
		src.OnTopicRecreated = RecreatedEarliest
	}
}
