package kafka

import (
	"github.com/onceflow/onceflow/internal/testbreak"

	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/flow"
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

// pollWait bounds a Poll without records, so the engine can inject
// barriers (flow.SourceReader asks for about 100ms).
const pollWait = 100 * time.Millisecond

// discoveryTimeout bounds one partition discovery (a topic listing and the
// offsets of what it found).
const discoveryTimeout = 10 * time.Second

// Lag of caught-up readers: a fetch response carries only partitions with
// new records, so every lagRefreshInterval Poll lists the end offsets of
// the source's topics, for the partitions no fetch response carried since
// the last listing and for partitions added since the last discovery,
// waiting at most lagListTimeout for the answer.
const (
	lagRefreshInterval = 3 * time.Second
	lagListTimeout     = time.Second
)

// maxSnapshots bounds the checkpoints whose offsets a reader keeps until
// they commit: an aborted checkpoint never commits, so without a bound its
// entry would stay forever.
const maxSnapshots = 16

// priorProgressTimeout bounds PriorProgress.
const priorProgressTimeout = 10 * time.Second

// fetchMaxWait is how long the broker may hold a fetch without data.
const fetchMaxWait = 500 * time.Millisecond

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

// Source reads Kafka topics as [Record]s. Create it with [NewSource]; one
// Source value is one operator of one job.
type Source struct {
	cfg SourceConfig
	re  *regexp.Regexp

	mu sync.Mutex
	// uid and job are learned at Open; the sink's commit point needs them
	// to find this source's positions in a manifest and its group.
	uid, job string
	// transactional is set when a Sink commits this source's offsets in
	// its transactions; the reader then does not commit them itself.
	transactional bool
	// readers are the open readers of this process, for Lag and
	// checkpointOffsets.
	readers map[*reader]bool
	// committed holds the offsets last committed per partition (to the
	// group, or in a Kafka sink's transaction), for ReportMetrics.
	committed map[split]int64
	// commitsOK and commitsFailed count checkpoints whose offsets were
	// committed, and commits to the group that failed.
	commitsOK, commitsFailed atomic.Int64
}

var (
	_ flow.Source[Record]        = (*Source)(nil)
	_ flow.ParallelismHinter     = (*Source)(nil)
	_ flow.PriorProgressReporter = (*Source)(nil)
	_ flow.MetricsReporter       = (*Source)(nil)
	_ flow.SourceReader[Record]  = (*reader)(nil)
	_ flow.Positioner            = (*reader)(nil)
)

// NewSource validates cfg and returns a source.
func NewSource(cfg SourceConfig) (*Source, error) {
	cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("kafka source: %w", err)
	}
	if testbreak.Is(testbreak.OffsetsOutsideTxn) {
		// The broken engine of the proof suite resumes from the group's
		// offsets, like a consumer that commits them outside the
		// transaction and trusts them.
		cfg.StartupMode, cfg.ResetFallback = StartGroupOffsets, ResetEarliest
	}
	s := &Source{cfg: cfg}
	if cfg.TopicRegex != "" {
		re, err := regexp.Compile("^(?:" + cfg.TopicRegex + ")$")
		if err != nil {
			return nil, fmt.Errorf("kafka source: TopicRegex %q: %w", cfg.TopicRegex, err)
		}
		s.re = re
	}
	return s, nil
}

func (s *Source) group(job string) string {
	if s.cfg.Group != "" {
		return s.cfg.Group
	}
	return "onceflow-" + job
}

// opened returns what Open learned: the operator uid and the group.
func (s *Source) opened() (uid, group string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.uid == "" {
		return "", "", false
	}
	return s.uid, s.group(s.job), true
}

// Lag returns how many records this process's readers of the source are
// behind the end of their partitions, summed over the partitions: the
// partition's end (the last stable offset with read_committed, else the
// high watermark; a bounded source's end offset if lower) minus the next
// offset to read, as of the latest fetch response that carried the
// partition or, for partitions without new records, the latest listing of
// end offsets (each reader's Poll lists them at most every few seconds).
// Partitions added to the topics that the readers do not read yet (before
// discovery finds them, or with discovery off) count with all their
// records from where reading them would start (docs/design.md, "The Kafka
// source"), so the lag is not 0 while records sit unread. A reader that
// owns no partition counts 0. It is -1 while no reader is
// open or one of them does not know its lag yet (before its first Poll):
// a partial sum would look like progress that is not there. Safe to call
// from any goroutine.
func (s *Source) Lag() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.readers) == 0 {
		return -1
	}
	var sum int64
	for r := range s.readers {
		l := r.lag.Load()
		if l < 0 {
			return -1
		}
		sum += l
	}
	return sum
}

// checkpointOffsets returns the group of the source and the next offsets
// of checkpoint id, merged over this process's open readers: what each
// recorded in its Snapshot(id), parked partitions included. ok is false
// when no reader is open or one of them has no snapshot of id (it never
// took one, or dropped it: entries up to a committed checkpoint are
// dropped, and only the newest maxSnapshots are kept). Safe to call from
// any goroutine; the Kafka commit point uses it.
func (s *Source) checkpointOffsets(id int64) (group string, offs map[split]int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.readers) == 0 {
		return "", nil, false
	}
	offs = map[split]int64{}
	for r := range s.readers {
		r.snapMu.Lock()
		snap, has := r.snapshots[id]
		if has {
			maps.Copy(offs, snap.read)
			maps.Copy(offs, snap.parked)
		}
		r.snapMu.Unlock()
		if !has {
			return "", nil, false
		}
	}
	return s.group(s.job), offs, true
}

// PriorProgress implements [flow.PriorProgressReporter]: it reads the
// offsets committed to the source's group (SourceConfig.Group, default
// "onceflow-<job>") and, when some carry this job's checkpoint metadata
// ("onceflow:<job>:<n>"), describes them with the highest checkpoint n.
// A group that does not exist, or holds only offsets of other tools or
// jobs, is no progress of the job. It gives up after 10 seconds.
func (s *Source) PriorProgress(ctx context.Context, job string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, priorProgressTimeout)
	defer cancel()
	cl, err := s.cfg.Client.newClient()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	group := s.group(job)
	var resps kadm.OffsetResponses
	err = retryRead(ctx, func() error {
		var err error
		resps, err = kadm.NewClient(cl).FetchOffsets(ctx, group)
		return err
	})
	if errors.Is(err, kerr.GroupIDNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("fetch the offsets of group %q: %w", group, s.cfg.Client.explain(err))
	}
	prefix := offsetMetadataPrefix(job)
	last := int64(-1)
	resps.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil || o.At < 0 || !strings.HasPrefix(o.Metadata, prefix) {
			return
		}
		if n, err := strconv.ParseInt(o.Metadata[len(prefix):], 10, 64); err == nil && n >= 0 {
			last = max(last, n)
		}
	})
	if last < 0 {
		return nil, nil
	}
	return []string{fmt.Sprintf("group %q has offsets committed by checkpoint %d of job %q", group, last, job)}, nil
}

