package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/onceflow/onceflow/internal/checkpoint/storage"
	"github.com/onceflow/onceflow/state"
)

// recovery is what resolveRestore decided for one attempt: the checkpoint
// to restore (nil: start from the sources' startup modes) and what the
// commit point recorded, which new checkpoint ids must exceed.
type recovery struct {
	manifest *storage.Manifest
	record   CommitRecord
	// own is true when manifest is one of the job's own checkpoints (not a
	// savepoint the user chose), so its counters continue.
	own bool
	// origin is the savepoint being restored, nil for the job's own
	// checkpoints (which carry their origin).
	origin *storage.Origin
}

// originOf is the savepoint the checkpoints taken after r descend from.
func (r recovery) originOf() *storage.Origin {
	if r.origin != nil {
		return r.origin
	}
	if r.manifest != nil {
		return r.manifest.Origin
	}
	return nil
}

// resolveRestore decides what the attempt restores; docs/design.md,
// "Recovery decisions", has the table this implements. Every way to get
// it wrong silently (another job's checkpoint, a manifest whose commit
// never completed, a fresh start over earlier progress) is refused with
// an error that says what was found and which explicit choice resolves it.
func (j *RunningJob) resolveRestore(ctx context.Context, store storage.Storage) (recovery, error) {
	cfg := &j.cfg
	cp := cfg.CommitPoint
	if cfg.FromSavepoint != "" && !j.committedThisRun.Load() {
		return j.resolveSavepoint(ctx, store)
	}
	if store == nil {
		return recovery{}, nil
	}
	if cp == nil {
		return j.resolveFromStore(ctx, store)
	}
	explicit := cfg.StartFresh || cfg.ResumeLatest
	peek, err := cp.Peek(ctx)
	if err != nil {
		return recovery{}, fmt.Errorf("read the job's commit record: %w", err)
	}
	if err := j.checkOwner(peek, store); err != nil && !explicit {
		// Refused before Recover: fencing would abort the other
		// installation's open transaction.
		return recovery{}, err
	}
	rec, err := cp.Recover(ctx)
	if err != nil {
		return recovery{}, fmt.Errorf("find the last committed checkpoint: %w", err)
	}
	if err := j.checkOwner(rec, store); err != nil {
		if !explicit {
			return recovery{}, err
		}
		j.noteTakeover(rec, startChoice(*cfg))
		if cfg.StartFresh {
			j.log.Warn("starting fresh, as asked: the sources start from their startup modes", "commit_record_checkpoint", rec.Checkpoint)
			return recovery{record: rec}, nil
		}
		return j.resumeLatest(store, rec, "the commit record belongs to another installation of the job")
	}
	if rec.Checkpoint == 0 {
		return j.resolveWithoutRecord(ctx, store, rec)
	}
	if newer, err := j.confirmedAfter(store, rec.Checkpoint); err != nil {
		return recovery{}, err
	} else if newer != 0 {
		// The job went on under another commit point (at-least-once or
		// none delivery): its newest progress is in the state
		// directory, not in the record.
		if cfg.ResumeLatest {
			return j.resumeLatest(store, rec, "checkpoints newer than the commit record exist")
		}
		return recovery{}, fmt.Errorf("%w: the commit record of job %q names checkpoint %d, but %s holds confirmed checkpoint %d, newer: the job ran with another delivery since (at-least-once or none have no commit record), or the record was rolled back. "+
			"Restoring checkpoint %d would process again what the newer checkpoints covered. Choose: --resume-latest-checkpoint restores checkpoint %d; --from-savepoint DIR restores a checkpoint directory of your choice",
			ErrRestoreRefused, j.cfg.Job, rec.Checkpoint, store.Root(), newer, rec.Checkpoint, newer)
	}
	m, err := store.LoadCommitted(rec.Checkpoint, rec.Manifest)
	if err == nil && rec.Incarnation != "" && m.Incarnation != "" && m.Incarnation != rec.Incarnation {
		err = fmt.Errorf("%w: it was written by run %s, the commit record names run %s", storage.ErrManifestMismatch, m.Incarnation, rec.Incarnation)
	}
	if err == nil {
		return recovery{manifest: m, record: rec, own: true}, nil
	}
	return j.recordedCheckpointUnusable(store, rec, err)
}

