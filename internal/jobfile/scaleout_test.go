package jobfile

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestPlanSegments(t *testing.T) {
	for _, tc := range []struct {
		name, pipeline string
		keyed          bool
		want           []string // per segment: input topic, steps, the key it repartitions by
		topics         string   // source topics; "in" when empty
	}{
		{"no keyed step", "  - filter: { if: 'value.a > 1' }\n  - map: { set: { b: '1' } }", true,
			[]string{"in: filter map"}, ""},
		{"keyed by the record key", "  - filter: { if: 'value.a > 1' }\n  - count: { key: record.key }", true,
			[]string{"in: filter count"}, ""},
		{"keyed by the record key, input not keyed", "  - count: { key: record.key }", false,
			[]string{"in: -> record.key", "j-repartition-1: count"}, ""},
		{"a key changed before", "  - key-by: { key: value.u }\n  - count: { key: record.key }", true,
			[]string{"in: key-by -> record.key", "j-repartition-1: count"}, ""},
		{"two keys", "  - dedupe: { key: value.id, ttl: 1h }\n  - filter: { if: 'value.a > 1' }\n  - dedupe: { key: value.id, ttl: 1h, uid: again }\n  - window: { key: value.user, size: 1m, fields: { n: 'count()' } }", true,
			[]string{"in: -> value.id", "j-repartition-1: dedupe filter dedupe -> value.user", "j-repartition-2: window"}, ""},
		// Each partition of each topic is a task of its own, so a key in
		// two keyed topics would have two states where one instance keeps
		// one: the keyed step reads a repartition topic instead.
		{"keyed by the record key over two topics", "  - dedupe: { key: record.key, ttl: 1h }", true,
			[]string{"a,b: -> record.key", "j-repartition-1: dedupe"}, "[a, b]"},
		{"no keyed step over two topics", "  - filter: { if: 'value.a > 1' }", true,
			[]string{"a,b: filter"}, "[a, b]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.topics == "" {
				tc.topics = "[in]"
			}
			file := fmt.Sprintf("job: j\nkafka: {brokers: [b:9092]}\nsource: {topics: %s}\nsink: {topic: out}\ncheckpointing: {interval: 1s}\nstate: {checkpoints: /shared}\nscale-out: {enabled: true, input-keyed: %v}\npipeline:\n%s\n", tc.topics, tc.keyed, tc.pipeline)
			jf, err := ParseJobFile("j.yaml", []byte(file), nil)
			if err != nil {
				t.Fatal(err)
			}
			segs, err := PlanSegments(jf)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range segs {
				var ops []string
				for _, st := range s.Steps {
					ops = append(ops, st.Op)
				}
				d := strings.Join(s.Topics, ",") + ": " + strings.Join(ops, " ")
				if s.Out != "" {
					d = strings.TrimSpace(d) + " -> " + s.OutKey
				}
				got = append(got, strings.ReplaceAll(d, ":  ->", ": ->"))
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("segments %q\nwant %q", got, tc.want)
			}
		})
	}
}

// The job file of deploy/kubernetes is a valid scale-out job.
func TestDeployJobFile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "kubernetes", "configmap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `yaml:"data"`
	}
	if err := yaml.Unmarshal(b, &cm); err != nil {
		t.Fatal(err)
	}
	jf, err := ParseJobFile("configmap.yaml:job.yaml", []byte(cm.Data["job.yaml"]), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !jf.ScaleOut.Enabled || jf.HTTP.Listen == "" {
		t.Fatalf("the deployed job must run scale-out with http.listen (got %+v, %q)", jf.ScaleOut, jf.HTTP.Listen)
	}
	segs, err := PlanSegments(jf)
	if err != nil || len(segs) != 3 {
		t.Fatalf("segments %d, %v: want the dedupe and the window each behind a repartition", len(segs), err)
	}
}

// TestScaleOutDatabaseSink: a database or Redis sink alone is each last
// task's commit point (docs/design.md, "Scale-out"); the parse refusals
// of what scale-out does not run with one are in
// testdata/parse-errors/scale-out-*.
func TestScaleOutDatabaseSink(t *testing.T) {
	for _, sink := range []string{
		"postgres: {dsn: 'postgres://u@db/orders', table: counts, columns: {k: record.key, n: value.n}, key: [k]}",
		"mysql: {dsn: 'u@tcp(db:3306)/orders', table: counts, columns: {k: record.key, n: value.n}, key: [k]}",
		"redis: {url: 'redis://r:6379/0', command: set, key: record.key, value: value}",
	} {
		file := "job: j\nkafka: {brokers: [b:9092]}\nsource: {topics: [in]}\nsink: {" + sink + "}\ncheckpointing: {interval: 1s}\nstate: {checkpoints: /shared}\nscale-out: {enabled: true}\npipeline:\n  - aggregate: { key: value.user, fields: { n: 'count()' } }\n"
		jf, err := ParseJobFile("j.yaml", []byte(file), nil)
		if err != nil {
			t.Fatalf("%s: %v", sink, err)
		}
		segs, err := PlanSegments(jf)
		if err != nil {
			t.Fatal(err)
		}
		if len(segs) != 2 || segs[0].Out != "j-repartition-1" || segs[1].Out != "" {
			t.Errorf("%s: segments %+v, want the re-key into j-repartition-1 and a last segment writing the sink", sink, segs)
		}
		if cp := jf.Sink.CommitPoint(); cp != jf.Sink.Kinds()[0] {
			t.Errorf("%s: commit point %q", sink, cp)
		}
	}
}

