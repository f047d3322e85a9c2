package jobfile

import (
	"errors"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/connector/build"
	"github.com/onceflow/onceflow/connector/kafka"
)

// Each connector's spec lists the fields its job-file section accepts:
// docs/connectors.md and SQL's WITH options are generated from the specs,
// so a field the decoder reads and the spec leaves out (or the other way
// round) would be undocumented or refused.
func TestConnectorSpecsListWhatTheDecoderReads(t *testing.T) {
	src := `job: j
kafka: {brokers: [b:9092]}
source: {topics: [in]}
sink:
  topic: out
  postgres: {dsn: x, table: t, columns: {a: record.key}}
  mysql: {dsn: x, table: t, columns: {a: record.key}}
  redis: {url: x, command: set, key: record.key, value: record.value}
checkpointing: {interval: 1s}
`
	root, err := parseYAML("j.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	d := &decoder{file: "j.yaml", env: func(string) (string, bool) { return "", false }, lines: map[string]int{}, known: map[string][]string{}}
	d.decodeRoot(root, &JobFile{Path: "j.yaml"})
	sinkNames := connector.Names()
	seen := 0
	for _, s := range connector.Specs() {
		if strings.HasPrefix(s.Name, "test-") {
			continue // registered by a test; TestOutsideSpecDecodesFromYAMLAndOptions reads it
		}
		for _, side := range []*connector.Side{s.Source, s.Sink} {
			if side == nil {
				continue
			}
			seen++
			var got []string
			for _, k := range d.known[side.Section] {
				if side.Section == "sink" && slices.Contains(sinkNames, k) {
					continue // the sections of the other sinks
				}
				got = append(got, k)
			}
			sort.Strings(got)
			if want := side.FieldNames(); !slices.Equal(got, want) {
				t.Errorf("%s: the decoder reads %q, connector %q's spec lists %q", side.Section, got, s.Name, want)
			}
		}
	}
	if seen < 5 {
		t.Errorf("checked %d connector sides, want at least 5 (kafka source and sink, postgres, mysql, redis)", seen)
	}
}

// The commit point is the sink first in the connectors' CommitRank order,
// as the switch it replaced chose: Kafka, then Redis, then PostgreSQL, then
// MySQL (docs/design.md, "Database sinks").
func TestCommitPointFollowsTheConnectorRanks(t *testing.T) {
	conf := func(names ...string) map[string]*connector.Config {
		m := map[string]*connector.Config{}
		for _, n := range names {
			m[n] = connector.NewConfig("sink."+n, 0)
		}
		return m
	}
	for _, tc := range []struct {
		sink SinkConfig
		want string
	}{
		{SinkConfig{Topic: "t", Connectors: conf("postgres", "mysql", "redis")}, SinkKafka},
		{SinkConfig{Connectors: conf("postgres", "mysql", "redis")}, "redis"},
		{SinkConfig{Connectors: conf("postgres", "mysql")}, "postgres"},
		{SinkConfig{Connectors: conf("mysql")}, "mysql"},
	} {
		tc.sink.Delivery = DeliveryExactlyOnce
		if got := tc.sink.CommitPoint(); got != tc.want {
			t.Errorf("%v: commit point %q, want %q", tc.sink.Kinds(), got, tc.want)
		}
		tc.sink.Delivery = DeliveryAtLeastOnce
		if got := tc.sink.CommitPoint(); got != "" {
			t.Errorf("%v at-least-once: commit point %q, want none", tc.sink.Kinds(), got)
		}
	}
}

// The sinks keep the order and the uids they had before connectors were
// registered: checkpoints know the uids (SinkConfig.UID).
func TestSinkUIDsAreTodays(t *testing.T) {
	conf := func(names ...string) map[string]*connector.Config {
		m := map[string]*connector.Config{}
		for _, n := range names {
			m[n] = connector.NewConfig("sink."+n, 0)
		}
		return m
	}
	for _, tc := range []struct {
		sink SinkConfig
		want map[string]string
	}{
		{SinkConfig{Topic: "t", Delivery: DeliveryExactlyOnce, Connectors: conf("postgres", "mysql")},
			map[string]string{"kafka": "sink", "postgres": "sink-postgres", "mysql": "sink-mysql"}},
		{SinkConfig{Delivery: DeliveryExactlyOnce, Connectors: conf("postgres", "redis")},
			map[string]string{"redis": "sink", "postgres": "sink-postgres"}},
		{SinkConfig{Delivery: DeliveryAtLeastOnce, Connectors: conf("redis", "mysql", "postgres")},
			map[string]string{"postgres": "sink", "mysql": "sink-mysql", "redis": "sink-redis"}},
		{SinkConfig{Delivery: DeliveryAtLeastOnce, Topic: "t", Connectors: conf("redis")},
			map[string]string{"kafka": "sink", "redis": "sink-redis"}},
	} {
		for kind, want := range tc.want {
			if got := tc.sink.UID(kind); got != want {
				t.Errorf("%v %s: uid of %s %q, want %q", tc.sink.Kinds(), tc.sink.Delivery, kind, got, want)
			}
		}
	}
}

// epochFilesShape has the shape of the spec examples/enrich registers from
// outside onceflow's module (sink.go there: a required path, two-phase, no
// commit point). That module cannot link this test (it would need the
// database drivers in its go.sum), so the shape is declared here.
var epochFilesShape = connector.Spec{
	Name:    "test-epoch-files",
	Summary: "Writes each checkpoint's records to a file (the shape of examples/enrich's sink).",
	Sink: &connector.Side{
		Section: "sink.test-epoch-files",
		Fields:  []connector.Field{{Name: "dir", Type: "path", Required: true, Doc: "The directory holding pending/ and out/."}},
	},
	Deliveries: []connector.Delivery{connector.ExactlyOnce, connector.TwoPhase},
}

// noHookSpec declares a section and no build hook.
var noHookSpec = connector.Spec{
	Name:       "test-no-hook",
	Summary:    "Declares a sink section and registers no build hook.",
	Sink:       &connector.Side{Section: "sink.test-no-hook"},
	Deliveries: []connector.Delivery{connector.ExactlyOnce, connector.TwoPhase},
}

func init() {
	connector.Register(epochFilesShape)
	// The hook is never called here: the job files are only read.
	build.Register("test-epoch-files", func(build.Context[kafka.Record]) (build.Sink[kafka.Record], error) {
		return build.Sink[kafka.Record]{}, errors.New("not built in this test")
	})
	connector.Register(noHookSpec)
}

// A section whose connector registers no build hook is refused when the
// file is read, not when the job starts.
func TestSinkWithoutBuildHookIsRefused(t *testing.T) {
	src := "job: j\nkafka: {brokers: [b:9092]}\nsource: {topics: [in]}\nsink:\n  test-no-hook: {}\ncheckpointing: {interval: 1s}\n"
	_, err := ParseJobFile("j.yaml", []byte(src), nil)
	want := `j.yaml:5: sink.test-no-hook: connector "test-no-hook" declares this section but registers no sink for job files: register its build hook next to its spec, build.Register("test-no-hook", …) for kafka.Record`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want %s", err, want)
	}
}

