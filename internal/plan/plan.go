package plan

import (
	"fmt"
	"io"
	"slices"
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
	// Edges, in a graph, are what the sub-topology writes into Out: each
	// an input of a keyed node of the next sub-topology, partitioned by
	// its own key (OutKey lists them) and tagged (Edge.Tag).
	Edges []Edge
}

// Edge is an input of a keyed node that a graph is cut before: the
// records of node From, written into the repartition topic of To's
// sub-topology by the partition Hash(Key) mod partitions, each with the
// header value Tag, and read there as To's input Slot.
type Edge struct {
	From, To, Slot int
	Key, Tag       string
	// Forward: the records are not node From's in this sub-topology but
	// those it reads as Tag, carried on toward To's (planGraph).
	Forward bool
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
		return planGraph(p)
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

// planGraph plans a graph for scale-out (docs/design.md, "Named
// streams", Scale-out). Sub-topology 0 holds the sources and runs
// co-partitioned: the task of partition p reads partition p of every
// source topic, so it sees every record of the keys that Kafka's default
// partitioner puts in p, whichever topic they are in, provided the topics
// have as many partitions (checked when the instance starts). A keyed
// node whose inputs are not all partitioned by its key (the record key of
// the sources, with scale-out.input-keyed, kept through steps that keep
// keys) starts the next sub-topology: every input of it becomes an Edge,
// written by the sub-topology before into that one's repartition topic
// by the edge's key and tagged, and the later sub-topology's task of
// partition p reads partition p of the one topic, so both sides of a
// join meet (one topic: one partition count, one hash). A node (or sink)
// reading a stream of an earlier sub-topology than its others gets it
// forwarded: written into each repartition topic on the way, unchanged,
// by the key the node needs (record.key for one without), so that a
// chain of joins by different keys runs. Refused: a node that routes
// records before a cut (a repartition topic sets the records' topic).
func planGraph(p *Physical) (*Physical, error) {
	l := p.Logical
	part := make([]string, len(l.Nodes)) // the key expression each node's output is partitioned by
	stage := make([]int, len(l.Nodes))
	var cuts [][]Edge // cuts[s-1]: the edges into sub-topology s
	// carry adds the edges that bring input slot of n from the
	// sub-topology of node in to sub-topology to, partitioned by key.
	carry := func(n *Node, slot, in, to int, key string) {
		for len(cuts) < to {
			cuts = append(cuts, nil)
		}
		for k := stage[in] + 1; k <= to; k++ {
			cuts[k-1] = append(cuts[k-1], Edge{From: in, To: n.ID, Slot: slot, Key: key, Tag: EdgeTag(n, slot), Forward: k > stage[in]+1})
		}
	}
	for _, n := range l.Nodes {
		if n.Kind == Source {
			if l.InputKeyed {
				part[n.ID] = "record.key"
			}
			continue
		}
		s := 0
		for _, in := range n.Inputs {
			s = max(s, stage[in])
		}
		inPart := make([]string, len(n.Inputs))
		cut := false
		for i, in := range n.Inputs {
			inPart[i] = part[in]
			if stage[in] < s {
				inPart[i] = "" // carried into s below, by the key the node needs
			}
			if n.Kind == Op && n.Props.Keyed && stage[in] == s && inPart[i] != inputKey(n, i) {
				cut = true
			}
		}
		if cut {
			s++
		}
		for i, in := range n.Inputs {
			if stage[in] == s {
				continue
			}
			key := "record.key"
			if n.Kind == Op && n.Props.Keyed {
				key = inputKey(n, i)
			}
			carry(n, i, in, s, key)
			inPart[i] = key
		}
		stage[n.ID] = s
		if n.Kind == Op && n.Props.Keys == KeysKept { // partitioned as its inputs, if they all are alike
			common := inPart[0]
			for _, ip := range inPart[1:] {
				if ip != common {
					common = ""
				}
			}
			part[n.ID] = common
		}
	}
	last := len(cuts)
	for _, n := range l.Nodes {
		if n.Kind == Sink && stage[n.ID] < last {
			// A sink writes from the last sub-topology, whose tasks hold
			// the commit point.
			carry(n, 0, n.Inputs[0], last, "record.key")
			stage[n.ID] = last
		}
	}
	for _, n := range l.Nodes {
		if n.Kind == Op && n.Props.Routes && stage[n.ID] < last {
			return nil, &Error{n.Line, fmt.Sprintf("with scale-out, a %s step that sets records' topics must come after the last keyed step that needs a repartition (here sub-topology %d): move it below", n.Op, last)}
		}
	}
	p.Subs = make([]SubTopology, last+1)
	for i := range p.Subs {
		p.Subs[i].Index = i
		if i > 0 {
			p.Subs[i].Inputs = []string{RepartitionTopic(l.Job, i)}
			p.Subs[i-1].Out = RepartitionTopic(l.Job, i)
			p.Subs[i-1].Edges = cuts[i-1]
			var keys []string
			for _, e := range cuts[i-1] {
				if !slices.Contains(keys, e.Key) {
					keys = append(keys, e.Key)
				}
			}
			p.Subs[i-1].OutKey = strings.Join(keys, " | ")
		}
	}
	sub0 := &p.Subs[0]
	sub0.CoPartitioned = true
	for _, n := range l.Nodes {
		p.Subs[stage[n.ID]].Nodes = append(p.Subs[stage[n.ID]].Nodes, n.ID)
		sub0.Inputs = append(sub0.Inputs, n.Topics...)
	}
	if len(sub0.Inputs) > 0 {
		sub0.Anchor = sub0.Inputs[0]
	}
	return p, nil
}

// inputKey is the key a keyed node needs its input i partitioned by.
func inputKey(n *Node, i int) string {
	if i == 1 && n.Props.RightKey != "" {
		return n.Props.RightKey
	}
	return n.Props.Key
}

// EdgeTag names input slot of node n in a repartition topic: the header
// value its records carry (stable: records in the topic and the reading
// tasks' state know it).
func EdgeTag(n *Node, slot int) string {
	return n.UID + "#" + strconv.Itoa(slot)
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
		switch {
		case len(p.Subs) > 1 && s.CoPartitioned && len(s.Inputs) > 1:
			fmt.Fprintf(&b, "%ssub-topology %d, a task per partition p of %s, reading p of %s:\n", indent, s.Index, s.Anchor, strings.Join(s.Inputs, ", "))
		case len(p.Subs) > 1:
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
		switch {
		case len(s.Edges) > 0:
			fmt.Fprintf(&b, "%s  → repartition topic %s:\n", indent, s.Out)
			for _, e := range s.Edges {
				from := p.Nodes[e.From].UID
				if e.Forward {
					from += " (carried on)"
				}
				fmt.Fprintf(&b, "%s      %s by %s, as input %d of %s (tag %s)\n", indent, from, e.Key, e.Slot+1, p.Nodes[e.To].UID, e.Tag)
			}
		case s.Out != "":
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
