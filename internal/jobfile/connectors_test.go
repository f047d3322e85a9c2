package jobfile

import (
	"slices"
	"sort"
	"testing"

	"github.com/onceflow/onceflow/connector"
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
