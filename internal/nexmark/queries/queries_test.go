package queries

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/onceflow/onceflow/internal/sql/planner"
)

// Every query runs in SQL, and q0 to q2 also as hand-written job files;
// SQL is the default where both are.
func TestNamesAndLangs(t *testing.T) {
	names := Names()
	want := []string{"q0", "q1", "q2", "q3", "q4", "q5", "q7", "q8", "q9", "q11", "q12", "q15", "q16", "q17", "q18", "q19", "q20", "q21", "q22", "q23"}
	if !slices.Equal(names, want) {
		t.Errorf("Names() = %v, want %v", names, want)
	}
	for _, q := range names {
		langs := Langs(q)
		if len(langs) == 0 || langs[0] != SQL {
			t.Errorf("%s: languages %v, want SQL first", q, langs)
		}
		if l, err := Lang(q); err != nil || l != SQL {
			t.Errorf("Lang(%s) = %q, %v", q, l, err)
		}
	}
	if l, err := Lang("q1.yaml"); err != nil || l != YAML {
		t.Errorf("Lang(q1.yaml) = %q, %v", l, err)
	}
	for ref, msg := range map[string]string{"q11.yaml": "q11 has no yaml file", "ddl": `no query "ddl"`, "q99.sql": `no query "q99"`} {
		if _, err := File(ref); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("File(%s): %v, want an error saying %q", ref, err, msg)
		}
	}
	src, err := File("q0")
	if err != nil || !strings.HasPrefix(string(src), "-- The Nexmark event table") || !strings.Contains(string(src), "INSERT INTO nexmark_q0") {
		t.Errorf("File(q0) is not the prelude then q0.sql: %v\n%.200s", err, src)
	}
}

// Job compiles a SQL query and applies the overrides as to a job file:
// the blackhole's step is gone, so the rows reach the sink's topic,
// unless Discard drops them again.
func TestJobSQL(t *testing.T) {
	for _, q := range Names() {
		for _, discard := range []bool{false, true} {
			b, err := Job(q+".sql", Overrides{Job: "j", Brokers: []string{"b:1"}, Input: "in", Output: "out", Group: "g",
				StateDir: "/s", Backend: "pebble", Bounded: true, Discard: discard})
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			// The one-source form, or the named form of a join
			// (docs/design.md, "### Named streams"): each source and sink
			// is overridden, and the steps counted are every stream's.
			type source struct {
				Topics  []string
				Group   string
				Bounded bool
			}
			type sink struct{ From, Topic string }
			var job struct {
				Job      string
				Kafka    struct{ Brokers []string }
				Source   *source
				Sources  map[string]source
				Pipeline []map[string]any
				Streams  map[string]struct{ Steps []map[string]any }
				Sink     *sink
				Sinks    map[string]sink
				State    struct{ Dir, Backend string }
			}
			if err := yaml.Unmarshal(b, &job); err != nil {
				t.Fatal(err)
			}
			sources, sinks, steps := job.Sources, job.Sinks, job.Pipeline
			if job.Source != nil {
				sources = map[string]source{"": *job.Source}
			}
			if job.Sink != nil {
				sinks = map[string]sink{"": *job.Sink}
			}
			for _, st := range job.Streams {
				steps = append(steps, st.Steps...)
			}
			if (job.Source == nil) == (job.Sources == nil) || len(sources) == 0 || len(sinks) != 1 || len(steps) == 0 {
				t.Fatalf("%s: not one form, with sources, steps and one sink:\n%s", q, b)
			}
			ok := job.Job == "j" && slices.Equal(job.Kafka.Brokers, []string{"b:1"}) && job.State.Dir == "/s" && job.State.Backend == "pebble"
			for _, src := range sources {
				ok = ok && slices.Equal(src.Topics, []string{"in"}) && src.Group == "g" && src.Bounded
			}
			for _, sk := range sinks {
				ok = ok && sk.Topic == "out"
			}
			if !ok {
				t.Errorf("%s: overrides not applied:\n%s", q, b)
			}
			drops := 0
			for _, st := range steps {
				if f, ok := st["filter"].(map[string]any); ok && f["if"] == "false" {
					drops++
				}
			}
			if want := map[bool]int{false: 0, true: 1}[discard]; drops != want {
				t.Errorf("%s, discard %v: %d steps dropping every row, want %d:\n%s", q, discard, drops, want, b)
			}
		}
	}
}

