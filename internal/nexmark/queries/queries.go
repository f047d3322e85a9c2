// Package queries holds the Nexmark queries onceflow runs and
// instantiates them for a run: another broker, topics, state directory or
// backend, a bounded source, or the output discarded. `onceflow nexmark
// run` and the tests use it; docs/benchmarks.md ("Nexmark queries")
// describes the queries and the figures.
//
// A query comes in one or two languages. qN.sql is Flink SQL as a Flink
// user writes it: the INSERT of Nexmark's query into a blackhole table,
// after the shared prelude ddl.sql (the Kafka event table with its
// computed dateTime and WATERMARK, and the views person, auction and
// bid), which File puts in front of it. qN.yaml is a job file written by
// hand in the pipeline's expression language (filter and map steps),
// kept beside the SQL of q0 to q2 to compare the two. Where a query has
// both, SQL is its default.
//
// Job turns either into the job file the engine runs. A script is
// compiled by the SQL planner (internal/sql/planner) into a job file and
// that file goes through Instantiate, as a hand-written one does, so the
// overrides apply the same way whatever the language; the blackhole
// table's drop-everything step is taken out first, so that a run writes
// the rows to Kafka unless Overrides.Discard drops them again.
package queries

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/onceflow/onceflow/internal/sql/planner"
)

//go:embed *.yaml *.sql
var files embed.FS

// The languages a query is written in: the file name's extension.
const (
	SQL  = "sql"  // Flink SQL, compiled by the planner
	YAML = "yaml" // a job file in the pipeline's expression language
)

// prelude is the file every SQL query is read after.
const prelude = "ddl.sql"

// Names lists the queries there are files for, in order: q0, q1, ...,
// each once whatever its languages.
func Names() []string {
	ents, err := fs.ReadDir(files, ".")
	if err != nil { // unreachable: the directory is embedded
		panic(err)
	}
	seen := map[string]bool{}
	var names []string
	for _, e := range ents {
		ext := path.Ext(e.Name())
		n := strings.TrimSuffix(e.Name(), ext)
		if e.Name() == prelude || (ext != ".sql" && ext != ".yaml") || seen[n] {
			continue
		}
		seen[n] = true
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if len(names[i]) != len(names[j]) {
			return len(names[i]) < len(names[j]) // q2 before q11
		}
		return names[i] < names[j]
	})
	return names
}

// Langs lists the languages the query name is written in, its default
// first: SQL, then YAML.
func Langs(name string) []string {
	var langs []string
	for _, l := range []string{SQL, YAML} {
		if _, err := fs.Stat(files, name+"."+l); err == nil && name+"."+l != prelude {
			langs = append(langs, l)
		}
	}
	return langs
}

// split parses a query reference: "q1" (its default language) or "q1.sql",
// "q1.yaml" (that one).
func split(ref string) (name, lang string, err error) {
	name, lang = ref, ""
	for _, l := range []string{SQL, YAML} {
		if n, ok := strings.CutSuffix(ref, "."+l); ok {
			name, lang = n, l
		}
	}
	langs := Langs(name)
	if len(langs) == 0 {
		return "", "", fmt.Errorf("nexmark: no query %q: use one of %s", name, strings.Join(Names(), ", "))
	}
	if lang == "" {
		return name, langs[0], nil
	}
	for _, l := range langs {
		if l == lang {
			return name, lang, nil
		}
	}
	return "", "", fmt.Errorf("nexmark: query %s has no %s file: it is written in %s", name, lang, strings.Join(langs, ", "))
}

// Lang returns the language the query reference ref ("q1", "q1.yaml")
// stands for.
func Lang(ref string) (string, error) {
	_, lang, err := split(ref)
	return lang, err
}

// File returns the source of the query reference ref as it is in the
// repository: "q1" is the query's default language, "q1.sql" or
// "q1.yaml" picks one. A SQL query is returned as a whole script, the
// prelude ddl.sql followed by qN.sql, as `onceflow run` takes it.
func File(ref string) ([]byte, error) {
	name, lang, err := split(ref)
	if err != nil {
		return nil, err
	}
	b, err := files.ReadFile(name + "." + lang)
	if err != nil {
		return nil, err
	}
	if lang != SQL {
		return b, nil
	}
	pre, err := files.ReadFile(prelude)
	if err != nil {
		return nil, err
	}
	return append(append(pre, '\n'), b...), nil
}