// startChoice says what made the start explicit, for the log.
func startChoice(cfg Config) string {
	switch {
	case cfg.StartFresh && cfg.StartReason != "":
		return cfg.StartReason
	case cfg.StartFresh:
		return "an explicit start choice (--start-fresh)"
	default:
		return "an explicit start choice (--resume-latest-checkpoint)"
	}
}

// checkpointID is the id of the checkpoint r restores, 0 for none.
func (r recovery) checkpointID() int64 {
	if r.manifest == nil {
		return 0
	}
	return r.manifest.CheckpointID
}

// resolveSavepoint restores FromSavepoint, unless the job's newest own
// checkpoint descends from that savepoint already: then the flag was left
// in place from an earlier start, and restoring the savepoint again would
// write everything the job committed since a second time.
func (j *RunningJob) resolveSavepoint(ctx context.Context, store storage.Storage) (recovery, error) {
	cfg := &j.cfg
	dir := cfg.FromSavepoint
	m, err := storage.LoadManifest(dir)
	if err != nil {
		if errors.Is(err, storage.ErrNoManifest) {
			if r, ok, err := j.resumeDescendantOf(ctx, store, dir); err != nil || ok {
				return r, err
			}
			if pending, _ := filepath.Glob(filepath.Join(dir, "_manifest.pending")); len(pending) > 0 {
				err = fmt.Errorf("%w: the directory holds a checkpoint whose commit was never confirmed (its transaction may have aborted); name a savepoint or a confirmed checkpoint", err)
			} else {
				what := "it holds no savepoint or checkpoint"
				if _, serr := os.Stat(dir); errors.Is(serr, os.ErrNotExist) {
					what = "the directory does not exist"
				}
				err = fmt.Errorf("%w: %s, and the job's newest checkpoint (if any) was not started from it. A retained checkpoint is removed by cleanup once newer ones exist: to keep a state, take a savepoint; name a savepoint that exists or remove the flag", err, what)
			}
		}
		return recovery{}, fmt.Errorf("%w: savepoint %s: %w", ErrRestoreRefused, dir, err)
	}
	if err := storage.Verify(m); err != nil {
		return recovery{}, fmt.Errorf("%w: savepoint %s: %w", ErrRestoreRefused, dir, err)
	}
	sum, err := storage.ManifestSHA256(dir)
	if err != nil {
		return recovery{}, fmt.Errorf("%w: savepoint %s: %w", ErrRestoreRefused, dir, err)
	}
	origin := &storage.Origin{Dir: dir, Checkpoint: m.CheckpointID, Manifest: sum}
	if store == nil {
		return recovery{manifest: m, origin: origin}, nil
	}
	var rec CommitRecord
	if cp := cfg.CommitPoint; cp != nil {
		// Fence whatever ran before: the savepoint replaces it.
		if rec, err = cp.Recover(ctx); err != nil {
			return recovery{}, fmt.Errorf("fence earlier instances of the job before restoring the savepoint: %w", err)
		}
	}
	own := j.ownNewest(store, rec)
	if own != nil && own.Origin != nil && own.Origin.Manifest == sum {
		j.log.Warn("--from-savepoint names the savepoint this job was started from already; its newest checkpoint descends from it, so the job resumes that checkpoint instead of going back (remove the flag; to go back anyway, start from the savepoint with a new state directory)",
			"savepoint", dir, "checkpoint", own.CheckpointID)
		return recovery{manifest: own, record: rec, own: true}, nil
	}
	j.noteTakeover(rec, "restoring savepoint "+dir)
	return recovery{manifest: m, record: rec, origin: origin}, nil
}

