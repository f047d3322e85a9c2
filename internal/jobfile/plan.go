package jobfile

import (
	"fmt"
	"strings"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/internal/plan"
	"github.com/onceflow/onceflow/pipeline"
)

// Logical is the job file as the planner sees it: the Kafka source, the
// pipeline's steps and the sinks, each with the uid that names its state
// in checkpoints.
func (jf *JobFile) Logical() (*plan.Logical, error) {
	l, _, err := jf.logical()
	return l, err
}

// Plan is the job file's physical plan: one sub-topology, or with
// scale-out the cut into sub-topologies behind repartition topics.
func (jf *JobFile) Plan() (*plan.Physical, error) {
	l, _, err := jf.logical()
	if err != nil {
		return nil, err
	}
	return plan.Plan(l, plan.Target{ScaleOut: jf.ScaleOut.Enabled})
}

// logical is Logical, with the pipeline step each operator node is.
func (jf *JobFile) logical() (*plan.Logical, map[int]Step, error) {
	l := &plan.Logical{Job: jf.Job, InputKeyed: jf.ScaleOut.InputKeyed}
	add := func(n *plan.Node) *plan.Node {
		n.ID = len(l.Nodes)
		if n.ID > 0 {
			n.Inputs = []int{n.ID - 1}
		}
		l.Nodes = append(l.Nodes, n)
		return n
	}
	src := "kafka topics " + strings.Join(jf.Source.Topics, ", ")
	if jf.Source.TopicRegex != "" {
		src = "kafka topics matching " + jf.Source.TopicRegex
	}
	add(&plan.Node{Kind: plan.Source, Name: src, UID: "source", Topics: jf.Source.Topics, Line: 0})
	steps := map[int]Step{}
	for _, st := range jf.Pipeline {
		spec, ok := pipeline.Lookup(st.Op)
		if !ok {
			return nil, nil, &planError{path: jf.Path, line: st.Line, msg: fmt.Sprintf("unknown operator %q", st.Op)}
		}
		p := spec.WithDefaults(st.AllParams())
		n := add(&plan.Node{Kind: plan.Op, Name: spec.Explain(p), Op: st.Op, UID: st.UID, Props: spec.PropsOf(p), Line: st.Line})
		steps[n.ID] = st
	}
	last := len(l.Nodes) - 1
	for _, kind := range jf.Sink.Kinds() {
		name := kind
		if kind == SinkKafka {
			name = "kafka topic " + jf.Sink.Topic
		} else if s, ok := connector.Lookup(kind); ok && s.Sink.Explain != nil {
			name = s.Sink.Explain(jf.Sink.Connectors[kind])
		}
		if jf.Sink.CommitPoint() == kind {
			name += " (the commit point)"
		}
		n := &plan.Node{Kind: plan.Sink, Name: name, Op: kind, UID: jf.Sink.UID(kind), Inputs: []int{last}}
		n.ID = len(l.Nodes)
		l.Nodes = append(l.Nodes, n)
	}
	return l, steps, nil
}

// UID is the uid of the sink of kind (SinkKafka, "postgres", ...): the
// commit point's sink, or the first sink without one, has the uid "sink" a
// job with one sink has, so adding a table to a topic job keeps the uid its
// checkpoints know; the others are "sink-<kind>".
func (s SinkConfig) UID(kind string) string {
	first := s.CommitPoint()
	if first == "" {
		if ks := s.Kinds(); len(ks) > 0 {
			first = ks[0]
		}
	}
	if kind == first {
		return "sink"
	}
	return "sink-" + kind
}
