package jobfile

import (
	"errors"
	"fmt"
	"strings"

	"github.com/onceflow/onceflow/connector"

	"github.com/onceflow/onceflow/internal/plan"
)

// A scale-out job runs as tasks: one per partition of each sub-topology's
// input (docs/design.md, "Scale-out"). The pipeline is cut into
// sub-topologies where a keyed step's key is not how its input is
// partitioned; each cut writes into a repartition topic the next
// sub-topology reads.

// Segment is one sub-topology.
type Segment struct {
	Index int
	// topics are the segment's input: the job's source topics, or the
	// repartition topic the segment before writes.
	Topics []string
	Steps  []Step
	// out is the repartition topic the segment writes into, partitioned
	// by outKey ("" for the last segment, which writes to the job's sink).
	Out, OutKey string
	// CoPartitioned: the segment's task of partition p of Anchor reads
	// partition p of every topic in Topics (plan.SubTopology).
	CoPartitioned bool
	Anchor        string
	// Graph, in the named form, is the segment's part of the graph: its
	// sources are the job's (segment 0) or, after a cut, one per edge it
	// reads (named by the edge's tag, each a share of the one
	// repartition topic in Topics); its sinks are the job's in the last
	// segment, none before.
	Graph *Graph
	// OutEdges, in the named form, are the streams the segment writes into
	// Out, each by a key of its own (docs/design.md, "Named streams").
	OutEdges []OutEdge
}

// OutEdge is a stream of a segment written into the repartition topic of
// the next: partitioned by Key, its records tagged Tag (the name of the
// source the next segment reads them as; plan.Edge).
type OutEdge struct {
	From, Key, Tag string
}

// PlanSegments cuts the job's pipeline into sub-topologies: the planner's
// (plan.Plan) cut of the job's logical plan for scale-out, with each
// sub-topology's steps.
func PlanSegments(jf *JobFile) ([]Segment, error) {
	l, steps, err := jf.logical()
	if err != nil {
		return nil, err
	}
	p, err := plan.Plan(l, plan.Target{ScaleOut: true})
	if err != nil {
		var pe *plan.Error
		if errors.As(err, &pe) {
			return nil, &planError{path: jf.Path, line: pe.Line, msg: pe.Msg}
		}
		return nil, err
	}
	segs := make([]Segment, len(p.Subs))
	for i, sub := range p.Subs {
		segs[i] = Segment{Index: sub.Index, Topics: sub.Inputs, Out: sub.Out, OutKey: sub.OutKey, CoPartitioned: sub.CoPartitioned, Anchor: sub.Anchor}
		for _, id := range sub.Nodes {
			if st, ok := steps[id]; ok {
				segs[i].Steps = append(segs[i].Steps, st)
			}
		}
	}
	if jf.Graph != nil {
		jf.graphSegments(p, segs)
	}
	return segs, nil
}

