package jobfile

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/internal/suggest"
	"github.com/onceflow/onceflow/pipeline"
)

// The named form of a job file (docs/design.md, "Named streams"): several
// sources, streams that read one or more of them (or of each other), and
// sinks that each write one stream:
//
//	sources:
//	  orders:    { topics: [orders] }
//	  customers: { topics: [customers] }
//	streams:
//	  paid:     { from: orders, steps: [ { filter: { if: 'value.status == "paid"' } } ] }
//	  enriched: { from: [paid, customers], steps: [ { join: { left-key: value.customer, right-key: value.id, ttl: 1h } } ] }
//	sinks:
//	  out: { from: enriched, topic: orders-enriched }
//
// A source section is a source: section, a sink section a sink: section
// with from: and one output (a topic, or one database or Redis). The
// file is decoded into the same JobFile as the one-source form:
// JobFile.Source is the job's input as a whole (every source's topics,
// the group they commit to), JobFile.Sink every sink's settings merged
// (one sink of each kind), JobFile.Pipeline every stream's steps with
// their ids (which checks of all steps read); Graph keeps the shape.

// Graph is the shape of a job file in the named form; nil in the
// one-source form (source:, pipeline:, sink:).
type Graph struct {
	Sources []NamedSource
	Streams []NamedStream
	Sinks   []NamedSink
}

// NamedSource is one entry of sources:.
type NamedSource struct {
	Name   string
	Line   int
	Source SourceConfig
	// EventTime is the source's own event-time section (Set false: none;
	// the job's event-time section applies).
	EventTime EventTimeConfig
}

// NamedStream is one entry of streams:.
type NamedStream struct {
	Name string
	Line int
	// From names its inputs: sources or other streams.
	From     []string
	FromLine int
	// Steps are its steps, with ids "<stream>.<id>" (their state's uids).
	Steps []Step
}

// NamedSink is one entry of sinks:.
type NamedSink struct {
	Name     string
	Line     int
	From     string
	FromLine int
	// Kind is the sink it is (SinkKafka, "postgres", "mysql", SinkRedis):
	// its settings are JobFile.Sink's of that kind.
	Kind string
}

// Named reports whether the file is in the named form.
func (jf *JobFile) Named() bool { return jf.Graph != nil }

// SinkFrom is the stream (or source) the sink of kind writes.
func (g *Graph) SinkFrom(kind string) string {
	for _, s := range g.Sinks {
		if s.Kind == kind {
			return s.From
		}
	}
	return ""
}

// namedEntries calls f for each name: value entry of a mapping at path.
func (d *decoder) namedEntries(path string, v *yaml.Node, what string, f func(name string, line int, v *yaml.Node)) {
	if v.Kind != yaml.MappingNode {
		d.errorf(v.Line, "%s must be a mapping of %s by name, not %s", path, what, describe(v))
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := resolve(v.Content[i]), resolve(v.Content[i+1])
		if first, dup := seen[k.Value]; dup {
			d.errorf(k.Line, "%s.%s is repeated (first on line %d): names must be unique", path, k.Value, first)
			continue
		}
		seen[k.Value] = k.Line
		if !ValidName(k.Value) || strings.Contains(k.Value, ".") {
			d.errorf(k.Line, "%s: the name %q may only use letters, digits, '_' and '-' (it names the %s's state in checkpoints)", path, k.Value, strings.TrimSuffix(what, "s"))
			continue
		}
		d.lines[path+"."+k.Value] = k.Line
		f(k.Value, k.Line, val)
	}
}

func (d *decoder) decodeSources(path string, v *yaml.Node, jf *JobFile) {
	d.graph(jf)
	d.namedEntries(path, v, "sources", func(name string, line int, v *yaml.Node) {
		ns := NamedSource{Name: name, Line: line}
		p := path + "." + name
		// event-time: is the named source's own; the rest is a source:
		// section's.
		if v.Kind == yaml.MappingNode {
			var rest []*yaml.Node
			for i := 0; i+1 < len(v.Content); i += 2 {
				k, val := resolve(v.Content[i]), resolve(v.Content[i+1])
				if k.Value == "event-time" {
					d.lines[p+".event-time"] = k.Line
					d.decodeEventTime(p+".event-time", val, &ns.EventTime)
					continue
				}
				rest = append(rest, v.Content[i], v.Content[i+1])
			}
			v = &yaml.Node{Kind: yaml.MappingNode, Line: v.Line, Column: v.Column, Content: rest}
		}
		d.decodeSource(p, v, &ns.Source)
		jf.Graph.Sources = append(jf.Graph.Sources, ns)
	})
}