// ParallelismHint returns the number of partitions the source reads, so the
// source runs one subtask per partition unless the job says otherwise.
func (s *Source) ParallelismHint(ctx context.Context) (int, error) {
	cl, err := s.cfg.Client.newClient()
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	splits, _, err := s.listSplits(ctx, kadm.NewClient(cl))
	if err != nil {
		return 0, s.cfg.Client.explain(err)
	}
	return max(len(splits), 1), nil
}

// listSplits returns the partitions of the source's topics, sorted, and
// the topic ids of the topics.
func (s *Source) listSplits(ctx context.Context, adm *kadm.Client) ([]split, map[string]topicID, error) {
	var (
		tds kadm.TopicDetails
		err error
	)
	if s.re != nil {
		tds, err = adm.ListTopics(ctx)
	} else {
		tds, err = adm.ListTopics(ctx, s.cfg.Topics...)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("list topics: %w", err)
	}
	var out []split
	ids := make(map[string]topicID, len(tds))
	for _, name := range slices.Sorted(maps.Keys(tds)) {
		td := tds[name]
		if s.re != nil && (td.IsInternal || len(name) > 1 && name[:2] == "__" || !s.re.MatchString(name)) {
			continue
		}
		if td.Err != nil {
			if errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
				return nil, nil, fmt.Errorf("topic %q does not exist", name)
			}
			return nil, nil, fmt.Errorf("topic %q: %w", name, td.Err)
		}
		ids[name] = topicID(td.ID)
		for p := range td.Partitions {
			if s.cfg.Partitions == nil || slices.Contains(s.cfg.Partitions[name], p) {
				out = append(out, split{name, p})
			}
		}
	}
	sortSplits(out)
	return out, ids, nil
}

// Open opens the reader of subtask sc.Subtask: it takes the partitions it
// owns, positioned from restored if there is anything to restore, else by
// the startup mode.
func (s *Source) Open(ctx context.Context, sc flow.SourceContext, restored map[string][]byte) (flow.SourceReader[Record], error) {
	s.mu.Lock()
	s.uid, s.job = sc.UID, sc.Job
	s.mu.Unlock()
	log := sc.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &reader{
		src: s, sc: sc, log: log, group: s.group(sc.Job),
		pos: map[split]position{}, known: map[split]bool{},
		parked:    map[split]position{},
		ends:      map[split]endOffset{},
		endGen:    1,
		snapshots: map[int64]snapshotOffsets{},
	}
	r.lag.Store(-1)
	iso := kgo.ReadCommitted()
	if s.cfg.ReadUncommitted {
		iso = kgo.ReadUncommitted()
	}
	cl, err := s.cfg.Client.newClient(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{}),
		kgo.FetchIsolationLevel(iso),
		// Control records tell the reader it passed a transaction
		// marker, so its position can reach the end offset of a
		// partition whose last entry is a marker.
		kgo.KeepControlRecords(),
		// An offset that is no longer retained means records were lost
		// to retention: fail loudly rather than silently skip them.
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		// Partitions added by discovery join the next fetch request, so
		// long-polling fetches would delay them by the wait; metadata
		// for them is refreshed at most this often.
		kgo.FetchMaxWait(fetchMaxWait),
		kgo.MetadataMinAge(fetchMaxWait),
	)
	if err != nil {
		return nil, err
	}
	r.cl, r.adm = cl, kadm.NewClient(cl)
	if err := r.init(ctx, restored); err != nil {
		cl.Close()
		return nil, s.cfg.Client.explain(err)
	}
	s.mu.Lock()
	if s.readers == nil {
		s.readers = map[*reader]bool{}
	}
	s.readers[r] = true
	s.mu.Unlock()
	return r, nil
}

// reader is one subtask's reader. Its methods are called from one goroutine.
type reader struct {
	src   *Source
	sc    flow.SourceContext
	log   *slog.Logger
	group string
	cl    *kgo.Client
	adm   *kadm.Client

	// pos holds every owned split's position: next is one past the last
	// record emitted (or control record passed).
	pos map[split]position
	// parked holds the restored positions of owned splits that were not
	// listed at the restore (their topic was deleted, or is no longer
	// named by the configuration, or lost the partition). Every snapshot
	// keeps them, and discovery resumes such a split at its position when
	// it is listed again.
	parked map[split]position
	// known holds every split of the source listed so far, owned or not,
	// so discovery recognizes new ones.
	known         map[split]bool
	nextDiscovery time.Time
	// ends holds each split's end offset from the latest fetch response
	// that carried it, or from the latest listing of end offsets for
	// splits no fetch response carried since the listing before (caught
	// up, or not fetched yet); endGen counts those listings. lag is the
	// sum of the ends minus the positions, -1 before the first response or
	// listing; Lag reads it from other goroutines.
	ends           map[split]endOffset
	endGen         uint64
	nextLagRefresh time.Time
	lag            atomic.Int64
	// unread holds the partitions the reader would own that the listing
	// of end offsets found and the reader does not read yet (added since
	// the last discovery, or discovery is off), with the offset it would
	// start at (the log start, or a parked position) as next and the
	// end: their records count in the lag (docs/design.md, "The Kafka
	// source").
	unread map[split]progress
	// progress copies each owned split's next offset and end (-1:
	// unknown) at every lag update, for Source.ReportMetrics.
	progressMu sync.Mutex
	progress   map[split]progress
	progressAt time.Time
	// The record emitted last, formatted only when Position asks: a
	// string per record would cost more than the rest of Poll.
	lastTopic     string
	lastPartition int32
	lastOffset    int64
	// snapshots are the offsets of each checkpoint's Snapshot, kept until
	// the checkpoint commits (at most maxSnapshots): the reader commits
	// them to the group itself unless a Kafka sink does, which reads them
	// with Source.checkpointOffsets from its own goroutine.
	snapMu    sync.Mutex
	snapshots map[int64]snapshotOffsets
	// assigned caches AssignedSplits.
	assigned []string
}

