package flow

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow/internal/checkpoint"
	"github.com/onceflow/onceflow/internal/checkpoint/storage"
	"github.com/onceflow/onceflow/internal/dirlock"
	"github.com/onceflow/onceflow/internal/failpoint"
	"github.com/onceflow/onceflow/internal/restart"
	"github.com/onceflow/onceflow/internal/runtime"
	"github.com/onceflow/onceflow/internal/testbreak"
	"github.com/onceflow/onceflow/state"
)

// ErrRestoreRefused is wrapped by errors that stop a job before it starts
// because restoring its state would be wrong (damaged checkpoint, state for
// operators that no longer exist, changed max parallelism). Restarting does
// not help; the error says what does.
var ErrRestoreRefused = errors.New("restore refused")

// Stats is a snapshot of a running job's counters. Counters marked
// "job life" continue across restarts and processes: the checkpoints carry
// them. The others count this process only.
type Stats struct {
	RecordsIn int64 // records read by sources (this process)
	// RecordsOut counts records written to sinks by this process,
	// including those of epochs whose commit later failed and that were
	// written again after a restore.
	RecordsOut int64
	// RecordsCommitted counts records written in checkpoints that
	// committed (job life): what readers of the output see.
	RecordsCommitted       int64
	CheckpointsCompleted   int64         // job life
	CheckpointsFailed      int64         // job life
	LastCheckpoint         int64         // id of the newest committed checkpoint
	LastCheckpointDuration time.Duration // trigger to commit
	// Restarts counts failovers inside this process plus starts of a
	// process after one that did not stop gracefully (job life).
	Restarts            int64
	RestoredCheckpoint  int64 // id of the checkpoint or savepoint the current (or last) attempt restored, 0 for none
	RecordsSkipped      int64 // poison records dropped by TryMap with SkipOnError
	RecordsDeadLettered int64 // poison records sent to a dead-letter stream by TryMap
	Running             bool
}

// Job is a running job.
type Job struct {
	env  *Env
	cfg  config
	log  *slog.Logger
	reqs chan request
	done chan struct{}
	err  error

	stopOnce sync.Once
	stop     chan struct{}
	// hardStop is canceled when a graceful stop has run out of time
	// (StopTimeout less the time kept for cleanup): a commit stuck on an
	// unreachable system gives up then.
	hardStop context.Context

	// stateID identifies the state directory (storage.Store.StateID).
	stateID string

	mu       sync.Mutex
	cur      *attempt
	restarts atomic.Int64
	cpDone   atomic.Int64
	cpFailed atomic.Int64
	lastCP   atomic.Int64
	lastDur  atomic.Int64
	restored atomic.Int64
	// committed counts records of committed checkpoints.
	committed atomic.Int64
	// base holds the counters restored from the first checkpoint this
	// process restored (set once, before the first attempt runs).
	baseMu  sync.Mutex
	base    storage.Counters
	baseSet bool
	// skipped and deadLettered count poison records over the job's life
	// (a replayed record counts again).
	skipped      atomic.Int64
	deadLettered atomic.Int64
	inBase       atomic.Int64 // records counted by finished attempts
	outBase      atomic.Int64
	// attemptRan is true once the current attempt's tasks started (its
	// recovery is over).
	attemptRan atomic.Bool
	// committedThisRun is true once the job committed a checkpoint of its
	// own; from then on it restores from its own checkpoints, not from
	// FromSavepoint.
	committedThisRun atomic.Bool
}

type request struct {
	dir   string
	stop  bool
	reply chan savepointResult
}

type savepointResult struct {
	path string
	err  error
}

// Run runs the job until its input ends (bounded sources), ctx is canceled
// (then it stops gracefully: a final checkpoint commits what was processed),
// or it fails beyond what its restart strategy allows.
func (e *Env) Run(ctx context.Context) error {
	j, err := e.Start(ctx)
	if err != nil {
		return err
	}
	return j.Wait()
}