// ownNewest is the job's newest own checkpoint: the one rec names when
// there is a commit point (rec is what it recovered or peeked), else the
// store's newest committed one; nil when there is none or it cannot be
// loaded.
func (j *RunningJob) ownNewest(store storage.Storage, rec CommitRecord) *storage.Manifest {
	if j.cfg.CommitPoint == nil {
		own, _, _ := store.Latest(storage.LatestOptions{})
		return own
	}
	if rec.Checkpoint > 0 && (rec.StateID == "" || rec.StateID == j.stateID) {
		own, _ := store.LoadCommitted(rec.Checkpoint, rec.Manifest)
		return own
	}
	return nil
}

// resumeDescendantOf handles a --from-savepoint directory that holds no
// manifest any more: typically one of the job's own retained checkpoints,
// named as the savepoint to start from, that the job's cleanup removed
// once newer checkpoints existed. Its checksum cannot be compared then, so
// the job's newest checkpoint is taken to descend from it when it records
// the same path as its origin; ok is false when it does not (or there is
// none), and the caller refuses. With a commit point the decision is made
// on the peeked record, before fencing, so a refusal disturbs nothing.
func (j *RunningJob) resumeDescendantOf(ctx context.Context, store storage.Storage, dir string) (r recovery, ok bool, err error) {
	if store == nil {
		return recovery{}, false, nil
	}
	descends := func(m *storage.Manifest) bool { return m != nil && m.Origin != nil && samePath(m.Origin.Dir, dir) }
	var rec CommitRecord
	if cp := j.cfg.CommitPoint; cp != nil {
		peek, err := cp.Peek(ctx)
		if err != nil {
			return recovery{}, false, fmt.Errorf("read the job's commit record: %w", err)
		}
		if !descends(j.ownNewest(store, peek)) {
			return recovery{}, false, nil
		}
		if rec, err = cp.Recover(ctx); err != nil {
			return recovery{}, false, fmt.Errorf("fence earlier instances of the job: %w", err)
		}
	}
	own := j.ownNewest(store, rec)
	if !descends(own) {
		return recovery{}, false, nil
	}
	j.log.Warn("--from-savepoint names a directory that holds no savepoint any more (a retained checkpoint the job's cleanup removed?), but the job was started from it and its newest checkpoint descends from it, so the job resumes that checkpoint (remove the flag)",
		"savepoint", dir, "checkpoint", own.CheckpointID)
	return recovery{manifest: own, record: rec, own: true}, true, nil
}

// samePath reports whether a and b name the same directory as written,
// or once made absolute.
func samePath(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	aa, err1 := filepath.Abs(a)
	ab, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && aa == ab
}

// checkOwner refuses a commit record written from another state directory:
// two installations of one job name, or a state directory that was lost or
// replaced.
func (j *RunningJob) checkOwner(rec CommitRecord, store storage.Storage) error {
	// Another installation's start mark (Checkpoint 0) is taken over,
	// logged: it committed nothing, and fenced it stops at its next start
	// on this installation's mark or record.
	if rec.Checkpoint == 0 || rec.StateID == "" || rec.StateID == j.stateID {
		return nil
	}
	when := ""
	if !rec.Time.IsZero() {
		when = " at " + rec.Time.UTC().Format(time.RFC3339)
	}
	return fmt.Errorf("%w: job %q's last commit on the cluster (checkpoint %d%s) was made by another installation of a job with this name: state directory id %s, while %s has id %s. "+
		"The job name is the job's identity on the cluster. If this is a different job, give it a name of its own (job: in the file, flow.JobName); "+
		"if another instance of this job still runs with another state directory, stop one of them; "+
		"if this is the same job and its state directory was lost or replaced, point state.dir at the original, restore a savepoint (--from-savepoint DIR), or start over on purpose (--start-fresh)",
		ErrRestoreRefused, j.cfg.Job, rec.Checkpoint, when, rec.StateID, store.Root(), j.stateID)
}