// graphSegments gives each segment of a graph its part of the graph: the
// streams whose steps run in it (a stream cut before a keyed step runs
// its steps before the cut in one segment and the rest, reading the
// edges, in the next), the edges it reads as sources, the job's sinks in
// the last and the edges it writes before. The planner made sure that
// every stream a segment reads is computed in it or read from the
// repartition topic.
func (jf *JobFile) graphSegments(p *plan.Physical, segs []Segment) {
	g := jf.Graph
	stage := make([]int, len(p.Nodes))
	for _, sub := range p.Subs {
		for _, id := range sub.Nodes {
			stage[id] = sub.Index
		}
	}
	// owner is the source or stream each node's records are; the node ids
	// follow graphLogical's order: the sources, then each stream's steps.
	owner := map[int]string{}
	nodesOf := map[string][]int{}
	out := map[string]int{}
	id := 0
	for _, s := range g.Sources {
		owner[id], out[s.Name] = s.Name, id
		id++
	}
	order, _ := g.StreamOrder() // graphLogical checked it
	for _, st := range order {
		for range st.Steps {
			owner[id] = st.Name
			nodesOf[st.Name] = append(nodesOf[st.Name], id)
			id++
		}
		if len(st.Steps) == 0 {
			out[st.Name] = out[st.From[0]]
		} else {
			out[st.Name] = id - 1
		}
	}
	into := map[int][]plan.Edge{} // the edges a node reads in its sub-topology
	for i, sub := range p.Subs {
		for _, e := range sub.Edges {
			if stage[e.To] == i+1 {
				into[e.To] = append(into[e.To], e)
			}
		}
	}
	// from is what input slot of node n reads in its segment: the edge's
	// tag when it comes through the repartition topic.
	from := func(n, slot int, name string) string {
		for _, e := range into[n] {
			if e.Slot == slot {
				return e.Tag
			}
		}
		return name
	}
	times, _ := jf.StreamTimes()
	edgeTime := func(from string) EventTimeConfig {
		if !jf.PerSourceEventTime() {
			return EventTimeConfig{} // the job's section applies
		}
		et, _ := jf.SourceEventTime(from)
		if t, ok := times[from]; ok {
			et.Timestamp = t
		}
		if et.Timestamp == "" {
			et.Timestamp = "timestamp" // inputs of several times: the record's own
		}
		et.Set, et.maxSet, et.idleSet = true, true, true
		return et
	}
	last := len(segs) - 1
	for i := range segs {
		sg := &Graph{}
		segs[i].Graph = sg
		if i == 0 {
			sg.Sources = g.Sources
		} else {
			for _, e := range p.Subs[i-1].Edges {
				src := SourceConfig{Topics: segs[i].Topics, Group: jf.Source.Group}
				sg.Sources = append(sg.Sources, NamedSource{Name: e.Tag, Line: p.Nodes[e.To].Line, Source: src, EventTime: edgeTime(owner[e.From])})
			}
		}
		for _, st := range order {
			if len(st.Steps) == 0 {
				if stage[out[st.Name]] == i {
					sg.Streams = append(sg.Streams, st)
				}
				continue
			}
			ns := st
			ns.Steps = nil
			for k, n := range nodesOf[st.Name] {
				if stage[n] != i {
					continue
				}
				switch {
				case len(ns.Steps) > 0:
				case k == 0:
					ns.From = make([]string, len(st.From))
					for slot, f := range st.From {
						ns.From[slot] = from(n, slot, f)
					}
				default: // cut before a step in the middle of the stream
					ns.From = []string{from(n, 0, "")}
				}
				ns.Steps = append(ns.Steps, st.Steps[k])
			}
			if len(ns.Steps) > 0 {
				sg.Streams = append(sg.Streams, ns)
			}
		}
		if i == last {
			for _, n := range p.Nodes {
				if n.Kind != plan.Sink {
					continue
				}
				for _, ns := range g.Sinks {
					if ns.Kind == n.Op {
						ns.From = from(n.ID, 0, ns.From)
						sg.Sinks = append(sg.Sinks, ns)
					}
				}
			}
			continue
		}
		for _, e := range p.Subs[i].Edges {
			f := owner[e.From]
			if e.Forward {
				f = e.Tag // read in this segment as a source of that name
			}
			segs[i].OutEdges = append(segs[i].OutEdges, OutEdge{From: f, Key: e.Key, Tag: e.Tag})
		}
	}
}

// planError is a pipeline scale-out cannot cut, at a line of the file.
type planError struct {
	path string
	line int
	msg  string
}

func (e *planError) Error() string { return fmt.Sprintf("%s:%d: %s", e.path, e.line, e.msg) }