// Start validates the job and runs it in the background.
func (e *Env) Start(ctx context.Context) (*Job, error) {
	cfg := e.cfg
	cfg.checkpoint = cfg.checkpoint.WithDefaults()
	if cfg.logger == nil {
		cfg.logger = slog.Default()
	}
	if err := e.validate(ctx, &cfg); err != nil {
		return nil, err
	}
	if testbreak.Any() {
		cfg.logger.Error("TEST-ONLY SWITCHES THAT BREAK EXACTLY-ONCE ARE ON (" + testbreak.EnvVar + "); never run production jobs like this")
	}
	j := &Job{env: e, cfg: cfg, log: cfg.logger.With("job", cfg.job), reqs: make(chan request), done: make(chan struct{}), stop: make(chan struct{})}
	go func() {
		defer close(j.done)
		j.err = j.run(ctx)
	}()
	return j, nil
}

func (e *Env) validate(ctx context.Context, cfg *config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	var errs []error
	var sources, sinks int
	var cps []*node
	for _, n := range e.nodes {
		switch n.kind {
		case kindSource:
			sources++
		case kindSink:
			sinks++
			if n.commitPoint != nil {
				cps = append(cps, n)
			}
		}
	}
	if sources == 0 {
		errs = append(errs, errors.New("the job has no source: add one with flow.From"))
	}
	if sinks == 0 {
		errs = append(errs, errors.New("the job has no sink: nothing it computes would leave it; add one with flow.To"))
	}
	if len(cps) > 1 {
		errs = append(errs, fmt.Errorf("sinks %q and %q both want to own the job's commit point; a job can have one transactional Kafka sink", cps[0].uid, cps[1].uid))
	}
	if len(cps) == 1 {
		if cfg.commitPoint != nil {
			errs = append(errs, fmt.Errorf("sink %q owns the commit point and WithCommitPoint sets another: use one", cps[0].uid))
		}
		cfg.commitPoint = cps[0].commitPoint
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidJob, errors.Join(errs...))
	}
	info := cfg.jobInfo()
	bound := map[any]bool{}
	bind := func(what string, v any) {
		b, ok := v.(JobBinder)
		if !ok || bound[v] {
			return
		}
		bound[v] = true
		if err := b.BindJob(info); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		}
	}
	for _, n := range e.nodes {
		if n.impl != nil {
			bind(fmt.Sprintf("operator %q", n.uid), n.impl)
		}
	}
	if cfg.commitPoint != nil {
		bind("the commit point", cfg.commitPoint)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidJob, errors.Join(errs...))
	}
	if _, err := e.plan(ctx, cfg); err != nil {
		return err
	}
	return nil
}

// plan computes every node's parallelism.
func (e *Env) plan(ctx context.Context, cfg *config) (map[*node]int, error) {
	par := map[*node]int{}
	var errs []error
	for _, n := range e.nodes { // nodes are in topological order: inputs come first
		switch {
		case n.par > 0:
			par[n] = n.par
		case n.kind == kindSource && n.hint != nil:
			h, err := n.hint(ctx)
			if err != nil {
				return nil, fmt.Errorf("source %q: %w", n.uid, err)
			}
			par[n] = max(h, 1)
		case n.kind == kindSource:
			par[n] = cfg.parallelism
		default:
			par[n] = par[n.input]
		}
		if n.kind == kindKeyed && par[n] > cfg.maxParallelism {
			errs = append(errs, fmt.Errorf("keyed operator %q has parallelism %d above the max parallelism %d: lower the parallelism (source.parallelism in a job file: by default a Kafka source takes one subtask per partition) or raise the max parallelism (state.max-parallelism in a job file, flow.MaxParallelism in Go) before the first checkpoint; it cannot change later", n.uid, par[n], cfg.maxParallelism))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalidJob, errors.Join(errs...))
	}
	return par, nil
}

// Wait blocks until the job ends and returns why it failed, or nil.
func (j *Job) Wait() error {
	<-j.done
	return j.err
}

// Done is closed when the job has ended.
func (j *Job) Done() <-chan struct{} { return j.done }

// Stop asks the job to stop gracefully: a final checkpoint commits what was
// processed, then the sources end. Wait returns when it has stopped.
func (j *Job) Stop() { j.stopOnce.Do(func() { close(j.stop) }) }

