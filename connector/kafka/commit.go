package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/failpoint"
	"github.com/onceflow/onceflow/internal/testbreak"
)

// recoverTimeout bounds each step of Peek and Recover: an unreachable
// broker fails the start (the restart strategy tries again, logging each
// attempt) instead of hanging it.
const recoverTimeout = 30 * time.Second

// CommitPoint is the Kafka commit point of a job: see the package doc.
type CommitPoint struct {
	s *Sink
}

// String names the commit point in checkpoint manifests.
func (c *CommitPoint) String() string { return "kafka" }

// BindJob checks the sink against the job (see Sink.BindJob).
func (c *CommitPoint) BindJob(info flow.JobInfo) error { return c.s.BindJob(info) }

// record is the commit record: the metadata of the committed offset that
// the checkpoint's transaction commits to the job's progress group.
type record struct {
	V           int    `json:"v"`
	Job         string `json:"job"`
	Checkpoint  int64  `json:"checkpoint"`
	Manifest    string `json:"manifest"`
	Incarnation string `json:"incarnation"`
	StateID     string `json:"state_id"`
	Time        int64  `json:"time_ms"`
}

const recordVersion = 1

func encodeRecord(r flow.CommitRecord) (string, error) {
	b, err := json.Marshal(record{V: recordVersion, Job: r.Job, Checkpoint: r.Checkpoint, Manifest: r.Manifest, Incarnation: r.Incarnation, StateID: r.StateID, Time: r.Time.UnixMilli()})
	return string(b), err
}

// decodeRecord parses the metadata of a progress-group offset; ok is false
// for metadata that is not a commit record of job.
func decodeRecord(meta, job string) (flow.CommitRecord, bool) {
	var r record
	if json.Unmarshal([]byte(meta), &r) != nil || r.V < 1 || r.Job != job || r.Checkpoint < 0 || (r.Checkpoint == 0 && r.StateID == "") {
		return flow.CommitRecord{}, false
	}
	return flow.CommitRecord{Job: r.Job, Checkpoint: r.Checkpoint, Manifest: r.Manifest, Incarnation: r.Incarnation, StateID: r.StateID, Time: time.UnixMilli(r.Time)}, true
}

// Peek reads the job's commit record without fencing anyone and without
// waiting for an open transaction: the last one committed.
func (c *CommitPoint) Peek(ctx context.Context) (flow.CommitRecord, error) {
	s := c.s
	cl, err := s.cfg.Client.newClient()
	if err != nil {
		return flow.CommitRecord{}, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, recoverTimeout)
	defer cancel()
	rec, err := readRecord(ctx, kadm.NewClient(cl), s.cfg.ProgressGroup, s.cfg.Job, false)
	return rec, s.cfg.Client.explain(err)
}

// Recover fences the previous instances of the job (initializing the
// transactional id aborts their open transaction, so its outcome is final)
// and returns the newest commit record, read with RequireStable so that
// an offset commit still pending in the job's own group is waited for;
// every other job's transactions are irrelevant to it. The producer it
// creates is the one the writers of this (re)start use.
func (c *CommitPoint) Recover(ctx context.Context) (flow.CommitRecord, error) {
	s := c.s
	ctx, cancel := context.WithTimeout(ctx, recoverTimeout)
	defer cancel()
	s.mu.Lock()
	if s.sess != nil && len(s.sess.writers) > 0 {
		s.mu.Unlock()
		return flow.CommitRecord{}, errors.New("kafka commit point: Recover was called while writers are open")
	}
	s.closeSession()
	s.hold.Reset(0)
	sess, err := s.newSession(ctx)
	if err != nil {
		s.mu.Unlock()
		return flow.CommitRecord{}, s.cfg.Client.explain(err)
	}
	s.sess = sess
	s.mu.Unlock()
	rec, err := readRecord(ctx, kadm.NewClient(sess.cl), s.cfg.ProgressGroup, s.cfg.Job, true)
	if err == nil {
		s.mu.Lock()
		s.hold.Reset(rec.Checkpoint)
		s.mu.Unlock()
	}
	return rec, s.cfg.Client.explain(err)
}

