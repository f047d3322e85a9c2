package kafka

import (
	"github.com/onceflow/onceflow/internal/testbreak"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/checkpoint/storage"
	"github.com/onceflow/onceflow/internal/failpoint"
)

// Sink defaults.
const (
	// DefaultProgressTopic is the compacted topic progress markers go to.
	DefaultProgressTopic = "__onceflow_progress"
	// DefaultTransactionTimeout is Kafka's default transaction.max.timeout.ms,
	// the longest timeout a default broker accepts.
	DefaultTransactionTimeout = 15 * time.Minute
	// DefaultMaxHeldBytes is SinkConfig.MaxHeldBytes's default.
	DefaultMaxHeldBytes = 64 << 20
	// defaultCheckpointTimeout mirrors the engine's default, for validation
	// when SinkConfig.CheckpointTimeout is unset.
	defaultCheckpointTimeout = 10 * time.Minute
)

// Delivery is the guarantee of a [Sink]'s writes.
type Delivery string

// Deliveries [SinkConfig].Delivery accepts.
const (
	// DeliveryExactlyOnce writes each checkpoint's records in one Kafka
	// transaction that is the job's commit point (see the package doc):
	// read_committed readers see every record exactly once.
	DeliveryExactlyOnce Delivery = "exactly-once"
	// DeliveryAtLeastOnce writes with an idempotent producer and no
	// transactions; a checkpoint waits until the brokers acknowledged every
	// record written before it. After a failure the job replays from its
	// last checkpoint, so records may be written again, but none is lost.
	DeliveryAtLeastOnce Delivery = "at-least-once"
	// DeliveryNone writes without waiting for acknowledgements (acks=0):
	// records may be lost or duplicated. For output that is only looked at.
	DeliveryNone Delivery = "none"
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
	// Job is the job's name, as given to flow.JobName; required. The
	// commit point needs it before any subtask opens, to find the job's
	// progress markers; Open fails if the running job has another name.
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
	// ProgressTopic is the compacted topic the commit point writes its
	// progress markers to, default DefaultProgressTopic. It is created
	// (one partition, cleanup.policy=compact) when missing.
	ProgressTopic string
	// TransactionTimeout is the producer's transaction.timeout.ms, default
	// 15 minutes. A transaction is open from the first record after one
	// checkpoint until the next checkpoint commits, so it must exceed
	// CheckpointInterval + CheckpointTimeout, and every checkpoint the job
	// tolerates failing adds as much again; the broker must allow it
	// (transaction.max.timeout.ms). A transaction the broker times out only
	// aborts an epoch: the job fails over and replays it.
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
	// CheckpointInterval is the job's checkpoint interval, used only to
	// validate TransactionTimeout (the sink cannot see the job's
	// configuration). Default 0.
	CheckpointInterval time.Duration
	// CheckpointTimeout is the job's checkpoint timeout, used only to
	// validate TransactionTimeout. Default: the engine's default, 10
	// minutes.
	CheckpointTimeout time.Duration
}

func (c *SinkConfig) withDefaults() {
	if c.Delivery == "" {
		c.Delivery = DeliveryExactlyOnce
	}
	if c.TransactionalID == "" && c.Job != "" {
		c.TransactionalID = "onceflow-" + c.Job + "-0"
	}
	if c.ProgressTopic == "" {
		c.ProgressTopic = DefaultProgressTopic
	}
	if c.TransactionTimeout == 0 {
		c.TransactionTimeout = DefaultTransactionTimeout
	}
	if c.CheckpointTimeout == 0 {
		c.CheckpointTimeout = defaultCheckpointTimeout
	}
	if c.MaxHeldBytes == 0 {
		c.MaxHeldBytes = DefaultMaxHeldBytes
	}
}

