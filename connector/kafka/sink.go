package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/testbreak"
	"github.com/onceflow/onceflow/internal/txhold"
)

// Sink defaults.
const (
	// DefaultProgressTopic is the topic whose partition 0 anchors the
	// commit records of every job (see the package doc) and holds a copy
	// of each, keyed by job, for people reading it.
	DefaultProgressTopic = "__onceflow_progress"
	// DefaultTransactionTimeout is Kafka's default transaction.max.timeout.ms,
	// the longest timeout a default broker accepts.
	DefaultTransactionTimeout = 15 * time.Minute
	// DefaultMaxHeldBytes is SinkConfig.MaxHeldBytes's default.
	DefaultMaxHeldBytes = 64 << 20
)

// Delivery is the guarantee of a [Sink]'s writes.
type Delivery = connector.Delivery

// Deliveries [SinkConfig].Delivery accepts.
const (
	// DeliveryExactlyOnce writes each checkpoint's records in one Kafka
	// transaction that is the job's commit point (see the package doc):
	// read_committed readers see every record exactly once.
	DeliveryExactlyOnce = connector.ExactlyOnce
	// DeliveryAtLeastOnce writes with an idempotent producer and no
	// transactions; a checkpoint waits until the brokers acknowledged every
	// record written before it. After a failure the job replays from its
	// last checkpoint, so records may be written again, but none is lost.
	DeliveryAtLeastOnce = connector.AtLeastOnce
	// DeliveryNone writes without waiting for acknowledgements (acks=0):
	// records may be lost or duplicated. For output that is only looked at.
	DeliveryNone = connector.None
)

// SinkConfig configures a [Sink].
type SinkConfig struct {
	Client ClientConfig
	// Delivery is the sink's guarantee, default DeliveryExactlyOnce. Only
	// an exactly-once sink is the job's commit point and commits the
	// offsets of OffsetsOf; with the others the sources commit their
	// offsets to their groups after each checkpoint, and the job's
	// checkpoint manifest is its commit point.
	Delivery Delivery
	// Job is the job's name, default "": the name the job runs with
	// (flow.JobName), which the sink learns when the job starts. When set
	// it must match that name.
	Job string
	// Topic is the topic every record is written to, default "": each
	// record's Record.Topic. It wins over Record.Topic because records
	// read by a Source carry their input topic, and passing them through
	// must not write them back into it.
	Topic string
	// KeepPartition writes each record to its Record.Partition, default
	// false: the partition is chosen from the key with murmur2 as the Java
	// client does (records without a key are spread).
	KeepPartition bool
	// OffsetsOf lists the Kafka sources whose offsets each checkpoint's
	// transaction commits to their groups (with metadata
	// "onceflow:<job>:<checkpoint>"), default none. Ignored unless
	// Delivery is exactly-once: the sources then commit them themselves.
	OffsetsOf []*Source
	// TransactionalID is the stable transactional id of the job's
	// producer, default "onceflow-<job>-0". A new instance fences the
	// previous one by initializing the same id: never share it between
	// jobs.
	TransactionalID string
	// ProgressTopic is the topic whose partition 0 anchors the job's
	// commit record (a committed offset of ProgressGroup, see the package
	// doc) and receives a copy of each record, default
	// DefaultProgressTopic. Recovery never reads it, so its cleanup policy
	// and other jobs' transactions on it do not matter. It is created (one
	// partition, compacted) when missing and the client may create topics,
	// otherwise it must exist.
	ProgressTopic string
	// ProgressGroup is the consumer group the commit record is committed
	// to, default "__onceflow_progress.<job>". No consumer joins it; one
	// group per job keeps recovery independent of every other job's
	// transactions.
	ProgressGroup string
	// TransactionTimeout is the producer's transaction.timeout.ms, default
	// 15 minutes. A transaction is open from the first record after one
	// checkpoint until the next checkpoint commits: with f tolerable
	// checkpoint failures that is up to (f+1) × (interval + min pause +
	// checkpoint timeout), which it must exceed (checked when the job
	// starts); the brokers must allow it (transaction.max.timeout.ms). A
	// transaction the broker times out only aborts an epoch: the job fails
	// over and replays it.
	TransactionTimeout time.Duration
	// MaxHeldBytes bounds the memory of records held while a checkpoint
	// commits, default DefaultMaxHeldBytes (64 MiB); exactly-once only.
	// Kafka transactions are sequential per producer, so a writer that has
	// prepared checkpoint n keeps the records it gets next in memory until
	// the commit point of n has run. When the held records (keys, values
	// and headers) reach this many bytes, the writer blocks until the
	// commit or abort of n releases them: backpressure reaches the
	// sources instead of memory growing with the input rate.
	MaxHeldBytes int64
	// MarkWatermarks, when set, names the task writing a scale-out
	// repartition topic: at every checkpoint the sink writes a watermark
	// marker (HeaderWatermark) with the watermark reaching it into each
	// of the topic's MarkPartitions partitions, inside the checkpoint's
	// transaction, for the tasks reading the topic (SourceConfig.Upstreams;
	// docs/design.md, "Scale-out"). Needs exactly-once, Topic,
	// KeepPartition and a sink of parallelism 1.
	MarkWatermarks string
	// MarkPartitions is the partition count of Topic, with MarkWatermarks.
	MarkPartitions int
}

