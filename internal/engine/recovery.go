package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
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

// resolveRestore decides what the attempt restores: it reads what decide
// (decide.go; docs/design.md, "Recovery decisions") asks for, one fact at
// a time, until decide has a verdict, then logs the decision's notes.
// Only this function and gather read storage or the commit point.
func (j *RunningJob) resolveRestore(ctx context.Context, store storage.Storage) (recovery, error) {
	f := j.newFound(store)
	for {
		d := decide(&f)
		if d.decided() {
			j.logNotes(d.notes)
			return d.rec, d.err
		}
		if !f.lacks(d.need) {
			// decide asked again for a fact it has: a bug, which would
			// otherwise loop forever.
			return recovery{}, fmt.Errorf("internal error: recovery asked twice for the same fact (%#x); please report it with the job's log", d.need)
		}
		if err := j.gather(ctx, store, &f, d); err != nil {
			// What was decided before the read failed stays true (a
			// takeover, say, has fenced the other installation).
			j.logNotes(d.notes)
			return recovery{}, err
		}
		f.have |= d.need
	}
}

// newFound is what recovery knows before it reads anything: the job's
// settings.
func (j *RunningJob) newFound(store storage.Storage) found {
	cfg := &j.cfg
	f := found{
		job: cfg.Job, stateID: j.stateID, noStore: store == nil, commitPoint: cfg.CommitPoint != nil,
		startFresh: cfg.StartFresh, resumeLatest: cfg.ResumeLatest, allowFallback: cfg.AllowFallback,
		startReason: cfg.StartReason,
	}
	if cfg.FromSavepoint != "" && !j.committedThisRun.Load() {
		f.savepoint = cfg.FromSavepoint
	}
	if store != nil {
		f.root = store.Root()
	}
	return f
}

// gather reads the fact d needs into f. Errors that no decision turns
// into something else (the commit point or the state directory cannot be
// read) are returned; the others are facts for decide.
func (j *RunningJob) gather(ctx context.Context, store storage.Storage, f *found, d decision) error {
	cp := j.cfg.CommitPoint
	var err error
	switch d.need {
	case needPeek:
		if f.peek, err = cp.Peek(ctx); err != nil {
			return fmt.Errorf("read the job's commit record: %w", err)
		}
	case needRecord:
		if f.record, err = cp.Recover(ctx); err != nil {
			return fmt.Errorf("%s: %w", d.fence, err)
		}
	case needConfirmed:
		if f.confirmed, err = store.List(); err != nil {
			return fmt.Errorf("%w: %w", ErrRestoreRefused, err)
		}
	case needPending:
		f.pending, f.pendingErr = store.Pending()
	case needReported:
		for _, n := range j.g.nodes {
			r, ok := n.impl.(PriorProgressReporter)
			if !ok {
				continue
			}
			got, err := r.PriorProgress(ctx, j.cfg.Job)
			if err != nil {
				return fmt.Errorf("operator %q: look for earlier progress of the job: %w", n.uid, err)
			}
			f.reported = append(f.reported, got...)
		}
	case needLatest:
		var report *storage.FallbackReport
		f.latest, report, f.latestErr = store.Latest(storage.LatestOptions{AllowFallback: j.cfg.AllowFallback})
		if report != nil {
			f.latestSkipped = report.Skipped
		}
	case needRecorded:
		f.recorded, f.recordedErr = store.LoadCommitted(f.record.Checkpoint, f.record.Manifest)
		f.recordedDir = store.Dir(f.record.Checkpoint)
	case needOlder:
		// The newest intact confirmed checkpoint below the recorded one;
		// decide asks for it only after the confirmed ones were listed.
		for _, c := range slices.Backward(f.confirmed) {
			if c >= f.record.Checkpoint {
				continue
			}
			if m, err := store.Load(c); err == nil {
				f.older = m
				break
			}
		}
	case needSavepoint:
		dir := f.savepoint
		m, err := storage.LoadManifest(dir)
		f.savepointLoadErr = err
		if err != nil {
			if errors.Is(err, storage.ErrNoManifest) {
				pending, _ := filepath.Glob(filepath.Join(dir, "_manifest.pending"))
				f.savepointPending = len(pending) > 0
				_, serr := os.Stat(dir)
				f.savepointMissing = errors.Is(serr, os.ErrNotExist)
			}
			return nil
		}
		f.savepointManifest = m
		if err := storage.Verify(m); err != nil {
			f.savepointErr = err
			return nil
		}
		f.savepointSum, f.savepointErr = storage.ManifestSHA256(dir)
	case needOwnPeeked:
		f.ownPeeked = j.ownNewest(store, f.peek)
	case needOwnFinal:
		f.ownFinal = j.ownNewest(store, f.record)
	default:
		return fmt.Errorf("internal error: recovery needs an unknown fact (%#x); please report it with the job's log", d.need)
	}
	return nil
}

