package jobfile

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

var updateSnapshot = flag.Bool("update-snapshot", false, "rewrite testdata/decoded.golden from today's decoder")

// The job files of the repository decode, or fail, as they did when the
// snapshot was taken: testdata/decoded.golden holds, for every job file
// under examples/, deploy/, internal/nexmark/queries and the testdata
// directories, every YAML block of the docs that starts with job:, and
// the cases of snapshotExtra, the whole JobFile it decodes to (unexported
// fields included) or its error. A change of the decoder that changes
// what a file means shows up here; go test -run TestDecodedSnapshot
// ./internal/jobfile -update-snapshot rewrites it, for a change that is
// meant or a job file added (review the diff).
func TestDecodedSnapshot(t *testing.T) {
	root := filepath.Join("..", "..")
	docs := snapshotCorpus(t, root)
	var b strings.Builder
	names := make([]string, 0, len(docs))
	for n := range docs {
		names = append(names, n)
	}
	sort.Strings(names)
	env := func(name string) (string, bool) { return "${" + name + "}", true }
	for _, n := range names {
		fmt.Fprintf(&b, "=== %s\n", n)
		jf, err := ParseJobFile("/job/job.yaml", []byte(docs[n]), env)
		if err != nil {
			fmt.Fprintf(&b, "error:\n%v\n", err)
			continue
		}
		jf.Path = ""
		dump(&b, reflect.ValueOf(jf), 0)
		b.WriteString("\n")
	}
	golden := filepath.Join("testdata", "decoded.golden")
	if *updateSnapshot {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (-update-snapshot writes it)", err)
	}
	if got := b.String(); got != string(want) {
		gotDocs, wantDocs := splitSnapshot(got), splitSnapshot(string(want))
		for _, n := range names {
			w, ok := wantDocs[n]
			switch {
			case !ok:
				t.Errorf("%s is not in %s: go test -run TestDecodedSnapshot -update-snapshot adds it", n, golden)
			case w != gotDocs[n]:
				t.Errorf("%s decodes differently from %s:\ngot\n%s\nwant\n%s", n, golden, gotDocs[n], w)
			}
		}
		for n := range wantDocs {
			if _, ok := gotDocs[n]; !ok {
				t.Errorf("%s of %s is gone: go test -run TestDecodedSnapshot -update-snapshot removes it", n, golden)
			}
		}
	}
	if len(docs) < 100 {
		t.Errorf("the corpus has %d job files, want at least 100", len(docs))
	}
}

// splitSnapshot cuts a snapshot into its job files' entries, by name.
func splitSnapshot(s string) map[string]string {
	out := map[string]string{}
	for _, part := range strings.Split(s, "=== ")[1:] {
		name, body, _ := strings.Cut(part, "\n")
		out[name] = body
	}
	return out
}

// snapshotExtra are job files that use every field of source: and of
// sink:'s Kafka part, in each of their spellings.
var snapshotExtra = map[string]string{
	"startup-timestamp": `job: j
kafka: {brokers: [b:9092]}
source:
  topics: a, b
  group: g
  startup: {mode: timestamp, timestamp: 2024-05-01T02:00:00+02:00}
  discovery-interval: 0
  isolation: READ-UNCOMMITTED
  bounded: yes
  parallelism: 3
  on-topic-recreated: fail
sink: {topic: out, delivery: at_least_once}
checkpointing: {interval: 1s}
`,
	"startup-offsets": `job: j
kafka: {brokers: [b:9092]}
source:
  topic-regex: 'in-.*'
  startup: {mode: specific-offsets, offsets: {a: {0: 42, 1: 300}}, reset: latest}
  discovery-interval: 1m
sink: {topic: out, max-held-bytes: 1MiB, transaction-timeout: 2m}
checkpointing: {interval: 1s}
`,
	"startup-group": `job: j
kafka: {brokers: [b:9092]}
source: {topics: [a], startup: {mode: group-offsets}}
sink: {topic: out, delivery: none}
checkpointing: {interval: 1s}
`,
	"startup-latest": `job: j
kafka: {brokers: [b:9092]}
source: {topics: [a], startup: latest, bounded: false}
sink: {topic: out, delivery: exactly-once, max-held-bytes: 1048576}
checkpointing: {interval: 1s}
`,
	"named": `job: j
kafka: {brokers: [b:9092]}
sources:
  a: {topics: [a], group: ga, startup: {mode: timestamp, timestamp: 2024-05-01T00:00:00Z}}
  b: {topics: [b], startup: latest, parallelism: 2}
streams:
  s: {from: [a, b], steps: [{union: {}}]}
sinks:
  out: {from: s, topic: out, transaction-timeout: 1m}
checkpointing: {interval: 1s}
`,
	"source-errors": `job: j
kafka: {brokers: [b:9092]}
source:
  topicz: [a]
  startup: {mode: timestamp, timestamp: yesterday, offsets: {a: {x: 1}}, reset: never}
  discovery-interval: -1s
  isolation: committed
  bounded: maybe
  parallelism: many
  on-topic-recreated: later
sink: {topic: out, delivery: twice, max-held-bytes: 1MB, transaction-timeout: soon, topc: x}
checkpointing: {interval: 1s}
`,
	"startup-scalar-errors": `job: j
kafka: {brokers: [b:9092]}
sources:
  a: {topics: [a], startup: timestamp}
  b: {topics: [b], startup: specific-offsets}
  c: {topics: [c], startup: {timestamp: 2024-05-01T00:00:00Z}}
  d: {topics: [d], startup: {mode: latest, reset: none, offsets: {a: {0: 1}}}}
  e: {topics: [e], startup: {mode: specific-offsets, offsets: [1]}}
  f: {topics: [f], startup: {mode: specific-offsets, offsets: {a: 1, b: {0: -1, 1: 2, 1: 3}}}}
streams:
  s: {from: [a, b, c, d, e, f], steps: [{union: {}}]}
sinks:
  out: {from: s, topic: out}
checkpointing: {interval: 1s}
`,
	"group-reset": `job: j
kafka: {brokers: [b:9092]}
source: {topics: "a,b", startup: {mode: group-offsets, reset: none}, parallelism: 0, discovery-interval: 30s}
sink: {topic: out, delivery: at-least-once, max-held-bytes: 1MiB}
checkpointing: {interval: 1s}
`,
	"sink-zeroes": `job: j
kafka: {brokers: [b:9092]}
source: {topics: [a], isolation: read_committed, on-topic-recreated: earliest}
sink: {topic: out, max-held-bytes: 0, transaction-timeout: 0s}
checkpointing: {interval: 1s}
`,
	"empty-values": `job: j
kafka: {brokers: [b:9092]}
source: {topics: , group: , startup: }
sink: {topic: , delivery: }
checkpointing: {interval: 1s}
`,
}

