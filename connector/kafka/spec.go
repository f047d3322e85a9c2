package kafka

import "github.com/onceflow/onceflow/connector"

func init() { connector.Register(Spec) }

// Spec is what the Kafka connector declares about itself (package
// connector): a source, and a sink whose transaction is the preferred
// commit point. The cluster is the job file's kafka section (brokers,
// client-id, tls, sasl), shared by both sides.
var Spec = connector.Spec{
	Name:    "kafka",
	Summary: "Reads Kafka topics with five startup modes and partition discovery; writes topics in a transaction per checkpoint that commits the source offsets too.",
	Doc: "The source keeps its offsets in the checkpoint and commits them to `source.group` only after a checkpoint commits, " +
		"for monitoring and the `group-offsets` startup mode; it never joins the group. " +
		"The sink's transaction is the job's commit point under exactly-once (docs/design.md, \"The Kafka commit point\").",
	Source: &connector.Side{Section: "source", Fields: []connector.Field{
		{Name: "topics", Type: "list of topics", Doc: "The topics to read; this or topic-regex is required."},
		{Name: "topic-regex", Type: "regular expression", Doc: "Reads every topic whose whole name matches, including topics created later."},
		{Name: "group", Type: "string", Default: "onceflow-<job>", Doc: "The consumer group offsets are committed to after each checkpoint."},
		{Name: "startup", Type: "mode, or a mapping of mode, timestamp, offsets, reset", Default: "earliest", Doc: "Where to start without a checkpoint: earliest, latest, timestamp, specific-offsets or group-offsets; reset says where partitions without an offset start."},
		{Name: "discovery-interval", Type: "duration", Default: "10s", Doc: "How often new partitions (and matching topics) are looked for; 0 turns discovery off."},
		{Name: "isolation", Type: "read_committed or read_uncommitted", Default: "read_committed", Doc: "Whether records of open or aborted transactions are read."},
		{Name: "bounded", Type: "bool", Default: "false", Doc: "Stop at the end offsets seen at the start, so the job ends."},
		{Name: "parallelism", Type: "int", Default: "one subtask per partition", Doc: "The source's parallelism."},
		{Name: "on-topic-recreated", Type: "earliest or fail", Default: "earliest", Doc: "What to do when a topic read before was deleted and created again."},
	}},
	Sink: &connector.Side{Section: "sink", Fields: []connector.Field{
		{Name: "topic", Type: "topic", Doc: "The topic results are written to (records a route step routed go to theirs)."},
		{Name: "delivery", Type: "exactly-once, at-least-once or none", Default: "exactly-once", Doc: "The guarantee of every sink of the job."},
		{Name: "max-held-bytes", Type: "size", Default: "64MiB", Doc: "How much output waits in memory for its checkpoint's commit before the job slows down (exactly-once)."},
		{Name: "transaction-timeout", Type: "duration", Default: "15m", Doc: "The producer's transaction timeout; the broker aborts a transaction left open longer."},
	}},
	Deliveries:  []connector.Delivery{connector.ExactlyOnce, connector.AtLeastOnce, connector.None},
	CommitPoint: true,
	CommitRank:  0,
	GoPackage:   "github.com/onceflow/onceflow/connector/kafka",
}