func (c *SinkConfig) validate() error {
	if err := c.Client.validate(); err != nil {
		return err
	}
	if c.Job == "" {
		return errors.New("the Kafka sink needs the job's name (SinkConfig.Job, as given to flow.JobName): its transactional id and progress markers are per job")
	}
	if c.MaxHeldBytes < 0 {
		return fmt.Errorf("MaxHeldBytes %d is negative", c.MaxHeldBytes)
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
	if need := c.CheckpointInterval + c.CheckpointTimeout; c.TransactionTimeout <= need {
		return fmt.Errorf("transaction timeout %v (transaction.timeout.ms) must exceed the checkpoint interval %v plus the checkpoint timeout %v, or the broker aborts transactions of checkpoints that are still allowed to complete; raise it (and the brokers' transaction.max.timeout.ms if needed) or lower the checkpoint timeout",
			c.TransactionTimeout, c.CheckpointInterval, c.CheckpointTimeout)
	}
	return nil
}

// Sink writes [Record]s to Kafka in one transaction per checkpoint and owns
// the job's commit point (see the package doc). One Sink value is one
// operator of one job instance; its subtasks share one transactional
// producer.
type Sink struct {
	cfg SinkConfig

	// mu guards sess and every writer's buffers and mode; the commit point
	// holds it throughout, so no record enters a transaction it does not
	// belong to.
	mu   sync.Mutex
	sess *session

	// deadLetterTopics are the topics of DeadLetters sinks, which the
	// partitioner partitions by key even with KeepPartition.
	dlMu             sync.Mutex
	deadLetterTopics map[string]bool
}

var (
	_ flow.Sink[Record]        = (*Sink)(nil)
	_ flow.CommitPointProvider = (*Sink)(nil)
	_ flow.CommitPoint         = (*CommitPoint)(nil)
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
	return &Sink{cfg: cfg}, nil
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
	txid := cfg.TransactionalID
	if testbreak.Is(testbreak.NoFencing) {
		// The broken engine of the proof suite: a fresh id per
		// incarnation fences nobody and aborts no zombie's transaction.
		txid += "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	cl, err := cfg.Client.newClient(
		kgo.TransactionalID(txid),
		kgo.TransactionTimeout(cfg.TransactionTimeout),
		part,
	)
	if err != nil {
		return nil, err
	}
	if err := s.ensureProgressTopic(ctx, cl); err != nil {
		cl.Close()
		return nil, err
	}
	if _, _, err := cl.ProducerID(ctx); err != nil {
		cl.Close()
		if errors.Is(err, kerr.InvalidTransactionTimeout) {
			return nil, fmt.Errorf("the broker refused the transaction timeout %v (the producer's transaction.timeout.ms): it is above the brokers' transaction.max.timeout.ms; raise that setting on the brokers or lower SinkConfig.TransactionTimeout: %w", cfg.TransactionTimeout, err)
		}
		return nil, fmt.Errorf("initialize transactional id %q: %w", cfg.TransactionalID, fenced(err))
	}
	if err := cl.BeginTransaction(); err != nil {
		cl.Close()
		return nil, fmt.Errorf("begin transaction: %w", fenced(err))
	}
	return &session{cl: cl, txid: txid, writers: map[*writer]bool{}}, nil
}

func (s *Sink) ensureProgressTopic(ctx context.Context, cl *kgo.Client) error {
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, s.cfg.ProgressTopic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create the progress topic %q: %w", s.cfg.ProgressTopic, err)
	}
	return nil
}

// closeSession aborts the open transaction and closes the producer. Caller
// holds s.mu.
func (s *Sink) closeSession() {
	sess := s.sess
	if sess == nil {
		return
	}
	s.sess = nil
	if !s.exactlyOnce() {
		// kgo's Close fails buffered records: hand them to the brokers
		// first, so a bounded job's last records arrive with delivery
		// none too. Bounded, so a dead broker does not stall a restart.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = sess.cl.Flush(ctx)
		cancel()
	} else if sess.err == nil {
		// Aborting releases the last stable offset of the partitions
		// written; otherwise read_committed readers wait for the next
		// instance's fencing or the transaction timeout.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := sess.cl.AbortBufferedRecords(ctx); err == nil {
			_ = sess.cl.EndTransaction(ctx, kgo.TryAbort)
		}
		cancel()
	}
	sess.cl.Close()
}