// endOffset is a split's end offset; gen is the reader's endGen when a
// fetch response gave it, 0 when a listing did.
type endOffset struct {
	off int64
	gen uint64
}

// snapshotOffsets are the next offsets one Snapshot recorded: of the
// splits the reader reads, and of its parked splits.
type snapshotOffsets struct {
	read, parked map[split]int64
}

func (r *reader) owns(s split) bool { return owner(s, r.sc.Parallelism) == r.sc.Subtask }

func (r *reader) init(ctx context.Context, restored map[string][]byte) error {
	all, ids, err := r.src.listSplits(ctx, r.adm)
	if err != nil {
		return err
	}
	var owned []split
	for _, s := range all {
		r.known[s] = true
		if r.owns(s) {
			owned = append(owned, s)
		}
	}
	if len(owned) == 0 {
		r.log.Warn("kafka source subtask owns no partition and stays idle: the source's parallelism is above its partition count", "partitions", len(all), "parallelism", r.sc.Parallelism)
	}
	if len(restored) > 0 && !testbreak.Is(testbreak.OffsetsOutsideTxn) {
		err = r.restore(ctx, owned, ids, restored)
	} else {
		err = r.startup(ctx, owned, ids)
	}
	if err != nil {
		return err
	}
	if r.src.cfg.Bounded {
		if err := r.fixEnds(ctx); err != nil {
			return err
		}
	}
	r.consume(slices.Collect(maps.Keys(r.pos)))
	if r.discovers() {
		r.nextDiscovery = time.Now().Add(r.src.cfg.DiscoveryInterval)
	}
	if len(r.pos) == 0 {
		r.lag.Store(0) // nothing to read, nothing to be behind on
	}
	return nil
}

func (r *reader) discovers() bool { return r.src.cfg.DiscoveryInterval > 0 && !r.src.cfg.Bounded }

// restore takes the positions of the owned splits from restored. Splits
// the checkpoint does not know are new since it was taken: they start at
// the earliest offset, as discovery would have started them. Owned splits
// the checkpoint has a position for that are not listed now are parked.
// A position whose topic id differs from the listed topic's belongs to a
// topic that was deleted and created again: OnTopicRecreated decides.
func (r *reader) restore(ctx context.Context, owned []split, ids map[string]topicID, restored map[string][]byte) error {
	byKey := make(map[split]position, len(restored))
	for k, v := range restored {
		s, err := parseSplit(k)
		if err != nil {
			return fmt.Errorf("restored source state: %w", err)
		}
		p, err := decodePosition(v)
		if err != nil {
			return fmt.Errorf("restored source state of %s: %w", s, err)
		}
		byKey[s] = p
	}
	keys := slices.SortedFunc(maps.Keys(byKey), compareSplits)
	// The checkpointed topic ids of the recreated topics this subtask
	// reads.
	recreated := map[string]topicID{}
	for _, s := range keys {
		if p := byKey[s]; r.owns(s) && isRecreated(p.id, ids, s.topic) {
			recreated[s.topic] = p.id
		}
	}
	if len(recreated) > 0 && r.src.cfg.OnTopicRecreated == RecreatedFail {
		t := slices.Min(slices.Collect(maps.Keys(recreated)))
		return recreatedError(t, recreated[t], ids[t], "the checkpoint being restored has positions for topic id")
	}
	var fresh []split
	for _, s := range owned {
		p, ok := byKey[s]
		if !ok || !recreated[s.topic].isZero() {
			fresh = append(fresh, s)
			continue
		}
		if id := ids[s.topic]; !id.isZero() {
			p.id = id // the same, or adopted by a position without one
		}
		r.pos[s] = p
	}
	for _, s := range keys {
		if r.known[s] || !r.owns(s) {
			continue
		}
		p := byKey[s]
		if old := recreated[s.topic]; !old.isZero() {
			r.log.Warn("the checkpoint has a position for a partition of a topic that was deleted and created again, and the new topic has no such partition: dropping it; if the partition is added, discovery reads it from its earliest offset",
				"partition", s.String(), "old_topic_id", old.String(), "new_topic_id", ids[s.topic].String(), "checkpointed_offset", p.next)
			continue
		}
		why := "its topic is not listed: deleted, or no longer named by Topics or TopicRegex"
		if _, ok := ids[s.topic]; ok {
			why = "its topic has no such partition now"
		}
		r.log.Warn("the checkpoint has a position for a partition the source does not list now; parking it: every checkpoint keeps its position, and when partition discovery lists it again reading resumes there",
			"partition", s.String(), "reason", why, "offset", p.next)
		r.parked[s] = p
	}
	if len(fresh) == 0 {
		return nil
	}
	start, err := r.listed(ctx, fresh, r.adm.ListStartOffsets)
	if err != nil {
		return err
	}
	for _, s := range fresh {
		p, ok := byKey[s]
		switch {
		case !ok:
			r.log.Info("partition is not in the checkpoint; reading it from the earliest offset", "partition", s.String())
		default:
			r.log.Warn("topic was deleted and created again since the checkpoint (its topic id changed); OnTopicRecreated is RecreatedReadEarliest, so the partition is read from the new topic's earliest offset: the old topic's records after the checkpointed offset are gone",
				"partition", s.String(), "old_topic_id", p.id.String(), "new_topic_id", ids[s.topic].String(),
				"checkpointed_offset", p.next, "earliest_offset", start[s])
		}
		r.pos[s] = position{next: start[s], end: -1, id: ids[s.topic]}
	}
	return nil
}

// isRecreated reports whether a position on topic id old belongs to a topic
// that was deleted and created again: the topic is listed with another id.
// Unknown ids (zero) never count.
func isRecreated(old topicID, ids map[string]topicID, topic string) bool {
	cur, ok := ids[topic]
	return ok && !old.isZero() && !cur.isZero() && old != cur
}

// recreatedError is the error of OnTopicRecreated RecreatedFail.
func recreatedError(topic string, old, cur topicID, what string) error {
	return flow.Unrecoverable(fmt.Errorf("topic %q was deleted and created again: %s %s, the topic now has id %s, and OnTopicRecreated is RecreatedFail. "+
		"Either read the new topic from its earliest offset (set SourceConfig.OnTopicRecreated to RecreatedReadEarliest; in a job file source.on-topic-recreated: earliest), "+
		"or start the job over without its checkpoints, so that its startup mode decides where the new topic is read from",
		topic, what, old, cur))
}