func (j *RunningJob) noteTakeover(rec CommitRecord, why string) {
	if rec.StateID == "" || rec.StateID == j.stateID {
		return
	}
	if rec.Checkpoint == 0 {
		j.log.Warn("taking over the job from another installation that started it and committed nothing; it is fenced and cannot commit any more (if it still runs, stop one of them)",
			"their_state_id", rec.StateID, "their_start", rec.Time.UTC().Format(time.RFC3339), "state_id", j.stateID)
		return
	}
	j.log.Warn("taking over the job from another installation because of "+why+"; it is fenced and cannot commit any more",
		"their_state_id", rec.StateID, "their_last_checkpoint", rec.Checkpoint, "state_id", j.stateID)
}

// resolveFromStore is recovery when the manifest write is the commit
// point: the newest committed checkpoint in the store.
func (j *RunningJob) resolveFromStore(ctx context.Context, store storage.Storage) (recovery, error) {
	m, report, err := store.Latest(storage.LatestOptions{AllowFallback: j.cfg.AllowFallback})
	if err != nil {
		return recovery{}, fmt.Errorf("%w: %w", ErrRestoreRefused, err)
	}
	if report != nil {
		for _, c := range report.Skipped {
			j.log.Warn("skipped a damaged checkpoint because fallback is allowed; records after the older checkpoint are processed again and non-idempotent sinks may see them twice", "damaged", c.Error())
		}
	}
	if m != nil {
		return recovery{manifest: m, own: true}, nil
	}
	evidence, err := j.priorProgress(ctx, store, true)
	if err != nil {
		return recovery{}, err
	}
	if len(evidence) == 0 {
		return recovery{}, nil
	}
	if j.cfg.StartFresh {
		j.log.Warn("starting fresh, as asked, although earlier progress of the job exists", "found", strings.Join(evidence, "; "))
		return recovery{}, nil
	}
	return recovery{}, fmt.Errorf("%w: job %q has no committed checkpoint in %s, but earlier progress of the job exists: %s. "+
		"Starting from the startup mode would process input again or skip it. "+
		"Point state.dir at the job's state directory, restore a savepoint (--from-savepoint DIR), or start over on purpose (--start-fresh)",
		ErrRestoreRefused, j.cfg.Job, store.Root(), strings.Join(evidence, "; "))
}

// resolveWithoutRecord is recovery when the commit point has no record of
// a committed checkpoint: a first start, a record that was lost, or this
// installation's start mark (flow.StartMarker), which says that nothing
// was committed since the job last started from its startup modes.
func (j *RunningJob) resolveWithoutRecord(ctx context.Context, store storage.Storage, rec CommitRecord) (recovery, error) {
	marked := rec.StateID != "" && rec.StateID == j.stateID
	j.noteTakeover(rec, "") // another installation's mark
	evidence, err := j.priorProgress(ctx, store, !marked)
	if err != nil {
		return recovery{}, err
	}
	if marked {
		// The checkpoints written since the mark and left pending were
		// never committed: the crash came before the first commit. They
		// are not progress; their ids stay used (new ids go above them).
		if pending, _ := store.Pending(); len(pending) > 0 {
			j.log.Info("the commit point recorded that this job started from its startup modes and has committed nothing since; checkpoints left pending by the crash were never committed, so the job starts from its startup modes again",
				"pending", idList(pending), "marked_at", rec.Time.UTC().Format(time.RFC3339))
		}
	}
	if len(evidence) == 0 {
		return recovery{record: rec}, nil
	}
	switch {
	case j.cfg.ResumeLatest:
		return j.resumeLatest(store, CommitRecord{}, "the commit point has no record of the job")
	case j.cfg.StartFresh:
		j.log.Warn("starting fresh, as asked, although earlier progress of the job exists", "found", strings.Join(evidence, "; "))
		// A start mark still tells that nothing committed since it
		// (resolvePrepared rolls back what was prepared after it).
		return recovery{record: rec}, nil
	}
	resume := "there is no confirmed checkpoint to resume from"
	if ids, _ := store.List(); len(ids) > 0 {
		resume = "--resume-latest-checkpoint restores checkpoint " + strconv.FormatInt(ids[len(ids)-1], 10) + ", the newest one confirmed there"
	}
	return recovery{}, fmt.Errorf("%w: the commit point has no record of job %q, but earlier progress of the job exists: %s. "+
		"This happens when the job's commit record was deleted (the progress topic or the job's progress group) or expired (Kafka drops the committed offsets of a group without members offsets.retention.minutes after their last commit, 7 days by default, so a job stopped longer loses its record), when the job ran with another delivery before (at-least-once has no commit record), or when the state directory belongs to another job. "+
		"Starting from the startup mode would process input again that the output already holds, or skip input. Choose: %s; or --start-fresh starts from the startup mode on purpose",
		ErrRestoreRefused, j.cfg.Job, strings.Join(evidence, "; "), resume)
}