// MarkStart records a start mark (flow.StartMarker) in a transaction of
// its own, fenced like a commit: offset 0 with the mark in the job's
// progress group, at the place the checkpoints' transactions commit the
// record (the first commit replaces it), and the mark as a record on the
// progress topic. Recover has fenced the earlier incarnations and found no
// record of a committed checkpoint; a zombie's mark fails with ErrFenced.
func (c *CommitPoint) MarkStart(ctx context.Context, rec flow.CommitRecord) error {
	s := c.s
	if rec.Checkpoint != 0 {
		return fmt.Errorf("kafka commit point: a start mark names no checkpoint (got %d)", rec.Checkpoint)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sess
	switch {
	case sess == nil:
		return errors.New("kafka commit point: MarkStart was called before Recover")
	case sess.err != nil:
		return fmt.Errorf("kafka commit point: the sink's transaction failed earlier: %w", sess.err)
	case len(sess.writers) > 0:
		return errors.New("kafka commit point: MarkStart was called while writers are open")
	case s.hold.LastCommitted() != 0:
		return fmt.Errorf("kafka commit point: no start mark over the record of committed checkpoint %d", s.hold.LastCommitted())
	}
	meta, err := encodeRecord(rec)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, recoverTimeout)
	defer cancel()
	err = produceWait(ctx, sess.cl, &kgo.Record{Topic: s.cfg.ProgressTopic, Partition: 0, Key: []byte(s.cfg.Job), Value: []byte(meta)})
	if err == nil {
		err = txnCommitOffsets(ctx, sess.cl, sess.txid, s.cfg.ProgressGroup, map[split]offsetAt{{s.cfg.ProgressTopic, 0}: {0, meta}}, true)
	}
	if err == nil {
		err = sess.cl.EndTransaction(ctx, kgo.TryCommit)
	}
	if err == nil {
		err = sess.cl.BeginTransaction()
	}
	if err != nil {
		sess.err = fmt.Errorf("write the start mark of job %q to group %q: %w", s.cfg.Job, s.cfg.ProgressGroup, fenced(err))
		s.hold.Wake()
		return fmt.Errorf("kafka commit point: %w", s.cfg.Client.explain(sess.err))
	}
	return nil
}

// readRecord returns the newest commit record of job among the offsets
// committed to group (on any topic: renaming the progress topic does not
// lose the record). With stable it waits while the group has a pending
// transactional offset commit.
func readRecord(ctx context.Context, adm *kadm.Client, group, job string, stable bool) (flow.CommitRecord, error) {
	fctx := ctx
	if stable {
		fctx = kadm.RequireStable(ctx)
	}
	for {
		var resps kadm.OffsetResponses
		err := retryRead(ctx, func() error {
			var err error
			resps, err = adm.FetchOffsets(fctx, group)
			return err
		})
		if errors.Is(err, kerr.GroupIDNotFound) {
			return flow.CommitRecord{}, nil
		}
		var unstable bool
		if err == nil {
			resps.Each(func(o kadm.OffsetResponse) {
				if errors.Is(o.Err, kerr.UnstableOffsetCommit) {
					unstable = true
				} else if o.Err != nil && err == nil {
					err = fmt.Errorf("%s/%d: %w", o.Topic, o.Partition, o.Err)
				}
			})
		}
		if errors.Is(err, kerr.UnstableOffsetCommit) {
			unstable, err = true, nil
		}
		if err != nil {
			return flow.CommitRecord{}, fmt.Errorf("read the commit record of job %q from group %q: %w", job, group, err)
		}
		if !unstable {
			// The newest record of a committed checkpoint, else a
			// start mark.
			var newest flow.CommitRecord
			found := false
			resps.Each(func(o kadm.OffsetResponse) {
				if r, ok := decodeRecord(o.Metadata, job); ok && (!found || r.Checkpoint > newest.Checkpoint) {
					newest, found = r, true
				}
			})
			return newest, nil
		}
		// The previous incarnation's commit is being aborted or
		// completed by the broker: it is final in a moment.
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return flow.CommitRecord{}, fmt.Errorf("read the commit record of job %q from group %q: an offset commit stays pending in the group (another instance of the job with another transactional id?): %w", job, group, err)
		}
	}
}

// Commit commits the open transaction with the records of every epoch up
// to rec.Checkpoint, the sources' offsets and the commit record. An error
// means the checkpoint did not commit (or its outcome is unknown and
// Recover will tell): the transaction is aborted when it can be, and the
// job fails over.
func (c *CommitPoint) Commit(ctx context.Context, rec flow.CommitRecord) error {
	s := c.s
	id := rec.Checkpoint
	// Every broker call below gets a deadline shorter than the
	// transaction timeout: past it the broker aborts the transaction
	// anyway, and waiting longer only blocks the job.
	ctx, cancel := context.WithTimeout(ctx, s.cfg.TransactionTimeout/2)
	defer cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sess
	if sess == nil {
		return fmt.Errorf("kafka commit point of checkpoint %d: the sink has no open producer (no writer is open)", id)
	}
	if sess.err != nil {
		return fmt.Errorf("kafka commit point of checkpoint %d: the sink's transaction failed earlier: %w", id, sess.err)
	}
	if err := c.commitLocked(ctx, sess, rec); err != nil {
		sess.err = err
		if !errors.Is(err, ErrFenced) {
			s.abortLocked(sess, min(5*time.Second, max(s.stopTimeout/4, 500*time.Millisecond)), fmt.Sprintf("the commit of checkpoint %d failed", id))
		} else {
			sess.ended = true
		}
		s.hold.Wake() // writers waiting for room see the failure
		return fmt.Errorf("kafka commit point of checkpoint %d: %w", id, err)
	}
	// The checkpoint is committed. Failing to start the next transaction
	// fails the writers (and the job) later, not this checkpoint.
	if err := sess.cl.BeginTransaction(); err != nil {
		sess.err = fmt.Errorf("begin the transaction after checkpoint %d: %w", id, fenced(err))
		sess.ended = true
		s.hold.Wake()
		return nil
	}
	s.resolvedLocked(id, true)
	return nil
}