func (d *decoder) decodeStreams(path string, v *yaml.Node, jf *JobFile) {
	d.graph(jf)
	d.namedEntries(path, v, "streams", func(name string, line int, v *yaml.Node) {
		st := NamedStream{Name: name, Line: line}
		p := path + "." + name
		d.mapping(p, v, map[string]field{
			"from": func(p string, v *yaml.Node) {
				st.FromLine = v.Line
				if v.Kind == yaml.ScalarNode {
					d.str(&one(&st.From)[0])(p, v)
					return
				}
				d.strList(&st.From)(p, v)
			},
			"steps": func(p string, v *yaml.Node) { st.Steps = d.decodeSteps(p, v) },
		})
		jf.Graph.Streams = append(jf.Graph.Streams, st)
	})
}

// one makes *l a list of one string and returns it.
func one(l *[]string) []string {
	*l = []string{""}
	return *l
}

func (d *decoder) decodeSinks(path string, v *yaml.Node, jf *JobFile) {
	d.graph(jf)
	d.namedEntries(path, v, "sinks", func(name string, line int, v *yaml.Node) {
		ns := NamedSink{Name: name, Line: line}
		p := path + "." + name
		var sc SinkConfig
		// from: is the sink's own; the rest is a sink: section's.
		var rest []*yaml.Node
		if v.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(v.Content); i += 2 {
				k, val := resolve(v.Content[i]), resolve(v.Content[i+1])
				if k.Value == "from" {
					ns.FromLine = k.Line
					d.lines[p+".from"] = k.Line
					d.str(&ns.From)(p+".from", val)
					continue
				}
				rest = append(rest, v.Content[i], v.Content[i+1])
			}
			v = &yaml.Node{Kind: yaml.MappingNode, Line: v.Line, Column: v.Column, Content: rest}
		}
		d.decodeSink(p, v, &sc)
		kinds := sc.Kinds()
		switch {
		case len(kinds) == 0:
			d.errorf(line, "%s writes nowhere: give it a topic: or a connector section (postgres:, mysql:, redis: …)", p)
			return
		case len(kinds) > 1:
			d.errorf(line, "%s names %s: a sink of the named form writes one output; make a sink for each", p, strings.Join(kinds, " and "))
			return
		}
		ns.Kind = kinds[0]
		for _, other := range jf.Graph.Sinks {
			if other.Kind == ns.Kind {
				d.errorf(line, "%s is a second %s sink (the first is %s at line %d): one job writes to one sink of each kind for now; combine the streams with union and write them with one sink", p, ns.Kind, other.Name, other.Line)
				return
			}
		}
		if sc.Delivery != "" {
			if jf.Sink.Delivery != "" && jf.Sink.Delivery != sc.Delivery {
				d.errorf(d.at(p+".delivery"), "%s.delivery is %s and another sink's is %s: the delivery is the job's, give it once (or the same on every sink)", p, sc.Delivery, jf.Sink.Delivery)
			}
			jf.Sink.Delivery = sc.Delivery
		}
		// The merged section's lines, so the checks of sink: report at the
		// named sink's lines.
		for _, f := range append([]string{"topic", "delivery", "max-held-bytes", "transaction-timeout"}, kinds...) {
			if l := d.at(p + "." + f); l != 0 {
				d.lines["sink."+f] = l
			}
		}
		for k, l := range d.lines {
			if rest, ok := strings.CutPrefix(k, p+"."); ok {
				if _, set := d.lines["sink."+rest]; !set {
					d.lines["sink."+rest] = l
				}
			}
		}
		switch ns.Kind {
		case SinkKafka:
			jf.Sink.Topic, jf.Sink.MaxHeldBytes, jf.Sink.TransactionTimeout = sc.Topic, sc.MaxHeldBytes, sc.TransactionTimeout
		default:
			if jf.Sink.Connectors == nil {
				jf.Sink.Connectors = map[string]*connector.Config{}
			}
			jf.Sink.Connectors[ns.Kind] = sc.Connectors[ns.Kind]
		}
		jf.Graph.Sinks = append(jf.Graph.Sinks, ns)
	})
}

