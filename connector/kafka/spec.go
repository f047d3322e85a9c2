package kafka

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/onceflow/onceflow/connector"
)

func init() { connector.Register(Spec) }

// The spellings of a source section's startup mode (startup: or
// startup.mode in a job file, 'scan.startup.mode' in SQL).
const (
	ModeEarliest        = "earliest"
	ModeLatest          = "latest"
	ModeTimestamp       = "timestamp"
	ModeSpecificOffsets = "specific-offsets"
	ModeGroupOffsets    = "group-offsets"
)

// startupModes are the modes, in the order messages list them.
var startupModes = []string{ModeEarliest, ModeLatest, ModeTimestamp, ModeSpecificOffsets, ModeGroupOffsets}

// Formats are the values of the SQL-only format option: how a table
// reads a record's value.
var Formats = []string{"json", "csv", "raw"}

// brokersField and formatField are on both sides: a SQL table names its
// cluster and format itself, a job file in its kafka section and its
// pipeline.
var (
	brokersField = connector.Field{Name: "brokers", Kind: connector.ListValue, Type: "list of host:port", SQLOnly: true,
		SQL: []string{"properties.bootstrap.servers"}, Doc: "The cluster's bootstrap brokers; a job file names them in kafka.brokers."}
	formatField = connector.Field{Name: "format", Kind: connector.EnumValue, Enum: Formats, SQLOnly: true, SQL: []string{"value.format"},
		Doc: "How a record's value is read or written as the table's columns; a job file's pipeline reads values itself (value.<field> of JSON)."}
)

// Spec is what the Kafka connector declares about itself (package
// connector): a source, and a sink whose transaction is the preferred
// commit point. The cluster is the job file's kafka section (brokers,
// client-id, tls, sasl), shared by both sides; a SQL table names its
// brokers itself ('properties.bootstrap.servers').
//
// Both sides are decoded from a job file by the generic decoder of
// connector sections and from a SQL table's WITH options by
// connector.Side.DecodeStrings, which take Flink's option names
// (Field.SQL); the source's Validate hook checks the startup rules that
// span fields, and StartupOf reads the startup the same way for both.
var Spec = connector.Spec{
	Name:    "kafka",
	Summary: "Reads Kafka topics with five startup modes and partition discovery; writes topics in a transaction per checkpoint that commits the source offsets too.",
	Doc: "The source keeps its offsets in the checkpoint and commits them to `source.group` only after a checkpoint commits, " +
		"for monitoring and the `group-offsets` startup mode; it never joins the group. " +
		"The sink's transaction is the job's commit point under exactly-once (docs/design.md, \"The Kafka commit point\"). " +
		"A SQL table takes Flink's option names (the SQL option column); `scan.startup.specific-offsets` names the partitions of its one topic.",
	Source: &connector.Side{Section: "source", Validate: validateSource, Fields: []connector.Field{
		{Name: "topics", Kind: connector.ListValue, Type: "list of topics", SQL: []string{"topic"},
			Doc: "The topics to read; this or topic-regex is required. As a SQL option, separated by ';' or ','."},
		{Name: "topic-regex", Type: "regular expression", SQL: []string{"topic-pattern"},
			Doc: "Reads every topic whose whole name matches, including topics created later."},
		{Name: "group", Type: "string", DefaultText: "onceflow-<job>", SQL: []string{"properties.group.id"},
			Doc: "The consumer group offsets are committed to after each checkpoint."},
		{Name: "startup", Kind: connector.GroupValue, Type: "mode, or a mapping of mode, timestamp, offsets, reset", DefaultText: "earliest",
			Doc: "Where to start without a checkpoint: a mode, or a mapping of the mode and its settings.",
			Fields: []connector.Field{
				{Name: "mode", Kind: connector.EnumValue, Enum: startupModes,
					Aliases: map[string]string{"earliest-offset": ModeEarliest, "latest-offset": ModeLatest},
					Default: ModeEarliest, SQL: []string{"scan.startup.mode"},
					Doc: "earliest or latest offsets, the first record at a time (timestamp), specific-offsets, or the offsets committed to the group (group-offsets)."},
				{Name: "timestamp", Type: "RFC 3339 time, or milliseconds since the epoch", SQL: []string{"scan.startup.timestamp-millis"},
					Doc: "The time mode timestamp starts from, such as 2024-05-01T00:00:00Z."},
				{Name: "offsets", Kind: connector.MapsValue, Type: "{topic: {partition: offset}}",
					Doc: "The offsets mode specific-offsets starts from."},
				{Name: "reset", Kind: connector.EnumValue, Enum: []string{"earliest", "latest", "none"}, Default: "earliest", SQL: []string{"properties.auto.offset.reset"},
					Doc: "Where a partition without an offset starts (group-offsets: none committed; specific-offsets: not listed); none fails instead."},
			}},
		{Name: "specific-offsets", Type: "partition:P,offset:O;…", SQLOnly: true, SQL: []string{"scan.startup.specific-offsets"},
			Doc: "Flink's spelling of startup.offsets, for a table of one topic: 'partition:0,offset:42;partition:1,offset:300'."},
		{Name: "discovery-interval", Kind: connector.DurationValue, Default: "10s", SQL: []string{"scan.topic-partition-discovery.interval"},
			Doc: "How often new partitions (and matching topics) are looked for; 0 turns discovery off."},
		{Name: "isolation", Kind: connector.EnumValue, Enum: []string{"read_committed", "read_uncommitted"}, Type: "read_committed or read_uncommitted",
			Default: "read_committed", SQL: []string{"properties.isolation.level"},
			Doc: "Whether records of open or aborted transactions are read."},
		{Name: "bounded", Kind: connector.BoolValue, Default: "false", Doc: "Stop at the end offsets seen at the start, so the job ends."},
		{Name: "parallelism", Kind: connector.IntValue, DefaultText: "one subtask per partition", Doc: "The source's parallelism."},
		{Name: "on-topic-recreated", Kind: connector.EnumValue, Enum: []string{"earliest", "fail"}, Type: "earliest or fail", Default: "earliest",
			Doc: "What to do when a topic read before was deleted and created again."},
		brokersField,
		formatField,
	}},
	Sink: &connector.Side{Section: "sink", Fields: []connector.Field{
		{Name: "topic", Type: "topic", Doc: "The topic results are written to (records a route step routed go to theirs)."},
		{Name: "delivery", Kind: connector.EnumValue, Enum: []string{string(connector.None), string(connector.AtLeastOnce), string(connector.ExactlyOnce)},
			Type: "exactly-once, at-least-once or none", Default: string(connector.ExactlyOnce), SQL: []string{"sink.delivery-guarantee"},
			Doc: "The guarantee of every sink of the job."},
		{Name: "max-held-bytes", Kind: connector.SizeValue, Default: "64MiB",
			Doc: "How much output waits in memory for its checkpoint's commit before the job slows down (exactly-once)."},
		{Name: "transaction-timeout", Kind: connector.DurationValue, Default: "15m",
			Doc: "The producer's transaction timeout; the broker aborts a transaction left open longer."},
		{Name: "transactional-id-prefix", Type: "string", SQLOnly: true, SQL: []string{"sink.transactional-id-prefix"},
			Doc: "Accepted for Flink's DDL and not used: the producer's transactional id is the job's, onceflow-<job>-0, which fences an earlier instance of the job."},
		brokersField,
		formatField,
	}},
	Deliveries:  []connector.Delivery{connector.ExactlyOnce, connector.AtLeastOnce, connector.None},
	CommitPoint: true,
	CommitRank:  0,
	GoPackage:   "github.com/onceflow/onceflow/connector/kafka",
}