// TestPlanSegmentsCutsAGraph: a graph cut before its joins gives each
// segment its part: segment 0 the sources and the steps before the cut
// (the stream cut in its middle keeps its first steps there), segment 1
// a source per edge it reads (named by the edge's tag) and the rest of
// that stream, segment 2 the second join, the union with the orders
// carried across both cuts, and the sink; each segment but the last
// writes its edges by their keys.
func TestPlanSegmentsCutsAGraph(t *testing.T) {
	file := `job: j
kafka: {brokers: ["b:9092"]}
checkpointing: {interval: 1s}
state: {checkpoints: /shared}
scale-out: {enabled: true}
sources:
  orders:    { topics: [orders] }
  customers: { topics: [customers] }
  items:     { topics: [items] }
streams:
  paid:
    from: [orders]
    steps:
      - filter: { if: 'value.paid' }
      - dedupe: { key: value.id, ttl: 1h }
  enriched:
    from: [paid, customers]
    steps:
      - join: { left-key: value.customer, ttl: 1h }
      - map: { set: { item: value.left.item } }
  full:
    from: [enriched, items]
    steps:
      - join: { left-key: value.item, ttl: 1h }
  all:
    from: [full, orders]
    steps:
      - union: {}
sinks:
  out: { from: all, topic: out }
`
	jf, err := ParseJobFile("j.yaml", []byte(file), nil)
	if err != nil {
		t.Fatal(err)
	}
	segs, err := PlanSegments(jf)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range segs {
		var d []string
		for _, src := range s.Graph.Sources {
			d = append(d, "<"+src.Name+" "+strings.Join(src.Source.Topics, ",")+">")
		}
		for _, st := range s.Graph.Streams {
			var ops []string
			for _, step := range st.Steps {
				ops = append(ops, step.Op)
			}
			d = append(d, st.Name+"("+strings.Join(st.From, ",")+"): "+strings.Join(ops, " "))
		}
		for _, sk := range s.Graph.Sinks {
			d = append(d, "sink "+sk.From)
		}
		for _, e := range s.OutEdges {
			d = append(d, "=> "+e.From+" by "+e.Key+" as "+e.Tag)
		}
		got = append(got, strings.Join(d, "; "))
	}
	want := []string{
		"<orders orders>; <customers customers>; <items items>; paid(orders): filter; " +
			"=> paid by value.id as paid.dedupe:value.id#0; => customers by record.key as enriched.join:value.customer#1; " +
			"=> items by record.key as full.join:value.item#1; => orders by record.key as all.union#1",
		"<paid.dedupe:value.id#0 j-repartition-1>; <enriched.join:value.customer#1 j-repartition-1>; <full.join:value.item#1 j-repartition-1>; <all.union#1 j-repartition-1>; " +
			"paid(paid.dedupe:value.id#0): dedupe; " +
			"=> paid by value.customer as enriched.join:value.customer#0; => enriched.join:value.customer#1 by record.key as enriched.join:value.customer#1; " +
			"=> full.join:value.item#1 by record.key as full.join:value.item#1; => all.union#1 by record.key as all.union#1",
		"<enriched.join:value.customer#0 j-repartition-2>; <enriched.join:value.customer#1 j-repartition-2>; <full.join:value.item#1 j-repartition-2>; <all.union#1 j-repartition-2>; " +
			"enriched(enriched.join:value.customer#0,enriched.join:value.customer#1): join map; " +
			"=> enriched by value.item as full.join:value.item#0; => full.join:value.item#1 by record.key as full.join:value.item#1; => all.union#1 by record.key as all.union#1",
		"<full.join:value.item#0 j-repartition-3>; <full.join:value.item#1 j-repartition-3>; <all.union#1 j-repartition-3>; " +
			"full(full.join:value.item#0,full.join:value.item#1): join; all(full,all.union#1): union; sink all",
	}
	if len(got) != len(want) {
		t.Fatalf("%d segments, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("segment %d\n got %s\nwant %s", i, got[i], want[i])
		}
	}
}

// TestPlanSegmentsEdgesKeepTheirEventTime: with an event-time section
// per source, the sources a segment after a cut reads (one per edge)
// take the event time of the stream each edge comes from.
func TestPlanSegmentsEdgesKeepTheirEventTime(t *testing.T) {
	file := `job: j
kafka: {brokers: ["b:9092"]}
checkpointing: {interval: 1s}
state: {checkpoints: /shared}
scale-out: {enabled: true}
sources:
  orders:
    topics: [orders]
    event-time: { timestamp: value.ts, max-out-of-orderness: 3s }
  customers:
    topics: [customers]
    event-time: { max-out-of-orderness: 1s }
streams:
  enriched:
    from: [orders, customers]
    steps:
      - interval-join: { left-key: value.customer, right-key: record.key, lower: 0s, upper: 1h }
sinks:
  out: { from: enriched, topic: out }
`
	jf, err := ParseJobFile("j.yaml", []byte(file), nil)
	if err != nil {
		t.Fatal(err)
	}
	segs, err := PlanSegments(jf)
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) != 2 {
		t.Fatalf("%d segments, want 2", len(segs))
	}
	var got []string
	for _, s := range segs[1].Graph.Sources {
		got = append(got, fmt.Sprintf("%s %v %s %s", s.Name, s.EventTime.Set, s.EventTime.Timestamp, s.EventTime.MaxOutOfOrderness))
	}
	want := []string{"enriched.interval-join:value.customer#0 true value.ts 3s", "enriched.interval-join:value.customer#1 true timestamp 1s"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("edge sources of segment 1: %q, want %q", got, want)
	}
	if _, inputs := (&JobFile{Graph: segs[1].Graph}).StreamTimes(); !reflect.DeepEqual(inputs["enriched"], []string{"value.ts", "timestamp"}) {
		t.Errorf("the join's input times after the cut: %q, want value.ts and timestamp", inputs["enriched"])
	}
}