// resumeLatest restores the newest checkpoint confirmed in the store, on
// the user's explicit request.
func (j *RunningJob) resumeLatest(store storage.Storage, rec CommitRecord, why string) (recovery, error) {
	m, report, err := store.Latest(storage.LatestOptions{AllowFallback: j.cfg.AllowFallback})
	if err != nil {
		return recovery{}, fmt.Errorf("%w: %w", ErrRestoreRefused, err)
	}
	if report != nil {
		for _, c := range report.Skipped {
			j.log.Warn("skipped a damaged checkpoint because fallback is allowed", "damaged", c.Error())
		}
	}
	if m == nil {
		return recovery{}, fmt.Errorf("%w: --resume-latest-checkpoint was given but %s holds no confirmed checkpoint to resume from; use --start-fresh to start from the startup mode", ErrRestoreRefused, store.Root())
	}
	pending, _ := store.Pending()
	var newer []int64
	for _, id := range pending {
		if id > m.CheckpointID {
			newer = append(newer, id)
		}
	}
	if len(newer) > 0 {
		j.log.Warn("checkpoints newer than the resumed one were written but their commit was never confirmed; they are not used: records after the resumed checkpoint are processed again, so the output may hold some twice",
			"resumed", m.CheckpointID, "unconfirmed", newer)
	}
	j.log.Warn("resuming the newest confirmed checkpoint, as asked, because "+why, "checkpoint", m.CheckpointID, "dir", m.Dir)
	return recovery{manifest: m, record: rec, own: true}, nil
}

// recordedCheckpointUnusable handles a commit record whose checkpoint
// cannot be restored (missing, damaged, or another run's manifest).
func (j *RunningJob) recordedCheckpointUnusable(store storage.Storage, rec CommitRecord, cause error) (recovery, error) {
	var ce *storage.CorruptError
	var what string
	switch {
	case errors.Is(cause, storage.ErrNoManifest):
		what = fmt.Sprintf("its manifest is missing from %s: was the state directory lost, moved or replaced?", store.Dir(rec.Checkpoint))
	case errors.Is(cause, storage.ErrManifestMismatch):
		what = fmt.Sprintf("the manifest in %s is not the one that was committed (%v): the directory holds another run's checkpoint %d; was it copied from another job or restored from an old backup?", store.Dir(rec.Checkpoint), cause, rec.Checkpoint)
	case errors.As(cause, &ce):
		what = "it is damaged: " + ce.Error()
	default:
		return recovery{}, fmt.Errorf("%w: load committed checkpoint %d: %w", ErrRestoreRefused, rec.Checkpoint, cause)
	}
	if j.cfg.AllowFallback {
		m, err := j.newestOlderThan(store, rec.Checkpoint)
		if err != nil {
			return recovery{}, err
		}
		if m != nil {
			j.log.Warn("falling back to an older checkpoint, as allowed: the output of the checkpoints after it is already committed and is written again (duplicates in the output)",
				"committed", rec.Checkpoint, "restored", m.CheckpointID, "reason", what)
			return recovery{manifest: m, record: rec, own: true}, nil
		}
	}
	if j.cfg.StartFresh {
		j.log.Warn("starting fresh, as asked, although checkpoint "+strconv.FormatInt(rec.Checkpoint, 10)+" is committed: "+what, "checkpoint", rec.Checkpoint)
		return recovery{record: rec}, nil
	}
	fallback := "--allow-checkpoint-fallback finds no older intact checkpoint there"
	if m, _ := j.newestOlderThan(store, rec.Checkpoint); m != nil {
		fallback = fmt.Sprintf("--allow-checkpoint-fallback restores checkpoint %d, the newest older one (the output of the checkpoints after it is written again: duplicates)", m.CheckpointID)
	}
	return recovery{}, fmt.Errorf("%w: checkpoint %d of job %q is committed, but %s. Choose: restore a savepoint (--from-savepoint DIR); %s; or --start-fresh starts from the startup mode",
		ErrRestoreRefused, rec.Checkpoint, j.cfg.Job, what, fallback)
}