// The Nexmark queries the planner cannot compile yet
// (unsupported/qN.sql, read after the same prelude) fail with these
// errors, listed in docs/benchmarks.md; a query that starts compiling
// belongs in this directory, with a reference computation.
func TestUnsupported(t *testing.T) {
	want := map[string]string{
		"q10": `table nexmark_q10: unknown connector "filesystem"`,
		"q13": `table side_input: unknown connector "filesystem"`,
		"q14": "unknown function count_char",
	}
	pre, err := files.ReadFile(prelude)
	if err != nil {
		t.Fatal(err)
	}
	paths, err := filepath.Glob("unsupported/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != len(want) {
		t.Errorf("%d files in unsupported/, want %d", len(paths), len(want))
	}
	for _, p := range paths {
		q := strings.TrimSuffix(filepath.Base(p), ".sql")
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		_, err = planner.Compile(q+".sql", string(pre)+"\n"+string(src))
		if err == nil || !strings.Contains(err.Error(), want[q]) || want[q] == "" {
			t.Errorf("%s: %v, want an error saying %q", q, err, want[q])
		}
		t.Logf("%s: %v", q, err)
	}
}

// In the named form (a join's, docs/design.md "### Named streams") the
// overrides go to every source and the one sink, and Discard's step ends
// the stream that sink reads, not another; several sinks, or a sink
// reading a source, are refused.
func TestInstantiateNamed(t *testing.T) {
	const named = `job: x
sources:
  a: { topics: [t1], group: g1 }
  b: { topics: [t2], group: g1 }
streams:
  side: { from: [a], steps: [ { filter: { if: "true" } } ] }
  out: { from: [side, b], steps: [ { join: { ttl: 1h } } ] }
sinks:
  s: { from: out, topic: old }
`
	b, err := Instantiate([]byte(named), Overrides{Input: "in", Group: "g", Output: "new", Bounded: true, Discard: true})
	if err != nil {
		t.Fatal(err)
	}
	var job struct {
		Sources map[string]struct {
			Topics  []string
			Group   string
			Bounded bool
		}
		Streams map[string]struct{ Steps []map[string]map[string]any }
		Sinks   map[string]struct{ From, Topic string }
		Sink    any
	}
	if err := yaml.Unmarshal(b, &job); err != nil {
		t.Fatal(err)
	}
	for name, src := range job.Sources {
		if !slices.Equal(src.Topics, []string{"in"}) || src.Group != "g" || !src.Bounded {
			t.Errorf("source %s not overridden:\n%s", name, b)
		}
	}
	if len(job.Sources) != 2 || job.Sinks["s"].Topic != "new" || job.Sink != nil {
		t.Errorf("sink not overridden, or a one-source sink added:\n%s", b)
	}
	out, side := job.Streams["out"].Steps, job.Streams["side"].Steps
	if len(out) != 2 || out[1]["filter"]["if"] != "false" || len(side) != 1 || side[0]["filter"]["if"] != "true" {
		t.Errorf("Discard's step is not the last of the sink's stream alone:\n%s", b)
	}
	for src, msg := range map[string]string{
		named + "  t: { from: side, topic: x }\n":           "has 2 sinks, want one",
		strings.Replace(named, "from: out,", "from: a,", 1): `a sink reading "a", which is no stream`,
	} {
		if _, err := Instantiate([]byte(src), Overrides{Output: "o"}); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%v, want an error saying %q", err, msg)
		}
	}
}

// q12's check holds the invariants of processing-time windows, not
// rows: the counts per bidder over all windows are its bids, each window
// once.
func TestVerifyProcessingTime(t *testing.T) {
	ref := map[string]int{`{"bidder":1}`: 3, `{"bidder":2}`: 1}
	row := func(bidder, n int, start string) []byte {
		return []byte(`{"bidder":` + strconv.Itoa(bidder) + `,"bid_count":` + strconv.Itoa(n) + `,"starttime":"2026-01-01 10:00:` + start +
			`.000","endtime":"2026-01-01 10:00:` + strconv.Itoa(mustAtoi(start)+10) + `.000"}`)
	}
	good := [][]byte{row(1, 2, "10"), row(1, 1, "20"), row(2, 1, "10")}
	if err := verifyProcessingTime("q12", ref, good); err != nil {
		t.Errorf("good output: %v", err)
	}
	for what, vs := range map[string][][]byte{
		"is in the output twice":      {row(1, 2, "10"), row(1, 1, "10"), row(2, 1, "10")},
		"do not add up to their bids": {row(1, 2, "10"), row(2, 1, "10")},
		"is not a count of a 10 s":    {row(1, 3, "15"), row(2, 1, "10")},
	} {
		if err := verifyProcessingTime("q12", ref, vs); err == nil || !strings.Contains(err.Error(), what) {
			t.Errorf("%v, want an error saying %q", err, what)
		}
	}
}

func mustAtoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}
