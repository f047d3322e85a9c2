package jobfile

import (
	"context"
	"maps"
	"time"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/checkpoint"
	"github.com/onceflow/onceflow/internal/restart"
	"github.com/onceflow/onceflow/pipeline"
)

// The job file's schema: what a job file holds once it is read, its
// defaults filled in. jobfile.go reads it (ParseJobFile).

// JobFile is a job file (`onceflow run FILE.yaml`) after parsing and
// validation. Every default is already applied, so the run wiring only
// translates it.
type JobFile struct {
	// Path is the file the job was read from, as given. Relative paths in
	// the file (state.dir, kafka.tls files) are resolved against its
	// directory, so the job finds its state whatever the working directory.
	Path string
	// Job names the job; it scopes checkpoints, transactional ids and the
	// default consumer group. Required.
	Job      string
	Kafka    KafkaConfig
	Source   SourceConfig
	Pipeline []Step
	Sink     SinkConfig
	// Graph is the shape of a file in the named form (sources:, streams:,
	// sinks:); nil in the one-source form. Source, Pipeline and Sink then
	// hold the whole job's input, steps and sinks (graph.go).
	Graph *Graph
	// Errors is the errors section; without one, policy fail.
	Errors ErrorsConfig
	// Checkpointing holds checkpointing.*, with zero meaning the
	// checkpoint package's default (WithDefaults is not applied).
	Checkpointing checkpoint.Config
	State         StateConfig
	// Restart holds restart.*; RestartSet tells whether the file has a
	// restart section at all (without one the engine picks its default).
	Restart    restart.Config
	RestartSet bool
	// HTTP is the http section: where the job serves its metrics and REST
	// API (the run flags override it).
	HTTP HTTPConfig
	// EventTime is the event-time section: where a record's event time
	// comes from and how the source's watermarks follow it.
	EventTime EventTimeConfig
	// ScaleOut is the scale-out section: instances of the job in one
	// consumer group (docs/design.md, "Scale-out").
	ScaleOut ScaleOutConfig
	// SQL is set on a job compiled from a SQL script (sql.go).
	SQL *SQLInfo
	// task is set on the job file of one scale-out task (derived from the
	// file the user wrote): the partition it reads and, for a segment
	// before a cut, the repartition topic it writes.
	Task *TaskSpec
}

// TaskSpec is what makes a job file a scale-out task's.
type TaskSpec struct {
	Partitions map[string][]int32
	// Out is the repartition topic written, by the partition Hash(key) mod
	// OutPartitions of the expression OutKey; "" for the job's own sink.
	Out, OutKey   string
	OutPartitions int
	// MarkAs names the task in the watermark markers it writes into Out
	// (kafka.SinkConfig.MarkWatermarks); Upstreams names the tasks
	// writing the repartition topic the task reads, whose markers its
	// source waits for (kafka.SourceConfig.Upstreams; docs/design.md,
	// "Scale-out").
	MarkAs    string
	Upstreams []string
	// MinOffsets is the lowest offset of each partition the task's
	// source reads from (kafka.SourceConfig.MinOffsets): a later stage's
	// task when a job savepoint of several stages is restored
	// (scaleout.Task.MinOffsets).
	MinOffsets map[string]map[int32]int64
	// OutEdges, for a task of a cut graph, are the streams it writes into
	// Out, each by its own key and tagged (Segment.OutEdges); OutKey is
	// then unused.
	OutEdges []OutEdge
	// Tagged: the task's graph sources are the tags of the records of
	// its one input topic, jf.Source (a cut graph's later segment).
	Tagged bool
	// GroupCommit commits the offsets of the task's sources to the job's
	// group as the instance's member, when no Kafka sink commits them in
	// its transaction (kafka.SourceConfig.GroupCommit).
	GroupCommit func(ctx context.Context, offsets map[kafka.Partition]int64, metadata string) error
}

// PartitionsOrNil is the partitions a task reads, nil for a whole job.
func (t *TaskSpec) PartitionsOrNil() map[string][]int32 {
	if t == nil {
		return nil
	}
	return t.Partitions
}