func (c *SinkConfig) withDefaults() {
	if c.Delivery == "" {
		c.Delivery = DeliveryExactlyOnce
	}
	if c.ProgressTopic == "" {
		c.ProgressTopic = DefaultProgressTopic
	}
	if c.TransactionTimeout == 0 {
		c.TransactionTimeout = DefaultTransactionTimeout
	}
	if c.MaxHeldBytes == 0 {
		c.MaxHeldBytes = DefaultMaxHeldBytes
	}
	c.jobDefaults()
}

// jobDefaults fills in the settings derived from the job's name.
func (c *SinkConfig) jobDefaults() {
	if c.Job == "" {
		return
	}
	if c.TransactionalID == "" {
		c.TransactionalID = "onceflow-" + c.Job + "-0"
	}
	if c.ProgressGroup == "" {
		c.ProgressGroup = DefaultProgressTopic + "." + c.Job
	}
}

func (c *SinkConfig) validate() error {
	if err := c.Client.validate(); err != nil {
		return err
	}
	if c.MaxHeldBytes < 0 {
		return fmt.Errorf("MaxHeldBytes %d is negative", c.MaxHeldBytes)
	}
	if err := c.validateMarks(); err != nil {
		return err
	}
	for i, s := range c.OffsetsOf {
		if s == nil {
			return fmt.Errorf("OffsetsOf[%d] is nil", i)
		}
	}
	switch c.Delivery {
	case DeliveryExactlyOnce:
	case DeliveryAtLeastOnce, DeliveryNone:
		return nil // no transactions: the timeout does not apply
	default:
		return fmt.Errorf("delivery %q is not supported: use %s, %s or %s", c.Delivery, DeliveryExactlyOnce, DeliveryAtLeastOnce, DeliveryNone)
	}
	if c.TransactionTimeout < time.Millisecond {
		return fmt.Errorf("transaction timeout %v is below Kafka's 1ms resolution", c.TransactionTimeout)
	}
	return nil
}

// checkJob validates the configuration against the job it runs in.
func (c *SinkConfig) checkJob(info flow.JobInfo) error {
	if c.Job != info.Name {
		return fmt.Errorf("the Kafka sink is configured for job %q but runs in job %q: leave SinkConfig.Job empty or set it to the name given to flow.JobName", c.Job, info.Name)
	}
	if c.Delivery != DeliveryExactlyOnce {
		return nil
	}
	cp := info.Checkpointing
	if cp.Mode != flow.ExactlyOnce {
		return errors.New("an exactly-once Kafka sink needs exactly-once checkpointing (aligned barriers): at-least-once checkpoints can put records of a later epoch into a checkpoint's transaction, so a restore writes them again; use checkpointing mode exactly-once, or sink delivery at-least-once")
	}
	return CheckTransactionTimeout(c.TransactionTimeout, cp)
}

