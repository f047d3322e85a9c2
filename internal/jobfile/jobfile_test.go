package jobfile

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/checkpoint"
	"github.com/onceflow/onceflow/internal/jobfile/jobfiletest"
	"github.com/onceflow/onceflow/internal/restart"
	"github.com/onceflow/onceflow/pipeline"
)

func TestParseOrdersExample(t *testing.T) {
	jf, err := ParseJobFile("orders.yaml", []byte(jobfiletest.Orders), nil)
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
			{Op: OpDedupe, Params: pipeline.Params{"key": KeyRecordKey, "ttl": 24 * time.Hour}, UID: "dedupe:record.key", Line: 9},
			{Op: OpCount, Params: pipeline.Params{"key": KeyRecordKey}, UID: "count:record.key", Line: 10},
		},
		Sink:          SinkConfig{Topic: "order-counts", Delivery: DeliveryExactlyOnce, MaxHeldBytes: 64 << 20, TransactionTimeout: 15 * time.Minute},
		Checkpointing: checkpoint.Config{Interval: time.Second, Mode: checkpoint.ExactlyOnce, Timeout: time.Minute},
		// Relative to the file's directory, here the working directory.
		State:      StateConfig{Dir: filepath.Join(cwd, "onceflow-data"), Backend: BackendPebble, Memory: DefaultStateMemory},
		Restart:    restart.Config{Strategy: restart.ExponentialDelay},
		RestartSet: true,
	}
	if !reflect.DeepEqual(jf, want) {
		t.Errorf("parsed\n%+v\nwant\n%+v", jf, want)
	}
}

func TestParseDefaults(t *testing.T) {
	jf, err := ParseJobFile("j.yaml", []byte(jobfiletest.Minimal), nil)
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
	if jf.Sink.TransactionTimeout != 15*time.Minute {
		t.Errorf("transaction timeout = %v, want Kafka's default 15m", jf.Sink.TransactionTimeout)
	}
	if jf.RestartSet || len(jf.Pipeline) != 0 || jf.Kafka.ClientID != "onceflow" {
		t.Errorf("unexpected defaults: %+v", jf)
	}
}