// ReadsTagged tells whether the task reads the tagged edges of a cut
// graph (TaskSpec.Tagged).
func (t *TaskSpec) ReadsTagged() bool { return t != nil && t.Tagged }

// Repartitions tells whether the task writes into a repartition topic.
func (t *TaskSpec) Repartitions() bool { return t != nil && t.Out != "" }

// ScaleOutConfig is the scale-out section.
type ScaleOutConfig struct {
	// Enabled makes every process run with this file an instance of the
	// job, sharing the partitions of source.group with the others.
	Enabled bool
	// Instance names this instance (in the group, and its directory under
	// state.dir); default the host name, --instance overrides it.
	Instance string
	// InputKeyed says the input topics are partitioned by record key
	// (Kafka's default partitioner), default true: a keyed step keyed by
	// record.key then needs no repartition topic.
	InputKeyed bool
	// RepartitionPartitions is the partition count of the repartition
	// topics the job creates; default the largest input topic's.
	RepartitionPartitions int
	// SessionTimeout is how long the group waits for a silent instance
	// before its partitions move, with the classic protocol; default 10s.
	// With KIP-848 the brokers' group.consumer.session.timeout.ms decides.
	SessionTimeout time.Duration
	// GroupProtocol is GroupProtocolConsumer (default: KIP-848 where every
	// broker has it, else classic) or GroupProtocolClassic.
	GroupProtocol string
}

// The group protocols of scale-out instances.
const (
	GroupProtocolConsumer = "consumer"
	GroupProtocolClassic  = "classic"
)

// EventTimeConfig is the event-time section. A job has event time when
// the section is set or a step needs it (window); the defaults then apply.
type EventTimeConfig struct {
	// Set tells whether the file has the section.
	Set bool
	// Timestamp is the expression of a record's event time in ms;
	// default "timestamp", the Kafka record's.
	Timestamp string
	// MaxOutOfOrderness is how far behind its partition's newest record
	// a record may be and still be on time; default 5s.
	MaxOutOfOrderness time.Duration
	// IdleTimeout is how long a partition may deliver nothing before it
	// stops holding event time back; default 30s.
	IdleTimeout time.Duration
	// maxSet and idleSet tell a 0 written in the file from none.
	maxSet, idleSet bool
}

// Event-time defaults.
const (
	DefaultMaxOutOfOrderness = 5 * time.Second
	DefaultIdleTimeout       = 30 * time.Second
)

// EventTimeSettings reports whether the job runs with event time, and its
// settings with defaults.
func (jf *JobFile) EventTimeSettings() (EventTimeConfig, bool) {
	et := jf.EventTime
	on := et.Set
	for _, st := range jf.Pipeline {
		if pr, _ := st.props(); pr.EventTime {
			on = true
		}
	}
	return et.withDefaults(), on
}

// withDefaults is et with the defaults of what it leaves out.
func (et EventTimeConfig) withDefaults() EventTimeConfig {
	if et.Timestamp == "" {
		et.Timestamp = "timestamp"
	}
	if et.MaxOutOfOrderness == 0 && !et.maxSet {
		et.MaxOutOfOrderness = DefaultMaxOutOfOrderness
	}
	if et.IdleTimeout == 0 && !et.idleSet {
		et.IdleTimeout = DefaultIdleTimeout
	}
	return et
}

// SourceEventTime reports whether the named form's source name runs with
// event time, and its settings with defaults: its own event-time
// section, else the job's (EventTimeSettings). A source without a
// section of its own in a job where only other sources have one has no
// event time unless a step needs it, as a job without the section.
func (jf *JobFile) SourceEventTime(name string) (EventTimeConfig, bool) {
	if jf.Graph != nil {
		for _, s := range jf.Graph.Sources {
			if s.Name == name && s.EventTime.Set {
				return s.EventTime.withDefaults(), true
			}
		}
	}
	return jf.EventTimeSettings()
}

// PerSourceEventTime tells whether a source of the named form has an
// event-time section of its own.
func (jf *JobFile) PerSourceEventTime() bool {
	if jf.Graph == nil {
		return false
	}
	for _, s := range jf.Graph.Sources {
		if s.EventTime.Set {
			return true
		}
	}
	return false
}