// Job returns the job file of the query reference ref ("q1", "q1.sql",
// "q1.yaml") with o's settings in place of its own: a YAML query through
// Instantiate, a SQL one compiled by the planner first (the script named
// nexmark-qN.sql, so its job is nexmark-qN as the YAML ones'), with its
// blackhole step taken out and its sink pointed at the topic nexmark-qN,
// then through Instantiate too.
func Job(ref string, o Overrides) ([]byte, error) {
	name, lang, err := split(ref)
	if err != nil {
		return nil, err
	}
	src, err := File(ref)
	if err != nil {
		return nil, err
	}
	if lang == SQL {
		job, err := planner.Compile("nexmark-"+name+".sql", string(src))
		if err != nil {
			return nil, fmt.Errorf("nexmark: %s: %w", name, err)
		}
		if src, err = unBlackhole(job.YAML, "nexmark-"+name); err != nil {
			return nil, fmt.Errorf("nexmark: %s: %w", name, err)
		}
	}
	return Instantiate(src, o)
}

// unBlackhole undoes a blackhole table in the compiled job file src: the
// planner writes it as a last step dropping every row (filter "false",
// commented as the blackhole's) before a sink named after the job. That
// step goes, so the rows reach the sink, and the sink writes to topic.
// A join compiles to the named form (docs/design.md, "### Named
// streams"): there the step is the last of the stream the one sink reads.
// A job file without the step is an error: every Nexmark query writes to
// a blackhole table.
func unBlackhole(src []byte, topic string) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, fmt.Errorf("the compiled job file is not one YAML document")
	}
	root := doc.Content[0]
	steps, sink, err := output(root)
	if err != nil {
		return nil, fmt.Errorf("the compiled job file %w", err)
	}
	if steps == nil || steps.Kind != yaml.SequenceNode || len(steps.Content) == 0 {
		return nil, fmt.Errorf("the compiled job file has no steps before its sink")
	}
	last := steps.Content[len(steps.Content)-1]
	if f := get(last, "filter", "if"); f == nil || f.Value != "false" || !strings.Contains(last.Content[0].LineComment+get(last, "filter").LineComment, "blackhole") {
		return nil, fmt.Errorf("the query does not write to a blackhole table (its last step is not the blackhole's)")
	}
	steps.Content = steps.Content[:len(steps.Content)-1]
	set(sink, &yaml.Node{Kind: yaml.ScalarNode, Value: topic}, "topic")
	return yaml.Marshal(&doc)
}

// output returns the steps whose records the job file root's sink writes
// and that sink's mapping: pipeline and sink in the one-source form; in
// the named form the one sink of sinks and the steps of the stream it
// reads from. The steps are nil when there are none yet (a one-source
// job without pipeline). Several sinks, or a sink reading a source, is
// an error: no Nexmark query has them.
func output(root *yaml.Node) (steps, sink *yaml.Node, err error) {
	sinks := get(root, "sinks")
	if sinks == nil {
		sink = get(root, "sink")
		if sink == nil || sink.Kind != yaml.MappingNode {
			sink = &yaml.Node{Kind: yaml.MappingNode}
			set(root, sink, "sink")
		}
		return get(root, "pipeline"), sink, nil
	}
	if sinks.Kind != yaml.MappingNode || len(sinks.Content) != 2 {
		return nil, nil, fmt.Errorf("has %d sinks, want one", len(sinks.Content)/2)
	}
	sink = sinks.Content[1]
	from := get(sink, "from")
	if from == nil || from.Kind != yaml.ScalarNode {
		return nil, nil, fmt.Errorf("has a sink without from")
	}
	stream := get(root, "streams", from.Value)
	if stream == nil || stream.Kind != yaml.MappingNode {
		return nil, nil, fmt.Errorf("has a sink reading %q, which is no stream", from.Value)
	}
	steps = get(stream, "steps")
	if steps == nil {
		steps = &yaml.Node{Kind: yaml.SequenceNode}
		set(stream, steps, "steps")
	}
	return steps, sink, nil
}