// TriggerSavepoint takes a savepoint of the running job into dir (a new or
// empty directory) and returns its path.
func (j *Job) TriggerSavepoint(ctx context.Context, dir string) (string, error) {
	return j.savepoint(ctx, dir, false)
}

// StopWithSavepoint takes a savepoint into dir and stops the job right after
// it, so nothing is processed after the savepoint. Resume with FromSavepoint.
func (j *Job) StopWithSavepoint(ctx context.Context, dir string) (string, error) {
	return j.savepoint(ctx, dir, true)
}

func (j *Job) savepoint(ctx context.Context, dir string, stop bool) (string, error) {
	if dir == "" {
		return "", errors.New("savepoint directory is empty: name a directory to write the savepoint into")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	r := request{dir: abs, stop: stop, reply: make(chan savepointResult, 1)}
	select {
	case j.reqs <- r:
	case <-j.done:
		return "", errors.New("the job is not running")
	case <-ctx.Done():
		return "", ctx.Err()
	}
	select {
	case res := <-r.reply:
		return res.path, res.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Stats returns the job's counters.
func (j *Job) Stats() Stats {
	b := j.counters()
	s := Stats{
		RecordsIn:              j.inBase.Load(),
		RecordsOut:             j.outBase.Load(),
		RecordsCommitted:       b.RecordsCommitted,
		CheckpointsCompleted:   b.CheckpointsCompleted,
		CheckpointsFailed:      b.CheckpointsFailed,
		LastCheckpoint:         j.lastCP.Load(),
		LastCheckpointDuration: time.Duration(j.lastDur.Load()),
		Restarts:               b.Restarts,
		RestoredCheckpoint:     j.restored.Load(),
		RecordsSkipped:         j.skipped.Load(),
		RecordsDeadLettered:    j.deadLettered.Load(),
	}
	j.mu.Lock()
	att := j.cur
	j.mu.Unlock()
	if att != nil {
		s.Running = true
		for _, st := range att.subtasks {
			s.RecordsIn += st.in.Load()
			s.RecordsOut += st.out.Load()
		}
	}
	return s
}

// counters returns the job-life counters: those restored plus this
// process's.
func (j *Job) counters() storage.Counters {
	j.baseMu.Lock()
	b := j.base
	j.baseMu.Unlock()
	return storage.Counters{
		Restarts:             b.Restarts + j.restarts.Load(),
		RecordsCommitted:     b.RecordsCommitted + j.committed.Load(),
		CheckpointsCompleted: b.CheckpointsCompleted + j.cpDone.Load(),
		CheckpointsFailed:    b.CheckpointsFailed + j.cpFailed.Load(),
	}
}

// restoreCounters continues the counters of the first checkpoint this
// process restores. A process that restores one of the job's own
// checkpoints that a graceful stop did not take follows one that failed:
// that counts as a restart.
func (j *Job) restoreCounters(r recovery) {
	j.baseMu.Lock()
	defer j.baseMu.Unlock()
	if j.baseSet {
		return
	}
	j.baseSet = true
	if r.manifest == nil {
		return
	}
	j.base = r.manifest.Counters
	if r.own && !r.manifest.Final {
		j.base.Restarts++
	}
}

func (j *Job) run(ctx context.Context) error {
	rc := j.cfg.restart
	if !j.cfg.restartSet {
		if j.cfg.checkpoint.Enabled() {
			rc = restart.Config{Strategy: restart.ExponentialDelay}
		} else {
			rc = restart.Config{Strategy: restart.None}
		}
	}
	strategy, err := restart.New(rc.WithDefaults(), nil)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidJob, err)
	}
	if j.cfg.stateDir != "" {
		// One live instance per state directory: a second one (or a
		// paused zombie coming back) would write the same checkpoint
		// directories and, without Kafka fencing, commit sinks twice.
		root := filepath.Join(j.cfg.stateDir, j.cfg.job)
		if abs, err := filepath.Abs(root); err == nil {
			root = abs
		}
		if err := os.MkdirAll(root, 0o755); err != nil {
			return fmt.Errorf("%w: create state directory: %w", ErrInvalidJob, err)
		}
		release, err := dirlock.Lock(filepath.Join(root, "LOCK"))
		if err != nil {
			if errors.Is(err, dirlock.ErrLocked) {
				return fmt.Errorf("%w: state directory %s is in use by another instance of job %q (%w): stop that instance first, or give this one its own state directory", ErrInvalidJob, root, j.cfg.job, err)
			}
			return fmt.Errorf("%w: lock state directory: %w", ErrInvalidJob, err)
		}
		defer release()
		store, err := storage.Open(root)
		if err != nil {
			return fmt.Errorf("%w: open state directory: %w", ErrInvalidJob, err)
		}
		if j.stateID, err = store.StateID(); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidJob, err)
		}
		j.log.Info("state directory", "dir", root, "state_id", j.stateID)
	}
	// A stop request cancels recovery at once (nothing to save yet) and,
	// StopTimeout less the cleanup budget later, whatever still blocks a
	// graceful stop.
	quit := make(chan struct{})
	defer close(quit)
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	hard, hardCancel := context.WithCancel(context.Background())
	defer hardCancel()
	j.hardStop = hard
	go func() {
		select {
		case <-j.stop:
			rcancel()
		case <-ctx.Done():
		case <-quit:
			return
		}
		t := time.NewTimer(j.cfg.stopTimeout - cleanupBudget(j.cfg.stopTimeout))
		defer t.Stop()
		select {
		case <-t.C:
			hardCancel()
		case <-quit:
		}
	}()
	var stopStatus func()
	if j.cfg.statusInterval > 0 {
		stopStatus = j.statusLoop()
		defer stopStatus()
	}
	for {
		err := j.runAttempt(rctx)
		if err == nil {
			return nil
		}
		if errors.Is(err, ErrRestoreRefused) || errors.Is(err, ErrInvalidJob) || errors.Is(err, ErrUnrecoverable) {
			j.log.Error("job failed and will not restart: restarting cannot fix this", "err", err)
			return err
		}
		if rctx.Err() != nil {
			if !j.attemptRan.Load() {
				// Asked to stop while recovering: nothing ran,
				// nothing is lost; the next start recovers.
				j.log.Warn("stopped while the job was recovering", "err", err)
				return nil
			}
			j.log.Error("stopped without a final checkpoint; the next start resumes from the last committed checkpoint", "err", err)
			return fmt.Errorf("stopped without a final checkpoint (the next start resumes from the last committed checkpoint): %w", err)
		}
		d := strategy.OnFailure(j.cfg.clock())
		if !d.Restart {
			j.log.Error("job failed", "err", err, "restart", d.Reason)
			return fmt.Errorf("job %q failed and will not restart (%s): %w", j.cfg.job, d.Reason, err)
		}
		j.restarts.Add(1)
		var te *TaskError
		if errors.As(err, &te) && te.Stack != nil {
			j.log.Error("task failed; restoring the last committed checkpoint", "err", err, "attempt", d.Attempt, "delay", d.Delay, "stack", string(te.Stack))
		} else {
			j.log.Error("task failed; restoring the last committed checkpoint", "err", err, "attempt", d.Attempt, "delay", d.Delay)
		}
		select {
		case <-time.After(d.Delay):
		case <-ctx.Done():
			return nil
		case <-j.stop:
			return nil
		}
	}
}