// CheckTransactionTimeout reports whether a Kafka transaction of the given
// timeout outlives the longest epoch the checkpoint settings allow (see
// SinkConfig.TransactionTimeout). A job started with an exactly-once Sink
// runs this check; a job file validator can run it before.
func CheckTransactionTimeout(timeout time.Duration, cp flow.CheckpointSettings) error {
	cp = cp.WithDefaults()
	if cp.Interval == 0 {
		return nil // bounded jobs: one transaction from start to end
	}
	if cp.TolerableFailures < 0 {
		return fmt.Errorf("an exactly-once Kafka sink cannot tolerate any number of failed checkpoints: the open transaction would outlive the transaction timeout %v (transaction.timeout.ms), and the broker aborts it; set a number of tolerable failed checkpoints", timeout)
	}
	cycle := cp.Interval + cp.MinPause + cp.Timeout
	need := time.Duration(cp.TolerableFailures+1) * cycle
	if timeout <= need {
		return fmt.Errorf("transaction timeout %v (transaction.timeout.ms) is too short for the checkpoint settings: a transaction stays open until the next checkpoint commits, which with %d tolerable failed checkpoints can take (%d+1) × (interval %v + min pause %v + checkpoint timeout %v) = %v; "+
			"the broker would abort transactions of checkpoints that are still allowed to complete. Lower the checkpoint timeout or the tolerable failures, or raise the transaction timeout (and the brokers' transaction.max.timeout.ms if needed)",
			timeout, cp.TolerableFailures, cp.TolerableFailures, cp.Interval, cp.MinPause, cp.Timeout, need)
	}
	return nil
}

// Sink writes [Record]s to Kafka in one transaction per checkpoint and owns
// the job's commit point (see the package doc). One Sink value is one
// operator of one job instance; its subtasks share one transactional
// producer.
type Sink struct {
	// cfg is set by NewSink and completed by BindJob (the job's name and
	// what derives from it) before anything runs.
	cfg SinkConfig
	log *slog.Logger
	// stopTimeout is the job's; the abort of an open transaction when
	// the sink closes gets a part of it.
	stopTimeout time.Duration

	// mu guards sess, every writer's buffers and mode, and the fields
	// below; the commit point holds it throughout, so no record enters a
	// transaction it does not belong to.
	mu   sync.Mutex
	sess *session
	// hold keeps, in order and up to MaxHeldBytes, every writer's records
	// that must wait for an unresolved checkpoint (see writer.write), and
	// knows which checkpoints are unresolved and the last committed one.
	// maxHeld is the most bytes it held, for tests and metrics.
	hold    *txhold.Hold[heldRecord]
	maxHeld int64
	// txnCommits and txnAborts count the transactions of checkpoints
	// committed and those aborted (ReportMetrics).
	txnCommits, txnAborts atomic.Int64

	// deadLetterTopics are the topics of DeadLetters sinks, which the
	// partitioner partitions by key even with KeepPartition.
	dlMu             sync.Mutex
	deadLetterTopics map[string]bool
}

var (
	_ flow.Sink[Record]        = (*Sink)(nil)
	_ flow.CommitPointProvider = (*Sink)(nil)
	_ flow.JobBinder           = (*Sink)(nil)
	_ flow.CommitPoint         = (*CommitPoint)(nil)
	_ flow.AbortNotifier       = (*CommitPoint)(nil)
)

// NewSink validates cfg and returns a sink.
func NewSink(cfg SinkConfig) (*Sink, error) {
	cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("kafka sink: %w", err)
	}
	if cfg.Delivery == DeliveryExactlyOnce {
		for _, src := range cfg.OffsetsOf {
			src.mu.Lock()
			src.transactional = true
			src.mu.Unlock()
		}
	}
	return &Sink{cfg: cfg, log: slog.New(slog.DiscardHandler), stopTimeout: time.Minute, hold: txhold.New(cfg.MaxHeldBytes, heldRecord.size)}, nil
}

// BindJob learns the job the sink runs in (flow calls it when the job
// starts) and checks that the sink's settings work with it: the job's name,
// exactly-once checkpointing for exactly-once delivery, and a transaction
// timeout that covers the checkpoint settings.
func (s *Sink) BindJob(info flow.JobInfo) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.Job == "" {
		s.cfg.Job = info.Name
		s.cfg.jobDefaults()
	}
	if err := s.cfg.checkJob(info); err != nil {
		return fmt.Errorf("kafka sink: %w", err)
	}
	if info.Logger != nil {
		s.log = info.Logger.With("sink", "kafka")
	}
	if info.StopTimeout > 0 {
		s.stopTimeout = info.StopTimeout
	}
	return nil
}

func (s *Sink) exactlyOnce() bool { return s.cfg.Delivery == DeliveryExactlyOnce }

func (s *Sink) isDeadLetterTopic(t string) bool {
	s.dlMu.Lock()
	defer s.dlMu.Unlock()
	return s.deadLetterTopics[t]
}