// FenceEpoch returns the epoch of the producer Recover initialized: every
// later incarnation of the job that fenced this one has a higher one. The
// runtime starts checkpoint ids above it (flow.FencedCheckpointIDs), so a
// fenced zombie never writes into a checkpoint directory its successor
// uses. 0 before Recover.
func (c *CommitPoint) FenceEpoch() int64 {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if c.s.sess == nil {
		return 0
	}
	return int64(c.s.sess.epoch)
}

// CheckpointAborted releases the records held after checkpoint id into the
// open transaction: id will never commit, so they may join the epoch the
// next commit covers (unless an earlier checkpoint is still unresolved).
func (c *CommitPoint) CheckpointAborted(_ context.Context, id int64) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resolvedLocked(id, false)
}

func (c *CommitPoint) commitLocked(ctx context.Context, sess *session, rec flow.CommitRecord) error {
	// Records held after aborted checkpoints below id belong to this
	// epoch; resolving id-1 and below released them, and this releases
	// whatever is free now. The coordinator commits in order, after every
	// earlier checkpoint committed or was aborted, so nothing of epoch id
	// or below still waits.
	c.s.releaseLocked()
	if err := sess.cl.Flush(ctx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	for w := range sess.writers {
		if err := w.firstErr(); err != nil {
			return err
		}
	}
	if err := c.commitOffsets(ctx, sess, rec); err != nil {
		return err
	}
	if err := failpoint.Inject(failpoint.BeforeEndTxn); err != nil {
		return err
	}
	if err := sess.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("commit the transaction: %w", fenced(err))
	}
	c.s.txnCommits.Add(1)
	return nil
}

// produceWait produces r and waits for the answer or the end of ctx,
// whichever comes first. kgo's ProduceSync waits for a record already sent
// until the broker answers, whatever ctx says; a commit must not.
func produceWait(ctx context.Context, cl *kgo.Client, r *kgo.Record) error {
	done := make(chan error, 1)
	cl.Produce(ctx, r, func(_ *kgo.Record, err error) { done <- err })
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("no answer from the broker: %w", ctx.Err())
	}
}

// offsetAt is one offset to commit and its metadata.
type offsetAt struct {
	at   int64
	meta string
}

