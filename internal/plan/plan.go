package plan

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Kind is what a node of a logical plan is.
type Kind uint8

const (
	// Source reads from outside the job; it has no input.
	Source Kind = iota
	// Op is an operator with one input.
	Op
	// Sink writes outside the job.
	Sink
)

// Node is one operator, source or sink of a job as written.
type Node struct {
	ID   int // index in Logical.Nodes
	Kind Kind
	// Name says what the node does, for people ("dedupe by record.key,
	// ttl 24h"; "kafka topics orders").
	Name string
	// Op is the operator's registered name (pipeline.Spec.Name), for
	// messages; the planner reads Props, never Op.
	Op string
	// UID identifies the node's state, positions or sink handles in
	// checkpoints.
	UID string
	// Inputs are the IDs of the nodes it reads.
	Inputs []int
	Props  Props
	// Line is where the node is written (a job file's line), 0 if nowhere.
	Line int
	// Topics are the topics a Kafka source reads.
	Topics []string
}

// Logical is a job as written: a job file, a Go program or (later) SQL
// produces one.
type Logical struct {
	Job   string
	Nodes []*Node // topological order: every input before its reader
	// InputKeyed: the source topics are partitioned by record.key
	// (Kafka's default partitioner, scale-out.input-keyed).
	InputKeyed bool
	// Graph: the job is written as named sources and streams, not a chain
	// (docs/design.md, "Named streams"); scale-out then runs it
	// co-partitioned (see Plan).
	Graph bool
}

// Target is where the plan runs.
type Target struct {
	// ScaleOut: the job runs as tasks of instances in one consumer group,
	// one per partition of each sub-topology's input (docs/design.md,
	// "Scale-out"), so a keyed node whose input is not partitioned by its
	// key reads a repartition topic.
	ScaleOut bool
}

// SubTopology is the part of a scale-out job between repartition topics;
// each of its tasks is a complete job.
type SubTopology struct {
	Index int
	Nodes []int // in order
	// Inputs are the topics it reads: the sources' or a repartition
	// topic.
	Inputs []string
	// Out is the repartition topic it writes, partitioned by the key
	// expression OutKey; "" for the last, which writes to the sinks.
	Out, OutKey string
	// CoPartitioned: a task owns partition p of every input topic, which
	// must all have the same number of partitions; the group assigns the
	// partitions of Anchor (the first input) and the task of Anchor's
	// partition p reads p of the others.
	CoPartitioned bool
	Anchor        string
}

// Physical is a logical plan cut for a target.
type Physical struct {
	*Logical
	Target Target
	// Subs has exactly one sub-topology unless Target.ScaleOut.
	Subs []SubTopology
}