// session is one transactional producer and the writers using it, from the
// fencing at a (re)start to the last writer's Close.
type session struct {
	cl      *kgo.Client
	txid    string // the transactional id (exactly-once)
	writers map[*writer]bool
	// err is sticky: a session whose transaction failed cannot commit
	// again; the job fails over and the next start makes a new session.
	err error
	// ended is true when no transaction is open (it was aborted, or
	// ending it failed in a way that leaves nothing to abort).
	ended bool
	// epoch is the transactional producer's epoch after its
	// initialization: it grows with every incarnation that fences the
	// one before.
	epoch int16
}

// newSession creates the producer. With exactly-once it initializes its
// transactional id, which fences any previous instance and aborts its open
// transaction, and begins a transaction. Caller holds s.mu.
func (s *Sink) newSession(ctx context.Context) (*session, error) {
	cfg := s.cfg
	part := kgo.RecordPartitioner(sinkPartitioner{sink: s, byKey: kgo.StickyKeyPartitioner(nil)})
	switch cfg.Delivery {
	case DeliveryAtLeastOnce:
		// kgo's producer is idempotent with acks=all by default: retries
		// do not duplicate, and an acknowledged record is replicated.
		cl, err := cfg.Client.newClient(part)
		if err != nil {
			return nil, err
		}
		return &session{cl: cl, writers: map[*writer]bool{}}, nil
	case DeliveryNone:
		// acks=0 needs the idempotent producer off.
		cl, err := cfg.Client.newClient(part, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
		if err != nil {
			return nil, err
		}
		return &session{cl: cl, writers: map[*writer]bool{}}, nil
	}
	if cfg.Job == "" {
		return nil, errors.New("the Kafka sink does not know its job: it is not part of a started job (flow.To and Env.Start tell it), and SinkConfig.Job is empty")
	}
	txid := cfg.TransactionalID
	if testbreak.Is(testbreak.NoFencing) {
		// The broken engine of the proof suite: a fresh id per
		// incarnation fences nobody and aborts no zombie's transaction.
		txid += "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	if err := s.ensureProgressTopic(ctx); err != nil {
		return nil, err
	}
	cl, err := cfg.Client.newClient(
		kgo.TransactionalID(txid),
		kgo.TransactionTimeout(cfg.TransactionTimeout),
		part,
	)
	if err != nil {
		return nil, err
	}
	_, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		cl.Close()
		if errors.Is(err, kerr.InvalidTransactionTimeout) {
			return nil, flow.Unrecoverable(fmt.Errorf("the broker refused the transaction timeout %v (the producer's transaction.timeout.ms): it is above the brokers' transaction.max.timeout.ms; raise that setting on the brokers or lower SinkConfig.TransactionTimeout: %w", cfg.TransactionTimeout, err))
		}
		return nil, fmt.Errorf("initialize transactional id %q: %w", cfg.TransactionalID, fenced(err))
	}
	if err := cl.BeginTransaction(); err != nil {
		cl.Close()
		return nil, fmt.Errorf("begin transaction: %w", fenced(err))
	}
	return &session{cl: cl, txid: txid, writers: map[*writer]bool{}, epoch: epoch}, nil
}

// abortLocked aborts the session's open transaction, bounded by d, so that
// read_committed readers of the partitions it wrote are not blocked until
// the broker's transaction timeout. It is a no-op for a fenced producer
// (the newer instance ended the transaction) and logs when the abort
// fails. Caller holds s.mu.
func (s *Sink) abortLocked(sess *session, d time.Duration, why string) {
	if !s.exactlyOnce() || sess.ended {
		return
	}
	sess.ended = true
	if sess.err != nil && errors.Is(sess.err, ErrFenced) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	err := sess.cl.AbortBufferedRecords(ctx)
	if err == nil {
		err = sess.cl.EndTransaction(ctx, kgo.TryAbort)
	}
	if err == nil {
		s.txnAborts.Add(1)
	}
	if err != nil && !isFenced(err) {
		s.log.Warn("could not abort the open transaction ("+why+"): read_committed readers of the partitions it wrote wait until the broker aborts it after the transaction timeout, or until the job's next start fences it",
			"transactional_id", sess.txid, "transaction_timeout", s.cfg.TransactionTimeout, "err", err)
	}
}