// A spec registered the way examples/enrich registers its own is read from
// a job file's section, and from SQL-style options, by the same decoder
// as onceflow's connectors: values with their lines, did-you-mean for a
// misspelt key.
func TestOutsideSpecDecodesFromYAMLAndOptions(t *testing.T) {
	const job = `job: enrich
kafka: {brokers: [b:9092]}
source: {topics: [in]}
sink:
  test-epoch-files:
    %s: /var/lib/enrich
checkpointing: {interval: 1s}
`
	jf, err := ParseJobFile("j.yaml", []byte(strings.Replace(job, "%s", "dir", 1)), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := jf.Sink.Connectors["test-epoch-files"]
	if c == nil || c.String("dir") != "/var/lib/enrich" || c.LineOf("dir") != 6 {
		t.Fatalf("sink.test-epoch-files decoded as %+v, want dir /var/lib/enrich on line 6", c)
	}
	if got := jf.Sink.Role("test-epoch-files"); got != connector.TwoPhase {
		t.Errorf("role %q, want two-phase: it is not a commit point, the checkpoint manifest is", got)
	}
	if got := jf.Sink.UID("test-epoch-files"); got != "sink" {
		t.Errorf("uid %q, want sink", got)
	}

	_, err = ParseJobFile("j.yaml", []byte(strings.Replace(job, "%s", "dirr", 1)), nil)
	if want := `j.yaml:6: unknown field "dirr" in sink.test-epoch-files (did you mean "dir"?)`; err == nil || err.Error() != want {
		t.Errorf("misspelt: error %v, want %s", err, want)
	}

	side := epochFilesShape.Sink
	sc, err := side.DecodeStrings(side.Section, map[string]string{"dir": "/var/lib/enrich"}, nil)
	if err != nil || sc.String("dir") != c.String("dir") {
		t.Errorf("from options: dir %q, error %v; want %q", sc.String("dir"), err, c.String("dir"))
	}
	_, err = side.DecodeStrings(side.Section, map[string]string{"dirr": "/x"}, nil)
	for _, want := range []string{`sink.test-epoch-files: unknown option "dirr" (did you mean "dir"?)`, `sink.test-epoch-files.dir is missing`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("misspelt option: error %v, want %s", err, want)
		}
	}
}