// snapshotCorpus collects the job files the snapshot decodes, by a name
// that says where each comes from.
func snapshotCorpus(t *testing.T, root string) map[string]string {
	docs := map[string]string{}
	for n, s := range snapshotExtra {
		docs["extra/"+n] = s
	}
	isJob := func(s string) bool {
		return strings.HasPrefix(s, "job:") || strings.Contains(s, "\njob:")
	}
	for _, dir := range []string{"examples", "deploy", "internal/nexmark/queries", "internal/cli/testdata", "internal/jobfile/testdata"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() || !(strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			s := string(data)
			if strings.HasSuffix(p, "configmap.yaml") {
				// The job file is the ConfigMap's job.yaml, indented.
				_, after, ok := strings.Cut(s, "job.yaml: |\n")
				if !ok {
					return nil
				}
				var lines []string
				for _, l := range strings.Split(after, "\n") {
					if l != "" && !strings.HasPrefix(l, "    ") {
						break
					}
					lines = append(lines, strings.TrimPrefix(l, "    "))
				}
				s = strings.Join(lines, "\n")
			}
			if isJob(s) {
				docs[filepath.ToSlash(rel)] = s
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	mds, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	mds = append(mds, filepath.Join(root, "README.md"))
	for _, md := range mds {
		data, err := os.ReadFile(md)
		if err != nil {
			t.Fatal(err)
		}
		parts := strings.Split(string(data), "```yaml\n")
		for i, p := range parts[1:] {
			block, _, _ := strings.Cut(p, "```")
			if isJob(block) {
				rel, _ := filepath.Rel(root, md)
				docs[fmt.Sprintf("%s#%d", filepath.ToSlash(rel), i+1)] = block
			}
		}
	}
	return docs
}

// dump writes v in full, unexported fields included, maps by sorted key.
func dump(b *strings.Builder, v reflect.Value, depth int) {
	ind := strings.Repeat("  ", depth)
	switch v.Kind() {
	case reflect.Invalid:
		b.WriteString("<nil>")
		return
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		dump(b, v.Elem(), depth)
		return
	case reflect.Func:
		if v.IsNil() {
			b.WriteString("nil func")
		} else {
			b.WriteString("func")
		}
		return
	}
	if v.Type() == reflect.TypeFor[time.Time]() {
		if v.CanInterface() {
			b.WriteString(v.Interface().(time.Time).Format(time.RFC3339Nano))
		} else {
			b.WriteString("time (unexported)")
		}
		return
	}
	if v.Type() == reflect.TypeFor[time.Duration]() {
		b.WriteString(time.Duration(v.Int()).String())
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		b.WriteString(v.Type().String() + "{\n")
		for i := range v.NumField() {
			f := v.Field(i)
			if f.IsZero() {
				continue
			}
			fmt.Fprintf(b, "%s  %s: ", ind, v.Type().Field(i).Name)
			dump(b, f, depth+1)
			b.WriteString("\n")
		}
		b.WriteString(ind + "}")
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			b.WriteString("nil")
			return
		}
		b.WriteString("[\n")
		for i := range v.Len() {
			b.WriteString(ind + "  ")
			dump(b, v.Index(i), depth+1)
			b.WriteString("\n")
		}
		b.WriteString(ind + "]")
	case reflect.Map:
		if v.IsNil() {
			b.WriteString("nil map")
			return
		}
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
		b.WriteString("map{\n")
		for _, k := range keys {
			fmt.Fprintf(b, "%s  %v: ", ind, k)
			dump(b, v.MapIndex(k), depth+1)
			b.WriteString("\n")
		}
		b.WriteString(ind + "}")
	case reflect.String:
		b.WriteString(strconv.Quote(v.String()))
	default:
		fmt.Fprintf(b, "%v", v)
	}
}