type listFunc func(ctx context.Context, topics ...string) (kadm.ListedOffsets, error)

// listed returns one offset per split from list.
func (r *reader) listed(ctx context.Context, splits []split, list listFunc) (map[split]int64, error) {
	lo, err := r.listedOffsets(ctx, splits, list)
	if err != nil {
		return nil, err
	}
	out := make(map[split]int64, len(lo))
	for s, o := range lo {
		out[s] = o.Offset
	}
	return out, nil
}

// listedOffsets returns one listed offset per split from list, with the
// timestamp a lookup by time found.
func (r *reader) listedOffsets(ctx context.Context, splits []split, list listFunc) (map[split]kadm.ListedOffset, error) {
	if len(splits) == 0 {
		return map[split]kadm.ListedOffset{}, nil
	}
	topics := map[string]bool{}
	for _, s := range splits {
		topics[s.topic] = true
	}
	lo, err := list(ctx, slices.Sorted(maps.Keys(topics))...)
	if err != nil {
		return nil, fmt.Errorf("list offsets: %w", err)
	}
	out := make(map[split]kadm.ListedOffset, len(splits))
	for _, s := range splits {
		o, ok := lo.Lookup(s.topic, s.partition)
		if !ok {
			return nil, fmt.Errorf("list offsets: no answer for %s", s)
		}
		if o.Err != nil {
			return nil, fmt.Errorf("list offsets of %s: %w", s, o.Err)
		}
		out[s] = o
	}
	return out, nil
}

func (r *reader) endOffsets(ctx context.Context, splits []split) (map[split]int64, error) {
	if r.src.cfg.ReadUncommitted {
		return r.listed(ctx, splits, r.adm.ListEndOffsets)
	}
	return r.listed(ctx, splits, r.adm.ListCommittedOffsets)
}

// groupOffsets returns the group's committed offsets of splits; splits
// without one are absent.
func (r *reader) groupOffsets(ctx context.Context, splits []split) (map[split]int64, error) {
	resps, err := r.adm.FetchOffsets(ctx, r.group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return map[split]int64{}, nil // a group that never committed
	}
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("fetch the offsets of group %q: %w", r.group, err)
	}
	out := map[split]int64{}
	for _, s := range splits {
		if o, ok := resps.Lookup(s.topic, s.partition); ok && o.Err == nil && o.At >= 0 {
			out[s] = o.At
		}
	}
	return out, nil
}

// startup positions the owned splits by the startup mode.
func (r *reader) startup(ctx context.Context, owned []split, ids map[string]topicID) error {
	cfg := r.src.cfg
	var (
		offs map[split]int64
		err  error
	)
	switch cfg.StartupMode {
	case StartEarliest:
		offs, err = r.listed(ctx, owned, r.adm.ListStartOffsets)
	case StartLatest:
		offs, err = r.endOffsets(ctx, owned)
	case StartTimestamp:
		offs, err = r.fromTimestamp(ctx, owned)
	case StartGroupOffsets:
		offs, err = r.fromGroup(ctx, owned)
	case StartSpecificOffsets:
		offs, err = r.fromSpecific(ctx, owned)
	}
	if err != nil {
		return fmt.Errorf("start from %s: %w", cfg.StartupMode, err)
	}
	for _, s := range owned {
		r.pos[s] = position{next: offs[s], end: -1, id: ids[s.topic]}
	}
	return nil
}

// fromTimestamp returns the first offset of each split whose record is at
// or after the start timestamp. The broker searches only the retained
// records, so when retention (or DeleteRecords) removed the records from
// the timestamp on, the lookup lands on the log start offset: the source
// starts there, and says that records it was asked for are gone.
func (r *reader) fromTimestamp(ctx context.Context, owned []split) (map[split]int64, error) {
	at := r.src.cfg.StartTimestamp
	ms := at.UnixMilli()
	found, err := r.listedOffsets(ctx, owned, func(ctx context.Context, topics ...string) (kadm.ListedOffsets, error) {
		return r.adm.ListOffsetsAfterMilli(ctx, ms, topics...)
	})
	if err != nil {
		return nil, err
	}
	start, err := r.listed(ctx, owned, r.adm.ListStartOffsets)
	if err != nil {
		return nil, err
	}
	out := make(map[split]int64, len(found))
	for _, s := range owned {
		o := found[s]
		out[s] = o.Offset
		// A record at exactly the timestamp is retained, and one newer
		// at the log start may have had deleted predecessors that were
		// at or after it.
		if st := start[s]; st > 0 && o.Offset == st && o.Timestamp > ms {
			r.log.Warn("the start timestamp is before the earliest retained record of the partition; starting at its log start offset, records before it were deleted by retention",
				"partition", s.String(), "start_timestamp", at, "log_start_offset", st,
				"earliest_retained_timestamp", time.UnixMilli(o.Timestamp))
		}
	}
	return out, nil
}

func (r *reader) fromGroup(ctx context.Context, owned []split) (map[split]int64, error) {
	offs, err := r.groupOffsets(ctx, owned)
	if err != nil {
		return nil, err
	}
	var missing []split
	for _, s := range owned {
		if _, ok := offs[s]; !ok {
			missing = append(missing, s)
		}
	}
	if len(missing) == 0 {
		return offs, nil
	}
	var fb map[split]int64
	switch r.src.cfg.ResetFallback {
	case ResetNone:
		// Restarting finds the same: stop with the reason.
		return nil, flow.Unrecoverable(fmt.Errorf("partition %s has no committed offset in group %q and the reset fallback is none: commit an offset for it, or choose the earliest or latest fallback", missing[0], r.group))
	case ResetLatest:
		fb, err = r.endOffsets(ctx, missing)
	default:
		fb, err = r.listed(ctx, missing, r.adm.ListStartOffsets)
	}
	if err != nil {
		return nil, err
	}
	maps.Copy(offs, fb)
	return offs, nil
}

func (r *reader) fromSpecific(ctx context.Context, owned []split) (map[split]int64, error) {
	var listed, rest []split
	for _, s := range owned {
		if _, ok := r.src.cfg.SpecificOffsets[s.topic][s.partition]; ok {
			listed = append(listed, s)
		} else {
			rest = append(rest, s)
		}
	}
	out, err := r.fromGroup(ctx, rest)
	if err != nil {
		return nil, err
	}
	start, err := r.listed(ctx, listed, r.adm.ListStartOffsets)
	if err != nil {
		return nil, err
	}
	end, err := r.listed(ctx, listed, r.adm.ListEndOffsets)
	if err != nil {
		return nil, err
	}
	for _, s := range listed {
		o := r.src.cfg.SpecificOffsets[s.topic][s.partition]
		if o < start[s] || o > end[s] {
			return nil, fmt.Errorf("offset %d for partition %s is outside its retained range %d..%d", o, s, start[s], end[s])
		}
		out[s] = o
	}
	return out, nil
}