// cleanupBudget is the part of StopTimeout kept for cleanup after a stop
// gave up on its final checkpoint (aborting an open transaction, closing
// clients), so that the whole stop ends within StopTimeout.
func cleanupBudget(stop time.Duration) time.Duration { return min(5*time.Second, stop/2) }

func (j *Job) statusLoop() func() {
	t := time.NewTicker(j.cfg.statusInterval)
	quit := make(chan struct{})
	go func() {
		defer t.Stop()
		for {
			select {
			case <-t.C:
				s := j.Stats()
				j.log.Info("status", "records_in", s.RecordsIn, "records_written", s.RecordsOut, "records_committed", s.RecordsCommitted, "checkpoints", s.CheckpointsCompleted, "failed_checkpoints", s.CheckpointsFailed, "last_checkpoint", s.LastCheckpoint, "last_checkpoint_duration", s.LastCheckpointDuration.Round(time.Millisecond), "restarts", s.Restarts)
			case <-quit:
				return
			}
		}
	}()
	return func() { close(quit) }
}

// ackMsg is a participant's answer to a barrier.
type ackMsg struct {
	cp    int64
	part  int
	uid   string
	keyed *storage.KeyedFile
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
}

// attempt is one run of the job's graph, from restore to failure or end.
type attempt struct {
	job      *Job
	cfg      *config
	log      *slog.Logger
	ctx      context.Context
	cancel   context.CancelFunc
	store    *storage.Store
	restored *storage.Manifest
	par      map[*node]int
	partBase map[*node]int
	parts    int

	acks      chan ackMsg
	failures  chan error
	finished  chan struct{}
	subtasks  []*subtask
	sources   []*subtask
	exchanges map[*node]exchangeImpl
	writers   sync.WaitGroup
	// incarnation identifies this attempt in manifests and commit records.
	incarnation string
	// origin is the savepoint this attempt's checkpoints descend from.
	origin *storage.Origin
}