// Error is a plan the planner refuses, at the line of the node that makes
// it impossible.
type Error struct {
	Line int
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// RepartitionTopic names the internal topic of cut n (from 1); the name
// is stable: running tasks and their checkpoints know it.
func RepartitionTopic(job string, n int) string {
	return job + "-repartition-" + strconv.Itoa(n)
}

// Plan cuts l for t. It is pure: no I/O and no operator code, only Props.
//
// The partitioning of each node's output follows from its input's and its
// Props: a source is partitioned by record.key when l.InputKeyed and it
// reads one topic (each partition of each topic is a task of its own, so
// with two topics a key would have a state in each); a node that keeps
// keys keeps its input's partitioning; one that loses them has none. In
// scale-out a keyed node whose input is not partitioned by its Key starts
// a new sub-topology behind a repartition topic, and a node that routes
// records to topics of their own may not come before such a cut (the
// records in a repartition topic go to the job's sinks later).
func Plan(l *Logical, t Target) (*Physical, error) {
	p := &Physical{Logical: l, Target: t}
	if err := checkInputs(l, t); err != nil {
		return nil, err
	}
	if t.ScaleOut && l.Graph {
		return planCoPartitioned(p)
	}
	if !t.ScaleOut {
		// One job: every node in one sub-topology, whatever its shape.
		sub := SubTopology{}
		for _, n := range l.Nodes {
			sub.Nodes = append(sub.Nodes, n.ID)
			sub.Inputs = append(sub.Inputs, n.Topics...)
		}
		p.Subs = []SubTopology{sub}
		return p, nil
	}
	cur := SubTopology{}
	part := "" // the key expression the current node's input is partitioned by
	for _, n := range l.Nodes {
		switch n.Kind {
		case Source:
			if len(n.Inputs) != 0 {
				return nil, &Error{n.Line, fmt.Sprintf("source %s has inputs", n.Name)}
			}
			cur.Inputs = append(cur.Inputs, n.Topics...)
			if l.InputKeyed && len(n.Topics) == 1 && countKind(l, Source) == 1 {
				part = "record.key"
			}
		case Op, Sink:
			if len(n.Inputs) != 1 || n.Inputs[0] != n.ID-1 && n.Kind == Op {
				return nil, &Error{n.Line, fmt.Sprintf("%s: scale-out cuts a chain of steps from one source for now, and this node reads %d inputs", n.Name, len(n.Inputs))}
			}
		}
		if n.Kind == Op && n.Props.Keyed && n.Props.Key != part && t.ScaleOut {
			for _, prev := range cur.Nodes {
				if pn := l.Nodes[prev]; pn.Props.Routes {
					return nil, &Error{pn.Line, fmt.Sprintf("with scale-out, a %s step that sets records' topics must come after the last keyed step that needs a repartition (here %s at line %d, keyed by %s): move it below", pn.Op, n.Op, n.Line, n.Props.Key)}
				}
			}
			cur.Out, cur.OutKey = RepartitionTopic(l.Job, len(p.Subs)+1), n.Props.Key
			p.Subs = append(p.Subs, cur)
			cur = SubTopology{Index: len(p.Subs), Inputs: []string{cur.Out}}
			part = n.Props.Key
		}
		cur.Nodes = append(cur.Nodes, n.ID)
		if n.Kind == Op && n.Props.Keys != KeysKept {
			part = ""
		}
	}
	p.Subs = append(p.Subs, cur)
	return p, nil
}

// planCoPartitioned plans a graph for scale-out as one co-partitioned
// sub-topology: the task of partition p reads partition p of every source
// topic, so it sees every record of the keys that Kafka's default
// partitioner puts in p, whichever topic they are in, provided the topics
// have as many partitions (checked when the instance starts). No cut is
// made: a keyed node must read inputs partitioned by its key (the record
// key of the sources, with scale-out.input-keyed, kept through steps that
// keep keys), else the plan is refused.
func planCoPartitioned(p *Physical) (*Physical, error) {
	l := p.Logical
	part := make([]string, len(l.Nodes)) // the key expression each node's output is partitioned by
	sub := SubTopology{CoPartitioned: true}
	for _, n := range l.Nodes {
		sub.Nodes = append(sub.Nodes, n.ID)
		switch n.Kind {
		case Source:
			sub.Inputs = append(sub.Inputs, n.Topics...)
			if l.InputKeyed {
				part[n.ID] = "record.key"
			}
			continue
		case Sink:
			continue
		}
		if n.Props.Keyed {
			for i, in := range n.Inputs {
				key := n.Props.Key
				if i == 1 && n.Props.RightKey != "" {
					key = n.Props.RightKey
				}
				if part[in] != key {
					have := "not partitioned by a key"
					if part[in] != "" {
						have = "partitioned by " + part[in]
					}
					return nil, &Error{n.Line, fmt.Sprintf("with scale-out, %s needs its input %s partitioned by %s, and it is %s: a job of named streams runs co-partitioned (a task per partition of its sources, which Kafka's default partitioner keys by record.key) and is not cut by repartition topics yet; key the topics by what the step keys by, with scale-out.input-keyed, or run it without scale-out", n.Op, l.Nodes[in].UID, key, have)}
				}
			}
		}
		if n.Props.Keys == KeysKept { // partitioned as its inputs, if they all are alike
			common := part[n.Inputs[0]]
			for _, in := range n.Inputs[1:] {
				if part[in] != common {
					common = ""
				}
			}
			part[n.ID] = common
		}
	}
	if len(sub.Inputs) > 0 {
		sub.Anchor = sub.Inputs[0]
	}
	p.Subs = []SubTopology{sub}
	return p, nil
}

// checkInputs checks the graph's shape: nodes in topological order, a
// source without inputs, a sink with one, an operator with at least one.
func checkInputs(l *Logical, t Target) error {
	for i, n := range l.Nodes {
		if n.ID != i {
			return &Error{n.Line, fmt.Sprintf("%s has id %d at position %d", n.Name, n.ID, i)}
		}
		for _, in := range n.Inputs {
			if in < 0 || in >= i {
				return &Error{n.Line, fmt.Sprintf("%s reads node %d, which does not come before it", n.Name, in)}
			}
		}
		switch {
		case n.Kind == Source && len(n.Inputs) != 0:
			return &Error{n.Line, fmt.Sprintf("source %s has inputs", n.Name)}
		case n.Kind == Sink && len(n.Inputs) != 1:
			return &Error{n.Line, fmt.Sprintf("sink %s has %d inputs; a sink writes one stream", n.Name, len(n.Inputs))}
		case n.Kind == Op && len(n.Inputs) == 0:
			return &Error{n.Line, fmt.Sprintf("%s has no input", n.Name)}
		}
	}
	return nil
}

func countKind(l *Logical, k Kind) int {
	c := 0
	for _, n := range l.Nodes {
		if n.Kind == k {
			c++
		}
	}
	return c
}

// Unbounded lists the keyed nodes whose state nothing frees.
func (p *Physical) Unbounded() []*Node {
	var out []*Node
	for _, n := range p.Nodes {
		if n.Props.Keyed && n.Props.StateBound == "" {
			out = append(out, n)
		}
	}
	return out
}

// Explain writes the plan for people: each sub-topology's input, nodes and
// output, and which keyed state is bounded by what. Every line starts with
// indent.
func Explain(w io.Writer, p *Physical, indent string) error {
	var b strings.Builder
	prev := -1
	for _, s := range p.Subs {
		if len(p.Subs) > 1 {
			fmt.Fprintf(&b, "%ssub-topology %d, a task per partition of %s:\n", indent, s.Index, strings.Join(s.Inputs, ", "))
		}
		for _, id := range s.Nodes {
			n := p.Nodes[id]
			fmt.Fprintf(&b, "%s  %s %s [%s]", indent, arrow(n), n.Name, n.UID)
			if n.Props.Keyed {
				bound := "unbounded: nothing frees it, it grows with the number of keys"
				if n.Props.StateBound != "" {
					bound = "freed by " + n.Props.StateBound
				}
				fmt.Fprintf(&b, ", state by %s, %s", n.Props.Key, bound)
			}
			if reads := n.Inputs; len(reads) > 1 || len(reads) == 1 && reads[0] != prev {
				names := make([]string, len(reads))
				for i, in := range reads {
					names[i] = p.Nodes[in].UID
				}
				fmt.Fprintf(&b, " ← %s", strings.Join(names, ", "))
			}
			if n.Kind != Sink {
				prev = id // every sink of a chain reads its last node
			}
			b.WriteString("\n")
		}
		if s.Out != "" {
			fmt.Fprintf(&b, "%s  → repartition topic %s, by %s\n", indent, s.Out, s.OutKey)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func arrow(n *Node) string {
	if n.Kind == Source {
		return "⇢"
	}
	return "→"
}