// ReportMetrics reports the sink's transactions: committed with a
// checkpoint, and aborted (a failed or aborted checkpoint, a stop).
func (s *Sink) ReportMetrics(emit func(flow.Metric)) {
	if !s.exactlyOnce() {
		return
	}
	emit(flow.Metric{Name: "kafka_sink_transactions_committed_total", Counter: true, Help: "Kafka transactions the sink committed, one per checkpoint.", Value: float64(s.txnCommits.Load())})
	emit(flow.Metric{Name: "kafka_sink_transactions_aborted_total", Counter: true, Help: "Kafka transactions the sink aborted (a failed or aborted checkpoint, a failover, a stop).", Value: float64(s.txnAborts.Load())})
	s.mu.Lock()
	held := s.maxHeld
	s.mu.Unlock()
	emit(flow.Metric{Name: "kafka_sink_held_bytes_max", Help: "The most bytes of records the sink held back at once while a checkpoint's commit was pending.", Value: float64(held)})
}

// closeSession aborts the open transaction and closes the producer. Caller
// holds s.mu.
func (s *Sink) closeSession() {
	sess := s.sess
	if sess == nil {
		return
	}
	s.sess = nil
	budget := min(5*time.Second, max(s.stopTimeout/4, 500*time.Millisecond))
	if !s.exactlyOnce() {
		// kgo's Close fails buffered records: hand them to the brokers
		// first, so a bounded job's last records arrive with delivery
		// none too. Bounded, so a dead broker does not stall a restart.
		ctx, cancel := context.WithTimeout(context.Background(), budget)
		_ = sess.cl.Flush(ctx)
		cancel()
	} else {
		s.abortLocked(sess, budget, "the sink closed")
	}
	sess.cl.Close()
	// Drop every held record (the session is gone) and wake waiting
	// writers.
	s.hold.Drop(func(heldRecord) bool { return true })
	s.hold.Wake()
}

// Close releases the producer a [CommitPoint.Recover] call created when no
// writer will use it (a job refused to start). Writers release it
// themselves; Close is for the job's owner after Run returned.
func (s *Sink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess != nil && len(s.sess.writers) == 0 {
		s.closeSession()
	}
	return nil
}

// Open opens the writer of one subtask. The first writer of a (re)start
// creates the shared producer unless Recover already did.
func (s *Sink) Open(ctx context.Context, sc flow.SinkContext) (flow.SinkWriter[Record], error) {
	if err := s.checkMarkedOpen(sc); err != nil {
		return nil, err
	}
	w, err := s.open(ctx, sc)
	if err != nil {
		return nil, err
	}
	// The sink's own writer marks; its dead-letter writers do not.
	w.marks = s.cfg.MarkWatermarks != ""
	return w, nil
}

// open opens a writer in the sink's session, for the sink's own stream or
// a dead-letter stream.
func (s *Sink) open(ctx context.Context, sc flow.SinkContext) (*writer, error) {
	log := sc.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.Job == "" {
		s.cfg.Job = sc.Job
		s.cfg.jobDefaults()
	}
	if sc.Job != s.cfg.Job {
		return nil, fmt.Errorf("the Kafka sink is configured for job %q but runs in job %q: leave SinkConfig.Job empty or set it to the name given to flow.JobName", s.cfg.Job, sc.Job)
	}
	if s.sess != nil && s.sess.err != nil {
		if len(s.sess.writers) > 0 {
			return nil, fmt.Errorf("the sink's transaction failed: %w", s.sess.err)
		}
		s.closeSession()
	}
	if s.sess == nil {
		sess, err := s.newSession(ctx)
		if err != nil {
			return nil, s.cfg.Client.explain(err)
		}
		s.sess = sess
	}
	w := &writer{sink: s, sess: s.sess, subtask: sc.Subtask, log: log, prepared: -1, txn: s.exactlyOnce(), wm: flow.NoWatermark, markedWM: flow.NoWatermark}
	w.promise = w.produced
	s.sess.writers[w] = true
	return w, nil
}

// Committer returns a no-op: a checkpoint's records are committed by its
// commit point, in the same transaction as the commit record, so there is
// nothing left to commit on recovery.
func (s *Sink) Committer(context.Context, string, string) (flow.SinkCommitter, error) {
	return nopCommitter{}, nil
}

type nopCommitter struct{}

func (nopCommitter) Commit(context.Context, int64, []byte) error { return nil }
func (nopCommitter) Close() error                                { return nil }