// commitOffsets adds to the transaction the sources' offsets of checkpoint
// rec.Checkpoint and the commit record.
func (c *CommitPoint) commitOffsets(ctx context.Context, sess *session, rec flow.CommitRecord) error {
	s := c.s
	id := rec.Checkpoint
	byGroup := map[string]map[split]offsetAt{}
	meta := offsetMetadata(s.cfg.Job, id)
	for _, src := range s.cfg.OffsetsOf {
		if _, _, opened := src.opened(); !opened {
			return errors.New("a source in OffsetsOf was never opened: is it part of this job?")
		}
		group, offs, ok := src.checkpointOffsets(id)
		if !ok {
			return fmt.Errorf("a source in OffsetsOf has no positions for checkpoint %d", id)
		}
		if byGroup[group] == nil {
			byGroup[group] = map[split]offsetAt{}
		}
		for sp, at := range offs {
			byGroup[group][sp] = offsetAt{at, meta}
		}
	}
	recMeta, err := encodeRecord(rec)
	if err != nil {
		return err
	}
	// The same record, as a record on the progress topic in the same
	// transaction: an audit trail (kcat -C -t __onceflow_progress -K shows
	// each job's commits), and the reason kgo sends EndTxn for an epoch
	// without output: it only ends transactions it added a partition to,
	// and it does not know about the offsets staged below.
	mr := &kgo.Record{Topic: s.cfg.ProgressTopic, Partition: 0, Key: []byte(s.cfg.Job), Value: []byte(recMeta)}
	if err := produceWait(ctx, sess.cl, mr); err != nil {
		return fmt.Errorf("write the commit record to %s: %w", s.cfg.ProgressTopic, fenced(err))
	}
	pg := s.cfg.ProgressGroup
	if byGroup[pg] == nil {
		byGroup[pg] = map[split]offsetAt{}
	}
	// The offset itself is the checkpoint id, so tools that show a group's
	// offsets (kafka-consumer-groups, kcat) show the job's last checkpoint.
	byGroup[pg][split{s.cfg.ProgressTopic, 0}] = offsetAt{id, recMeta}
	for _, g := range slices.Sorted(maps.Keys(byGroup)) {
		if len(byGroup[g]) == 0 {
			continue
		}
		if testbreak.Is(testbreak.OffsetsOutsideTxn) && g != pg {
			// The broken engine: offsets become visible before (and
			// whether or not) the transaction commits.
			offs := kadm.Offsets{}
			for sp, o := range byGroup[g] {
				offs.Add(kadm.Offset{Topic: sp.topic, Partition: sp.partition, At: o.at, LeaderEpoch: -1, Metadata: o.meta})
			}
			if _, err := kadm.NewClient(sess.cl).CommitOffsets(ctx, g, offs); err != nil {
				return fmt.Errorf("commit offsets to group %q: %w", g, err)
			}
			continue
		}
		if err := txnCommitOffsets(ctx, sess.cl, sess.txid, g, byGroup[g], g == pg); err != nil {
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
// applies or drops them with the records. Unless required, offsets of
// partitions that do not exist (a source's parked partition of a deleted
// topic) are left out: source offsets are for monitoring, and Kafka refuses
// them; the commit record's partition is required.
func txnCommitOffsets(ctx context.Context, cl *kgo.Client, txid, group string, offs map[split]offsetAt, required bool) error {
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
	exists := func(sp split) error {
		td := details[sp.topic]
		switch {
		case td.Err != nil:
			return fmt.Errorf("topic %s: %w", sp.topic, td.Err)
		case td.ID == (kadm.TopicID{}):
			return fmt.Errorf("topic %s has no topic id", sp.topic)
		}
		if _, ok := td.Partitions[sp.partition]; !ok {
			return fmt.Errorf("topic %s has no partition %d", sp.topic, sp.partition)
		}
		return nil
	}
	names := map[kadm.TopicID]string{}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	for _, sp := range splits {
		if err := exists(sp); err != nil {
			if required {
				return err
			}
			continue
		}
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != sp.topic {
			t := kmsg.NewTxnOffsetCommitRequestTopic()
			t.Topic, t.TopicID = sp.topic, details[sp.topic].ID
			names[details[sp.topic].ID] = sp.topic
			req.Topics = append(req.Topics, t)
		}
		o := offs[sp]
		p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch, p.Metadata = sp.partition, o.at, -1, kmsg.StringPtr(o.meta)
		t := &req.Topics[len(req.Topics)-1]
		t.Partitions = append(t.Partitions, p)
	}
	if len(req.Topics) == 0 {
		return nil
	}
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
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = txid, group, pid, epoch
	req.Generation, req.MemberID = -1, ""
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("TxnOffsetCommit: %w", err)
	}
	var errs []error
	for _, t := range resp.Topics {
		name := t.Topic
		if name == "" {
			name = names[kadm.TopicID(t.TopicID)] // newer versions answer by id
		}
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				errs = append(errs, fmt.Errorf("TxnOffsetCommit %s/%d: %w", name, p.Partition, err))
			}
		}
	}
	return errors.Join(errs...)
}

// ensureProgressTopic makes sure the progress topic exists: it looks first,
// so a client that may not create topics works when the topic is there, and
// creates it (one partition) otherwise. It uses a client of its own: kgo
// caches the metadata of admin requests, and the producer must not
// remember the topic as unknown after it was created.
func (s *Sink) ensureProgressTopic(ctx context.Context) error {
	topic := s.cfg.ProgressTopic
	cl, err := s.cfg.Client.newClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	tds, err := adm.ListTopics(ctx, topic)
	if err == nil {
		if td, ok := tds[topic]; ok && td.Err == nil && len(td.Partitions) > 0 {
			return nil
		}
	}
	// Compacted: it keeps each job's newest commit record for people
	// reading it. Recovery reads the committed offsets anchored on it.
	resp, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, topic)
	if err == nil {
		err = resp.Err
	}
	switch {
	case err == nil, errors.Is(err, kerr.TopicAlreadyExists):
		return nil
	case errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed), errors.Is(err, kerr.PolicyViolation):
		return flow.Unrecoverable(fmt.Errorf("the progress topic %q does not exist and this client may not create it (%w): create it once with one partition (kafka-topics --create --topic %s --partitions 1 --config cleanup.policy=compact), or grant the job's principal CREATE on it", topic, err, topic))
	}
	return fmt.Errorf("create the progress topic %q: %w", topic, err)
}