// confirmedAfter returns the newest confirmed checkpoint above id, 0 if
// there is none.
func (j *RunningJob) confirmedAfter(store storage.Storage, id int64) (int64, error) {
	ids, err := store.List()
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrRestoreRefused, err)
	}
	if n := len(ids); n > 0 && ids[n-1] > id {
		return ids[n-1], nil
	}
	return 0, nil
}

// newestOlderThan returns the newest intact confirmed checkpoint below id.
func (j *RunningJob) newestOlderThan(store storage.Storage, id int64) (*storage.Manifest, error) {
	ids, err := store.List()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRestoreRefused, err)
	}
	for _, c := range slices.Backward(ids) {
		if c >= id {
			continue
		}
		if m, err := store.Load(c); err == nil {
			return m, nil
		}
	}
	return nil, nil
}

// priorProgress lists traces of earlier progress of the job: checkpoints
// in the state directory (pending ones only withPending) and what sources
// and sinks report.
func (j *RunningJob) priorProgress(ctx context.Context, store storage.Storage, withPending bool) ([]string, error) {
	var found []string
	committed, err := store.List()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRestoreRefused, err)
	}
	pending, err := store.Pending()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRestoreRefused, err)
	}
	if len(committed) > 0 {
		found = append(found, fmt.Sprintf("%s holds confirmed checkpoints %s", store.Root(), idList(committed)))
	}
	if len(pending) > 0 && withPending {
		found = append(found, fmt.Sprintf("%s holds checkpoints %s whose commit was never confirmed", store.Root(), idList(pending)))
	}
	for _, n := range j.g.nodes {
		r, ok := n.impl.(PriorProgressReporter)
		if !ok {
			continue
		}
		got, err := r.PriorProgress(ctx, j.cfg.Job)
		if err != nil {
			return nil, fmt.Errorf("operator %q: look for earlier progress of the job: %w", n.uid, err)
		}
		found = append(found, got...)
	}
	return found, nil
}

func idList(ids []int64) string {
	if len(ids) > 4 {
		return fmt.Sprintf("%d, %d, … %d (%d in all)", ids[0], ids[1], ids[len(ids)-1], len(ids))
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, ", ")
}