// CommitPoint returns the job's commit point, the Kafka transaction, when
// the delivery is exactly-once, and nil otherwise: a sink without
// transactions leaves the commit point to the job's checkpoint manifest
// (flow ignores a nil commit point).
func (s *Sink) CommitPoint() flow.CommitPoint {
	if !s.exactlyOnce() {
		return nil
	}
	return &CommitPoint{s: s}
}

// MaxHeldBytes returns the most bytes of records the sink's writers held
// at once while checkpoints committed (see SinkConfig.MaxHeldBytes).
func (s *Sink) MaxHeldBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxHeld
}

// resolvedLocked records that checkpoint id committed (with every one
// below it) or was aborted, and releases what no longer has to wait.
// Caller holds s.mu.
func (s *Sink) resolvedLocked(id int64, committed bool) {
	if committed {
		s.hold.Committed(id)
	} else {
		s.hold.Aborted(id)
	}
	if s.sess == nil || s.sess.err != nil {
		return
	}
	s.releaseLocked()
	s.hold.Wake()
}

// releaseLocked produces the held records that no longer have to wait, in
// the order they came; a writer's records are in epoch order, so one that
// must wait keeps every later one of its writer waiting too. The records
// outlive the call that releases them (a commit with a deadline), so they
// are produced without a context: the transaction bounds them. Caller
// holds s.mu.
func (s *Sink) releaseLocked() {
	ctx := context.Background()
	_ = s.hold.Release(-1, func(h heldRecord) error {
		h.w.held--
		h.w.produce(ctx, h.r)
		return nil
	})
}

// heldRecord is a record a writer got while a checkpoint it prepared was
// unresolved.
type heldRecord struct {
	w *writer
	r *kgo.Record
}

// size is what a held record counts against MaxHeldBytes: its bytes plus
// the fixed cost of a record.
func (h heldRecord) size() int64 {
	r := h.r
	n := int64(len(r.Key)+len(r.Value)+len(r.Topic)) + 128
	for _, h := range r.Headers {
		n += int64(len(h.Key) + len(h.Value) + 32)
	}
	return n
}

// slabSize is how many kgo.Records a writer allocates at once: kgo keeps
// each record until its produce completes, so they cannot be reused, but
// allocating them together saves an allocation per record.
const slabSize = 256

// writer is one subtask's writer. With exactly-once, records go straight
// into the open transaction unless a checkpoint the writer has prepared may
// still commit: then they are held in memory, up to the sink's
// MaxHeldBytes, until that checkpoint committed or was aborted (see the
// package doc). Without transactions they are produced as they come.
type writer struct {
	sink    *Sink
	sess    *session
	subtask int
	log     *slog.Logger
	txn     bool // exactly-once
	// promise is w.produced, bound once: a method value made per record
	// would allocate.
	promise func(*kgo.Record, error)
	slab    []kgo.Record // unused records of the current slab

	// Guarded by sink.mu.
	prepared int64 // newest checkpoint prepared, -1 none
	held     int   // how many of the sink's held records are this writer's

	inflight sync.WaitGroup
	err      atomic.Pointer[error] // first failed produce

	// marks: the writer writes watermark markers at a Prepare when its
	// watermark changed (SinkConfig.MarkWatermarks), wm and wmIdle the
	// watermark reaching it (NoWatermark before any: the readers wait).
	marks  bool
	wm     int64
	wmIdle bool
	// markedWM and markedIdle are what the writer's last markers said.
	markedWM   int64
	markedIdle bool
}

func (w *writer) setErr(err error) { w.err.CompareAndSwap(nil, &err) }

func (w *writer) firstErr() error {
	if p := w.err.Load(); p != nil {
		return *p
	}
	return nil
}

func (w *writer) produced(r *kgo.Record, err error) {
	if err != nil {
		w.setErr(fmt.Errorf("produce to %s/%d: %w", r.Topic, r.Partition, fenced(err)))
	}
	w.inflight.Done()
}

// produce sends r to the producer. With exactly-once the caller holds
// sink.mu.
func (w *writer) produce(ctx context.Context, r *kgo.Record) {
	w.inflight.Add(1)
	w.sess.cl.Produce(ctx, r, w.promise)
}

// newRecord returns a zeroed record from the writer's slab. Called from the
// writer's goroutine only.
func (w *writer) newRecord() *kgo.Record {
	if len(w.slab) == 0 {
		w.slab = make([]kgo.Record, slabSize)
	}
	r := &w.slab[0]
	w.slab = w.slab[1:]
	return r
}

