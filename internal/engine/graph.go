package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Graph is a job definition: its configuration and its operators in
// topological order (inputs first). flow.Env wraps one.
type Graph struct {
	Cfg   Config
	nodes []*Node
	uids  map[string]*Node
}

// NewGraph returns an empty graph with cfg.
func NewGraph(cfg Config) *Graph { return &Graph{Cfg: cfg, uids: map[string]*Node{}} }

type nodeKind int

const (
	kindSource nodeKind = iota
	kindOp
	kindKeyed
	kindSink
)

type edgeKind int

const (
	edgeForward edgeKind = iota // same parallelism: chained
	edgeRebalance
	edgeKeyed
)

// Node is one operator of the graph, with its type erased; the typed
// behaviour lives in the closures the generic Add functions set.
type Node struct {
	g    *Graph
	id   int
	uid  string
	name string
	kind nodeKind
	par  int // explicit parallelism, 0 = inherit
	// onRejected is a sink's policy for records its writer rejects.
	onRejected int
	// inputs are the nodes this one reads, in order: one for every node
	// but a source, several for a multi-input node (docs/design.md,
	// "Multi-input nodes"). A node reading one stream twice (a diamond)
	// lists it twice.
	inputs []*Node
	edge   edgeKind
	// consumers are the nodes reading this one; slots[i] is which input of
	// consumers[i] this node is.
	consumers []*Node
	slots     []int

	// hint returns the source's own parallelism (sources only).
	hint func(ctx context.Context) (int, error)
	// runSource runs one source subtask (sources only).
	runSource func(st *subtask, out any)
	// chain builds this operator for subtask st, pushing to out (the typed
	// input of its consumers, fanned out) and returns its own typed input.
	chain func(st *subtask, n *Node, out any) any
	// fanout combines the typed inputs of several consumers into one.
	fanout func(outs []any) any
	// exchanges create, per input, the typed channels of the exchange edge
	// from that input into this node.
	exchanges []exchangeFunc
	// committer returns the sink's recovery committer (sinks only).
	committer CommitterOpener
	// commitPoint is set for sinks that own the commit point.
	commitPoint JobCommitPoint
	// impl is the user's Source or Sink value, for optional interfaces.
	impl any
	// watermarks is a source's WatermarkSpec of its record type (nil:
	// no event time).
	watermarks any
	// layout describes how the node keeps its state (StateLayout): a
	// restore refuses a checkpoint whose layout for the uid differs.
	layout string
}

// NodeOption configures a node as it is added.
type NodeOption func(*Node)

// UID sets the node's uid.
func UID(uid string) NodeOption { return func(n *Node) { n.uid = uid } }

// StateLayout says how the node keeps its state, as text that changes
// when the state a checkpoint holds could no longer be read by the node
// as the job now builds it (an aggregate's functions, a window's size):
// the manifest records it per operator, and a restore refuses a
// checkpoint whose layout differs (docs/design.md, "State across query
// changes"). Empty: not checked. A layout may end in subset parts,
// ` ~name=["a","b"]` (LayoutCompatible).
func StateLayout(layout string) NodeOption { return func(n *Node) { n.layout = layout } }

// LayoutCompatible says whether state a checkpoint kept with layout
// checkpoint can be read by an operator whose layout is now job. Equal
// layouts are; so are layouts that differ only in their subset parts
// (` ~name=<JSON list>`, written last: the columns the state's rows
// hold), when for each of the job's the checkpoint's part names every
// column of it, or is absent (rows of every column): rows that hold
// more serve a reader of fewer. A subset part the checkpoint has and
// the job lacks (the job reads every column now) is not compatible.
func LayoutCompatible(checkpoint, job string) bool {
	if checkpoint == job {
		return true
	}
	cBase, cSubs, ok1 := splitLayout(checkpoint)
	jBase, jSubs, ok2 := splitLayout(job)
	if !ok1 || !ok2 || cBase != jBase {
		return false
	}
	for name, have := range cSubs {
		need, ok := jSubs[name]
		if !ok {
			return false
		}
		for _, col := range need {
			if !slices.Contains(have, col) {
				return false
			}
		}
	}
	return true
}

// splitLayout splits a layout into what precedes its subset parts and
// those parts by name; ok is false for a subset part that does not parse.
func splitLayout(l string) (base string, subs map[string][]string, ok bool) {
	i := strings.Index(l, " ~")
	if i < 0 {
		return l, nil, true
	}
	base, rest := l[:i], l[i:]
	subs = map[string][]string{}
	for rest != "" {
		if !strings.HasPrefix(rest, " ~") {
			return "", nil, false
		}
		eq := strings.IndexByte(rest, '=')
		if eq < 0 {
			return "", nil, false
		}
		name := rest[2:eq]
		dec := json.NewDecoder(strings.NewReader(rest[eq+1:]))
		var cols []string
		if err := dec.Decode(&cols); err != nil {
			return "", nil, false
		}
		subs[name] = cols
		rest = rest[eq+1+int(dec.InputOffset()):]
	}
	return base, subs, true
}

// Name sets the node's display name.
func Name(name string) NodeOption { return func(n *Node) { n.name = name } }

// OnRejected sets what a sink does with a record its writer rejects
// (ErrRejected): FailOnError, SkipOnError or DeadLetterOnError.
func OnRejected(policy int) NodeOption { return func(n *Node) { n.onRejected = policy } }

