package kafka

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/onceflow/onceflow/internal/testbreak"
)

// priorProgressTimeout bounds PriorProgress.
const priorProgressTimeout = 10 * time.Second

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

	// marks are the newest watermark markers per upstream task read
	// since the engine last took them (SourceConfig.Upstreams).
	marks map[string]flow.UpstreamMark

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
	// fetched holds the records of the last fetch not emitted yet, in
	// fetch order, when Poll yielded to a barrier; yield is the engine's
	// (flow.Yielder).
	fetched []fetchedPart
	yield   func() bool
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

// Close closes the reader's client.
func (r *reader) Close() error {
	r.src.mu.Lock()
	delete(r.src.readers, r)
	r.src.mu.Unlock()
	r.cl.Close()
	return nil
}