func (w *writer) toKgo(rec Record) (*kgo.Record, error) {
	topic := w.sink.cfg.Topic
	if topic == "" {
		topic = rec.Topic
		if topic == "" {
			return nil, errors.New("the record has no topic and SinkConfig.Topic is empty")
		}
	}
	r := w.newRecord()
	r.Topic, r.Partition, r.Key, r.Value, r.Timestamp = topic, rec.Partition, rec.Key, rec.Value, rec.Timestamp
	if len(rec.Headers) > 0 {
		r.Headers = make([]kgo.RecordHeader, len(rec.Headers))
		for i, h := range rec.Headers {
			r.Headers[i] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
		}
	}
	return r, nil
}

// Write adds rec to the current epoch.
func (w *writer) Write(ctx context.Context, rec Record) error {
	r, err := w.toKgo(rec)
	if err != nil {
		return err
	}
	return w.write(ctx, r)
}

// write produces r into the open transaction, or holds it while a
// checkpoint the writer prepared is unresolved (the records of epoch
// prepared+1 wait for it, docs/design.md, "The Kafka commit point"). When
// holding r would pass MaxHeldBytes, the writer waits until a commit or
// abort releases records and tries again: r is not held yet, and nothing
// the writer gets later is handled before it, so order is kept.
func (w *writer) write(ctx context.Context, r *kgo.Record) error {
	if err := w.firstErr(); err != nil {
		return err
	}
	if !w.txn {
		w.produce(ctx, r)
		return nil
	}
	s := w.sink
	s.mu.Lock()
	defer s.mu.Unlock()
	epoch := w.prepared + 1
	for {
		if w.sess.err != nil {
			return fmt.Errorf("the sink's transaction failed: %w", w.sess.err)
		}
		if s.sess != w.sess {
			return errors.New("the sink's producer was closed while the writer waited for room to hold a record")
		}
		if w.held == 0 && !s.hold.MustHold(epoch) {
			w.produce(ctx, r)
			return nil
		}
		if s.hold.Add(epoch, heldRecord{w: w, r: r}) {
			w.held++
			s.maxHeld = max(s.maxHeld, s.hold.Size())
			return nil
		}
		released := s.hold.Released()
		s.mu.Unlock()
		select {
		case <-released:
			s.mu.Lock()
		case <-ctx.Done():
			s.mu.Lock()
			return ctx.Err()
		}
	}
}

