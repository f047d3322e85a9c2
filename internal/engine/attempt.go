package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/onceflow/onceflow/internal/checkpoint"
	"github.com/onceflow/onceflow/internal/checkpoint/storage"
	"github.com/onceflow/onceflow/internal/failpoint"
	"github.com/onceflow/onceflow/internal/plan"
	"github.com/onceflow/onceflow/internal/testbreak"
	"github.com/onceflow/onceflow/state"
)

// ackMsg is a participant's answer to a barrier.
type ackMsg struct {
	cp    int64
	part  int
	uid   string
	keyed *storage.KeyedFile
	db    *storage.DBSnapshot
	blobs map[string][]byte
	out   int64 // records a sink wrote in the epoch it prepared
	err   error
}

// pendingCP collects the acks of one checkpoint into its manifest.
type pendingCP struct {
	id        int64
	savepoint bool
	started   time.Time
	ops       map[string]*storage.OperatorState
	req       *request // savepoint requester
	final     bool     // the job stops once it commits
	out       int64    // records the sinks wrote in the epoch
	warned    bool     // logged as running past half its timeout
	// acked are the participants that acknowledged it, for naming the
	// ones a slow checkpoint waits for.
	acked map[int]bool
}

// attempt is one run of the job's graph, from restore to failure or end.
type attempt struct {
	// firstID is the id of the attempt's first checkpoint (sinks learn it
	// in SinkContext).
	firstID  int64
	job      *RunningJob
	cfg      *Config
	log      *slog.Logger
	ctx      context.Context
	cancel   context.CancelFunc
	store    storage.Storage
	restored *storage.Manifest
	par      map[*Node]int
	partBase map[*Node]int
	parts    int

	acks     chan ackMsg
	failures chan error
	finished chan struct{}
	subtasks []*subtask
	sources  []*subtask
	// exchanges are, per node heading a task, the exchange of each of its
	// inputs.
	exchanges map[*Node][]exchangeImpl
	writers   sync.WaitGroup
	// incarnation identifies this attempt in manifests and commit records.
	incarnation string
	// origin is the savepoint this attempt's checkpoints descend from.
	origin *storage.Origin

	// The Pebble state backend (nil pool: keyed state in the heap).
	pool          state.DBProvider
	keyedSubtasks int
	dbMu          sync.Mutex
	dbDir         string
	dbTemp        bool
	dbs           []*dbState
}

// newIncarnation returns 16 random hex digits.
func newIncarnation() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (att *attempt) exactlyOnce() bool { return att.cfg.Checkpoint.Mode == checkpoint.ExactlyOnce }

func (att *attempt) restoredID() int64 {
	if att.restored == nil {
		return 0
	}
	return att.restored.CheckpointID
}

func (att *attempt) partOf(n *Node, subtask int) int { return att.partBase[n] + subtask }

func (att *attempt) ack(a ackMsg) {
	select {
	case att.acks <- a:
	case <-att.ctx.Done():
	}
}

// failTask fails the attempt from the run loop's side.
func (att *attempt) failTask(err error) {
	select {
	case att.failures <- err:
	default:
	}
}

func (att *attempt) sourceFinished() {
	select {
	case att.finished <- struct{}{}:
	case <-att.ctx.Done():
	}
}

func (att *attempt) sourceRestore(uid string) map[string][]byte {
	if att.restored == nil || testbreak.Is(testbreak.NoRewind) {
		return nil
	}
	if op := att.restored.Operators[uid]; op != nil {
		return op.Blobs
	}
	return map[string][]byte{}
}

func (att *attempt) restoreKeyed(uid string, s *state.Runtime) error {
	if att.restored == nil {
		return nil
	}
	op := att.restored.Operators[uid]
	if op == nil {
		return nil
	}
	first, last := s.KeyGroups()
	for _, f := range op.Keyed {
		if f.LastKeyGroup < first || f.FirstKeyGroup > last {
			continue
		}
		groups, err := att.store.ReadKeyed(att.restored, f, first, last)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrRestoreRefused, err)
		}
		if err := s.Restore(groups); err != nil {
			return fmt.Errorf("%w: operator %q: %w", ErrRestoreRefused, uid, err)
		}
	}
	for _, snap := range op.DB {
		if snap.Format != storage.FormatHeapChain || snap.LastKeyGroup < first || snap.FirstKeyGroup > last {
			continue
		}
		if err := att.restoreHeapChain(uid, snap, s); err != nil {
			return err
		}
	}
	return nil
}