// Startup is where a decoded source section starts without a checkpoint.
type Startup struct {
	// Mode is one of ModeEarliest …; "" when the section does not say.
	Mode string
	// Timestamp is the first record time to read, for ModeTimestamp.
	Timestamp time.Time
	// Offsets is topic -> partition -> offset, for ModeSpecificOffsets;
	// not nil when the section writes them.
	Offsets map[string]map[int32]int64
	// Reset is where partitions without an offset start, "" when the
	// section does not say.
	Reset string
}

// validateSource is the source side's Validate hook: the startup rules.
func validateSource(c *connector.Config, _ connector.Check) error {
	_, err := StartupOf(c)
	return err
}

// StartupOf reads the startup of a decoded source section: the job
// file's startup (a mode, or a mapping of mode, timestamp, offsets and
// reset) or a SQL table's scan.startup.* options. The problems are
// *connector.FieldError values, joined; what parses is returned anyway.
func StartupOf(c *connector.Config) (Startup, error) {
	var st Startup
	var errs []error
	add := func(at []string, format string, args ...any) {
		errs = append(errs, connector.Errorf(at, format, args...))
	}
	path := c.Section + ".startup"
	if c.Has("startup.mode") && c.String("startup.mode") != "" {
		st.Mode = c.String("startup.mode")
	}
	if c.Has("startup.reset") {
		st.Reset = c.String("startup.reset")
	}
	if c.Get("startup.offsets") != nil {
		st.Offsets = offsetsOf(path+".offsets", c.Map("startup.offsets"), add)
	}
	if c.Has("specific-offsets") {
		if st.Offsets != nil {
			add(connector.At("specific-offsets"), "%s: startup.offsets and specific-offsets are both set: use one", c.Section)
		}
		if spec := c.String("specific-offsets"); spec != "" {
			st.Offsets = flinkOffsets(c, spec, add)
		}
	}
	if c.Has("startup") && c.Bool("startup") {
		// Written as one value, the mode.
		switch st.Mode {
		case ModeTimestamp:
			add(connector.At("startup"), "%s timestamp needs the time to start from: write startup: {mode: timestamp, timestamp: 2024-05-01T00:00:00Z}", path)
		case ModeSpecificOffsets:
			add(connector.At("startup"), "%s specific-offsets needs the offsets: write startup: {mode: specific-offsets, offsets: {TOPIC: {PARTITION: OFFSET}}}", path)
		}
		return st, errors.Join(errs...)
	}
	if st.Mode == "" {
		if c.Has("startup") && !c.Has("startup.mode") {
			add(connector.At("startup"), "%s.mode is missing: use one of %s", path, strings.Join(startupModes, ", "))
		}
		return st, errors.Join(errs...)
	}
	// Fields of other modes are almost always a mistake in the mode.
	ts := c.String("startup.timestamp")
	if ts != "" && st.Mode != ModeTimestamp {
		add(connector.At("startup.timestamp"), "%s.timestamp only applies to mode timestamp, and the mode is %s", path, st.Mode)
	}
	if st.Offsets != nil && st.Mode != ModeSpecificOffsets {
		add(connector.At("startup.offsets", "specific-offsets"), "%s.offsets only applies to mode specific-offsets, and the mode is %s", path, st.Mode)
	}
	if st.Reset != "" && st.Mode != ModeGroupOffsets && st.Mode != ModeSpecificOffsets {
		add(connector.At("startup.reset"), "%s.reset only applies to modes group-offsets and specific-offsets, and the mode is %s", path, st.Mode)
	}
	switch st.Mode {
	case ModeTimestamp:
		if ts == "" {
			if !c.Has("startup.timestamp") {
				add(connector.At("startup.mode"), "%s.timestamp is missing: mode timestamp needs the time to start from, such as 2024-05-01T00:00:00Z", path)
			}
			break
		}
		t, err := ParseStartTime(ts)
		if err != nil {
			add(connector.At("startup.timestamp"), "%s.timestamp %q is not an RFC 3339 time such as 2024-05-01T00:00:00Z or 2024-05-01T02:00:00+02:00, nor milliseconds since the epoch", path, ts)
			break
		}
		st.Timestamp = t
	case ModeSpecificOffsets:
		if len(st.Offsets) == 0 && !c.Has("startup.offsets") && !c.Has("specific-offsets") {
			add(connector.At("startup.mode"), "%s.offsets is missing: mode specific-offsets needs {TOPIC: {PARTITION: OFFSET}}", path)
		}
	}
	return st, errors.Join(errs...)
}