// StreamTimes is, for each stream of the named form, the event-time
// timestamp expression of the sources it reads (through other streams),
// "" when they differ; and, for a stream of several inputs, each input's.
// The steps that default to the job's event time (window's time,
// interval-join's left-time and right-time) take these.
func (jf *JobFile) StreamTimes() (times map[string]string, inputs map[string][]string) {
	times, inputs = map[string]string{}, map[string][]string{}
	if jf.Graph == nil {
		return times, inputs
	}
	const mixed = "\x00mixed"
	of := map[string]string{}
	for _, s := range jf.Graph.Sources {
		et, on := jf.SourceEventTime(s.Name)
		if !on {
			et.Timestamp = "timestamp"
		}
		of[s.Name] = et.Timestamp
	}
	order, err := jf.Graph.StreamOrder()
	if err != nil {
		return times, inputs
	}
	for _, st := range order {
		t := ""
		var ins []string
		for i, f := range st.From {
			ft := of[f]
			if ft == mixed {
				ins = append(ins, "")
			} else {
				ins = append(ins, ft)
			}
			if i == 0 {
				t = ft
			} else if t != ft {
				t = mixed
			}
		}
		of[st.Name] = t
		if t == mixed {
			t = ""
		}
		times[st.Name], inputs[st.Name] = t, ins
	}
	return times, inputs
}

// HTTPConfig is the http section. Without Listen (and without --http) the
// job serves nothing. Files are absolute once read.
type HTTPConfig struct {
	// Listen is host:port; a bare port listens on 127.0.0.1.
	Listen string
	// TokenFile holds the bearer token the endpoints that change the job
	// need (ONCEFLOW_HTTP_TOKEN overrides it); required off loopback.
	TokenFile string
	// TLSCert and TLSKey turn on TLS.
	TLSCert, TLSKey string
}

// KafkaConfig is the kafka section: how to reach the cluster.
type KafkaConfig struct {
	// Brokers are the bootstrap host:port addresses. Required.
	Brokers []string
	// ClientID is sent with every request (shows in broker logs and
	// quotas). Default "onceflow".
	ClientID string
	TLS      TLSConfig
	SASL     SASLConfig
}

// TLSConfig is kafka.tls. Naming any file turns TLS on unless enabled is
// written as false, which is then an error. The file names are absolute:
// relative ones are resolved against the job file's directory.
type TLSConfig struct {
	Enabled            bool
	CAFile             string // PEM CA bundle; default: the system roots
	CertFile           string // PEM client certificate (mutual TLS); needs KeyFile
	KeyFile            string // PEM client key; needs CertFile
	InsecureSkipVerify bool   // do not verify the broker's certificate; for tests only
}

// SASLConfig is kafka.sasl. An empty Mechanism means no SASL.
type SASLConfig struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (normalized to
	// upper case).
	Mechanism string
	// Username and Password may be written as ${ENV_VAR} to keep secrets
	// out of the file; they are then read from the environment.
	Username string
	Password string
}

// SourceConfig is the source section: what to read.
type SourceConfig struct {
	// Topics to read; exactly one of Topics and TopicRegex is set.
	Topics []string
	// TopicRegex selects topics by a Go regular expression matched
	// against the whole topic name.
	TopicRegex string
	// Group is the consumer group offsets are committed to (for
	// monitoring and group-offsets startup; the source never joins it).
	// Default "onceflow-<job>".
	Group   string
	Startup Startup
	// DiscoveryInterval is how often new partitions (and topics matching
	// TopicRegex) are looked for (Flink's partition.discovery.interval.ms).
	// Not written (0): the connector's default, 10s; written as 0:
	// discovery off, held here as -1.
	DiscoveryInterval time.Duration
	// Isolation is IsolationReadCommitted (default) or
	// IsolationReadUncommitted.
	Isolation string
	// Bounded stops the source at the end offsets it sees when it starts,
	// so the job ends. Default false.
	Bounded bool
	// Parallelism is the source's parallelism. Default 0: one subtask per
	// partition.
	Parallelism int
	// OnTopicRecreated is what the source does when a topic it read was
	// deleted and created again under the same name: RecreatedEarliest
	// (default: read the new topic from its start) or RecreatedFail (stop
	// the job so an operator decides).
	OnTopicRecreated string
}