// fixEnds gives every owned split without an end the current end offset.
func (r *reader) fixEnds(ctx context.Context) error {
	var open []split
	for s, p := range r.pos {
		if p.end < 0 {
			open = append(open, s)
		}
	}
	end, err := r.endOffsets(ctx, open)
	if err != nil {
		return fmt.Errorf("bounded source: %w", err)
	}
	for _, s := range open {
		p := r.pos[s]
		p.end = end[s]
		r.pos[s] = p
	}
	return nil
}

// consume starts fetching splits from their positions, except the ones a
// bounded source has finished.
func (r *reader) consume(splits []split) {
	m := map[string]map[int32]kgo.Offset{}
	for _, s := range splits {
		p := r.pos[s]
		if p.end >= 0 && p.next >= p.end {
			continue
		}
		if m[s.topic] == nil {
			m[s.topic] = map[int32]kgo.Offset{}
		}
		m[s.topic][s.partition] = kgo.NewOffset().At(p.next)
	}
	if len(m) > 0 {
		r.cl.AddConsumePartitions(m)
	}
}

func (r *reader) finished() bool {
	if !r.src.cfg.Bounded {
		return false
	}
	for _, p := range r.pos {
		if p.next < p.end {
			return false
		}
	}
	return true
}

// Poll emits the records fetched within about 100ms.
func (r *reader) Poll(ctx context.Context, emit func(Record)) error {
	if r.finished() {
		return io.EOF
	}
	now := time.Now()
	if !r.nextDiscovery.IsZero() && !now.Before(r.nextDiscovery) {
		if _, err := r.discover(ctx, true); err != nil {
			if errors.Is(err, flow.ErrUnrecoverable) {
				return err
			}
			// The partitions read so far are unaffected; try again
			// at the next interval.
			r.log.Warn("kafka partition discovery failed", "err", err)
		}
		r.nextDiscovery = time.Now().Add(r.src.cfg.DiscoveryInterval)
	}
	if (len(r.pos) > 0 || len(r.known) > 0 && !r.src.cfg.Bounded) && !now.Before(r.nextLagRefresh) {
		r.refreshEnds(ctx)
		r.nextLagRefresh = time.Now().Add(lagRefreshInterval)
	}
	pctx, cancel := context.WithTimeout(ctx, pollWait)
	fs := r.cl.PollRecords(pctx, r.src.cfg.MaxPollRecords)
	cancel()
	if err := ctx.Err(); err != nil {
		return err
	}
	recreated, err := r.fetchErrors(ctx, fs)
	if err != nil {
		return err
	}
	var (
		done    map[string][]int32
		fetched bool
	)
	// Per partition, not per record: the map lookups and stores of a
	// position cost more than emitting a record.
	fs.EachPartition(func(fp kgo.FetchTopicPartition) {
		if recreated != nil && slices.Contains(recreated, fp.Topic) {
			return // the old topic's, fetched before it was read anew
		}
		s := split{fp.Topic, fp.Partition}
		p, ok := r.pos[s]
		if !ok {
			return // not ours (any more)
		}
		end := fp.HighWatermark
		if !r.src.cfg.ReadUncommitted && fp.LastStableOffset >= 0 {
			end = fp.LastStableOffset
		}
		r.ends[s] = endOffset{end, r.endGen}
		fetched = true
		startNext := p.next
		for _, kr := range fp.Records {
			if kr.Offset < p.next {
				continue // already passed
			}
			if p.end >= 0 && kr.Offset >= p.end {
				p.next = max(p.next, p.end)
				break
			}
			p.next = kr.Offset + 1
			if kr.Attrs.IsControl() {
				continue
			}
			rec := Record{
				Topic: kr.Topic, Partition: kr.Partition, Offset: kr.Offset,
				Key: kr.Key, Value: kr.Value, Timestamp: kr.Timestamp,
			}
			if len(kr.Headers) > 0 {
				rec.Headers = make([]Header, len(kr.Headers))
				for i, h := range kr.Headers {
					rec.Headers[i] = Header{h.Key, h.Value}
				}
			}
			r.lastTopic, r.lastPartition, r.lastOffset = kr.Topic, kr.Partition, kr.Offset
			emit(rec)
		}
		if p.next != startNext {
			r.pos[s] = p
			if p.end >= 0 && p.next >= p.end && startNext < p.end {
				done = appendDone(done, s)
			}
		}
	})
	if fetched {
		r.updateLag()
	}
	if len(done) > 0 {
		r.cl.RemoveConsumePartitions(done)
	}
	return nil
}

// fetchErrors returns the errors of fs, if any. kgo never adopts the new
// id of a topic that was deleted and created again: it stops fetching the
// topic and, after a few retries (about 10 seconds), reports
// UNKNOWN_TOPIC_ID on every poll. On that error the reader checks the
// topic ids at once instead of at the next discovery; the errors of the
// topics it found recreated and read anew are not errors, and it returns
// those topics: what fs holds of them is the old topic's.
func (r *reader) fetchErrors(ctx context.Context, fs kgo.Fetches) (recreated []string, _ error) {
	type fetchErr struct {
		topic string
		err   error
	}
	var (
		errs      []fetchErr
		unknownID bool
	)
	fs.EachError(func(t string, p int32, err error) {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return
		}
		unknownID = unknownID || errors.Is(err, kerr.UnknownTopicID)
		errs = append(errs, fetchErr{t, fmt.Errorf("read %s/%d: %w", t, p, err)})
	})
	if len(errs) == 0 {
		return nil, nil
	}
	if unknownID {
		var err error
		recreated, err = r.discover(ctx, r.discovers())
		if errors.Is(err, flow.ErrUnrecoverable) {
			return nil, err
		}
		if err != nil {
			r.log.Warn("kafka: checking the topic ids after UNKNOWN_TOPIC_ID failed", "err", err)
		}
		errs = slices.DeleteFunc(errs, func(e fetchErr) bool { return slices.Contains(recreated, e.topic) })
		if len(errs) == 0 {
			return recreated, nil
		}
	}
	joined := make([]error, len(errs))
	for i, e := range errs {
		joined[i] = e.err
	}
	return nil, r.src.cfg.Client.explain(errors.Join(joined...))
}