// ParseStartTime reads the time of startup mode timestamp: RFC 3339, or
// whole milliseconds since the epoch (Flink's
// 'scan.startup.timestamp-millis').
func ParseStartTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms >= 0 {
		return time.UnixMilli(ms), nil
	}
	return time.Parse(time.RFC3339Nano, s)
}

// offsetsOf reads startup.offsets, {topic: {partition: offset}}, as
// entries the decoder read.
func offsetsOf(path string, topics []connector.Entry, add func([]string, string, ...any)) map[string]map[int32]int64 {
	out := map[string]map[int32]int64{}
	for _, te := range topics {
		topic := te.Name
		if _, dup := out[topic]; dup {
			add(connector.At("startup.offsets."+topic), "%s: topic %q is repeated", path, topic)
			continue
		}
		parts := map[int32]int64{}
		out[topic] = parts
		for _, pe := range te.Entries {
			at := connector.At("startup.offsets." + topic + "." + pe.Name)
			p, err := strconv.ParseInt(pe.Name, 10, 32)
			if err != nil || p < 0 {
				add(at, "%s.%s: partition %q is not a partition number (0 or more)", path, topic, pe.Name)
				continue
			}
			if _, dup := parts[int32(p)]; dup {
				add(at, "%s.%s: partition %d is repeated", path, topic, p)
				continue
			}
			o, err := strconv.ParseInt(pe.Value, 10, 64)
			if err != nil || o < 0 {
				add(at, "%s.%s.%d: offset %q is not an offset (0 or more)", path, topic, p, pe.Value)
				continue
			}
			parts[int32(p)] = o
		}
	}
	return out
}

// flinkOffsets reads Flink's 'scan.startup.specific-offsets',
// "partition:0,offset:42;partition:1,offset:300", for the section's one
// topic.
func flinkOffsets(c *connector.Config, spec string, add func([]string, string, ...any)) map[string]map[int32]int64 {
	at := connector.At("specific-offsets")
	topics := c.List("topics")
	if len(topics) != 1 {
		add(at, "%s: specific-offsets names partitions of one topic, and the section reads %d: list one topic, or write startup.offsets per topic in a job file", c.Section, len(topics))
		return nil
	}
	parts := map[int32]int64{}
	for _, item := range strings.Split(spec, ";") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		var p, o int64 = -1, -1
		for _, kv := range strings.Split(item, ",") {
			k, v, _ := strings.Cut(kv, ":")
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			switch strings.TrimSpace(k) {
			case "partition":
				if err == nil && n >= 0 && n <= 1<<31-1 {
					p = n
				}
			case "offset":
				if err == nil && n >= 0 {
					o = n
				}
			}
		}
		if p < 0 || o < 0 {
			add(at, "%s.specific-offsets: %q is not partition:P,offset:O (whole numbers, 0 or more)", c.Section, strings.TrimSpace(item))
			continue
		}
		if _, dup := parts[int32(p)]; dup {
			add(at, "%s.specific-offsets: partition %d is repeated", c.Section, p)
			continue
		}
		parts[int32(p)] = o
	}
	return map[string]map[int32]int64{topics[0]: parts}
}