// writeKeyed writes a keyed snapshot in the background and acks when done,
// so the operator goes on processing while the file is written and synced.
func (att *attempt) writeKeyed(cp int64, n *Node, subtask, part int, s *state.Runtime, groups map[int][]byte, blobs map[string][]byte) {
	if att.store == nil {
		att.ack(ackMsg{cp: cp, part: part, uid: n.uid})
		return
	}
	first, last := s.KeyGroups()
	name := fmt.Sprintf("%s-%d.state", sanitize(n.uid), subtask)
	att.writers.Add(1)
	go func() {
		defer att.writers.Done()
		kf, err := att.store.WriteKeyedFile(cp, name, first, last, groups)
		if err == nil {
			err = failpoint.Inject(failpoint.AfterSnapshotWritten)
		}
		if err != nil {
			att.ack(ackMsg{cp: cp, part: part, err: fmt.Errorf("write state of %q subtask %d: %w", n.uid, subtask, err)})
			return
		}
		att.ack(ackMsg{cp: cp, part: part, uid: n.uid, keyed: &kf, blobs: blobs})
	}()
}

// sanitize makes s safe in a file name: plan.StateFileStem, which the
// job-file checks use too, so both agree on which uids clash.
func sanitize(s string) string { return plan.StateFileStem(s) }