// refreshEnds lists the end offsets of the splits no fetch response
// carried since the last listing, and updates the lag. A fetch response
// carries only partitions with new records, so without the listing a
// caught-up reader would never know its lag, nor see records it has not
// fetched yet. Failures leave the ends as they were.
func (r *reader) refreshEnds(ctx context.Context) {
	gen := r.endGen
	r.endGen++
	var stale []split
	for s, p := range r.pos {
		if p.end >= 0 && p.next >= p.end {
			continue // a finished bounded split is behind by nothing
		}
		if e, ok := r.ends[s]; !ok || e.gen != gen {
			stale = append(stale, s)
		}
	}
	// The topics of every split listed so far, not only the stale ones:
	// the listing covers all partitions of a topic, and so shows those
	// added since the last discovery.
	topics := map[string]bool{}
	for s := range r.known {
		topics[s.topic] = true
	}
	if len(topics) > 0 && !r.src.cfg.Bounded {
		lctx, cancel := context.WithTimeout(ctx, lagListTimeout)
		list := r.adm.ListCommittedOffsets
		if r.src.cfg.ReadUncommitted {
			list = r.adm.ListEndOffsets
		}
		lo, err := list(lctx, slices.Sorted(maps.Keys(topics))...)
		if err != nil {
			r.log.Debug("kafka: listing end offsets for the lag failed", "err", err)
		}
		for _, s := range stale {
			if o, ok := lo.Lookup(s.topic, s.partition); ok && o.Err == nil && o.Offset >= 0 {
				r.ends[s] = endOffset{off: o.Offset}
			}
		}
		if err == nil {
			r.listUnread(lctx, lo)
		}
		cancel()
	} else if len(stale) > 0 {
		lctx, cancel := context.WithTimeout(ctx, lagListTimeout)
		ends, err := r.endOffsets(lctx, stale)
		cancel()
		if err != nil {
			r.log.Debug("kafka: listing end offsets for the lag failed", "err", err)
		}
		for s, off := range ends {
			if off >= 0 {
				r.ends[s] = endOffset{off: off}
			}
		}
	}
	r.updateLag()
}

// listUnread updates r.unread from a listing of end offsets that covers
// every partition of the reader's topics: the partitions this subtask
// would own that it neither reads nor knew of, with their end and where
// reading them would start (a parked position, else the log start,
// listed once per partition).
func (r *reader) listUnread(ctx context.Context, lo kadm.ListedOffsets) {
	found := map[split]int64{}
	lo.Each(func(o kadm.ListedOffset) {
		s := split{o.Topic, o.Partition}
		if o.Err != nil || o.Offset < 0 || r.known[s] || !r.owns(s) {
			return
		}
		if ps := r.src.cfg.Partitions; ps != nil && !slices.Contains(ps[s.topic], s.partition) {
			return // another task's partition (scale-out)
		}
		if _, read := r.pos[s]; read {
			return
		}
		found[s] = o.Offset
	})
	var first []split
	for s := range found {
		if _, ok := r.unread[s]; !ok {
			if _, parked := r.parked[s]; !parked {
				first = append(first, s)
			}
		}
	}
	var starts map[split]int64
	if len(first) > 0 {
		var err error
		if starts, err = r.listed(ctx, first, r.adm.ListStartOffsets); err != nil {
			r.log.Debug("kafka: listing start offsets of partitions not read yet failed", "err", err)
			for _, s := range first {
				delete(found, s) // next time
			}
		}
	}
	next := make(map[split]progress, len(found))
	for s, end := range found {
		p, ok := r.unread[s]
		if !ok {
			p.next = starts[s]
			if pp, parked := r.parked[s]; parked {
				p.next = pp.next
			}
		}
		p.end, p.bound = end, -1
		next[s] = p
	}
	r.unread = next
}

// updateLag sums end - next over the splits with a known end; a reader
// without splits is behind by nothing.
func (r *reader) updateLag() {
	// Partitions discovery has taken since the listing are read now.
	for s := range r.unread {
		if r.known[s] {
			delete(r.unread, s)
		}
	}
	var lag int64
	for _, p := range r.unread {
		lag += max(0, p.end-p.next)
	}
	if len(r.pos) == 0 {
		r.lag.Store(lag)
		r.storeProgress()
		return
	}
	known := false
	for s, e := range r.ends {
		p, ok := r.pos[s]
		if !ok {
			continue
		}
		end := e.off
		if p.end >= 0 {
			end = min(end, p.end)
		}
		lag += max(0, end-p.next)
		known = true
	}
	if known {
		r.lag.Store(lag)
	}
	r.storeProgress()
}

// storeProgress copies each split's next offset and end, the partitions
// not read yet included, for Source.ReportMetrics.
func (r *reader) storeProgress() {
	r.progressMu.Lock()
	if r.progress == nil {
		r.progress = map[split]progress{}
	}
	clear(r.progress)
	maps.Copy(r.progress, r.unread)
	for s, p := range r.pos {
		end := int64(-1)
		if e, ok := r.ends[s]; ok {
			end = e.off
			if p.end >= 0 {
				end = min(end, p.end)
			}
		}
		r.progress[s] = progress{next: p.next, end: end, bound: p.end}
	}
	r.progressAt = time.Now()
	r.progressMu.Unlock()
}

// progress is a split's position for ReportMetrics: the next offset, the
// end offset (-1: unknown) and the bound of a bounded split (-1: none).
type progress struct{ next, end, bound int64 }

// staleProgress is how old a reader's progress may be before
// ReportMetrics lists the end offsets itself: a reader blocked downstream
// (backpressure, a stuck operator) does not poll, and its lag must still
// grow while records arrive.
const staleProgress = 3 * time.Second

