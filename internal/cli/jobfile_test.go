package cli

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/checkpoint"
	"github.com/onceflow/onceflow/internal/restart"
)

// ordersYAML is the job file from the design brief; it must parse unchanged.
const ordersYAML = `job: orders-count
kafka:
  brokers: [127.0.0.1:9092]
source:
  topics: [orders]
  group: orders-count
  startup: earliest
pipeline:
  - dedupe: { key: record.key, ttl: 24h }
  - count:  { key: record.key }
sink:
  topic: order-counts
  delivery: exactly-once
checkpointing:
  interval: 1s
  mode: exactly-once
  timeout: 1m
state:
  dir: ./onceflow-data
restart:
  strategy: exponential-delay
`

func TestParseOrdersExample(t *testing.T) {
	jf, err := ParseJobFile("orders.yaml", []byte(ordersYAML), nil)
	if err != nil {
		t.Fatal(err)
	}
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	want := &JobFile{
		Path:  "orders.yaml",
		Job:   "orders-count",
		Kafka: KafkaConfig{Brokers: []string{"127.0.0.1:9092"}, ClientID: "onceflow"},
		Source: SourceConfig{
			Topics:           []string{"orders"},
			Group:            "orders-count",
			Startup:          Startup{Mode: StartEarliest},
			Isolation:        IsolationReadCommitted,
			OnTopicRecreated: RecreatedEarliest,
		},
		Pipeline: []Step{
			{Op: OpDedupe, Key: KeyRecordKey, TTL: 24 * time.Hour, UID: "dedupe:record.key", Line: 9},
			{Op: OpCount, Key: KeyRecordKey, UID: "count:record.key", Line: 10},
		},
		Sink:          SinkConfig{Topic: "order-counts", Delivery: DeliveryExactlyOnce, MaxHeldBytes: 64 << 20},
		Checkpointing: checkpoint.Config{Interval: time.Second, Mode: checkpoint.ExactlyOnce, Timeout: time.Minute},
		// Relative to the file's directory, here the working directory.
		State:      StateConfig{Dir: filepath.Join(cwd, "onceflow-data")},
		Restart:    restart.Config{Strategy: restart.ExponentialDelay},
		RestartSet: true,
	}
	if !reflect.DeepEqual(jf, want) {
		t.Errorf("parsed\n%+v\nwant\n%+v", jf, want)
	}
}

// minimalYAML has only what is required; line numbers in the tests below
// count from it.
const minimalYAML = `job: j
kafka:
  brokers: [b:9092]
source:
  topics: [in]
sink:
  topic: out
checkpointing:
  interval: 10s
`

func TestParseDefaults(t *testing.T) {
	jf, err := ParseJobFile("j.yaml", []byte(minimalYAML), nil)
	if err != nil {
		t.Fatal(err)
	}
	if jf.Source.Group != "onceflow-j" {
		t.Errorf("group = %q, want onceflow-<job>", jf.Source.Group)
	}
	if jf.Source.Startup.Mode != StartEarliest || jf.Source.Isolation != IsolationReadCommitted {
		t.Errorf("startup/isolation = %v/%v, want earliest/read_committed", jf.Source.Startup.Mode, jf.Source.Isolation)
	}
	if jf.Sink.Delivery != DeliveryExactlyOnce {
		t.Errorf("delivery = %q, want exactly-once", jf.Sink.Delivery)
	}
	if abs, _ := filepath.Abs(DefaultStateDir); jf.State.Dir != abs {
		t.Errorf("state dir = %q, want %q", jf.State.Dir, abs)
	}
	if jf.Source.OnTopicRecreated != RecreatedEarliest || jf.Sink.MaxHeldBytes != 64<<20 {
		t.Errorf("on-topic-recreated/max-held-bytes = %q/%d, want earliest/64MiB", jf.Source.OnTopicRecreated, jf.Sink.MaxHeldBytes)
	}
	if jf.RestartSet || len(jf.Pipeline) != 0 || jf.Kafka.ClientID != "onceflow" {
		t.Errorf("unexpected defaults: %+v", jf)
	}
}