// Parallelism sets the node's parallelism.
func Parallelism(p int) NodeOption {
	return func(n *Node) {
		if p < 1 {
			n.g.Cfg.Errs = append(n.g.Cfg.Errs, fmt.Errorf("operator %q: parallelism %d is below 1", n.name, p))
			return
		}
		n.par = p
	}
}

// Graph returns the graph the node belongs to.
func (n *Node) Graph() *Graph { return n.g }

// UID returns the node's uid.
func (n *Node) UID() string { return n.uid }

// Name returns the node's display name.
func (n *Node) Name() string { return n.name }

// Impl returns the user's Source or Sink value of a source or sink node.
func (n *Node) Impl() any { return n.impl }

// OnRejectedPolicy returns the sink's policy for rejected records.
func (n *Node) OnRejectedPolicy() int { return n.onRejected }

// Invalid rejects the job the node belongs to with err.
func (n *Node) Invalid(err error) { n.g.Cfg.Errs = append(n.g.Cfg.Errs, err) }

// Nodes returns the graph's nodes in topological order.
func (g *Graph) Nodes() []*Node { return g.nodes }

func (g *Graph) add(n *Node, opts []NodeOption) *Node {
	n.g = g
	for _, o := range opts {
		o(n)
	}
	n.id = len(g.nodes)
	if n.uid == "" {
		n.uid = fmt.Sprintf("%s-%d", n.name, n.id)
	} else if prev, dup := g.uids[n.uid]; dup {
		g.Cfg.Errs = append(g.Cfg.Errs, fmt.Errorf("operator uid %q is used by both %s (#%d) and %s (#%d): uids map state in checkpoints to operators, give each a different one", n.uid, prev.name, prev.id, n.name, n.id))
	}
	if n.kind == kindKeyed {
		if other, clash := g.stateFiles(n); clash {
			g.Cfg.Errs = append(g.Cfg.Errs, fmt.Errorf("operators %q and %q would write the same state files (%q): give one of them another uid", other, n.uid, sanitize(n.uid)))
		}
	}
	g.uids[n.uid] = n
	g.nodes = append(g.nodes, n)
	for slot, in := range n.inputs {
		if in.g != g {
			g.Cfg.Errs = append(g.Cfg.Errs, fmt.Errorf("operator %q reads a stream of another job: every input of an operator must come from the same flow.New", n.uid))
			continue
		}
		in.consumers = append(in.consumers, n)
		in.slots = append(in.slots, slot)
	}
	return n
}

// stateFiles reports whether another keyed node's uid maps to the same
// state file names as n's.
func (g *Graph) stateFiles(n *Node) (string, bool) {
	for _, o := range g.nodes {
		if o.kind == kindKeyed && o.uid != n.uid && sanitize(o.uid) == sanitize(n.uid) {
			return o.uid, true
		}
	}
	return "", false
}

// validate checks the graph's structure and finds the commit point.
func (g *Graph) validate(cfg *Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	var errs []error
	var sources, sinks int
	var cps []*Node
	for _, n := range g.nodes {
		switch n.kind {
		case kindSource:
			sources++
		case kindSink:
			sinks++
			if n.commitPoint != nil {
				cps = append(cps, n)
			}
		}
	}
	if sources == 0 {
		errs = append(errs, errors.New("the job has no source: add one with flow.From"))
	}
	if sinks == 0 {
		errs = append(errs, errors.New("the job has no sink: nothing it computes would leave it; add one with flow.To"))
	}
	if len(cps) > 1 {
		errs = append(errs, fmt.Errorf("sinks %q and %q both want to own the job's commit point; a job can have one transactional Kafka sink", cps[0].uid, cps[1].uid))
	}
	if len(cps) == 1 {
		if cfg.CommitPoint != nil {
			errs = append(errs, fmt.Errorf("sink %q owns the commit point and WithCommitPoint sets another: use one", cps[0].uid))
		}
		cfg.CommitPoint = cps[0].commitPoint
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidJob, errors.Join(errs...))
	}
	return nil
}

// CommitPointOf returns the commit point the job would use: the one a sink
// owns, else cfg's.
func (g *Graph) CommitPointOf() JobCommitPoint {
	for _, n := range g.nodes {
		if n.commitPoint != nil {
			return n.commitPoint
		}
	}
	return g.Cfg.CommitPoint
}

// plan computes every node's parallelism.
func (g *Graph) plan(ctx context.Context, cfg *Config) (map[*Node]int, error) {
	par := map[*Node]int{}
	var errs []error
	for _, n := range g.nodes { // nodes are in topological order: inputs come first
		switch {
		case n.par > 0:
			par[n] = n.par
		case n.kind == kindSource && n.hint != nil:
			h, err := n.hint(ctx)
			if err != nil {
				return nil, fmt.Errorf("source %q: %w", n.uid, err)
			}
			par[n] = max(h, 1)
		case n.kind == kindSource:
			par[n] = cfg.Parallelism
		default:
			// Inherit: a multi-input node takes its widest input's.
			for _, in := range n.inputs {
				par[n] = max(par[n], par[in])
			}
		}
		if n.kind == kindKeyed && par[n] > cfg.MaxParallelism {
			errs = append(errs, fmt.Errorf("keyed operator %q has parallelism %d above the max parallelism %d: lower the parallelism (source.parallelism in a job file: by default a Kafka source takes one subtask per partition) or raise the max parallelism (state.max-parallelism in a job file, flow.MaxParallelism in Go) before the first checkpoint; it cannot change later", n.uid, par[n], cfg.MaxParallelism))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalidJob, errors.Join(errs...))
	}
	return par, nil
}
