// Package queries holds the Nexmark queries onceflow runs as job files
// (q0.yaml, q1.yaml, ...: each says in a comment what it computes and the
// Flink SQL it corresponds to) and instantiates them for a run: another
// broker, topics, state directory or backend, a bounded source, or the
// output discarded. `onceflow nexmark run` and the tests use it;
// docs/benchmarks.md ("Nexmark queries") describes the queries and the
// figures.
package queries

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

//go:embed *.yaml
var files embed.FS

// Names lists the queries there are job files for, in order: q0, q1, ...
func Names() []string {
	ents, err := fs.ReadDir(files, ".")
	if err != nil { // unreachable: the directory is embedded
		panic(err)
	}
	var names []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".yaml"); ok {
			names = append(names, n)
		}
	}
	sort.Slice(names, func(i, j int) bool {
		if len(names[i]) != len(names[j]) {
			return len(names[i]) < len(names[j]) // q2 before q11
		}
		return names[i] < names[j]
	})
	return names
}

// File returns the job file of the query name ("q1") as it is in the
// repository.
func File(name string) ([]byte, error) {
	b, err := files.ReadFile(name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("nexmark: no query %q: use one of %s", name, strings.Join(Names(), ", "))
	}
	return b, nil
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
	if o.Input != "" {
		set(root, list(o.Input), "source", "topics")
	}
	if o.Group != "" {
		set(root, scalar(o.Group), "source", "group")
	}
	if o.Bounded {
		set(root, scalar("true"), "source", "bounded")
	}
	if o.Output != "" {
		set(root, scalar(o.Output), "sink", "topic")
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
		steps := get(root, "pipeline")
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
