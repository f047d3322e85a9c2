package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// StartupMode says where a source starts reading when the job has no
// checkpoint to restore. A restore always resumes from the checkpoint.
type StartupMode int

const (
	// StartEarliest reads every partition from its log start offset.
	StartEarliest StartupMode = iota
	// StartLatest reads only records written after the job started.
	StartLatest
	// StartGroupOffsets starts at the offsets committed to the source's
	// group; partitions without one use SourceConfig.ResetFallback.
	StartGroupOffsets
	// StartTimestamp starts at the first record whose timestamp is at or
	// after SourceConfig.StartTimestamp (the end of a partition that has
	// none). Only retained records count: when retention deleted the
	// records from that time on, the partition starts at its earliest
	// retained record and the source logs a warning.
	StartTimestamp
	// StartSpecificOffsets starts at SourceConfig.SpecificOffsets; unlisted
	// partitions start at the group's offset, else at the earliest.
	StartSpecificOffsets
)

func (m StartupMode) String() string {
	switch m {
	case StartEarliest:
		return "earliest"
	case StartLatest:
		return "latest"
	case StartGroupOffsets:
		return "group-offsets"
	case StartTimestamp:
		return "timestamp"
	case StartSpecificOffsets:
		return "specific-offsets"
	}
	return fmt.Sprintf("StartupMode(%d)", int(m))
}

// ResetFallback says where StartGroupOffsets starts a partition that has no
// committed offset in the group.
type ResetFallback int

const (
	// ResetEarliest starts such a partition at its log start offset.
	ResetEarliest ResetFallback = iota
	// ResetLatest starts such a partition at its end.
	ResetLatest
	// ResetNone fails the job, naming the partition.
	ResetNone
)

// TopicRecreated says what a source does when a topic it reads was deleted
// and created again under the same name (Kafka gives it a new topic id), so
// the positions it holds belong to records that no longer exist.
type TopicRecreated int

const (
	// RecreatedReadEarliest reads the new topic from its earliest offset
	// and logs a warning naming the old and new topic ids. The records of
	// the old topic are gone; every record of the new one is read once.
	RecreatedReadEarliest TopicRecreated = iota
	// RecreatedFail stops the job with an error naming the topic, so an
	// operator decides (flow.ErrUnrecoverable: restarting does not help).
	RecreatedFail
)

func (t TopicRecreated) String() string {
	switch t {
	case RecreatedReadEarliest:
		return "earliest"
	case RecreatedFail:
		return "fail"
	}
	return fmt.Sprintf("TopicRecreated(%d)", int(t))
}

// Source defaults.
const (
	// DefaultDiscoveryInterval is how often a source looks for new
	// partitions unless told otherwise. Flink's default is 5 minutes;
	// records written to a partition added meanwhile wait that long
	// unread, and in an event-time job arrive behind the watermark the
	// other partitions moved on. One discovery is a metadata request and
	// a listing of offsets per subtask, so 10 seconds costs little and a
	// partition change is read within seconds (docs/design.md, "The
	// Kafka source").
	DefaultDiscoveryInterval = 10 * time.Second
	DefaultMaxPollRecords    = 10000
)