// Values of SourceConfig.OnTopicRecreated.
const (
	RecreatedEarliest = "earliest"
	RecreatedFail     = "fail"
)

// Isolation levels of SourceConfig.Isolation.
const (
	IsolationReadCommitted   = "read_committed"
	IsolationReadUncommitted = "read_uncommitted"
)

// StartupMode is where a source starts reading when the job has no
// checkpoint to resume from: the Kafka spec's modes (kafka.ModeEarliest …).
type StartupMode string

// The startup modes.
const (
	StartEarliest        StartupMode = kafka.ModeEarliest
	StartLatest          StartupMode = kafka.ModeLatest
	StartTimestamp       StartupMode = kafka.ModeTimestamp
	StartSpecificOffsets StartupMode = kafka.ModeSpecificOffsets
	StartGroupOffsets    StartupMode = kafka.ModeGroupOffsets
)

// Startup is source.startup. Default mode earliest (as Flink's
// KafkaSource).
type Startup struct {
	Mode StartupMode
	// Timestamp is the first record time to read, for StartTimestamp.
	Timestamp time.Time
	// Offsets is topic -> partition -> offset, for StartSpecificOffsets.
	Offsets map[string]map[int32]int64
	// Reset is where partitions without an offset start (group-offsets:
	// no committed offset; specific-offsets: partition not listed):
	// "earliest" (default), "latest", or "none" to fail instead.
	Reset string
}

// Step is one pipeline step: an operator of package pipeline with its
// fields.
type Step struct {
	// Op names the operator, such as OpDedupe (pipeline.Names lists them).
	Op string
	// Params are the step's fields as its operator's spec decoded them
	// (pipeline.Spec), the spec's defaults filled in.
	Params pipeline.Params
	// UID identifies the step's state in checkpoints. Without uid: in the
	// file it is the step's default id (pipeline.IDs): derived from what
	// the step is, not where it is, so inserting, removing or reordering
	// other steps keeps it.
	UID string
	// UIDSet tells whether UID was written in the file (uid:).
	UIDSet bool
	// Line is where the step is in the file, for messages.
	Line int
	// Key and TTL are the key expression and ttl of a step written in Go
	// rather than read from a file (the demo's); they count as
	// Params["key"] and Params["ttl"] where Params has none. A job file's
	// steps have every field in Params.
	Key string
	TTL time.Duration
}

// props is what the step does to keys, routing and event time, as its
// operator's spec declares it (false for an unknown operator).
func (st Step) props() (pipeline.Props, bool) {
	spec, ok := pipeline.Lookup(st.Op)
	if !ok {
		return pipeline.Props{}, false
	}
	return spec.PropsOf(spec.WithDefaults(st.AllParams())), true
}

// AllParams are the step's fields, Key and TTL included.
func (st Step) AllParams() pipeline.Params {
	if st.Key == "" && st.TTL == 0 {
		return st.Params
	}
	p := maps.Clone(st.Params)
	if p == nil {
		p = pipeline.Params{}
	}
	if _, ok := p["key"]; !ok && st.Key != "" {
		p["key"] = st.Key
	}
	if _, ok := p["ttl"]; !ok && st.TTL != 0 {
		p["ttl"] = st.TTL
	}
	return p
}

// Names of the operators package pipeline registers and of its record key
// expression, for Go code that builds steps (the demo).
const (
	OpDedupe     = "dedupe"
	OpCount      = "count"
	OpExtractKey = "extract-key"
	KeyRecordKey = pipeline.KeyRecordKey
)