// A transaction timeout longer than the brokers' default maximum is taken
// as written: the brokers may allow it (transaction.max.timeout.ms).
func TestParseTransactionTimeout(t *testing.T) {
	src := strings.Replace(jobfiletest.Minimal, "  topic: out\n", "  topic: out\n  transaction-timeout: 1h\n", 1)
	jf, err := ParseJobFile("j.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	if jf.Sink.TransactionTimeout != time.Hour {
		t.Errorf("transaction timeout = %v, want 1h", jf.Sink.TransactionTimeout)
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
  backend: pebble
  memory: 64MiB
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
	if want := []Step{{Op: OpCount, Params: pipeline.Params{"key": KeyRecordKey}, UID: "counter", UIDSet: true, Line: 27}}; !reflect.DeepEqual(jf.Pipeline, want) {
		t.Errorf("pipeline = %+v, want %+v", jf.Pipeline, want)
	}
	wantCP := checkpoint.Config{Interval: 10 * time.Second, Mode: checkpoint.AtLeastOnce, Timeout: 2 * time.Minute,
		MinPause: 500 * time.Millisecond, MaxConcurrent: 2, TolerableFailures: -1, NumRetained: 3}
	if jf.Checkpointing != wantCP {
		t.Errorf("checkpointing = %+v, want %+v", jf.Checkpointing, wantCP)
	}
	if want := (StateConfig{Dir: "/var/lib/onceflow", MaxParallelism: 256, Backend: BackendPebble, Memory: 64 << 20}); jf.State != want {
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
			src := jobfiletest.Minimal + "  # \n"
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

// parseErrorsDir holds the job files that must not parse: NAME.yaml is
// parsed as j.yaml, and NAME.err holds the exact error, one problem a
// line (go test -run TestParseErrors -update rewrites the .err files).
var parseErrorsDir = filepath.Join("testdata", "parse-errors")

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func TestParseErrors(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(parseErrorsDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no cases in %s", parseErrorsDir)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			jf, err := ParseJobFile("j.yaml", src, nil)
			if err == nil {
				t.Fatalf("parsed without error: %+v\nfile:\n%s", jf, src)
			}
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Errorf("error %T does not contain a *FileError", err)
			}
			got := err.Error() + "\n"
			errFile := strings.TrimSuffix(file, ".yaml") + ".err"
			if *update {
				if err := os.WriteFile(errFile, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(errFile)
			if err != nil {
				t.Fatalf("%v (go test -run TestParseErrors -update writes it)", err)
			}
			if got != string(want) {
				t.Errorf("error:\n%swant (%s):\n%sfile:\n%s", got, errFile, want, src)
			}
		})
	}
	// Every .err belongs to a case.
	errFiles, _ := filepath.Glob(filepath.Join(parseErrorsDir, "*.err"))
	for _, f := range errFiles {
		if _, err := os.Stat(strings.TrimSuffix(f, ".err") + ".yaml"); err != nil {
			t.Errorf("%s has no job file: %v", f, err)
		}
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
		if got := FormatSize(n); got != want {
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
			src := jobfiletest.Minimal + "pipeline:\n  - extract-key: { json-field: user }\n  - count: {}\n" + tc.section
			jf, err := ParseJobFile("j.yaml", []byte(src), nil)
			if err != nil {
				t.Fatal(err)
			}
			if jf.Errors != tc.want {
				t.Errorf("errors = %+v, want %+v", jf.Errors, tc.want)
			}
			wantSteps := []Step{
				{Op: OpExtractKey, Params: pipeline.Params{"json-field": "user"}, UID: "extract-key:user", Line: 11},
				{Op: OpCount, Params: pipeline.Params{"key": KeyRecordKey}, UID: "count:record.key", Line: 12},
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

// The pipeline shown in README.md's operator examples is a valid pipeline
// with one step of every operator.
func TestReadmePipeline(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "One example per operator:\n\n```yaml\n")
	if !ok {
		t.Fatal(`README.md has no pipeline after "One example per operator:"`)
	}
	src, _, _ := strings.Cut(rest, "```")
	head := "job: readme\nkafka: {brokers: [b:9092]}\nsource: {topics: [orders]}\nsink: {topic: revenue}\ncheckpointing: {interval: 1s}\n"
	jf, err := ParseJobFile("README.md", []byte(head+src), nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, st := range jf.Pipeline {
		seen[st.Op] = true
	}
	for _, op := range pipeline.Names() {
		if spec, _ := pipeline.Lookup(op); !spec.TakesInputs(1) {
			continue // a stream's first step over several inputs: TestReadmeNamedStreams
		}
		if !seen[op] {
			t.Errorf("README.md's pipeline example has no %s step", op)
		}
	}
}

// The named-form job in README.md parses, and uses union and join.
func TestReadmeNamedStreams(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "Named streams:\n\n```yaml\n")
	if !ok {
		t.Fatal(`README.md has no job file after "Named streams:"`)
	}
	src, _, _ := strings.Cut(rest, "```")
	jf, err := ParseJobFile("README.md", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	if jf.Graph == nil || len(jf.Graph.Sources) != 3 || len(jf.Graph.Streams) != 2 || len(jf.Graph.Sinks) != 2 {
		t.Fatalf("README's named job: graph %+v", jf.Graph)
	}
	seen := map[string]bool{}
	for _, st := range jf.Pipeline {
		seen[st.Op] = true
	}
	for _, op := range pipeline.Names() {
		// interval-join, window-join and temporal-join need event time per
		// source (temporal-join a versioned changelog too): docs/design.md
		// ("Named streams") and docs/operators.md show them.
		if spec, _ := pipeline.Lookup(op); !spec.TakesInputs(1) && !seen[op] && op != "interval-join" && op != "window-join" && op != "temporal-join" {
			t.Errorf("README.md's named-streams example has no %s step", op)
		}
	}
	l, err := jf.Logical()
	if err != nil {
		t.Fatal(err)
	}
	var uids []string
	for _, n := range l.Nodes {
		uids = append(uids, n.UID)
	}
	want := "web shop customers orders.union orders.filter enriched.join:value.customer_id sink sink-postgres"
	if got := strings.Join(uids, " "); got != want {
		t.Errorf("uids %s, want %s", got, want)
	}
}

// Each source of the named form may have its own event time; the others
// keep the job's section, and the steps reading several sources default
// to each input's.
func TestPerSourceEventTime(t *testing.T) {
	src := `job: j
kafka: {brokers: [b:9092]}
checkpointing: {interval: 10s}
event-time: {timestamp: value.ts, max-out-of-orderness: 1s}
sources:
  bids:
    topics: [bids]
    event-time: {timestamp: value.bid_ts, max-out-of-orderness: 2s, idle-timeout: 0s}
  asks: {topics: [asks]}
streams:
  pairs: {from: [bids, asks], steps: [{interval-join: {left-key: value.k, right-key: value.k, lower: -1m, upper: 1m}}]}
sinks:
  out: {from: pairs, topic: out}
`
	jf, err := ParseJobFile("j.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	bids, on := jf.SourceEventTime("bids")
	if !on || bids.Timestamp != "value.bid_ts" || bids.MaxOutOfOrderness != 2*time.Second || bids.IdleTimeout != 0 {
		t.Errorf("bids: %+v %v, want its own section (value.bid_ts, 2s, idle 0)", bids, on)
	}
	asks, on := jf.SourceEventTime("asks")
	if !on || asks.Timestamp != "value.ts" || asks.MaxOutOfOrderness != time.Second || asks.IdleTimeout != DefaultIdleTimeout {
		t.Errorf("asks: %+v %v, want the job's section", asks, on)
	}
	times, inputs := jf.StreamTimes()
	if times["pairs"] != "" || strings.Join(inputs["pairs"], ",") != "value.bid_ts,value.ts" {
		t.Errorf("stream times %q, inputs %q; want none (they differ) and value.bid_ts,value.ts", times["pairs"], inputs["pairs"])
	}
}