// newIncarnation returns 16 random hex digits.
func newIncarnation() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (att *attempt) exactlyOnce() bool { return att.cfg.checkpoint.Mode == checkpoint.ExactlyOnce }

func (att *attempt) restoredID() int64 {
	if att.restored == nil {
		return 0
	}
	return att.restored.CheckpointID
}

func (att *attempt) partOf(n *node, subtask int) int { return att.partBase[n] + subtask }

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
		groups, err := storage.ReadKeyedFile(att.restored.Dir, f, first, last)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrRestoreRefused, err)
		}
		if err := s.Restore(groups); err != nil {
			return fmt.Errorf("%w: operator %q: %w", ErrRestoreRefused, uid, err)
		}
	}
	return nil
}

// writeKeyed writes a keyed snapshot in the background and acks when done,
// so the operator goes on processing while the file is written and synced.
func (att *attempt) writeKeyed(cp int64, n *node, subtask, part int, s *state.Runtime, groups map[int][]byte) {
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
		att.ack(ackMsg{cp: cp, part: part, uid: n.uid, keyed: &kf})
	}()
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, s)
}

func (j *Job) runAttempt(ctx context.Context) (err error) {
	j.attemptRan.Store(false)
	cfg := &j.cfg
	var store *storage.Store
	if cfg.stateDir != "" {
		store, err = storage.Open(filepath.Join(cfg.stateDir, cfg.job))
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
	j.restoreCounters(rec)
	j.restored.Store(0)
	if restored != nil {
		j.restored.Store(restored.CheckpointID)
		j.log.Info("restoring", "checkpoint", restored.CheckpointID, "dir", restored.Dir, "savepoint", restored.Savepoint)
	}
	if err := j.recoverSinks(ctx, restored); err != nil {
		return err
	}
	par, err := j.env.plan(ctx, cfg)
	if err != nil {
		return err
	}
	actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	att := &attempt{
		job: j, cfg: cfg, log: j.log, ctx: actx, cancel: cancel, store: store, restored: restored,
		par: par, partBase: map[*node]int{}, exchanges: map[*node]exchangeImpl{},
		failures: make(chan error, 1), finished: make(chan struct{}),
		incarnation: newIncarnation(), origin: rec.originOf(),
	}
	for _, n := range j.env.nodes {
		att.partBase[n] = att.parts
		att.parts += par[n]
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
	coord := checkpoint.NewCoordinator(cfg.checkpoint, lastID, att.parts, cfg.clock())

	// Build tasks: a task starts at a source or at a node fed by an exchange.
	chained := func(n *node) bool {
		return n.kind != kindSource && n.edge == edgeForward && par[n] == par[n.input]
	}
	for _, n := range j.env.nodes {
		if n.kind != kindSource && !chained(n) {
			att.exchanges[n] = n.exchange(att, par[n.input], par[n])
		}
	}
	var build func(st *subtask, n *node) any
	build = func(st *subtask, n *node) any {
		outs := make([]any, 0, len(n.consumers))
		for _, c := range n.consumers {
			if chained(c) {
				var down any
				if c.kind != kindSink {
					down = build(st, c)
				}
				outs = append(outs, c.chain(st, c, down))
			} else {
				outs = append(outs, att.exchanges[c].writer(st))
			}
		}
		if len(outs) == 1 {
			return outs[0]
		}
		return n.fanout(outs)
	}
	for _, n := range j.env.nodes {
		if n.kind != kindSource && chained(n) {
			continue
		}
		for i := 0; i < par[n]; i++ {
			st := &subtask{att: att, head: n, index: i, par: par[n], mail: runtime.NewMailbox[mail]()}
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
			j.inBase.Add(st.in.Load())
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
				att.exchanges[n].receive(st, in)
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

	result := att.loop(ctx, coord, allDone)
	if result != nil {
		cancel()
	}
	<-allDone
	select {
	case e := <-att.failures:
		if result == nil || errors.Is(result, errAttemptCanceled) {
			result = e
		}
	default:
	}
	if errors.Is(result, errAttemptCanceled) {
		result = nil
	}
	return result
}

// loop is the coordinator's run loop: it owns the Coordinator, timers, acks
// and requests, and performs the commit point. It returns nil when the job
// ended (input exhausted, stop requested) and the reason otherwise.
func (att *attempt) loop(ctx context.Context, coord *checkpoint.Coordinator, allDone <-chan struct{}) error {
	j := att.job
	cfg := att.cfg
	pending := map[int64]*pendingCP{}
	defer func() {
		// Whoever asked for a savepoint that did not complete must hear so.
		for _, p := range pending {
			att.replySavepoint(p, "", errors.New("the attempt ended (failure or stop) before the savepoint completed; trigger it again"))
		}
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	sourcesLeft := len(att.sources)
	stopping := false // a final checkpoint is in flight
	ended := false    // the final checkpoint committed; the sources are ending
	ctxDone := ctx.Done()
	stopCh := j.stop
	var stopDeadline <-chan struct{}
	// carry is the output of aborted checkpoints' epochs: the next commit
	// commits it.
	var carry int64

	endSources := func() {
		for _, st := range att.sources {
			st.mail.Post(mail{kind: mailStop})
		}
	}
	beginStop := func(final *request) {
		if stopping {
			return
		}
		stopping = true
		id := coord.TriggerSavepoint(cfg.clock())
		p := &pendingCP{id: id, final: true, req: final}
		if final != nil {
			p.savepoint = true
		}
		pending[id] = p
		stopDeadline = j.hardStop.Done()
		att.log.Info("stopping: taking a final checkpoint", "checkpoint", id)
	}
	for {
		now := cfg.clock()
		coord.Tick(now)
		for _, a := range coord.Ready() {
			switch a.Kind {
			case checkpoint.Trigger:
				p := pending[a.ID]
				if p == nil {
					p = &pendingCP{id: a.ID}
					pending[a.ID] = p
				}
				p.started = now
				p.ops = map[string]*storage.OperatorState{}
				for _, st := range att.sources {
					st.mail.Post(mail{kind: mailTrigger, b: runtime.Barrier{ID: a.ID, Savepoint: a.Savepoint}})
				}
			case checkpoint.Commit:
				p := pending[a.ID]
				delete(pending, a.ID)
				if ended {
					continue // after the final checkpoint nothing else commits
				}
				cctx, cancel := att.commitContext(p)
				err := att.commit(cctx, p, carry)
				cancel()
				coord.CommitDone(a.ID, err, cfg.clock())
				if err != nil {
					// The commit point failed: the epoch's output is gone
					// (or unknown). Replay from the last committed checkpoint.
					j.cpFailed.Add(1)
					att.replySavepoint(p, "", err)
					return fmt.Errorf("checkpoint %d could not commit: %w", a.ID, err)
				}
				carry = 0
				for _, st := range att.subtasks {
					st.mail.Post(mail{kind: mailCommitted, b: runtime.Barrier{ID: a.ID}})
				}
				if p.final {
					ended = true
					endSources()
				}
			case checkpoint.Abort:
				p := pending[a.ID]
				delete(pending, a.ID)
				j.cpFailed.Add(1)
				if p != nil {
					carry += p.out
				}
				att.log.Warn("checkpoint aborted", "checkpoint", a.ID, "reason", a.Err)
				if an, ok := cfg.commitPoint.(AbortNotifier); ok {
					an.CheckpointAborted(att.ctx, a.ID)
				}
				for _, st := range att.subtasks {
					st.mail.Post(mail{kind: mailAborted, b: runtime.Barrier{ID: a.ID}})
				}
				if p != nil {
					att.replySavepoint(p, "", a.Err)
					if p.final {
						return fmt.Errorf("final checkpoint %d failed: %w", a.ID, a.Err)
					}
				}
			case checkpoint.FailJob:
				return a.Err
			}
		}
		if d, ok := coord.NextDeadline(); ok {
			wait := d.Sub(cfg.clock())
			if wait < time.Millisecond {
				wait = time.Millisecond
			}
			timer.Reset(wait)
		} else {
			timer.Reset(time.Hour)
		}
		// Accept savepoint requests only when none is in flight.
		reqs := j.reqs
		if stopping {
			reqs = nil
		}
		select {
		case <-timer.C:
		case a := <-att.acks:
			p := pending[a.cp]
			if a.err != nil {
				coord.Decline(a.cp, a.part, a.err)
				continue
			}
			if p != nil {
				p.out += a.out
			}
			if p != nil && p.ops != nil && a.uid != "" {
				op := p.ops[a.uid]
				if op == nil {
					op = &storage.OperatorState{}
					p.ops[a.uid] = op
				}
				if a.keyed != nil {
					op.Keyed = append(op.Keyed, *a.keyed)
				}
				for k, v := range a.blobs {
					if op.Blobs == nil {
						op.Blobs = map[string][]byte{}
					}
					op.Blobs[k] = v
				}
			}
			coord.Ack(a.cp, a.part)
		case err := <-att.failures:
			return err
		case <-att.finished:
			sourcesLeft--
			if sourcesLeft == 0 {
				beginStop(nil)
			}
		case r := <-reqs:
			if r.stop {
				beginStop(&r)
				continue
			}
			id := coord.TriggerSavepoint(cfg.clock())
			pending[id] = &pendingCP{id: id, savepoint: true, req: &r}
		case <-ctxDone:
			ctxDone = nil
			beginStop(nil)
		case <-stopCh:
			stopCh = nil
			beginStop(nil)
		case <-stopDeadline:
			return fmt.Errorf("the final checkpoint did not complete within the stop timeout %v; stopped without it (the next start resumes from the last committed checkpoint)", att.cfg.stopTimeout)
		case <-allDone:
			if stopping {
				return nil
			}
			return errors.New("every task ended without a final checkpoint")
		case <-att.ctx.Done():
			return errAttemptCanceled
		}
	}
}

// commitContext bounds the commit point of p: the checkpoint's timeout
// counts from its trigger to its commit (at least a second is left for the
// commit itself), and a graceful stop that ran out of time cancels it.
// Every call the commit point makes to an external system inherits the
// deadline, so a broker that stops answering fails the checkpoint instead
// of blocking the job, its stop and its restarts.
func (att *attempt) commitContext(p *pendingCP) (context.Context, context.CancelFunc) {
	deadline := p.started.Add(att.cfg.checkpoint.Timeout)
	if now := time.Now(); deadline.Before(now.Add(time.Second)) {
		deadline = now.Add(time.Second)
	}
	ctx, cancel := context.WithDeadline(att.ctx, deadline)
	stop := context.AfterFunc(att.job.hardStop, cancel)
	return ctx, func() { stop(); cancel() }
}

// commit performs the commit point of checkpoint p; carry is the output of
// aborted checkpoints' epochs that it commits too.
func (att *attempt) commit(ctx context.Context, p *pendingCP, carry int64) error {
	j := att.job
	cfg := att.cfg
	counters := j.counters()
	counters.CheckpointsCompleted++
	counters.RecordsCommitted += carry + p.out
	m := &storage.Manifest{
		Version:        storage.ManifestVersion,
		Job:            cfg.job,
		CheckpointID:   p.id,
		CreatedAt:      cfg.clock(),
		MaxParallelism: cfg.maxParallelism,
		Operators:      p.ops,
		Incarnation:    att.incarnation,
		StateID:        j.stateID,
		Final:          p.final,
		Counters:       counters,
		Origin:         att.origin,
	}
	for uid, op := range m.Operators {
		if n := j.env.uids[uid]; n != nil {
			op.Parallelism = att.par[n]
		}
	}
	switch {
	case att.store == nil && cfg.commitPoint != nil:
		return errors.New("the commit point needs a state directory for the checkpoint manifest: set flow.StateDir")
	case att.store == nil:
		// No state directory: nothing can be recovered, but sinks still
		// commit (bounded jobs without checkpointing).
	case cfg.commitPoint != nil:
		m.CommitPoint = commitPointName(cfg.commitPoint)
		sum, err := att.store.WritePending(m)
		if err != nil {
			return err
		}
		rec := CommitRecord{Job: cfg.job, Checkpoint: p.id, Manifest: sum, Incarnation: att.incarnation, StateID: j.stateID, Time: time.Now()}
		if err := cfg.commitPoint.Commit(ctx, rec); err != nil {
			return err
		}
		// The checkpoint is committed. Confirming it in the store is a
		// follow-up step that recovery repeats (LoadCommitted), so a
		// failure here fails over without undoing the checkpoint.
		if err := att.store.Confirm(p.id, sum); err != nil {
			att.failTask(fmt.Errorf("checkpoint %d committed but confirming its manifest failed (recovery confirms it): %w", p.id, err))
		}
	default:
		if err := att.store.Commit(m); err != nil {
			return err
		}
	}
	j.committed.Add(carry + p.out)
	if err := failpoint.Inject(failpoint.AfterCommitPoint); err != nil {
		// Past the commit point nothing may undo the checkpoint: an
		// injected error here fails the job over, and recovery redoes the
		// post-commit steps.
		j.committedThisRun.Store(true)
		att.failTask(fmt.Errorf("after the commit point of checkpoint %d: %w", p.id, err))
		return nil
	}
	dur := cfg.clock().Sub(p.started)
	j.cpDone.Add(1)
	j.lastCP.Store(p.id)
	j.lastDur.Store(int64(dur))
	j.committedThisRun.Store(true)
	att.log.Debug("checkpoint committed", "checkpoint", p.id, "duration", dur)
	if p.savepoint && p.req != nil {
		if att.store == nil {
			att.replySavepoint(p, "", errors.New("savepoints need a state directory: set flow.StateDir"))
		} else if sp, err := storage.CopyTo(m, p.req.dir); err != nil {
			att.replySavepoint(p, "", fmt.Errorf("checkpoint %d committed but copying it into savepoint %s failed: %w", p.id, p.req.dir, err))
		} else {
			att.log.Info("savepoint written", "checkpoint", p.id, "dir", sp.Dir)
			att.replySavepoint(p, sp.Dir, nil)
		}
	}
	if att.store != nil {
		if _, err := att.store.GC(cfg.checkpoint.NumRetained); err != nil {
			att.log.Warn("removing old checkpoints failed; they are retried after the next checkpoint", "err", err)
		}
	}
	return nil
}

// commitPointName names an external commit point in manifests.
func commitPointName(cp CommitPoint) string {
	if s, ok := cp.(fmt.Stringer); ok {
		return s.String()
	}
	return "external"
}

func (att *attempt) replySavepoint(p *pendingCP, path string, err error) {
	if p == nil || p.req == nil {
		return
	}
	select {
	case p.req.reply <- savepointResult{path: path, err: err}:
	default:
	}
	p.req = nil
}
