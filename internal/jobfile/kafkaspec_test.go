package jobfile

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/connector/kafka"
)

// sqlSource decodes a SQL table's WITH options by the Kafka source's spec
// and checks them, as the SQL planner does.
func sqlSource(t *testing.T, opts map[string]string) (SourceConfig, error) {
	t.Helper()
	side := kafka.Spec.Source
	c, err := side.DecodeStrings("source", opts, nil)
	if err != nil {
		return SourceConfig{}, err
	}
	if err := side.Validate(c, connector.Check{}); err != nil {
		return SourceConfig{}, err
	}
	s, err := SourceFromConfig(c)
	s.ApplyDefaults("j")
	return s, err
}

// A SQL table's WITH options in Flink's names decode, by the Kafka spec,
// to the source and sink a job file's source: and sink: say.
func TestKafkaFlinkOptionsDecodeAsTheJobFile(t *testing.T) {
	const job = `job: j
kafka: {brokers: [k1:9092, k2:9092]}
source:
  topics: [orders]
  group: g
  startup: {mode: specific-offsets, offsets: {orders: {0: 42, 1: 300}}, reset: latest}
  discovery-interval: 0
  isolation: read_uncommitted
sink: {topic: out, delivery: at-least-once}
checkpointing: {interval: 1s}
`
	jf, err := ParseJobFile("j.yaml", []byte(job), nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := map[string]string{
		"topic":                                   "orders",
		"properties.bootstrap.servers":            "k1:9092,k2:9092",
		"properties.group.id":                     "g",
		"scan.startup.mode":                       "specific-offsets",
		"scan.startup.specific-offsets":           "partition:0,offset:42;partition:1,offset:300",
		"properties.auto.offset.reset":            "latest",
		"scan.topic-partition-discovery.interval": "0",
		"properties.isolation.level":              "read_uncommitted",
		"format":                                  "json",
	}
	src, err := sqlSource(t, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(src, jf.Source) {
		t.Errorf("from SQL options\n%+v\nfrom the job file\n%+v", src, jf.Source)
	}
	c, _ := kafka.Spec.Source.DecodeStrings("source", opts, nil)
	if got := strings.Join(c.List("brokers"), ","); got != strings.Join(jf.Kafka.Brokers, ",") || c.String("format") != "json" {
		t.Errorf("brokers %q, format %q", got, c.String("format"))
	}

	sc, err := kafka.Spec.Sink.DecodeStrings("sink", map[string]string{
		"topic": "out", "sink.delivery-guarantee": "AT_LEAST_ONCE", "sink.transactional-id-prefix": "x", "value.format": "raw",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := KafkaSinkFromConfig(sc), (SinkConfig{Topic: jf.Sink.Topic, Delivery: jf.Sink.Delivery}); !reflect.DeepEqual(got, want) {
		t.Errorf("sink from SQL options %+v, want %+v", got, want)
	}
}

// Flink's startup modes, timestamps in milliseconds, topic lists with ';'.
func TestKafkaFlinkStartupOptions(t *testing.T) {
	for _, tc := range []struct {
		opts map[string]string
		want Startup
	}{
		{map[string]string{"scan.startup.mode": "earliest-offset"}, Startup{Mode: StartEarliest}},
		{map[string]string{"scan.startup.mode": "latest-offset"}, Startup{Mode: StartLatest}},
		{map[string]string{"scan.startup.mode": "group-offsets"}, Startup{Mode: StartGroupOffsets, Reset: "earliest"}},
		{map[string]string{"scan.startup.mode": "timestamp", "scan.startup.timestamp-millis": "1714521600000"},
			Startup{Mode: StartTimestamp, Timestamp: time.UnixMilli(1714521600000)}},
		{map[string]string{"startup": "latest"}, Startup{Mode: StartLatest}},
		{nil, Startup{Mode: StartEarliest}},
	} {
		opts := map[string]string{"topic": "a;b"}
		for k, v := range tc.opts {
			opts[k] = v
		}
		src, err := sqlSource(t, opts)
		if err != nil {
			t.Errorf("%v: %v", tc.opts, err)
			continue
		}
		if !reflect.DeepEqual(src.Startup, tc.want) || strings.Join(src.Topics, "|") != "a|b" {
			t.Errorf("%v: startup %+v, topics %q; want %+v, a|b", tc.opts, src.Startup, src.Topics, tc.want)
		}
	}
	for _, tc := range []struct {
		opts map[string]string
		want string
	}{
		{map[string]string{"topic": "a;b", "scan.startup.mode": "specific-offsets", "scan.startup.specific-offsets": "partition:0,offset:1"},
			"specific-offsets names partitions of one topic, and the section reads 2"},
		{map[string]string{"topic": "a", "scan.startup.mode": "specific-offsets", "scan.startup.specific-offsets": "partition:0;offset:1"},
			`source.specific-offsets: "partition:0" is not partition:P,offset:O`},
		{map[string]string{"topic": "a", "scan.startup.mode": "specific-offsets"}, "source.startup.offsets is missing"},
		{map[string]string{"topic": "a", "scan.startup.mode": "timestamp"}, "source.startup.timestamp is missing"},
		{map[string]string{"topic": "a", "scan.startup.mode": "latest-offset", "scan.startup.specific-offsets": "partition:0,offset:1"},
			"source.startup.offsets only applies to mode specific-offsets, and the mode is latest"},
		{map[string]string{"topic": "a", "scan.startup.mode": "earliest", "properties.auto.offset.reset": "none"},
			"source.startup.reset only applies to modes group-offsets and specific-offsets"},
		{map[string]string{"topic": "a", "scan.startup.mode": "newest"}, `source.scan.startup.mode: "newest" is not one of earliest, latest`},
	} {
		if _, err := sqlSource(t, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %s", tc.opts, err, tc.want)
		}
	}
}

// A job file may write Flink's spellings of the startup modes and a
// timestamp in milliseconds too.
func TestKafkaFlinkSpellingsInAJobFile(t *testing.T) {
	const job = "job: j\nkafka: {brokers: [b:9092]}\nsources:\n" +
		"  a: {topics: [a], startup: latest-offset}\n" +
		"  b: {topics: [b], startup: {mode: timestamp, timestamp: 1714521600000}}\n" +
		"streams: {s: {from: [a, b], steps: [{union: {}}]}}\nsinks: {out: {from: s, topic: out}}\ncheckpointing: {interval: 1s}\n"
	jf, err := ParseJobFile("j.yaml", []byte(job), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := jf.Graph.Sources[0].Source.Startup.Mode; got != StartLatest {
		t.Errorf("latest-offset: mode %q", got)
	}
	if got := jf.Graph.Sources[1].Source.Startup.Timestamp; !got.Equal(time.UnixMilli(1714521600000)) {
		t.Errorf("timestamp in milliseconds: %v", got)
	}
}