// validateScaleOut checks what a scale-out job needs.
func (d *decoder) validateScaleOut(jf *JobFile) {
	so := jf.ScaleOut
	line := d.at("scale-out")
	if !so.Enabled {
		if line != 0 && (so.Instance != "" || so.RepartitionPartitions != 0 || d.at("scale-out.input-keyed") != 0 || so.SessionTimeout != 0) {
			d.errorf(line, "scale-out settings are given but scale-out.enabled is not true: set enabled: true, or remove the section")
		}
		return
	}
	if g := jf.Graph; g != nil {
		for _, ns := range g.Sources {
			if ns.Source.Bounded {
				d.errorf(d.at("sources."+ns.Name+".bounded"), "sources.%s.bounded does not go with scale-out: the instances run as a service; remove it", ns.Name)
			}
			if ns.Source.Parallelism > 0 {
				d.errorf(d.at("sources."+ns.Name+".parallelism"), "sources.%s.parallelism does not apply with scale-out: every partition is a task of its own; remove it", ns.Name)
			}
		}
	}
	if jf.State.Checkpoints == "" {
		d.errorf(line, "scale-out needs state.checkpoints: the instances share their tasks' checkpoints there (s3://bucket/prefix, or a directory every instance mounts), while state.dir is each instance's own")
	}
	if jf.Source.TopicRegex != "" {
		d.errorf(d.at("source.topic-regex"), "scale-out reads source.topics; source.topic-regex is not supported with it yet: list the topics")
	}
	if jf.Source.Bounded {
		d.errorf(d.at("source.bounded"), "source.bounded does not go with scale-out: the instances run as a service; remove it")
	}
	if jf.Source.Parallelism > 0 {
		d.errorf(d.at("source.parallelism"), "source.parallelism does not apply with scale-out: every partition is a task of its own; remove it")
	}
	d.validateScaleOutSink(jf)
	if so.Instance != "" && !ValidName(so.Instance) {
		d.errorf(d.at("scale-out.instance"), "scale-out.instance %q may only use letters, digits, '.', '_' and '-' (it names the instance's directory under state.dir)", so.Instance)
	}
	if so.RepartitionPartitions < 0 {
		d.errorf(d.at("scale-out.repartition-partitions"), "scale-out.repartition-partitions must not be negative (0: the largest input topic's count)")
	}
	if so.SessionTimeout < 0 {
		d.errorf(d.at("scale-out.session-timeout"), "scale-out.session-timeout must not be negative")
	}
	if _, err := PlanSegments(jf); err != nil {
		if pe, ok := err.(*planError); ok {
			d.errorf(pe.line, "%s", pe.msg)
		} else {
			d.errorf(line, "%v", err)
		}
	}
}

// validateScaleOutSink checks the sink of a scale-out job: each task of
// the last sub-topology writes it with a commit point of its own (the
// Kafka transaction, or the database's), which fences the task's earlier
// owner; the earlier sub-topologies write repartition topics through
// Kafka transactions (docs/design.md, "Scale-out").
func (d *decoder) validateScaleOutSink(jf *JobFile) {
	if jf.Sink.Delivery != "" && jf.Sink.Delivery != DeliveryExactlyOnce {
		d.errorf(d.at("sink.delivery"), "scale-out needs sink.delivery exactly-once: each task's transaction (Kafka's, or the database's) is its commit point and fences the instance that had its partition before; at-least-once upserts have no such fence for the task's checkpoints, which a paused instance could still write")
		return
	}
	kinds := jf.Sink.Kinds()
	if len(kinds) == 0 {
		d.errorf(d.at("sink"), "scale-out needs a sink: set sink.topic, or one database or Redis sink (sink.postgres, sink.mysql, sink.redis)")
		return
	}
	if !jf.Sink.External() {
		return
	}
	if len(kinds) > 1 {
		var names []string
		for _, k := range kinds {
			if k == SinkKafka {
				names = append(names, "sink.topic")
			} else {
				names = append(names, "sink."+k)
			}
		}
		d.errorf(d.at("sink"), "scale-out writes one sink per job when a database or Redis is among them, and this job writes %s: the others would be two-phase participants under one commit point, which scale-out does not run (a paused instance's prepared transactions would hold their rows' locks until the task recovered again); keep one sink here and write the others from a second job that reads this one's output", strings.Join(names, " and "))
		return
	}
	if spec, ok := connector.Lookup(kinds[0]); ok && !spec.CommitPoint {
		d.errorf(d.at("sink."+kinds[0]), "sink.%s cannot be a commit point: in scale-out each task's sink commits the task's checkpoints (a Kafka topic, PostgreSQL, MySQL/MariaDB or Redis)", kinds[0])
	}
}