func (j *RunningJob) checkRestore(m *storage.Manifest) error {
	if m == nil {
		return nil
	}
	if m.MaxParallelism != 0 && m.MaxParallelism != j.cfg.MaxParallelism {
		return fmt.Errorf("%w: checkpoint %d was taken with max parallelism %d and the job now has %d; keyed state is sharded by it: set it back to %d (state.max-parallelism in a job file, flow.MaxParallelism in Go)", ErrRestoreRefused, m.CheckpointID, m.MaxParallelism, j.cfg.MaxParallelism, m.MaxParallelism)
	}
	var missing []string
	for uid, op := range m.Operators {
		if _, ok := j.g.uids[uid]; !ok {
			missing = append(missing, uid)
			continue
		}
		if _, db := state.LookupDBBackend(j.cfg.StateBackend); len(op.DB) > 0 && !db {
			return fmt.Errorf("%w: checkpoint %d in %s keeps the keyed state of operator %q as Pebble database files, and the job now keeps state in memory; set the state backend back to pebble (state.backend in a job file, flow.StateBackend in Go), or take a savepoint with it (savepoints use a portable format) and start the memory job from that savepoint",
				ErrRestoreRefused, m.CheckpointID, m.Dir, uid)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		if !j.cfg.AllowNonRestored {
			return fmt.Errorf("%w: checkpoint %d in %s holds state for operators this job does not have: %s; give the operators their old uids (uid: in a job file step, flow.UID in Go), or allow dropping that state (--allow-non-restored-state, flow.AllowNonRestoredState)", ErrRestoreRefused, m.CheckpointID, m.Dir, strings.Join(missing, ", "))
		}
		j.log.Warn("dropping state of operators the job no longer has", "operators", missing)
	}
	return nil
}

// recoverSinks commits the sink handles of the restored checkpoint: its
// commit point passed, so whatever it prepared must become visible.
func (j *RunningJob) recoverSinks(ctx context.Context, m *storage.Manifest) error {
	if m == nil {
		return nil
	}
	for _, n := range j.g.nodes {
		if n.kind != kindSink {
			continue
		}
		op := m.Operators[n.uid]
		if op == nil {
			continue
		}
		ps, err := restoredPending(op.Blobs)
		if err != nil {
			return fmt.Errorf("%w: checkpoint %d sink %q: %w", ErrRestoreRefused, m.CheckpointID, n.uid, err)
		}
		if len(ps) == 0 {
			continue
		}
		c, err := n.committer(ctx, j.cfg.Job, n.uid)
		if err != nil {
			return fmt.Errorf("sink %q: open committer for recovery: %w", n.uid, err)
		}
		for _, p := range ps {
			if err := c.Commit(ctx, p.id, p.handle); err != nil {
				c.Close()
				return fmt.Errorf("sink %q: commit checkpoint %d on recovery: %w", n.uid, p.id, err)
			}
		}
		if err := c.Close(); err != nil {
			return fmt.Errorf("sink %q: close recovery committer: %w", n.uid, err)
		}
	}
	return nil
}

// resolvePrepared settles, on a start that restores no checkpoint, what
// two-phase sinks left prepared: nothing in a manifest names it, and the
// commit record says up to which checkpoint it committed (docs/design.md,
// "Database sinks"). It runs before the start mark is recorded, which
// would replace a record of checkpoint 0 with that of this start.
func (j *RunningJob) resolvePrepared(ctx context.Context, rec CommitRecord) error {
	known := rec.Checkpoint > 0 || rec.StateID != ""
	for _, n := range j.g.nodes {
		if n.kind != kindSink {
			continue
		}
		r, ok := n.impl.(PreparedResolver)
		if !ok {
			continue
		}
		if err := r.ResolvePrepared(ctx, j.cfg.Job, n.uid, rec.Checkpoint, known); err != nil {
			return fmt.Errorf("sink %q: settle the transactions an earlier run left prepared: %w", n.uid, err)
		}
	}
	return nil
}

// markStart records at the commit point that the attempt starts from the
// startup modes with nothing committed (flow.StartMarker), so that a crash
// before the first commit is told apart from a lost record on restart.
// Nothing is marked over a record of a committed checkpoint, and nothing
// when the attempt restores a checkpoint or savepoint.
func (j *RunningJob) markStart(ctx context.Context, store storage.Storage, rec recovery, incarnation string) error {
	cp := j.cfg.CommitPoint
	if cp == nil || store == nil || rec.manifest != nil || rec.record.Checkpoint != 0 {
		return nil
	}
	mark := CommitRecord{Job: j.cfg.Job, Incarnation: incarnation, StateID: j.stateID, Time: time.Now()}
	if _, err := cp.MarkStart(ctx, mark); err != nil {
		return fmt.Errorf("record the job's start at the commit point (%s): %w", cp.Name(), err)
	}
	return nil
}