// Close releases the producer a [CommitPoint.LastCommitted] call created
// when no writer will use it (a job refused to start). Writers release it
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
// creates the shared producer unless LastCommitted already did.
func (s *Sink) Open(ctx context.Context, sc flow.SinkContext) (flow.SinkWriter[Record], error) {
	w, err := s.open(ctx, sc)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// open opens a writer in the sink's session, for the sink's own stream or
// a dead-letter stream.
func (s *Sink) open(ctx context.Context, sc flow.SinkContext) (*writer, error) {
	if sc.Job != s.cfg.Job {
		return nil, fmt.Errorf("the Kafka sink is configured for job %q but runs in job %q: set SinkConfig.Job to the name given to flow.JobName", s.cfg.Job, sc.Job)
	}
	log := sc.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
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
	w := &writer{sink: s, sess: s.sess, subtask: sc.Subtask, log: log, prepared: -1, txn: s.exactlyOnce()}
	w.promise = w.produced
	s.sess.writers[w] = true
	return w, nil
}

// Committer returns a no-op: a checkpoint's records are committed by its
// commit point, in the same transaction as the progress marker, so there is
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

// segment is records a writer got after it prepared checkpoint after.
type segment struct {
	after int64
	recs  []*kgo.Record
}

// slabSize is how many kgo.Records a writer allocates at once: kgo keeps
// each record until its produce completes, so they cannot be reused, but
// allocating them together saves an allocation per record.
const slabSize = 256

// writer is one subtask's writer. With exactly-once, records go straight
// into the open transaction until the writer prepares a checkpoint; from
// then on they are held until that checkpoint's commit point ran (see the
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
	holding  bool  // prepared a checkpoint that has not committed yet
	held     []segment

	inflight sync.WaitGroup
	err      atomic.Pointer[error] // first failed produce
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
	if w.sess.err != nil {
		return fmt.Errorf("the sink's transaction failed: %w", w.sess.err)
	}
	if w.holding {
		if n := len(w.held); n > 0 && w.held[n-1].after == w.prepared {
			w.held[n-1].recs = append(w.held[n-1].recs, r)
		} else {
			w.held = append(w.held, segment{after: w.prepared, recs: []*kgo.Record{r}})
		}
		return nil
	}
	w.produce(ctx, r)
	return nil
}