func TestParseAllFields(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"ca.pem", "cert.pem", "key.pem"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	src := `job: full
kafka:
  brokers: "a:9092, b:9093"
  client-id: my-client
  tls:
    ca-file: DIR/ca.pem
    cert-file: DIR/cert.pem
    key-file: DIR/key.pem
    insecure-skip-verify: false
  sasl:
    mechanism: scram-sha-512
    username: alice
    password: ${PW}
source:
  topic-regex: "orders-.*"
  group: g
  startup:
    mode: specific-offsets
    offsets: {orders-eu: {0: 42, 3: 7}}
    reset: none
  discovery-interval: 30s
  isolation: read_uncommitted
  bounded: true
  parallelism: 4
  on-topic-recreated: fail
pipeline:
  - count: {uid: counter}
sink:
  topic: out
  delivery: at-least-once
checkpointing:
  interval: 10s
  mode: at-least-once
  timeout: 2m
  min-pause: 500ms
  max-concurrent: 2
  tolerable-failures: -1
  retained: 3
state:
  dir: /var/lib/onceflow
  max-parallelism: 256
restart:
  strategy: fixed-delay
  attempts: 5
  delay: 0s
`
	src = strings.ReplaceAll(src, "DIR", dir)
	env := func(k string) (string, bool) {
		if k == "PW" {
			return "secret", true
		}
		return "", false
	}
	jf, err := ParseJobFile("full.yaml", []byte(src), env)
	if err != nil {
		t.Fatal(err)
	}
	wantKafka := KafkaConfig{
		Brokers:  []string{"a:9092", "b:9093"},
		ClientID: "my-client",
		TLS:      TLSConfig{Enabled: true, CAFile: dir + "/ca.pem", CertFile: dir + "/cert.pem", KeyFile: dir + "/key.pem"},
		SASL:     SASLConfig{Mechanism: "SCRAM-SHA-512", Username: "alice", Password: "secret"},
	}
	if !reflect.DeepEqual(jf.Kafka, wantKafka) {
		t.Errorf("kafka = %+v, want %+v", jf.Kafka, wantKafka)
	}
	wantSource := SourceConfig{
		TopicRegex: "orders-.*",
		Group:      "g",
		Startup: Startup{Mode: StartSpecificOffsets, Reset: "none",
			Offsets: map[string]map[int32]int64{"orders-eu": {0: 42, 3: 7}}},
		DiscoveryInterval: 30 * time.Second,
		Isolation:         IsolationReadUncommitted,
		Bounded:           true,
		Parallelism:       4,
		OnTopicRecreated:  RecreatedFail,
	}
	if !reflect.DeepEqual(jf.Source, wantSource) {
		t.Errorf("source = %+v, want %+v", jf.Source, wantSource)
	}
	if want := []Step{{Op: OpCount, Key: KeyRecordKey, UID: "counter", UIDSet: true, Line: 27}}; !reflect.DeepEqual(jf.Pipeline, want) {
		t.Errorf("pipeline = %+v, want %+v", jf.Pipeline, want)
	}
	wantCP := checkpoint.Config{Interval: 10 * time.Second, Mode: checkpoint.AtLeastOnce, Timeout: 2 * time.Minute,
		MinPause: 500 * time.Millisecond, MaxConcurrent: 2, TolerableFailures: -1, NumRetained: 3}
	if jf.Checkpointing != wantCP {
		t.Errorf("checkpointing = %+v, want %+v", jf.Checkpointing, wantCP)
	}
	if want := (StateConfig{Dir: "/var/lib/onceflow", MaxParallelism: 256}); jf.State != want {
		t.Errorf("state = %+v, want %+v", jf.State, want)
	}
	if want := (restart.Config{Strategy: restart.FixedDelay, Attempts: 5, NoDelay: true}); jf.Restart != want {
		t.Errorf("restart = %+v, want %+v (an explicit 0s delay is NoDelay)", jf.Restart, want)
	}
}