func (d *decoder) graph(jf *JobFile) {
	if jf.Graph == nil {
		jf.Graph = &Graph{}
	}
}

// desugarGraph fills the one-source form's sections from the named form's
// (see the top of this file), after defaults: JobFile.Source is the job's
// input, JobFile.Pipeline every stream's steps, ids prefixed.
func (d *decoder) desugarGraph(jf *JobFile) {
	g := jf.Graph
	var topics []string
	for i := range g.Sources {
		src := &g.Sources[i].Source
		topics = append(topics, src.Topics...)
		if src.Group != "" && jf.Source.Group == "" {
			jf.Source.Group = src.Group
		}
	}
	jf.Source.Topics = topics
	jf.Pipeline = nil
	for i := range g.Streams {
		st := &g.Streams[i]
		applyPipelineDefaults(st.Steps)
		for j := range st.Steps {
			if !st.Steps[j].UIDSet {
				st.Steps[j].UID = st.Name + "." + st.Steps[j].UID
			}
		}
		jf.Pipeline = append(jf.Pipeline, st.Steps...)
	}
}

// validateGraph checks the named form: every name known, no cycle, every
// stream and source used, the inputs fit each stream's first step.
func (d *decoder) validateGraph(jf *JobFile) {
	g := jf.Graph
	if g == nil {
		return
	}
	for _, legacy := range []string{"source", "pipeline", "sink"} {
		if line := d.at(legacy); line != 0 {
			d.errorf(line, "%s: goes with the one-source form and this file uses sources:, streams: and sinks:; move it into the named form (a source under sources:, steps under a stream's steps:, a sink under sinks: with from:)", legacy)
		}
	}
	if len(g.Sources) == 0 {
		d.errorf(d.first("sources", "streams", "sinks"), "sources: is missing: the named form reads the sources it names, such as sources: { orders: { topics: [orders] } }")
	}
	if len(g.Sinks) == 0 {
		d.errorf(d.first("sinks", "streams", "sources"), "sinks: is missing: name where the job writes, such as sinks: { out: { from: <stream>, topic: out } }")
	}
	names := map[string]string{} // name -> "source" | "stream"
	var all []string
	for _, s := range g.Sources {
		names[s.Name] = "source"
		all = append(all, s.Name)
	}
	for _, s := range g.Streams {
		if names[s.Name] != "" {
			d.errorf(s.Line, "streams.%s: %q is also a source's name: sources and streams share one namespace", s.Name, s.Name)
		}
		names[s.Name] = "stream"
		all = append(all, s.Name)
	}
	for _, s := range g.Sinks {
		if names[s.Name] != "" {
			d.errorf(s.Line, "sinks.%s: %q is also a %s's name: every name in a job is its own", s.Name, s.Name, names[s.Name])
		}
	}
	unknown := false
	known := func(where string, line int, name string) bool {
		if names[name] != "" {
			return true
		}
		unknown = true
		if name == "" {
			d.errorf(line, "%s is empty: name a source or a stream (%s)", where, strings.Join(all, ", "))
		} else {
			d.errorf(line, "%s: no source or stream is called %q%s; known: %s", where, name, suggest.Suggest(name, all), strings.Join(all, ", "))
		}
		return false
	}
	used := map[string]bool{}
	streams := map[string]*NamedStream{}
	for i := range g.Streams {
		s := &g.Streams[i]
		streams[s.Name] = s
		line := s.FromLine
		if line == 0 {
			line = s.Line
		}
		if len(s.From) == 0 {
			d.errorf(line, "streams.%s.from is missing: name the source or stream it reads (or a list of them)", s.Name)
			continue
		}
		seen := map[string]bool{}
		for _, f := range s.From {
			if seen[f] {
				d.errorf(line, "streams.%s.from names %q twice", s.Name, f)
			}
			seen[f] = true
			if known("streams."+s.Name+".from", line, f) {
				used[f] = true
			}
		}
		d.validateInputs(s)
	}
	for _, s := range g.Sinks {
		line := s.FromLine
		if line == 0 {
			line = s.Line
			d.errorf(line, "sinks.%s.from is missing: name the stream (or source) it writes", s.Name)
			continue
		}
		if known("sinks."+s.Name+".from", line, s.From) {
			used[s.From] = true
		}
	}
	for _, name := range all {
		if !used[name] && !unknown { // a misspelt from: leaves its input unused: one error is enough
			line := d.at("sources." + name)
			if names[name] == "stream" {
				line = d.at("streams." + name)
			}
			d.errorf(line, "%s %q is not read by any stream or sink: use it or remove it", names[name], name)
		}
	}
	// A cycle: a stream that reads itself through others.
	const (
		visiting = 1
		done     = 2
	)
	mark := map[string]int{}
	var path []string
	var visit func(name string) bool
	visit = func(name string) bool {
		s := streams[name]
		if s == nil || mark[name] == done {
			return false
		}
		if mark[name] == visiting {
			i := slices.Index(path, name)
			cyc := append(slices.Clone(path[i:]), name)
			d.errorf(s.Line, "streams form a cycle: %s; a stream cannot read its own output", strings.Join(cyc, " → "))
			return true
		}
		mark[name] = visiting
		path = append(path, name)
		for _, f := range s.From {
			if visit(f) {
				return true
			}
		}
		path = path[:len(path)-1]
		mark[name] = done
		return false
	}
	for _, s := range g.Streams {
		if visit(s.Name) {
			break
		}
	}
	var groups []string
	srcTopics := map[string]string{}
	for _, s := range g.Sources {
		d.validateSourceAt("sources."+s.Name, s.Source)
		if grp := s.Source.Group; grp != "" && !slices.Contains(groups, grp) {
			groups = append(groups, grp)
		}
		for _, t := range s.Source.Topics {
			if other, dup := srcTopics[t]; dup {
				d.errorf(d.at("sources."+s.Name+".topics"), "sources.%s reads topic %q, which source %s reads too: read it once and use the source in both streams", s.Name, t, other)
			}
			srcTopics[t] = s.Name
		}
		if s.Source.TopicRegex != "" {
			d.errorf(d.at("sources."+s.Name+".topic-regex"), "sources.%s.topic-regex: the named form reads listed topics only for now: list them in topics:", s.Name)
		}
	}
	if len(groups) > 1 {
		d.errorf(d.first("sources"), "the sources commit to different groups (%s): a job's sources commit their offsets to one consumer group; give the same group (or none, for the default onceflow-<job>)", strings.Join(groups, ", "))
	}
}