// ErrorsConfig is the errors section: what happens to a poison record, one
// a pipeline operator cannot process (extract-key given a value that is not
// a JSON object with the field). Such a record fails the same way after
// every restart, so the policy decides whether the job may go past it.
type ErrorsConfig struct {
	// Policy is flow.FailOnError (default: the job fails and the restart
	// strategy decides), flow.SkipOnError (drop, count and log the record)
	// or flow.DeadLetterOnError (write it to DeadLetterTopic).
	Policy flow.ErrorPolicy
	// DeadLetterTopic receives the poison records under
	// flow.DeadLetterOnError, committed together with the sink's output.
	// Required with that policy, and only allowed with it; it must differ
	// from the source and sink topics.
	DeadLetterTopic string
}

// errorPolicies are the spellings of errors.policy.
var errorPolicies = []string{"fail", "skip", "dead-letter"}

// SinkConfig is the sink section: where results go.
type SinkConfig struct {
	// Topic to write to. Required unless another sink is set.
	Topic string
	// Connectors are the sections of the other sinks, sink.<name> by
	// connector name (sink.postgres, sink.redis, any registered sink
	// connector's): each sends the results to a table, to Redis keys …
	// as well as, or instead of, a topic. Decoded by the connector's spec
	// (package connector), defaults filled in; see sinks.go for the
	// commit point.
	Connectors map[string]*connector.Config
	// Delivery is DeliveryExactlyOnce (default), DeliveryAtLeastOnce or
	// DeliveryNone.
	Delivery string
	// MaxHeldBytes bounds the memory of records the exactly-once sink
	// holds while a checkpoint commits; when it is reached, the sink
	// blocks until the commit (backpressure). Default
	// kafka.DefaultMaxHeldBytes (64 MiB); only with DeliveryExactlyOnce.
	MaxHeldBytes int64
	// TransactionTimeout is the Kafka producer's transaction.timeout.ms:
	// it must exceed the longest epoch the checkpointing section allows
	// and be within the brokers' transaction.max.timeout.ms. Default
	// kafka.DefaultTransactionTimeout (15m); only with DeliveryExactlyOnce.
	TransactionTimeout time.Duration
}

// Delivery guarantees of SinkConfig.Delivery.
const (
	DeliveryNone        = string(connector.None)
	DeliveryAtLeastOnce = string(connector.AtLeastOnce)
	DeliveryExactlyOnce = string(connector.ExactlyOnce)
)

// StateConfig is the state section.
type StateConfig struct {
	// Dir holds the job's checkpoints (under Dir/<job>). Absolute: a
	// relative state.dir, and the default "./onceflow-data", are resolved
	// against the job file's directory, not the working directory.
	Dir string
	// MaxParallelism is the number of key groups; it cannot change once a
	// job has checkpoints. Default 0: the engine's (128).
	MaxParallelism int
	// Backend is where keyed state lives: BackendPebble (the default for
	// job files) or BackendMemory.
	Backend string
	// Memory is the Pebble backend's memory budget in bytes. Default
	// DefaultStateMemory.
	Memory int64
	// Checkpoints is where checkpoints live when not under Dir: an
	// s3://bucket/prefix URL (the job's checkpoints go under
	// prefix/<job>), or a directory (relative to the job file's), such as
	// one several machines mount. Default "": Dir/<job>.
	Checkpoints string
	// S3 configures the S3 client when Checkpoints is an s3:// URL.
	S3 S3Config
}

// S3Config is the state.s3 section. Credentials are not in the file: they
// come from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN,
// the shared credentials file or the machine's IAM role.
type S3Config struct {
	// Endpoint is the server (host[:port] or URL); default
	// AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, then AWS.
	Endpoint string
	// Region defaults to AWS_REGION, then us-east-1.
	Region string
	// PathStyle addresses buckets as host/bucket (MinIO, SeaweedFS).
	PathStyle bool
	// Insecure uses plain HTTP for a host:port endpoint (local tests only).
	Insecure bool
}

// State backends of StateConfig.Backend.
const (
	BackendPebble = flow.PebbleBackend
	BackendMemory = flow.MemoryBackend
)

// DefaultStateMemory is StateConfig.Memory's default.
const DefaultStateMemory = 256 << 20

// DefaultStateDir is StateConfig.Dir's default, relative to the job
// file's directory.
const DefaultStateDir = "./onceflow-data"