// Overrides are the settings of a job file Instantiate replaces; a zero
// field keeps the file's.
type Overrides struct {
	Job      string   // job
	Brokers  []string // kafka.brokers
	Input    string   // source.topics: the one topic of events
	Group    string   // source.group
	Output   string   // sink.topic
	StateDir string   // state.dir
	Backend  string   // state.backend: memory or pebble
	// Interval is checkpointing.interval.
	Interval time.Duration
	// Bounded sets source.bounded: the job reads to the end offsets the
	// partitions have when it starts, then stops after a final
	// checkpoint.
	Bounded bool
	// Discard appends a step dropping every record, so the query does
	// all its work and the sink writes nothing: the nearest a job file
	// comes to Flink's blackhole sink (docs/benchmarks.md). The sink's
	// transactions still commit the source's offsets every checkpoint.
	Discard bool
}

// Instantiate returns the job file src with o's settings in place of
// its own. Comments and every other setting are kept.
func Instantiate(src []byte, o Overrides) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("nexmark: a job file is a YAML mapping")
	}
	root := doc.Content[0]
	scalar := func(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: v} }
	list := func(vs ...string) *yaml.Node {
		n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for _, v := range vs {
			n.Content = append(n.Content, scalar(v))
		}
		return n
	}
	if o.Job != "" {
		set(root, scalar(o.Job), "job")
	}
	if len(o.Brokers) > 0 {
		set(root, list(o.Brokers...), "kafka", "brokers")
	}
	// A one-source job's source, or each source of the named form: the
	// Nexmark queries read one topic, through one source or several.
	sources := []*yaml.Node{}
	if named := get(root, "sources"); named != nil && named.Kind == yaml.MappingNode {
		for i := 1; i < len(named.Content); i += 2 {
			sources = append(sources, named.Content[i])
		}
	} else {
		src := get(root, "source")
		if src == nil || src.Kind != yaml.MappingNode {
			src = &yaml.Node{Kind: yaml.MappingNode}
			set(root, src, "source")
		}
		sources = append(sources, src)
	}
	for _, src := range sources {
		if o.Input != "" {
			set(src, list(o.Input), "topics")
		}
		if o.Group != "" {
			set(src, scalar(o.Group), "group")
		}
		if o.Bounded {
			set(src, scalar("true"), "bounded")
		}
	}
	steps, sink, err := output(root)
	if err != nil {
		return nil, fmt.Errorf("nexmark: the job file %w", err)
	}
	if o.Output != "" {
		set(sink, scalar(o.Output), "topic")
	}
	if o.StateDir != "" {
		set(root, scalar(o.StateDir), "state", "dir")
	}
	if o.Backend != "" {
		set(root, scalar(o.Backend), "state", "backend")
	}
	if o.Interval > 0 {
		set(root, scalar(o.Interval.String()), "checkpointing", "interval")
	}
	if o.Discard {
		if steps == nil || steps.Kind != yaml.SequenceNode {
			steps = &yaml.Node{Kind: yaml.SequenceNode}
			set(root, steps, "pipeline")
		}
		var step yaml.Node
		if err := yaml.Unmarshal([]byte(`filter: { if: "false" }`), &step); err != nil {
			return nil, err
		}
		steps.Content = append(steps.Content, step.Content[0])
	}
	return yaml.Marshal(&doc)
}

// get returns the value at path in the mapping m, or nil.
func get(m *yaml.Node, path ...string) *yaml.Node {
	for _, k := range path {
		if m == nil || m.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(m.Content); i += 2 {
			if m.Content[i].Value == k {
				next = m.Content[i+1]
			}
		}
		m = next
	}
	return m
}

// set puts v at path in the mapping m, making the mappings on the way.
func set(m *yaml.Node, v *yaml.Node, path ...string) {
	for i, k := range path {
		var next *yaml.Node
		for j := 0; j+1 < len(m.Content); j += 2 {
			if m.Content[j].Value == k {
				if i == len(path)-1 {
					m.Content[j+1] = v
					return
				}
				next = m.Content[j+1]
			}
		}
		if i == len(path)-1 {
			m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, v)
			return
		}
		if next == nil {
			next = &yaml.Node{Kind: yaml.MappingNode}
			m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, next)
		} else if next.Kind != yaml.MappingNode {
			*next = yaml.Node{Kind: yaml.MappingNode}
		}
		m = next
	}
}