// validateInputs checks that a stream's steps fit its inputs: with
// several, the first step takes that many; every other step takes one.
func (d *decoder) validateInputs(s *NamedStream) {
	n := len(s.From)
	for i, st := range s.Steps {
		spec, ok := pipeline.Lookup(st.Op)
		if !ok {
			continue // reported when decoded
		}
		want := 1
		if i == 0 {
			want = n
		}
		if !spec.TakesInputs(want) {
			switch {
			case i > 0:
				d.errorf(st.Line, "streams.%s.steps[%d]: %s takes %s, and only a stream's first step reads its inputs: make a stream of its own that reads the streams to combine", s.Name, i, st.Op, spec.InputsText())
			case n > 1 && spec.TakesInputs(1):
				d.errorf(st.Line, "streams.%s.steps[0]: %s takes one input and the stream reads %d (%s): start the steps with union (any number of inputs) or join (two)", s.Name, st.Op, n, strings.Join(s.From, ", "))
			case n > 1:
				d.errorf(st.Line, "streams.%s.steps[0]: %s takes %s and the stream reads %d (%s)", s.Name, st.Op, spec.InputsText(), n, strings.Join(s.From, ", "))
			default:
				d.errorf(st.Line, "streams.%s.steps[0]: %s takes %s and the stream reads one (%s): list them in from:, such as from: [a, b]", s.Name, st.Op, spec.InputsText(), strings.Join(s.From, ", "))
			}
		}
	}
	if n > 1 && len(s.Steps) == 0 {
		line := s.FromLine
		if line == 0 {
			line = s.Line
		}
		d.errorf(line, "streams.%s reads %d inputs and has no steps: its first step says how to combine them (union, or join for two)", s.Name, n)
	}
}

// String is the stream's inputs as a job file writes them.
func (s NamedStream) String() string {
	if len(s.From) == 1 {
		return fmt.Sprintf("%s from %s", s.Name, s.From[0])
	}
	return fmt.Sprintf("%s from [%s]", s.Name, strings.Join(s.From, ", "))
}