func TestParseStartupForms(t *testing.T) {
	ts := time.Date(2024, 5, 1, 2, 0, 0, 0, time.FixedZone("", 2*3600))
	for _, tc := range []struct {
		startup string
		want    Startup
	}{
		{`latest`, Startup{Mode: StartLatest}},
		{`group-offsets`, Startup{Mode: StartGroupOffsets, Reset: "earliest"}},
		{`{mode: group-offsets, reset: latest}`, Startup{Mode: StartGroupOffsets, Reset: "latest"}},
		{`{mode: timestamp, timestamp: "2024-05-01T02:00:00+02:00"}`, Startup{Mode: StartTimestamp, Timestamp: ts}},
	} {
		t.Run(tc.startup, func(t *testing.T) {
			src := minimalYAML + "  # \n"
			src = strings.Replace(src, "  topics: [in]\n", "  topics: [in]\n  startup: "+tc.startup+"\n", 1)
			jf, err := ParseJobFile("j.yaml", []byte(src), nil)
			if err != nil {
				t.Fatal(err)
			}
			got := jf.Source.Startup
			if got.Mode != tc.want.Mode || got.Reset != tc.want.Reset || !got.Timestamp.Equal(tc.want.Timestamp) {
				t.Errorf("startup = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	// Each case replaces one line of minimalYAML (or appends lines) and
	// expects the exact messages, one per line.
	for _, tc := range []struct {
		name     string
		old, new string // replace old with new in minimalYAML; old "" appends
		want     string
	}{
		{
			name: "typo in checkpointing",
			old:  "  interval: 10s\n", new: "  intervall: 10s\n",
			want: `j.yaml:9: unknown field "intervall" in checkpointing (did you mean "interval"?)`,
		},
		{
			name: "exactly-once without checkpoints",
			old:  "  interval: 10s\n", new: "  timeout: 10s\n",
			want: `j.yaml:8: sink.delivery exactly-once commits output at checkpoints, but checkpointing.interval is not set: set it, such as checkpointing: {interval: 10s}`,
		},
		{
			name: "unknown top-level field without a near name",
			new:  "frobnicate: 1\n",
			want: `j.yaml:10: unknown field "frobnicate"; known fields: checkpointing, errors, job, kafka, pipeline, restart, sink, source, state`,
		},
		{
			name: "top-level typo",
			old:  "source:\n", new: "sorce:\n",
			want: `j.yaml:4: unknown field "sorce" (did you mean "source"?)`,
		},
		{
			name: "missing job name",
			old:  "job: j\n", new: "",
			want: `j.yaml: job is missing: name the job, such as job: orders-count (it scopes checkpoints and transactional ids, so keep it stable)`,
		},
		{
			name: "empty job name",
			old:  "job: j\n", new: "job:\n",
			want: `j.yaml:1: job is empty: give it a value or remove it`,
		},
		{
			name: "job name with a slash",
			old:  "job: j\n", new: "job: a/b\n",
			want: `j.yaml:1: job "a/b" may only use letters, digits, '.', '_' and '-' (it becomes part of directory names and transactional ids)`,
		},
		{
			name: "no brokers",
			old:  "  brokers: [b:9092]\n", new: "  brokers: []\n",
			want: `j.yaml:3: kafka.brokers is missing: list the bootstrap brokers, such as brokers: [127.0.0.1:9092]`,
		},
		{
			name: "broker without port",
			old:  "  brokers: [b:9092]\n", new: "  brokers: [localhost]\n",
			want: `j.yaml:3: kafka.brokers[0] "localhost" is not host:port, such as 127.0.0.1:9092`,
		},
		{
			name: "no topics",
			old:  "  topics: [in]\n", new: "  group: g\n",
			want: `j.yaml:4: source.topics is missing: list the topics to read, such as topics: [orders], or set source.topic-regex`,
		},
		{
			name: "topics and regex",
			old:  "  topics: [in]\n", new: "  topics: [in]\n  topic-regex: x.*\n",
			want: `j.yaml:6: source.topics and source.topic-regex are both set: use one`,
		},
		{
			name: "bad regex",
			old:  "  topics: [in]\n", new: "  topic-regex: \"(\"\n",
			want: `j.yaml:5: source.topic-regex "(" is not a regular expression: error parsing regexp: missing closing ): ` + "`(`",
		},
		{
			name: "bad delivery",
			old:  "  topic: out\n", new: "  topic: out\n  delivery: exactly_once!\n",
			want: `j.yaml:8: sink.delivery "exactly_once!" is not one of none, at-least-once, exactly-once (did you mean "exactly-once"?)`,
		},
		{
			name: "flink spelling of delivery is accepted, missing sink topic is not",
			old:  "  topic: out\n", new: "  delivery: EXACTLY_ONCE\n",
			want: `j.yaml:6: sink.topic is missing: name the topic to write to`,
		},
		{
			name: "sink writes a source topic",
			old:  "  topic: out\n", new: "  topic: in\n",
			want: `j.yaml:7: sink.topic "in" is also a source topic: the job would read its own output`,
		},
		{
			name: "negative duration",
			old:  "  interval: 10s\n", new: "  interval: 10s\n  timeout: -5s\n",
			want: `j.yaml:10: checkpointing.timeout must not be negative (got -5s)`,
		},
		{
			name: "duration without unit",
			old:  "  interval: 10s\n", new: "  interval: 10\n",
			want: `j.yaml:9: checkpointing.interval: "10" is not a duration: write a number with a unit, such as 500ms, 10s, 5m, 24h or 7d`,
		},
		{
			name: "timeout shorter than interval",
			old:  "  interval: 10s\n", new: "  interval: 10s\n  timeout: 5s\n",
			want: `j.yaml:8: checkpoint timeout 5s is shorter than the interval 10s: checkpoints slower than 5s are abandoned although the next one would not be triggered before 10s anyway (the two values are easily swapped); set timeout >= interval`,
		},
		{
			name: "at-least-once checkpoints with exactly-once sink",
			old:  "  interval: 10s\n", new: "  interval: 10s\n  mode: at-least-once\n",
			want: `j.yaml:10: sink.delivery exactly-once needs checkpointing.mode exactly-once: at-least-once checkpoints can replay records into the output`,
		},
		{
			name: "unknown checkpoint mode",
			old:  "  interval: 10s\n", new: "  interval: 10s\n  mode: twice\n",
			want: `j.yaml:10: checkpointing.mode "twice" is not one of exactly-once, at-least-once`,
		},
		{
			name: "not a number",
			old:  "  interval: 10s\n", new: "  interval: 10s\n  retained: many\n",
			want: `j.yaml:10: checkpointing.retained must be a whole number, not "many"`,
		},
		{
			name: "unknown operator",
			new:  "pipeline:\n  - dedup: {ttl: 1h}\n  - window: {size: 1m}\n",
			want: `j.yaml:11: pipeline[0]: unknown operator "dedup" (did you mean "dedupe"?); supported operators: count, dedupe, extract-key` + "\n" +
				`j.yaml:12: pipeline[1]: unknown operator "window"; supported operators: count, dedupe, extract-key`,
		},
		{
			name: "unsupported key expression",
			new:  "pipeline:\n  - count: {key: record.value}\n",
			want: `j.yaml:11: pipeline[0].count.key: unsupported key expression "record.value": only record.key is supported for now`,
		},
		{
			name: "dedupe without ttl",
			new:  "pipeline:\n  - dedupe: {key: record.key}\n",
			want: `j.yaml:11: pipeline[0].dedupe.ttl is missing: set how long a key is remembered, such as ttl: 24h (dedupe keeps one entry per distinct key until it expires)`,
		},
		{
			name: "dedupe zero ttl",
			new:  "pipeline:\n  - dedupe: {ttl: 0s}\n",
			want: `j.yaml:11: pipeline[0].dedupe.ttl must be positive: a key remembered for 0s drops nothing`,
		},
		{
			name: "unknown operator parameter",
			new:  "pipeline:\n  - dedupe:\n      ttl: 1h\n      tll: 2h\n",
			want: `j.yaml:13: unknown field "tll" in pipeline[0].dedupe (did you mean "ttl"?)`,
		},
		{
			name: "duplicate uid",
			new:  "pipeline:\n  - count: {uid: c}\n  - count: {uid: c}\n",
			want: `j.yaml:12: pipeline operator uid "c" is used twice (first on line 11): uids must be unique`,
		},
		{
			name: "explicit uid equal to another step's default id",
			new:  "pipeline:\n  - count: {}\n  - count: {uid: \"count:record.key\"}\n",
			want: `j.yaml:12: pipeline operator uid "count:record.key" is used twice (first on line 11): uids must be unique; a step without uid: has the id of its operator and key, so give one of the two a uid: of its own`,
		},
		{
			name: "empty uid",
			new:  "pipeline:\n  - count: {uid: \"\"}\n",
			want: `j.yaml:11: pipeline[0].count.uid is empty: give it a value or remove it for the default id`,
		},
		{
			name: "uid of the job's own sink",
			new:  "pipeline:\n  - count: {uid: sink}\n",
			want: `j.yaml:11: pipeline operator uid "sink" is the uid of the Kafka sink: choose another`,
		},
		{
			name: "uids that make the same state file",
			new:  "pipeline:\n  - count: {uid: \"a:b\"}\n  - dedupe: {ttl: 1h, uid: a_b}\n",
			want: `j.yaml:12: pipeline operator uid "a_b" and "a:b" (line 11) differ only in characters the engine replaces with '_' in state file names, so their state would be written to the same file: make them differ in letters, digits, '.', '_' or '-'`,
		},
		{
			name: "max-held-bytes with a decimal unit",
			old:  "  topic: out\n", new: "  topic: out\n  max-held-bytes: 64MB\n",
			want: `j.yaml:8: sink.max-held-bytes: "64MB" is ambiguous (decimal or binary units?): write 64MiB (1 MiB = 1048576 bytes) or the number of bytes`,
		},
		{
			name: "max-held-bytes not a size",
			old:  "  topic: out\n", new: "  topic: out\n  max-held-bytes: lots\n",
			want: `j.yaml:8: sink.max-held-bytes: "lots" is not a size: write a number of bytes, or a whole number with a unit (B, KiB, MiB, GiB, TiB), such as 64MiB`,
		},
		{
			name: "max-held-bytes zero",
			old:  "  topic: out\n", new: "  topic: out\n  max-held-bytes: 0\n",
			want: `j.yaml:8: sink.max-held-bytes must be positive: it bounds the memory of records held while a checkpoint commits; remove it for the default 64MiB`,
		},
		{
			name: "max-held-bytes without exactly-once",
			old:  "  topic: out\n", new: "  topic: out\n  delivery: at-least-once\n  max-held-bytes: 1GiB\n",
			want: `j.yaml:9: sink.max-held-bytes only applies to delivery exactly-once (records are held while a checkpoint's transaction commits), and sink.delivery is at-least-once: remove it`,
		},
		{
			name: "max-held-bytes typo",
			old:  "  topic: out\n", new: "  topic: out\n  max-held-byte: 1GiB\n",
			want: `j.yaml:8: unknown field "max-held-byte" in sink (did you mean "max-held-bytes"?)`,
		},
		{
			name: "on-topic-recreated typo",
			old:  "  topics: [in]\n", new: "  topics: [in]\n  on-topic-recreated: earlist\n",
			want: `j.yaml:6: source.on-topic-recreated "earlist" is not one of earliest, fail (did you mean "earliest"?)`,
		},
		{
			name: "on-topic-recreated unknown",
			old:  "  topics: [in]\n", new: "  topics: [in]\n  on-topic-recreated: latest\n",
			want: `j.yaml:6: source.on-topic-recreated "latest" is not one of earliest, fail`,
		},
		{
			name: "pipeline item with two operators",
			new:  "pipeline:\n  - {count: {}, dedupe: {ttl: 1h}}\n",
			want: `j.yaml:11: pipeline[0] must name one operator, such as "- count: {key: record.key}"; supported operators: count, dedupe, extract-key`,
		},
		{
			name: "repeated field",
			old:  "job: j\n", new: "job: j\njob: k\n",
			want: `j.yaml:2: field "job" is repeated (first on line 1): keep one`,
		},
		{
			name: "startup timestamp as a word",
			old:  "  topics: [in]\n", new: "  topics: [in]\n  startup: timestamp\n",
			want: `j.yaml:6: source.startup timestamp needs the time to start from: write startup: {mode: timestamp, timestamp: 2024-05-01T00:00:00Z}`,
		},
		{
			name: "startup bad timestamp",
			old:  "  topics: [in]\n", new: "  topics: [in]\n  startup: {mode: timestamp, timestamp: yesterday}\n",
			want: `j.yaml:6: source.startup.timestamp "yesterday" is not an RFC 3339 time such as 2024-05-01T00:00:00Z or 2024-05-01T02:00:00+02:00`,
		},
		{
			name: "startup reset with earliest",
			old:  "  topics: [in]\n", new: "  topics: [in]\n  startup:\n    mode: earliest\n    reset: latest\n",
			want: `j.yaml:8: source.startup.reset only applies to modes group-offsets and specific-offsets, and the mode is earliest`,
		},
		{
			name: "startup negative offset",
			old:  "  topics: [in]\n", new: "  topics: [in]\n  startup: {mode: specific-offsets, offsets: {in: {0: -3}}}\n",
			want: `j.yaml:6: source.startup.offsets.in.0: offset "-3" is not an offset (0 or more)`,
		},
		{
			name: "unknown startup mode",
			old:  "  topics: [in]\n", new: "  topics: [in]\n  startup: earlist\n",
			want: `j.yaml:6: source.startup "earlist" is not one of earliest, latest, timestamp, specific-offsets, group-offsets (did you mean "earliest"?)`,
		},
		{
			name: "bad isolation",
			old:  "  topics: [in]\n", new: "  topics: [in]\n  isolation: serializable\n",
			want: `j.yaml:6: source.isolation "serializable" is not one of read_committed, read_uncommitted`,
		},
		{
			name: "zero parallelism",
			old:  "  topics: [in]\n", new: "  topics: [in]\n  parallelism: 0\n",
			want: `j.yaml:6: source.parallelism 0 is below 1: use 1 or more, or remove it for one subtask per partition`,
		},
		{
			name: "restart errors name their keys and lines",
			new:  "restart:\n  strategy: exponential-delay\n  multiplier: 0.5\n  max-backoff: 1s\n  initial-backoff: 5s\n",
			want: `j.yaml:12: restart.multiplier must be at least 1 so the backoff never shrinks (got 0.5); 1 keeps it constant` + "\n" +
				`j.yaml:13: restart.max-backoff (1s) is shorter than restart.initial-backoff (5s); raise the maximum or lower the initial backoff`,
		},
		{
			name: "unknown restart strategy",
			new:  "restart:\n  strategy: sometimes\n",
			want: `j.yaml:11: restart.strategy "sometimes" is not a restart strategy; use one of none, fixed-delay, failure-rate, exponential-delay`,
		},
		{
			name: "sasl without password",
			old:  "  brokers: [b:9092]\n", new: "  brokers: [b:9092]\n  sasl: {mechanism: PLAIN, username: u}\n",
			want: `j.yaml:4: kafka.sasl.mechanism PLAIN needs both username and password`,
		},
		{
			name: "sasl password from unset variable",
			old:  "  brokers: [b:9092]\n", new: "  brokers: [b:9092]\n  sasl: {mechanism: PLAIN, username: u, password: \"${NOPE}\"}\n",
			want: `j.yaml:4: kafka.sasl.password refers to the environment variable NOPE, which is not set`,
		},
		{
			name: "tls files that do not exist",
			old:  "  brokers: [b:9092]\n", new: "  brokers: [b:9092]\n  tls:\n    cert-file: /nonexistent/c.pem\n",
			want: `j.yaml:4: kafka.tls.cert-file and kafka.tls.key-file go together (mutual TLS): set both or neither` + "\n" +
				`j.yaml:5: kafka.tls.cert-file: stat /nonexistent/c.pem: no such file or directory`,
		},
		{
			name: "tls disabled with files",
			old:  "  brokers: [b:9092]\n", new: "  brokers: [b:9092]\n  tls: {enabled: false, insecure-skip-verify: true}\n",
			want: `j.yaml:4: kafka.tls.enabled is false but other kafka.tls fields are set: remove them, or set enabled: true`,
		},
		{
			name: "section is not a mapping",
			old:  "sink:\n  topic: out\n", new: "sink: out\n",
			want: `j.yaml:6: sink must be a mapping of fields, not the value "out"`,
		},
		{
			name: "invalid yaml",
			old:  "  topics: [in]\n", new: "  topics: [in\n",
			want: `j.yaml:4: invalid YAML: did not find expected ',' or ']'`,
		},
		{
			name: "two documents",
			new:  "---\njob: other\n",
			want: `j.yaml:10: a second YAML document: a job file describes one job; remove the "---" and what follows, or split it into two files`,
		},
		{
			name: "unknown error policy",
			new:  "errors:\n  policy: ignore\n",
			want: `j.yaml:11: errors.policy "ignore" is not one of fail, skip, dead-letter`,
		},
		{
			name: "error policy typo",
			new:  "errors:\n  policy: deadletter\n  dead-letter-topic: dlq\n",
			want: `j.yaml:11: errors.policy "deadletter" is not one of fail, skip, dead-letter (did you mean "dead-letter"?)`,
		},
		{
			name: "dead-letter without a topic",
			new:  "errors:\n  policy: dead-letter\n",
			want: `j.yaml:11: errors.dead-letter-topic is missing: policy dead-letter writes poison records to a topic of their own, such as dead-letter-topic: out-dlq`,
		},
		{
			name: "dead-letter with an empty topic",
			new:  "errors:\n  policy: dead-letter\n  dead-letter-topic:\n",
			want: `j.yaml:12: errors.dead-letter-topic is empty: give it a value or remove it`,
		},
		{
			name: "dead-letter topic with policy skip",
			new:  "errors:\n  policy: skip\n  dead-letter-topic: dlq\n",
			want: `j.yaml:12: errors.dead-letter-topic only applies to policy dead-letter, and errors.policy is skip: set policy: dead-letter, or remove the topic`,
		},
		{
			name: "dead-letter topic without a policy",
			new:  "errors:\n  dead-letter-topic: dlq\n",
			want: `j.yaml:11: errors.dead-letter-topic only applies to policy dead-letter, and errors.policy is not set (default fail): set policy: dead-letter, or remove the topic`,
		},
		{
			name: "dead-letter topic is the source topic",
			new:  "errors: {policy: dead-letter, dead-letter-topic: in}\n",
			want: `j.yaml:10: errors.dead-letter-topic "in" is also a source topic: the job would read its own dead letters`,
		},
		{
			name: "dead-letter topic is the sink topic",
			new:  "errors:\n  policy: dead-letter\n  dead-letter-topic: out\n",
			want: `j.yaml:12: errors.dead-letter-topic "out" is also sink.topic: poison records would be mixed into the output; use a topic of their own`,
		},
		{
			name: "dead-letter topic matched by the source regex",
			old:  "  topics: [in]\nsink:\n", new: "  topic-regex: \"in.*\"\nerrors: {policy: dead-letter, dead-letter-topic: in-dlq}\nsink:\n",
			want: `j.yaml:6: errors.dead-letter-topic "in-dlq" matches source.topic-regex "in.*": the job would read its own dead letters`,
		},
		{
			name: "dead-letter topic with a bad name",
			new:  "errors:\n  policy: dead-letter\n  dead-letter-topic: a/b\n",
			want: `j.yaml:12: errors.dead-letter-topic: topic "a/b" may only use letters, digits, '.', '_' and '-'`,
		},
		{
			name: "errors is not a mapping",
			new:  "errors: skip\n",
			want: `j.yaml:10: errors must be a mapping of fields, not the value "skip"`,
		},
		{
			name: "extract-key without json-field",
			new:  "pipeline:\n  - extract-key:\n",
			want: `j.yaml:11: pipeline[0].extract-key.json-field is missing: name the JSON field whose value becomes the record key, such as json-field: user`,
		},
		{
			name: "extract-key takes no key expression",
			new:  "pipeline:\n  - extract-key: {json-field: user, key: record.key}\n",
			want: `j.yaml:11: unknown field "key" in pipeline[0].extract-key; known fields: json-field, uid`,
		},
		{
			name: "extract-key typo",
			new:  "pipeline:\n  - extract_key: {json-field: user}\n",
			want: `j.yaml:11: pipeline[0]: unknown operator "extract_key" (did you mean "extract-key"?); supported operators: count, dedupe, extract-key`,
		},
		{
			name: "extract-key field is not a value",
			new:  "pipeline:\n  - extract-key: {json-field: [a, b]}\n",
			want: `j.yaml:11: pipeline[0].extract-key.json-field must be a single value, not a list`,
		},
		{
			name: "max parallelism out of range",
			new:  "state: {max-parallelism: 0}\n",
			want: `j.yaml:10: state.max-parallelism 0 is out of range: use 1..32768 (default 128)`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := minimalYAML
			if tc.old == "" {
				src += tc.new
			} else {
				if !strings.Contains(src, tc.old) {
					t.Fatalf("test bug: %q is not in the base file", tc.old)
				}
				src = strings.Replace(src, tc.old, tc.new, 1)
			}
			jf, err := ParseJobFile("j.yaml", []byte(src), nil)
			if err == nil {
				t.Fatalf("parsed without error: %+v\nfile:\n%s", jf, src)
			}
			if got := err.Error(); got != tc.want {
				t.Errorf("error:\n%s\nwant:\n%s\nfile:\n%s", got, tc.want, src)
			}
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Errorf("error %T does not contain a *FileError", err)
			}
		})
	}
}

func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"7d", 7 * 24 * time.Hour, true},
		{"1h30m", 90 * time.Minute, true},
		{"0", 0, true},
		{"d", 0, false},
		{"1.5d", 0, false},
		{"10", 0, false},
		{"999999999d", 0, false},
	} {
		got, err := parseDuration(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    int64
		wantErr string // substring; "" means no error
	}{
		{in: "67108864", want: 64 << 20},
		{in: "64MiB", want: 64 << 20},
		{in: "64mib", want: 64 << 20},
		{in: "512 KiB", want: 512 << 10},
		{in: "1GiB", want: 1 << 30},
		{in: "2TiB", want: 2 << 40},
		{in: "100B", want: 100},
		{in: "0", want: 0},
		{in: "64MB", wantErr: "write 64MiB"},
		{in: "1g", wantErr: "write 1GiB"},
		{in: "1.5GiB", wantErr: "is not a size"},
		{in: "MiB", wantErr: "is not a size"},
		{in: "-1MiB", wantErr: "must not be negative"},
		{in: "9999999TiB", wantErr: "too large"},
		{in: "99999999999999999999", wantErr: "too large"},
	} {
		got, err := parseSize(tc.in)
		switch {
		case tc.wantErr == "" && (err != nil || got != tc.want):
			t.Errorf("parseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("parseSize(%q) = %d, %v; want an error with %q", tc.in, got, err, tc.wantErr)
		}
	}
	for n, want := range map[int64]string{64 << 20: "64MiB", 1536 << 20: "1536MiB", 1 << 30: "1GiB", 100: "100B", 1025: "1025B"} {
		if got := formatSize(n); got != want {
			t.Errorf("formatSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestParseErrorsAndExtractKey(t *testing.T) {
	for _, tc := range []struct {
		name, section string
		want          ErrorsConfig
	}{
		{"no section: fail", "", ErrorsConfig{Policy: flow.FailOnError}},
		{"fail", "errors: {policy: fail}\n", ErrorsConfig{Policy: flow.FailOnError}},
		{"skip", "errors:\n  policy: skip\n", ErrorsConfig{Policy: flow.SkipOnError}},
		{"dead-letter", "errors:\n  policy: dead-letter\n  dead-letter-topic: orders-dlq\n", ErrorsConfig{Policy: flow.DeadLetterOnError, DeadLetterTopic: "orders-dlq"}},
		{"underscore spelling", "errors: {policy: DEAD_LETTER, dead-letter-topic: dlq}\n", ErrorsConfig{Policy: flow.DeadLetterOnError, DeadLetterTopic: "dlq"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := minimalYAML + "pipeline:\n  - extract-key: { json-field: user }\n  - count: {}\n" + tc.section
			jf, err := ParseJobFile("j.yaml", []byte(src), nil)
			if err != nil {
				t.Fatal(err)
			}
			if jf.Errors != tc.want {
				t.Errorf("errors = %+v, want %+v", jf.Errors, tc.want)
			}
			wantSteps := []Step{
				{Op: OpExtractKey, JSONField: "user", UID: "extract-key:user", Line: 11},
				{Op: OpCount, Key: KeyRecordKey, UID: "count:record.key", Line: 12},
			}
			if !reflect.DeepEqual(jf.Pipeline, wantSteps) {
				t.Errorf("pipeline = %+v, want %+v", jf.Pipeline, wantSteps)
			}
		})
	}
}

// The job file shown in README.md parses, so its comments describe keys
// that exist.
func TestReadmeJobFile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "A job file:\n\n```yaml\n")
	if !ok {
		t.Fatal("README.md has no job file after \"A job file:\"")
	}
	src, _, _ := strings.Cut(rest, "```")
	jf, err := ParseJobFile("README.md", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	if jf.Sink.MaxHeldBytes != 64<<20 || jf.Source.OnTopicRecreated != RecreatedEarliest {
		t.Errorf("sink.max-held-bytes %d, source.on-topic-recreated %q", jf.Sink.MaxHeldBytes, jf.Source.OnTopicRecreated)
	}
}