// SourceConfig configures a [Source].
type SourceConfig struct {
	Client ClientConfig
	// Topics lists the topics to read. Exactly one of Topics and TopicRegex
	// is required.
	Topics []string
	// TopicRegex reads every topic whose whole name matches it (internal
	// topics starting with "__" excepted).
	TopicRegex string
	// Partitions, when set, limits the source to these partitions of its
	// topics (topic -> partitions), default all: a scale-out task reads
	// one partition (docs/design.md, "Scale-out"). Partitions found later
	// that are not listed are not read.
	Partitions map[string][]int32
	// Group is the consumer group the job's offsets are committed to, for
	// monitoring and lag and for StartGroupOffsets; default
	// "onceflow-<job>". The source never joins the group: it reads
	// partitions it assigns itself, and a restore resumes from the
	// checkpoint, not from the group.
	Group string
	// StartupMode is where a fresh start (nothing to restore) begins,
	// default StartEarliest.
	StartupMode StartupMode
	// ResetFallback is where StartGroupOffsets and StartSpecificOffsets
	// start partitions the group has no offset for, default ResetEarliest.
	ResetFallback ResetFallback
	// StartTimestamp is the time StartTimestamp starts at; required by it.
	StartTimestamp time.Time
	// SpecificOffsets maps topic to partition to the offset
	// StartSpecificOffsets starts at; required by it. An offset outside the
	// partition's retained range fails the job at start.
	SpecificOffsets map[string]map[int32]int64
	// MinOffsets maps topic to partition to the lowest offset the source
	// reads of it: a position below it, restored from a checkpoint or
	// given by the startup mode, starts there instead. The scale-out
	// instance sets it on a repartition topic when it restores a job
	// savepoint, to skip what a run abandoned by that restore wrote
	// (docs/design.md, "Scale-out").
	MinOffsets map[string]map[int32]int64
	// DiscoveryInterval is how often the source looks for new partitions
	// (and, with TopicRegex, new topics) and checks the topic ids of the
	// topics it reads (see OnTopicRecreated): Flink's
	// partition.discovery.interval.ms. Zero means the default,
	// DefaultDiscoveryInterval (10 seconds); negative turns discovery off
	// (the source's lag still counts the records of partitions it does
	// not read). New partitions are read from their earliest
	// offset by the subtask that owns them, except partitions a restored
	// checkpoint has a position for (parked because they were not listed at
	// the restore): those resume at that position. Bounded sources never
	// discover.
	DiscoveryInterval time.Duration
	// ReadUncommitted reads records of open and aborted transactions too,
	// default false (read_committed, which exactly-once needs).
	ReadUncommitted bool
	// Bounded stops each subtask at the end offsets its partitions had when
	// the job first started, default false (read forever). A restored
	// bounded job keeps the end offsets of the first start.
	Bounded bool
	// MaxPollRecords bounds the records one Poll emits, default 10000.
	MaxPollRecords int
	// OnTopicRecreated is what happens when a topic the source read was
	// deleted and created again under the same name, detected by its topic
	// id (checkpoints keep it with the positions) at restore, at partition
	// discovery, and as soon as the Kafka client reports the topic id it
	// reads unknown; default RecreatedReadEarliest. A running reader
	// handles it in place, without failing the job. Brokers without topic
	// ids (before Kafka 2.8), and checkpoints written before positions
	// carried the id, cannot be checked: their topic is taken as it is.
	OnTopicRecreated TopicRecreated
	// Upstreams, for a source reading a scale-out repartition topic,
	// names the tasks writing it with watermark markers
	// (SinkConfig.MarkWatermarks): with event time (flow.WithWatermarks)
	// the source's watermark is the smallest of those tasks' (those not
	// idle), and it waits for each one's first marker, instead of coming
	// from the records' timestamps (docs/design.md, "Scale-out"). Markers
	// are never data: every source skips them.
	Upstreams []string
	// GroupCommit, when set, commits a committed checkpoint's offsets to
	// Group in place of the source's own commit (OffsetCommit with
	// generation -1 and no member, which a group with members refuses):
	// a scale-out task whose commit point is a database commits them as
	// its instance's group member (Membership.CommitOffsets). Unused when
	// a Kafka sink commits the offsets in its transaction. The offsets
	// are for monitoring and the repartition purge; a restore never
	// reads them.
	GroupCommit func(ctx context.Context, offsets map[Partition]int64, metadata string) error
}

func (c *SourceConfig) withDefaults() {
	if c.DiscoveryInterval == 0 {
		c.DiscoveryInterval = DefaultDiscoveryInterval
	}
	if c.MaxPollRecords == 0 {
		c.MaxPollRecords = DefaultMaxPollRecords
	}
}

func (c *SourceConfig) validate() error {
	if err := c.Client.validate(); err != nil {
		return err
	}
	switch {
	case len(c.Topics) == 0 && c.TopicRegex == "":
		return errors.New("the Kafka source has no topics: set Topics or TopicRegex")
	case len(c.Topics) > 0 && c.TopicRegex != "":
		return errors.New("the Kafka source has both Topics and TopicRegex: use one")
	}
	for _, t := range c.Topics {
		if t == "" {
			return errors.New("the Kafka source's topic list has an empty name")
		}
	}
	for t, ps := range c.Partitions {
		if !slices.Contains(c.Topics, t) {
			return fmt.Errorf("the Kafka source's Partitions name topic %q, which is not in Topics", t)
		}
		for _, p := range ps {
			if p < 0 {
				return fmt.Errorf("the Kafka source's Partitions has partition %d of %s: partitions cannot be negative", p, t)
			}
		}
	}
	switch c.StartupMode {
	case StartEarliest, StartLatest, StartGroupOffsets:
	case StartTimestamp:
		if c.StartTimestamp.IsZero() {
			return errors.New("startup mode timestamp needs StartTimestamp")
		}
	case StartSpecificOffsets:
		if len(c.SpecificOffsets) == 0 {
			return errors.New("startup mode specific-offsets needs SpecificOffsets (topic -> partition -> offset)")
		}
		for t, ps := range c.SpecificOffsets {
			for p, o := range ps {
				if p < 0 || o < 0 {
					return fmt.Errorf("specific offset %d for %s/%d: partitions and offsets cannot be negative", o, t, p)
				}
			}
		}
	default:
		return fmt.Errorf("unknown startup mode %d", int(c.StartupMode))
	}
	if c.ResetFallback < ResetEarliest || c.ResetFallback > ResetNone {
		return fmt.Errorf("unknown reset fallback %d", int(c.ResetFallback))
	}
	if c.OnTopicRecreated < RecreatedReadEarliest || c.OnTopicRecreated > RecreatedFail {
		return fmt.Errorf("unknown OnTopicRecreated %d", int(c.OnTopicRecreated))
	}
	if c.MaxPollRecords < 0 {
		return fmt.Errorf("MaxPollRecords %d is negative", c.MaxPollRecords)
	}
	return nil
}
