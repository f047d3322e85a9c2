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
	if jf.Graph != nil {
		return jf.graphLogical()
	}
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
	jf.addSinks(l, func(string) int { return last })
	return l, steps, nil
}

// addSinks adds a node per sink, reading the node input gives for the
// sink's kind.
func (jf *JobFile) addSinks(l *plan.Logical, input func(kind string) int) {
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
		n := &plan.Node{Kind: plan.Sink, Name: name, Op: kind, UID: jf.Sink.UID(kind), Inputs: []int{input(kind)}}
		n.ID = len(l.Nodes)
		l.Nodes = append(l.Nodes, n)
	}
}

// graphLogical is logical for the named form: a node per source, per
// step of each stream in the order the streams depend on each other, and
// per sink. A stream without steps is its input.
func (jf *JobFile) graphLogical() (*plan.Logical, map[int]Step, error) {
	g := jf.Graph
	l := &plan.Logical{Job: jf.Job, InputKeyed: jf.ScaleOut.InputKeyed, Graph: true}
	out := map[string]int{} // source or stream -> the node giving its records
	for _, s := range g.Sources {
		n := &plan.Node{ID: len(l.Nodes), Kind: plan.Source, Name: s.Name + ": kafka topics " + strings.Join(s.Source.Topics, ", "), UID: s.Name, Topics: s.Source.Topics, Line: s.Line}
		l.Nodes = append(l.Nodes, n)
		out[s.Name] = n.ID
	}
	steps := map[int]Step{}
	order, err := g.StreamOrder()
	if err != nil {
		return nil, nil, &planError{path: jf.Path, line: 0, msg: err.Error()}
	}
	for _, s := range order {
		var ins []int
		for _, f := range s.From {
			id, ok := out[f]
			if !ok {
				return nil, nil, &planError{path: jf.Path, line: s.FromLine, msg: fmt.Sprintf("streams.%s reads %q, which is not a source or stream", s.Name, f)}
			}
			ins = append(ins, id)
		}
		for _, st := range s.Steps {
			spec, ok := pipeline.Lookup(st.Op)
			if !ok {
				return nil, nil, &planError{path: jf.Path, line: st.Line, msg: fmt.Sprintf("unknown operator %q", st.Op)}
			}
			p := spec.WithDefaults(st.AllParams())
			n := &plan.Node{ID: len(l.Nodes), Kind: plan.Op, Name: s.Name + ": " + spec.Explain(p), Op: st.Op, UID: st.UID, Props: spec.PropsOf(p), Line: st.Line, Inputs: ins}
			l.Nodes = append(l.Nodes, n)
			steps[n.ID] = st
			ins = []int{n.ID}
		}
		if len(ins) != 1 {
			return nil, nil, &planError{path: jf.Path, line: s.Line, msg: fmt.Sprintf("streams.%s reads %d inputs and has no step to combine them", s.Name, len(ins))}
		}
		out[s.Name] = ins[0]
	}
	jf.addSinks(l, func(kind string) int { return out[g.SinkFrom(kind)] })
	return l, steps, nil
}

// StreamOrder is the streams in an order in which every stream comes
// after the streams it reads.
func (g *Graph) StreamOrder() ([]NamedStream, error) {
	byName := map[string]NamedStream{}
	for _, s := range g.Streams {
		byName[s.Name] = s
	}
	var order []NamedStream
	state := map[string]int{}
	var visit func(s NamedStream) error
	visit = func(s NamedStream) error {
		switch state[s.Name] {
		case 1:
			return fmt.Errorf("streams form a cycle through %s", s.Name)
		case 2:
			return nil
		}
		state[s.Name] = 1
		for _, f := range s.From {
			if in, ok := byName[f]; ok {
				if err := visit(in); err != nil {
					return err
				}
			}
		}
		state[s.Name] = 2
		order = append(order, s)
		return nil
	}
	for _, s := range g.Streams {
		if err := visit(s); err != nil {
			return nil, err
		}
	}
	return order, nil
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