// refreshStale lists the end offsets of the splits of readers whose
// progress is older than staleProgress and updates those copies.
func (s *Source) refreshStale(readers []*reader) {
	for _, r := range readers {
		r.progressMu.Lock()
		stale := time.Since(r.progressAt) > staleProgress && len(r.progress) > 0
		topics := map[string]bool{}
		for sp := range r.progress {
			topics[sp.topic] = true
		}
		r.progressMu.Unlock()
		if !stale {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), lagListTimeout)
		list := r.adm.ListCommittedOffsets
		if s.cfg.ReadUncommitted {
			list = r.adm.ListEndOffsets
		}
		lo, err := list(ctx, slices.Sorted(maps.Keys(topics))...)
		cancel()
		if err != nil {
			continue
		}
		r.progressMu.Lock()
		for sp, p := range r.progress {
			if o, ok := lo.Lookup(sp.topic, sp.partition); ok && o.Err == nil && o.Offset >= 0 {
				p.end = o.Offset
				if p.bound >= 0 {
					p.end = min(p.end, p.bound)
				}
				r.progress[sp] = p
			}
		}
		r.progressMu.Unlock()
	}
}

// ReportMetrics reports, per partition this process reads (or would read:
// one added since the last discovery), the next
// offset to read (current_offset), the end offset less it (records_lag)
// and the offset last committed (committed_offset); their maximum and sum
// (records_lag_max, pending_records), and the offset commits. The names
// follow Flink's Kafka source metrics (docs/design.md, "Metrics").
func (s *Source) ReportMetrics(emit func(flow.Metric)) {
	s.mu.Lock()
	readers := slices.Collect(maps.Keys(s.readers))
	committed := maps.Clone(s.committed)
	s.mu.Unlock()
	s.refreshStale(readers)
	parts := map[split]progress{}
	for _, r := range readers {
		r.progressMu.Lock()
		maps.Copy(parts, r.progress)
		r.progressMu.Unlock()
	}
	labels := func(sp split) []flow.Label {
		return []flow.Label{{Name: "topic", Value: sp.topic}, {Name: "partition", Value: strconv.Itoa(int(sp.partition))}}
	}
	var lagMax, pending int64
	lagKnown := len(parts) > 0
	for sp, p := range parts {
		emit(flow.Metric{Name: "source_current_offset", Help: "The next offset the source reads from the partition.", Labels: labels(sp), Value: float64(p.next)})
		if p.end < 0 {
			lagKnown = false
			continue
		}
		lag := max(0, p.end-p.next)
		emit(flow.Metric{Name: "source_records_lag", Help: "Records in the partition after the source's position (end offset less current offset).", Labels: labels(sp), Value: float64(lag)})
		lagMax = max(lagMax, lag)
		pending += lag
	}
	if lagKnown {
		emit(flow.Metric{Name: "source_records_lag_max", Help: "The largest lag of a partition the source reads.", Value: float64(lagMax)})
		emit(flow.Metric{Name: "source_pending_records", Help: "Records not yet read by the source, over its partitions.", Value: float64(pending)})
	}
	for sp, off := range committed {
		emit(flow.Metric{Name: "source_committed_offset", Help: "The offset last committed for the partition with a checkpoint (to the group, or in the Kafka sink's transaction).", Labels: labels(sp), Value: float64(off)})
	}
	emit(flow.Metric{Name: "source_commits_succeeded_total", Counter: true, Help: "Checkpoints whose source offsets were committed.", Value: float64(s.commitsOK.Load())})
	emit(flow.Metric{Name: "source_commits_failed_total", Counter: true, Help: "Commits of checkpoint offsets to the group that failed.", Value: float64(s.commitsFailed.Load())})
}

// CommittedOffsets returns, per partition, the offset committed with the
// newest committed checkpoint (to the group, or in a Kafka sink's
// transaction): what a restore would resume from.
func (s *Source) CommittedOffsets() map[Partition]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[Partition]int64, len(s.committed))
	for sp, o := range s.committed {
		out[Partition{sp.topic, sp.partition}] = o
	}
	return out
}

// offsetsCommitted records offs as the partitions' committed offsets.
func (s *Source) offsetsCommitted(offs map[split]int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.committed == nil {
		s.committed = map[split]int64{}
	}
	maps.Copy(s.committed, offs)
	s.commitsOK.Add(1)
}

func appendDone(m map[string][]int32, s split) map[string][]int32 {
	if m == nil {
		m = map[string][]int32{}
	}
	m[s.topic] = append(m[s.topic], s.partition)
	return m
}

// discover lists the source's partitions. It first checks the topic ids of
// the topics the reader reads or has parked: a changed id means the topic
// was deleted and created again, and OnTopicRecreated decides (fail: an
// unrecoverable error; read earliest: the reader reads the new topic from
// its earliest offset, in place). Then, if addNew, the owned partitions
// that appeared since the last look start: a parked one at its position,
// any other at the earliest offset. It returns the recreated topics it
// read anew.
func (r *reader) discover(ctx context.Context, addNew bool) ([]string, error) {
	dctx, cancel := context.WithTimeout(ctx, discoveryTimeout)
	defer cancel()
	all, ids, err := r.src.listSplits(dctx, r.adm)
	if err != nil {
		return nil, err
	}
	old := map[string]topicID{} // recreated topic -> the id the reader had
	for _, m := range []map[split]position{r.pos, r.parked} {
		for s, p := range m {
			if isRecreated(p.id, ids, s.topic) {
				old[s.topic] = p.id
			}
		}
	}
	recreated := slices.Sorted(maps.Keys(old))
	if len(recreated) > 0 {
		if r.src.cfg.OnTopicRecreated == RecreatedFail {
			t := recreated[0]
			return nil, recreatedError(t, old[t], ids[t], "the source read it with topic id")
		}
		if err := r.readRecreated(dctx, recreated, old, ids, all); err != nil {
			return nil, err
		}
	}
	if !addNew {
		return recreated, nil
	}
	var mine, resumed []split
	for _, s := range all {
		if r.known[s] {
			continue
		}
		r.known[s] = true
		if !r.owns(s) {
			continue
		}
		if p, ok := r.parked[s]; ok {
			delete(r.parked, s)
			if id := ids[s.topic]; !id.isZero() {
				p.id = id
			}
			r.pos[s] = p
			resumed = append(resumed, s)
			r.log.Info("a parked partition is listed again; reading resumes at its checkpointed offset", "partition", s.String(), "offset", p.next)
			continue
		}
		mine = append(mine, s)
	}
	r.consume(resumed)
	if len(mine) == 0 {
		return recreated, nil
	}
	start, err := r.listed(dctx, mine, r.adm.ListStartOffsets)
	if err != nil {
		for _, s := range mine {
			delete(r.known, s) // retry them next time
		}
		return recreated, err
	}
	for _, s := range mine {
		r.log.Info("discovered a new partition; reading it from the earliest offset", "partition", s.String())
		r.pos[s] = position{next: start[s], end: -1, id: ids[s.topic]}
	}
	r.consume(mine)
	return recreated, nil
}