// Prepare waits until the broker has every record the writer sent. With
// exactly-once the records stay invisible until the commit point commits
// the transaction; with delivery none it does not wait. The handle is
// empty because nothing is left to commit afterwards.
func (w *writer) Prepare(ctx context.Context, checkpointID int64) ([]byte, error) {
	switch w.sink.cfg.Delivery {
	case DeliveryNone:
		return nil, w.firstErr()
	case DeliveryExactlyOnce:
		s := w.sink
		s.mu.Lock()
		if w.sess.err != nil {
			s.mu.Unlock()
			return nil, fmt.Errorf("the sink's transaction failed: %w", w.sess.err)
		}
		w.prepared = checkpointID
		w.holding = true
		s.mu.Unlock()
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
	w.held = nil
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
// KeepPartition; progress markers go to partition 0, dead letters by key.
type sinkPartitioner struct {
	sink  *Sink
	byKey kgo.Partitioner
}

func (p sinkPartitioner) ForTopic(t string) kgo.TopicPartitioner {
	cfg := &p.sink.cfg
	switch {
	case p.sink.isDeadLetterTopic(t):
		return p.byKey.ForTopic(t)
	case cfg.KeepPartition || t == cfg.ProgressTopic:
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

// marker is the progress record of a committed checkpoint.
type marker struct {
	Job        string `json:"job"`
	Checkpoint int64  `json:"checkpoint"`
	Manifest   string `json:"manifest,omitempty"`
}

// CommitPoint is the Kafka commit point of a job: see the package doc.
type CommitPoint struct {
	s *Sink
}

// Commit writes m's manifest, then commits the open transaction with the
// records of every epoch up to m.CheckpointID, the sources' offsets and the
// progress marker. An error means the checkpoint did not commit (or its
// outcome is unknown and LastCommitted will tell): the job must fail over.
func (c *CommitPoint) Commit(ctx context.Context, store *storage.Store, m *storage.Manifest) error {
	s := c.s
	id := m.CheckpointID
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sess
	if sess == nil {
		return fmt.Errorf("kafka commit point of checkpoint %d: the sink has no open producer (no writer is open)", id)
	}
	if sess.err != nil {
		return fmt.Errorf("kafka commit point of checkpoint %d: the sink's transaction failed earlier: %w", id, sess.err)
	}
	if err := c.commitLocked(ctx, sess, store, m); err != nil {
		sess.err = err
		return fmt.Errorf("kafka commit point of checkpoint %d: %w", id, err)
	}
	// The checkpoint is committed. Failing to start the next transaction
	// fails the writers (and the job) later, not this checkpoint.
	if err := sess.cl.BeginTransaction(); err != nil {
		sess.err = fmt.Errorf("begin the transaction after checkpoint %d: %w", id, fenced(err))
		return nil
	}
	for w := range sess.writers {
		var keep []segment
		for _, seg := range w.held {
			if seg.after == id {
				for _, r := range seg.recs {
					w.produce(ctx, r)
				}
			} else {
				keep = append(keep, seg)
			}
		}
		w.held = keep
		w.holding = w.prepared > id
	}
	return nil
}

func (c *CommitPoint) commitLocked(ctx context.Context, sess *session, store *storage.Store, m *storage.Manifest) error {
	s := c.s
	id := m.CheckpointID
	// Records held after checkpoints that were aborted belong to this
	// epoch: they came before barrier id.
	for w := range sess.writers {
		var keep []segment
		for _, seg := range w.held {
			if seg.after < id {
				for _, r := range seg.recs {
					w.produce(ctx, r)
				}
			} else {
				keep = append(keep, seg)
			}
		}
		w.held = keep
	}
	if err := sess.cl.Flush(ctx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	for w := range sess.writers {
		if err := w.firstErr(); err != nil {
			return err
		}
	}
	if err := storage.WriteManifest(store.Dir(id), m); err != nil {
		return err
	}
	if err := c.commitOffsets(ctx, sess, m); err != nil {
		return err
	}
	val, err := json.Marshal(marker{Job: s.cfg.Job, Checkpoint: id, Manifest: m.Dir})
	if err != nil {
		return err
	}
	mr := &kgo.Record{Topic: s.cfg.ProgressTopic, Partition: 0, Key: []byte(s.cfg.Job), Value: val}
	if err := sess.cl.ProduceSync(ctx, mr).FirstErr(); err != nil {
		return fmt.Errorf("produce the progress marker: %w", fenced(err))
	}
	if err := failpoint.Inject(failpoint.BeforeEndTxn); err != nil {
		return err
	}
	if err := sess.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("commit the transaction: %w", fenced(err))
	}
	return nil
}

// commitOffsets adds the sources' positions in m to the transaction.
func (c *CommitPoint) commitOffsets(ctx context.Context, sess *session, m *storage.Manifest) error {
	s := c.s
	byGroup := map[string]map[split]int64{}
	for _, src := range s.cfg.OffsetsOf {
		uid, group, ok := src.opened()
		if !ok {
			return errors.New("a source in OffsetsOf was never opened: is it part of this job?")
		}
		op := m.Operators[uid]
		if op == nil {
			continue
		}
		if byGroup[group] == nil {
			byGroup[group] = map[split]int64{}
		}
		for k, v := range op.Blobs {
			sp, err := parseSplit(k)
			if err != nil {
				return fmt.Errorf("source %q: %w", uid, err)
			}
			p, err := decodePosition(v)
			if err != nil {
				return fmt.Errorf("source %q %s: %w", uid, sp, err)
			}
			byGroup[group][sp] = p.next
		}
	}
	meta := offsetMetadata(s.cfg.Job, m.CheckpointID)
	for _, g := range slices.Sorted(maps.Keys(byGroup)) {
		if len(byGroup[g]) == 0 {
			continue
		}
		if testbreak.Is(testbreak.OffsetsOutsideTxn) {
			// The broken engine: offsets become visible before (and
			// whether or not) the transaction commits.
			offs := kadm.Offsets{}
			for sp, at := range byGroup[g] {
				offs.Add(kadm.Offset{Topic: sp.topic, Partition: sp.partition, At: at, LeaderEpoch: -1, Metadata: meta})
			}
			if _, err := kadm.NewClient(sess.cl).CommitOffsets(ctx, g, offs); err != nil {
				return fmt.Errorf("commit offsets to group %q: %w", g, err)
			}
			continue
		}
		if err := txnCommitOffsets(ctx, sess.cl, sess.txid, g, byGroup[g], meta); err != nil {
			return fmt.Errorf("commit offsets to group %q: %w", g, fenced(err))
		}
	}
	return nil
}

// txnCommitOffsets stages offsets for group in cl's open transaction.
// kgo's own transactional offset commit (GroupTransactSession) needs a
// group membership the source does not have, so this speaks the protocol:
// AddOffsetsToTxn enrolls the group, TxnOffsetCommit with generation -1 and
// no member (a group without members) stages the offsets, and EndTxn
// applies or drops them with the records.
func txnCommitOffsets(ctx context.Context, cl *kgo.Client, txid, group string, offs map[split]int64, meta string) error {
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("producer id: %w", err)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = txid, pid, epoch, group
	addResp, err := add.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("AddOffsetsToTxn: %w", err)
	}
	if err := kerr.ErrorForCode(addResp.ErrorCode); err != nil {
		return fmt.Errorf("AddOffsetsToTxn: %w", err)
	}
	splits := slices.SortedFunc(maps.Keys(offs), compareSplits)
	var topics []string
	for _, sp := range splits {
		if len(topics) == 0 || topics[len(topics)-1] != sp.topic {
			topics = append(topics, sp.topic)
		}
	}
	// Newer TxnOffsetCommit versions name topics by id.
	details, err := kadm.NewClient(cl).ListTopics(ctx, topics...)
	if err != nil {
		return fmt.Errorf("topic ids: %w", err)
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = txid, group, pid, epoch
	req.Generation, req.MemberID = -1, ""
	for _, sp := range splits {
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != sp.topic {
			t := kmsg.NewTxnOffsetCommitRequestTopic()
			t.Topic, t.TopicID = sp.topic, details[sp.topic].ID
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch, p.Metadata = sp.partition, offs[sp], -1, kmsg.StringPtr(meta)
		t := &req.Topics[len(req.Topics)-1]
		t.Partitions = append(t.Partitions, p)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("TxnOffsetCommit: %w", err)
	}
	var errs []error
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				errs = append(errs, fmt.Errorf("TxnOffsetCommit %s/%d: %w", t.Topic, p.Partition, err))
			}
		}
	}
	return errors.Join(errs...)
}

// LastCommitted fences the previous instance of the job (initializing the
// transactional id aborts its open transaction, so its outcome is final)
// and returns the checkpoint of the job's newest progress marker that a
// read_committed reader sees, 0 if there is none. The producer it created
// is the one the writers of this (re)start use.
func (c *CommitPoint) LastCommitted(ctx context.Context) (int64, error) {
	s := c.s
	s.mu.Lock()
	if s.sess != nil && len(s.sess.writers) > 0 {
		s.mu.Unlock()
		return 0, errors.New("kafka commit point: LastCommitted was called while writers are open")
	}
	s.closeSession()
	sess, err := s.newSession(ctx)
	if err != nil {
		s.mu.Unlock()
		return 0, s.cfg.Client.explain(err)
	}
	s.sess = sess
	s.mu.Unlock()
	n, err := readLastMarker(ctx, s.cfg.Client, s.cfg.ProgressTopic, s.cfg.Job)
	return n, s.cfg.Client.explain(err)
}

// readLastMarker reads the progress topic up to its last stable offset and
// returns the newest checkpoint committed for job.
func readLastMarker(ctx context.Context, cc ClientConfig, topic, job string) (int64, error) {
	admCl, err := cc.newClient()
	if err != nil {
		return 0, err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	start, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = start.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("read progress markers: %w", err)
	}
	end, err := adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = end.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("read progress markers: %w", err)
	}
	want := map[int32]int64{}
	from := map[int32]kgo.Offset{}
	end.Each(func(o kadm.ListedOffset) {
		st, _ := start.Lookup(o.Topic, o.Partition)
		if o.Offset > st.Offset {
			want[o.Partition] = o.Offset
			from[o.Partition] = kgo.NewOffset().At(st.Offset)
		}
	})
	if len(want) == 0 {
		return 0, nil
	}
	cl, err := cc.newClient(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	var last int64
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("read progress markers: %w", err)
		}
		if err := fs.Err(); err != nil {
			return 0, fmt.Errorf("read progress markers: %w", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if e, ok := want[r.Partition]; ok && r.Offset+1 >= e {
				delete(want, r.Partition)
			}
			if r.Attrs.IsControl() || string(r.Key) != job {
				return
			}
			var mk marker
			if json.Unmarshal(r.Value, &mk) == nil && mk.Job == job && mk.Checkpoint > last {
				last = mk.Checkpoint
			}
		})
	}
	return last, nil
}