// Prepare ends the writer's epoch. With at-least-once it waits until the
// broker has every record the writer sent; with delivery none it does not
// wait. With exactly-once it does not wait either: the records stay
// invisible until the commit point commits the transaction, and the commit
// point flushes the producer and checks every writer's produces before
// EndTxn, so their acknowledgements arrive while the checkpoint's other
// parts (the state snapshots' upload) run instead of before this subtask
// acknowledges the barrier (docs/design.md, "The Kafka commit point"). A
// produce that failed already fails the prepare. The handle is empty
// because nothing is left to commit afterwards.
func (w *writer) Prepare(ctx context.Context, checkpointID int64) ([]byte, error) {
	switch w.sink.cfg.Delivery {
	case DeliveryNone:
		return nil, w.firstErr()
	case DeliveryExactlyOnce:
		if w.marks {
			// Into the checkpoint's transaction: the readers see the
			// markers once it committed, after the records before them.
			if err := w.writeMarks(ctx); err != nil {
				return nil, err
			}
		}
		s := w.sink
		s.mu.Lock()
		if w.sess.err != nil {
			s.mu.Unlock()
			return nil, fmt.Errorf("the sink's transaction failed: %w", w.sess.err)
		}
		w.prepared = checkpointID
		s.hold.Prepared(checkpointID)
		s.mu.Unlock()
		return nil, w.firstErr()
	}
	done := make(chan struct{})
	go func() { w.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if err := w.firstErr(); err != nil {
		return nil, err
	}
	return nil, nil
}

// Commit does nothing: the commit point committed the transaction, or
// there is none.
func (w *writer) Commit(context.Context, int64, []byte) error { return nil }

// Close drops the records held for the next epoch; the last writer aborts
// the open transaction (exactly-once) or flushes (otherwise) and closes the
// producer.
func (w *writer) Close() error {
	s := w.sink
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.held > 0 {
		s.hold.Drop(func(h heldRecord) bool { return h.w == w })
		w.held = 0
	}
	s.hold.Wake()
	if s.sess != w.sess {
		return nil
	}
	delete(w.sess.writers, w)
	if len(w.sess.writers) == 0 {
		s.closeSession()
	}
	return nil
}

// sinkPartitioner partitions by key (murmur2), or by Record.Partition with
// KeepPartition; commit records go to partition 0, dead letters by key.
type sinkPartitioner struct {
	sink  *Sink
	byKey kgo.Partitioner
}

func (p sinkPartitioner) ForTopic(t string) kgo.TopicPartitioner {
	switch {
	case p.sink.isDeadLetterTopic(t):
		return p.byKey.ForTopic(t)
	case p.sink.cfg.KeepPartition || t == p.sink.cfg.ProgressTopic:
		return kgo.ManualPartitioner().ForTopic(t)
	}
	return p.byKey.ForTopic(t)
}

// Dead-letter headers: where the failed record was read and why it failed.
const (
	HeaderTopic     = "onceflow.topic"
	HeaderPartition = "onceflow.partition"
	HeaderOffset    = "onceflow.offset"
	HeaderError     = "onceflow.error"
)

// DeadLetters returns a sink that writes failed records (the failure stream
// of flow.TryMap with flow.DeadLetterOnError) to topic, with the delivery
// of s: with exactly-once in the same transaction as s's records, so a
// checkpoint commits a record's output or its dead letter, never neither
// or both. Connect s to the same job: its commit point commits both.
//
// A dead letter has the original key, value and headers, the headers
// [HeaderTopic], [HeaderPartition], [HeaderOffset] and [HeaderError]
// (decimal or text values), and the time it was written as its timestamp,
// so topic retention counts from the failure. It is partitioned by key,
// even with KeepPartition.
func (s *Sink) DeadLetters(topic string) flow.Sink[flow.Failure[Record]] {
	s.dlMu.Lock()
	if s.deadLetterTopics == nil {
		s.deadLetterTopics = map[string]bool{}
	}
	s.deadLetterTopics[topic] = true
	s.dlMu.Unlock()
	return &deadLetterSink{s: s, topic: topic}
}

// deadLetterSink is not a commit point provider: its writers join the
// session of its Sink, whose commit point commits them.
type deadLetterSink struct {
	s     *Sink
	topic string
}

func (d *deadLetterSink) Open(ctx context.Context, sc flow.SinkContext) (flow.SinkWriter[flow.Failure[Record]], error) {
	if d.topic == "" {
		return nil, errors.New("the Kafka dead-letter sink has no topic: pass one to Sink.DeadLetters")
	}
	w, err := d.s.open(ctx, sc)
	if err != nil {
		return nil, err
	}
	return &deadLetterWriter{w: w, topic: d.topic}, nil
}

func (d *deadLetterSink) Committer(context.Context, string, string) (flow.SinkCommitter, error) {
	return nopCommitter{}, nil
}

type deadLetterWriter struct {
	w     *writer
	topic string
}

func (d *deadLetterWriter) Write(ctx context.Context, f flow.Failure[Record]) error {
	rec := f.Record
	r := d.w.newRecord()
	r.Topic, r.Key, r.Value = d.topic, rec.Key, rec.Value
	r.Headers = make([]kgo.RecordHeader, len(rec.Headers), len(rec.Headers)+4)
	for i, h := range rec.Headers {
		r.Headers[i] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
	}
	var msg string
	if f.Err != nil {
		msg = f.Err.Error()
	}
	r.Headers = append(r.Headers,
		kgo.RecordHeader{Key: HeaderTopic, Value: []byte(rec.Topic)},
		kgo.RecordHeader{Key: HeaderPartition, Value: strconv.AppendInt(nil, int64(rec.Partition), 10)},
		kgo.RecordHeader{Key: HeaderOffset, Value: strconv.AppendInt(nil, rec.Offset, 10)},
		kgo.RecordHeader{Key: HeaderError, Value: []byte(msg)},
	)
	return d.w.write(ctx, r)
}

func (d *deadLetterWriter) Prepare(ctx context.Context, id int64) ([]byte, error) {
	return d.w.Prepare(ctx, id)
}

func (d *deadLetterWriter) Commit(ctx context.Context, id int64, h []byte) error {
	return d.w.Commit(ctx, id, h)
}

func (d *deadLetterWriter) Close() error { return d.w.Close() }