func (j *RunningJob) runAttempt(ctx context.Context) (err error) {
	j.attemptRan.Store(false)
	cfg := &j.cfg
	var store storage.Storage
	if cfg.StateDir != "" {
		store, err = cfg.OpenStorage(cfg.StateDir, cfg.Job)
		if err != nil {
			return fmt.Errorf("%w: open state directory: %w", ErrInvalidJob, err)
		}
	}
	rec, err := j.resolveRestore(ctx, store)
	if err != nil {
		return err
	}
	restored := rec.manifest
	if err := j.checkRestore(restored); err != nil {
		return err
	}
	if restored != nil {
		if err := failpoint.Inject(failpoint.DuringRestore); err != nil {
			return err
		}
	}
	if restored == nil && store != nil && cfg.CommitPoint != nil {
		if err := j.resolvePrepared(ctx, rec.record); err != nil {
			return err
		}
	}
	incarnation := newIncarnation()
	if err := j.markStart(ctx, store, rec, incarnation); err != nil {
		return err
	}
	first, afterCrash := j.restoreCounters(rec)
	if first {
		// This process runs the job now: until a graceful end, the next
		// process counts as a restart.
		j.saveRunRecord(true)
	}
	if afterCrash {
		j.log.Warn("the previous process did not stop gracefully (a crash, a kill or a failure): counted as a restart", "restored_checkpoint", rec.checkpointID())
	}
	j.restored.Store(0)
	j.restoredAt.Store(0)
	if restored != nil {
		j.restored.Store(restored.CheckpointID)
		j.restoredAt.Store(time.Now().UnixNano())
		j.log.Info("restoring", "checkpoint", restored.CheckpointID, "dir", restored.Dir, "savepoint", restored.Savepoint)
		cfg.Hooks.restored(Restored{Job: cfg.Job, ID: restored.CheckpointID, Savepoint: restored.Savepoint, Dir: restored.Dir, Time: time.Now(), AfterCrash: afterCrash})
	}
	if err := j.recoverSinks(ctx, restored); err != nil {
		return err
	}
	par, err := j.g.plan(ctx, cfg)
	if err != nil {
		return err
	}
	actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	att := &attempt{
		job: j, cfg: cfg, log: j.log, ctx: actx, cancel: cancel, store: store, restored: restored,
		par: par, partBase: map[*Node]int{}, exchanges: map[*Node][]exchangeImpl{},
		failures: make(chan error, 1), finished: make(chan struct{}),
		incarnation: incarnation, origin: rec.originOf(),
	}
	for _, n := range j.g.nodes {
		att.partBase[n] = att.parts
		att.parts += par[n]
		if n.kind == kindKeyed {
			att.keyedSubtasks += par[n]
		}
	}
	if b, ok := state.LookupDBBackend(cfg.StateBackend); ok && att.keyedSubtasks > 0 {
		att.pool = b.NewProvider(cfg.StateMemory)
		defer att.closeDBs()
	}
	att.acks = make(chan ackMsg, att.parts*4)
	// New ids continue above every id in use: the restored one, any
	// directory in the store, and what the commit point recorded.
	lastID := max(att.restoredID(), rec.record.Checkpoint)
	if store != nil {
		high, err := store.HighestID()
		if err != nil {
			return err
		}
		lastID = max(lastID, high)
	}
	if cfg.FencedCheckpointIDs && cfg.CommitPoint != nil {
		// Ids above every id an older, fenced incarnation can still use
		// (docs/design.md, "Scale-out"): it may be writing into the same
		// storage.
		if fe, ok := cfg.CommitPoint.Unwrap().(FenceEpocher); ok {
			lastID = max(lastID, fe.FenceEpoch()<<32)
		}
	}
	coord := checkpoint.NewCoordinator(cfg.Checkpoint, lastID, att.parts, cfg.Clock())
	att.firstID = lastID + 1

	// Build tasks: a task starts at a source or at a node fed by an
	// exchange; a multi-input node always heads one.
	chained := func(n *Node) bool {
		return n.kind != kindSource && len(n.inputs) == 1 && n.edge == edgeForward && par[n] == par[n.inputs[0]]
	}
	for _, n := range j.g.nodes {
		if n.kind != kindSource && !chained(n) {
			exs := make([]exchangeImpl, len(n.inputs))
			for i, in := range n.inputs {
				exs[i] = n.exchanges[i](att, par[in], par[n])
			}
			att.exchanges[n] = exs
		}
	}
	var build func(st *subtask, n *Node) any
	build = func(st *subtask, n *Node) any {
		outs := make([]any, 0, len(n.consumers))
		for i, c := range n.consumers {
			if chained(c) {
				var down any
				if c.kind != kindSink {
					down = build(st, c)
				}
				outs = append(outs, c.chain(st, c, down))
			} else {
				outs = append(outs, att.exchanges[c][n.slots[i]].writer(st))
			}
		}
		if len(outs) == 1 {
			return outs[0]
		}
		return n.fanout(outs)
	}
	for _, n := range j.g.nodes {
		if n.kind != kindSource && chained(n) {
			continue
		}
		for i := 0; i < par[n]; i++ {
			st := &subtask{att: att, head: n, index: i, par: par[n], mail: newMailbox[mail](), started: time.Now()}
			st.watermark.Store(NoWatermark)
			st.initSampling(chainOf(n, chained))
			att.subtasks = append(att.subtasks, st)
			if n.kind == kindSource {
				att.sources = append(att.sources, st)
			}
		}
	}
	j.mu.Lock()
	j.cur = att
	j.mu.Unlock()
	j.attemptRan.Store(true)
	defer func() {
		j.mu.Lock()
		j.cur = nil
		j.mu.Unlock()
		for _, st := range att.subtasks {
			if st.head.kind == kindSource {
				j.inBase.Add(st.in.Load())
			}
			j.outBase.Add(st.out.Load())
		}
	}()

	var wg sync.WaitGroup
	for _, st := range att.subtasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := st.head
			err := st.run(func() {
				if n.kind == kindSource {
					n.runSource(st, build(st, n))
					return
				}
				var in any
				if n.kind == kindSink {
					in = n.chain(st, n, nil)
				} else {
					in = n.chain(st, n, build(st, n))
				}
				exs := att.exchanges[n]
				if len(exs) == 1 {
					exs[0].receive(st, in)
					return
				}
				m := in.(*multiIn)
				ports := make([]inPort, len(exs))
				for i, ex := range exs {
					ports[i] = ex.port(st, m.ins[i])
				}
				receiveMulti(st, ports, m.ctl)
			})
			if err != nil {
				select {
				case att.failures <- err:
				default:
				}
				cancel()
			}
		}()
	}
	allDone := make(chan struct{})
	go func() { wg.Wait(); att.writers.Wait(); close(allDone) }()
	go att.sample(allDone)

	result := att.loop(ctx, coord, allDone)
	if result != nil {
		cancel()
	}
	<-allDone
	select {
	case e := <-att.failures:
		var ce *commitError
		switch {
		case result == nil || errors.Is(result, errAttemptCanceled):
			result = e
		case errors.As(result, &ce):
			// A failing task closes its sinks before its error is
			// posted: a commit in between fails for want of them. The
			// task's error is the cause (a poison record, say).
			result = fmt.Errorf("%w (afterwards %w)", e, result)
		}
	default:
	}
	if errors.Is(result, errAttemptCanceled) {
		result = nil
	}
	return result
}

// chainOf lists the operators of the task that starts at head whose calls
// the sampler tells apart (docs/design.md, "Metrics and the REST API"):
// head, then in chain order the keyed operators and sinks. A stateless
// function (map, filter, flatmap) is not marked: two atomic stores per
// record cost it more than its work, so its time counts for the operator
// that calls it.
func chainOf(head *Node, chained func(*Node) bool) []*Node {
	ops := []*Node{head}
	var walk func(n *Node)
	walk = func(n *Node) {
		for _, c := range n.consumers {
			if !chained(c) {
				continue
			}
			if c.kind == kindKeyed || c.kind == kindSink {
				ops = append(ops, c)
			}
			walk(c)
		}
	}
	walk(head)
	return ops
}

// commitError is a checkpoint's commit point that failed.
type commitError struct {
	id  int64
	err error
}

func (e *commitError) Error() string {
	return fmt.Sprintf("checkpoint %d could not commit: %v", e.id, e.err)
}

func (e *commitError) Unwrap() error { return e.err }