// readRecreated reads the recreated topics anew (OnTopicRecreated
// RecreatedReadEarliest): each owned split the new topic has restarts at
// its earliest offset (a bounded source ends at the new topic's current
// end), the others and parked ones of those topics are dropped. old holds
// the ids the reader had, ids the current ones, all the listed splits.
func (r *reader) readRecreated(ctx context.Context, topics []string, old, ids map[string]topicID, all []split) error {
	listed := make(map[split]bool, len(all))
	for _, s := range all {
		listed[s] = true
	}
	var reset []split
	for s := range r.pos {
		if !old[s.topic].isZero() && listed[s] {
			reset = append(reset, s)
		}
	}
	sortSplits(reset)
	start, err := r.listed(ctx, reset, r.adm.ListStartOffsets)
	if err != nil {
		return err
	}
	var end map[split]int64
	if r.src.cfg.Bounded {
		if end, err = r.endOffsets(ctx, reset); err != nil {
			return err
		}
	}
	// kgo keeps the old topic id until the topic is purged from the
	// client; purging also drops what it fetched and buffered.
	r.cl.PurgeTopicsFromClient(topics...)
	for _, s := range slices.SortedFunc(maps.Keys(r.pos), compareSplits) {
		if old[s.topic].isZero() {
			continue
		}
		p := r.pos[s]
		delete(r.pos, s)
		delete(r.ends, s)
		if !listed[s] {
			delete(r.known, s)
			r.log.Warn("topic was deleted and created again (its topic id changed), and the new topic has no such partition: dropping it; if the partition is added, discovery reads it from its earliest offset",
				"partition", s.String(), "old_topic_id", p.id.String(), "new_topic_id", ids[s.topic].String(), "offset", p.next)
			continue
		}
		np := position{next: start[s], end: -1, id: ids[s.topic]}
		if end != nil {
			np.end = end[s]
		}
		r.pos[s] = np
		r.log.Warn("topic was deleted and created again (its topic id changed); OnTopicRecreated is RecreatedReadEarliest, so the partition is read from the new topic's earliest offset: the old topic's records from the offset reached on are gone",
			"partition", s.String(), "old_topic_id", p.id.String(), "new_topic_id", ids[s.topic].String(),
			"offset", p.next, "earliest_offset", start[s])
	}
	for _, s := range slices.SortedFunc(maps.Keys(r.parked), compareSplits) {
		if old[s.topic].isZero() {
			continue
		}
		p := r.parked[s]
		delete(r.parked, s)
		r.log.Warn("a parked partition belongs to a topic that was deleted and created again (its topic id changed): dropping its position; discovery reads the new topic's partition from its earliest offset",
			"partition", s.String(), "old_topic_id", p.id.String(), "new_topic_id", ids[s.topic].String(), "offset", p.next)
	}
	for s := range r.known {
		if !old[s.topic].isZero() && !listed[s] {
			delete(r.known, s)
		}
	}
	r.consume(reset)
	r.updateLag()
	return nil
}

// Snapshot returns the position of every owned split, parked ones
// included, keyed "topic/partition".
func (r *reader) Snapshot(checkpointID int64) (map[string][]byte, error) {
	out := make(map[string][]byte, len(r.pos)+len(r.parked))
	snap := snapshotOffsets{read: make(map[split]int64, len(r.pos))}
	for s, p := range r.pos {
		out[s.String()] = p.encode()
		snap.read[s] = p.next
	}
	if len(r.parked) > 0 {
		snap.parked = make(map[split]int64, len(r.parked))
		for s, p := range r.parked {
			out[s.String()] = p.encode()
			snap.parked[s] = p.next
		}
	}
	r.snapMu.Lock()
	defer r.snapMu.Unlock()
	r.snapshots[checkpointID] = snap
	if len(r.snapshots) > maxSnapshots {
		ids := slices.Sorted(maps.Keys(r.snapshots))
		for _, id := range ids[:len(ids)-maxSnapshots] {
			delete(r.snapshots, id)
		}
	}
	return out, nil
}

// CheckpointCommitted commits the checkpoint's offsets to the group for
// monitoring, unless a Kafka sink already committed them in its
// transaction. Parked splits are not committed: the source does not read
// them, and Kafka refuses offsets of partitions that do not exist. The job
// never restores from these offsets.
func (r *reader) CheckpointCommitted(ctx context.Context, checkpointID int64) error {
	r.snapMu.Lock()
	snap, ok := r.snapshots[checkpointID]
	for id := range r.snapshots {
		if id <= checkpointID {
			delete(r.snapshots, id)
		}
	}
	r.snapMu.Unlock()
	r.src.mu.Lock()
	txn := r.src.transactional
	r.src.mu.Unlock()
	if !ok || len(snap.read) == 0 {
		return nil
	}
	if txn {
		// The sink's transaction committed them with the checkpoint.
		r.src.offsetsCommitted(snap.read)
		return nil
	}
	meta := offsetMetadata(r.sc.Job, checkpointID)
	offs := kadm.Offsets{}
	for s, next := range snap.read {
		offs.Add(kadm.Offset{Topic: s.topic, Partition: s.partition, At: next, LeaderEpoch: -1, Metadata: meta})
	}
	resp, err := r.adm.CommitOffsets(ctx, r.group, offs)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		r.src.commitsFailed.Add(1)
		return fmt.Errorf("commit offsets of checkpoint %d to group %q: %w", checkpointID, r.group, err)
	}
	r.src.offsetsCommitted(snap.read)
	return nil
}

// Position names the record emitted last, as topic/partition@offset, ""
// before the first.
func (r *reader) Position() string {
	if r.lastTopic == "" {
		return ""
	}
	return Record{Topic: r.lastTopic, Partition: r.lastPartition, Offset: r.lastOffset}.String()
}

// Close closes the reader's client.
func (r *reader) Close() error {
	r.src.mu.Lock()
	delete(r.src.readers, r)
	r.src.mu.Unlock()
	r.cl.Close()
	return nil
}

// offsetMetadata is the metadata of offsets committed for a checkpoint.
func offsetMetadata(job string, checkpointID int64) string {
	return offsetMetadataPrefix(job) + strconv.FormatInt(checkpointID, 10)
}

// offsetMetadataPrefix is what the metadata of every offset committed for
// a checkpoint of job starts with.
func offsetMetadataPrefix(job string) string { return "onceflow:" + job + ":" }