func (j *RunningJob) logNotes(notes []note) {
	for _, n := range notes {
		j.log.Log(context.Background(), n.level, n.msg, n.args...)
	}
}

// checkpointID is the id of the checkpoint r restores, 0 for none.
func (r recovery) checkpointID() int64 {
	if r.manifest == nil {
		return 0
	}
	return r.manifest.CheckpointID
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

func (j *RunningJob) checkRestore(m *storage.Manifest) error {
	if m == nil {
		return nil
	}
	if m.MaxParallelism != 0 && m.MaxParallelism != j.cfg.MaxParallelism {
		return fmt.Errorf("%w: checkpoint %d was taken with max parallelism %d and the job now has %d; keyed state is sharded by it: set it back to %d (state.max-parallelism in a job file, flow.MaxParallelism in Go)", ErrRestoreRefused, m.CheckpointID, m.MaxParallelism, j.cfg.MaxParallelism, m.MaxParallelism)
	}
	var missing []string
	var changed []string
	for uid, op := range m.Operators {
		n, ok := j.g.uids[uid]
		if !ok {
			missing = append(missing, uid)
			continue
		}
		if op.Layout != "" && n.layout != "" && !LayoutCompatible(op.Layout, n.layout) {
			if !j.cfg.AllowNonRestored {
				return fmt.Errorf("%w: checkpoint %d in %s holds the state of operator %q kept as\n  %s\nand the job's operator %q now keeps it as\n  %s\nso that state cannot be read into it (a changed aggregate, key, window, ranking or join's kept columns: docs/design.md, \"State across query changes\"). Undo the change to go on from the checkpoint, or start that operator with empty state (--allow-non-restored-state, flow.AllowNonRestoredState: it drops that operator's state and keeps every other's)",
					ErrRestoreRefused, m.CheckpointID, m.Dir, uid, op.Layout, uid, n.layout)
			}
			changed = append(changed, uid)
		}
		if _, db := state.LookupDBBackend(j.cfg.StateBackend); hasDBFiles(op) && !db {
			return fmt.Errorf("%w: checkpoint %d in %s keeps the keyed state of operator %q as Pebble database files, and the job now keeps state in memory; set the state backend back to pebble (state.backend in a job file, flow.StateBackend in Go), or take a savepoint with it (savepoints use a portable format) and start the memory job from that savepoint",
				ErrRestoreRefused, m.CheckpointID, m.Dir, uid)
		}
	}
	sort.Strings(changed)
	for _, uid := range changed {
		// Restored as if the checkpoint had no state of it.
		j.log.Warn("dropping the state of an operator whose state layout changed (--allow-non-restored-state)", "operator", uid,
			"checkpoint", m.Operators[uid].Layout, "job", j.g.uids[uid].layout)
		delete(m.Operators, uid)
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

// hasDBFiles reports whether op keeps keyed state as an embedded
// database's files (a heap snapshot chain restores into either backend).
func hasDBFiles(op *storage.OperatorState) bool {
	for _, s := range op.DB {
		if s.Format == "" {
			return true
		}
	}
	return false
}
