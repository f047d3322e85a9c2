package engine

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/onceflow/onceflow/internal/checkpoint/storage"
	"github.com/onceflow/onceflow/internal/failpoint"
	"github.com/onceflow/onceflow/state"
)

// State backends (Config.StateBackend).
const (
	// BackendMemory keeps keyed state in the Go heap as Go values.
	BackendMemory = "memory"
	// BackendPebble keeps keyed state in a Pebble database per keyed
	// subtask, on local disk, with incremental checkpoints.
	BackendPebble = "pebble"
)

// Incremental checkpoints of Pebble-backed keyed state (docs/design.md,
// "Incremental checkpoints"):
//
//   - Synchronous part, on the subtask's goroutine at the barrier: sweep
//     due TTL entries, flush the memtable and hard-link the database's
//     files into a staging directory (DB.Checkpoint). Records wait only
//     for this.
//   - Asynchronous part: store the staged files. An SST the store already
//     holds (written by an earlier checkpoint of this database, or
//     inherited from the restored checkpoint) is referenced, not written
//     again; new SSTs go to the shared area; the small files are private to
//     the checkpoint. The subtask acknowledges the barrier when this ends.
//   - Restore: the snapshot with the largest overlap with the subtask's
//     key-group range is put in place and opened as the database, the key
//     groups outside the range are deleted (Clip), and the keys in range of
//     any other overlapping snapshot are imported (rescaling).
//
// Savepoints are written in the portable per-key-group format instead
// (state.Runtime.Snapshot), so that they are self-contained and restore
// into either backend.

// dbState is the Pebble database of one keyed subtask.
type dbState struct {
	db       state.IncrementalDB
	dir      string // the database directory
	uid      string
	subtask  int
	instance string // tells this database's new files from every other's

	// mu serialises the asynchronous parts of this database's
	// checkpoints and guards stored.
	mu sync.Mutex
	// stored maps an SST's name in the database to where the store holds
	// it, for the SSTs of the last snapshot stored.
	stored map[string]storage.DBFile
	// newest is the highest checkpoint whose files were stored.
	newest int64
	// forgotAt is the newest savepoint this database passed (see
	// forgetStored): snapshots of older checkpoints stored after it no
	// longer tell what the store holds.
	forgotAt int64
}

// forgetStored is called when savepoint cp's barrier passes the subtask.
// A savepoint is written in the portable format, so its checkpoint
// references none of the database's files; once it commits, cleanup may
// remove every checkpoint that did, and with them the shared files. What
// stored says the store holds is then no longer known to be there: the
// next checkpoint stores every file anew (under its own id, which cleanup
// leaves alone until a checkpoint that references it commits). See
// docs/design.md, "Incremental checkpoints".
func (ds *dbState) forgetStored(cp int64) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	ds.stored = map[string]storage.DBFile{}
	ds.newest = max(ds.newest, cp)
	ds.forgotAt = max(ds.forgotAt, cp)
}

// dbRoot returns where this attempt's databases live: under the state
// directory when there is one (same filesystem as a local checkpoint
// store, so files are hard-linked, not copied), else a temporary directory.
func (att *attempt) dbRoot() (string, error) {
	att.dbMu.Lock()
	defer att.dbMu.Unlock()
	if att.dbDir != "" {
		return att.dbDir, nil
	}
	var dir string
	if att.cfg.StateDir != "" {
		dir = filepath.Join(att.cfg.StateDir, att.cfg.Job, "db")
		// Databases of earlier attempts are scratch: the checkpoint is
		// the truth.
		if err := os.RemoveAll(dir); err != nil {
			return "", fmt.Errorf("clear the state backend's directory %s: %w", dir, err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", fmt.Errorf("create the state backend's directory: %w", err)
		}
	} else {
		d, err := os.MkdirTemp("", "onceflow-"+sanitize(att.cfg.Job)+"-db-")
		if err != nil {
			return "", fmt.Errorf("create a directory for the state backend: %w", err)
		}
		dir = d
		att.dbTemp = true
	}
	att.dbDir = dir
	return dir, nil
}

// openKeyedDB opens the database of keyed subtask subtask of n, owning
// key groups first..last, restored from the restored checkpoint's
// database snapshots of n that overlap that range.
func (att *attempt) openKeyedDB(n *Node, subtask, first, last int) (*dbState, error) {
	root, err := att.dbRoot()
	if err != nil {
		return nil, err
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	ds := &dbState{uid: n.uid, subtask: subtask, instance: hex.EncodeToString(b[:]), stored: map[string]storage.DBFile{}}
	ds.dir = filepath.Join(root, fmt.Sprintf("%s-%d-%s", sanitize(n.uid), subtask, ds.instance))

	var snaps []storage.DBSnapshot
	if att.restored != nil {
		if op := att.restored.Operators[n.uid]; op != nil {
			for _, s := range op.DB {
				// A heap chain restores through the handles
				// (restoreKeyed), as keyed files do.
				if s.Format == "" && s.LastKeyGroup >= first && s.FirstKeyGroup <= last {
					snaps = append(snaps, s)
				}
			}
		}
	}
	overlap := func(s storage.DBSnapshot) int { return min(last, s.LastKeyGroup) - max(first, s.FirstKeyGroup) + 1 }
	// The base is the snapshot with the largest overlap; ties go to the
	// lowest range, so every run picks the same.
	slices.SortStableFunc(snaps, func(a, b storage.DBSnapshot) int {
		if d := overlap(b) - overlap(a); d != 0 {
			return d
		}
		return a.FirstKeyGroup - b.FirstKeyGroup
	})
	dbs := max(1, att.keyedSubtasks)
	if len(snaps) == 0 {
		db, err := att.pool.Open(ds.dir, dbs, att.cfg.MaxParallelism)
		if err != nil {
			return nil, err
		}
		ds.db = db
		att.trackDB(ds)
		return ds, nil
	}
	base := snaps[0]
	if err := att.fetchSnapshot(base, ds.dir); err != nil {
		return nil, err
	}
	db, err := att.pool.Open(ds.dir, dbs, att.cfg.MaxParallelism)
	if err != nil {
		return nil, fmt.Errorf("%w: open the restored state of %q subtask %d: %w", ErrRestoreRefused, n.uid, subtask, err)
	}
	ds.db = db
	att.trackDB(ds)
	if base.FirstKeyGroup < first || base.LastKeyGroup > last {
		if err := db.Clip(first, last); err != nil {
			return nil, fmt.Errorf("restore the state of %q subtask %d: %w", n.uid, subtask, err)
		}
	}
	if att.restored.Dir == att.store.Dir(att.restored.CheckpointID) {
		// The base's SSTs are in this job's store already: reference
		// them. (A checkpoint of another directory given as
		// --from-savepoint has them elsewhere: they are stored anew.)
		for _, f := range base.Files {
			if f.Shared && strings.HasSuffix(f.Name, ".sst") {
				ds.stored[f.Name] = f
			}
		}
	}
	for i, s := range snaps[1:] {
		tmp := fmt.Sprintf("%s.import-%d", ds.dir, i)
		if err := att.importSnapshot(ds, s, tmp, max(first, s.FirstKeyGroup), min(last, s.LastKeyGroup)); err != nil {
			return nil, err
		}
	}
	return ds, nil
}

func (att *attempt) importSnapshot(ds *dbState, s storage.DBSnapshot, tmp string, lo, hi int) error {
	defer os.RemoveAll(tmp)
	if err := att.fetchSnapshot(s, tmp); err != nil {
		return err
	}
	src, err := att.pool.OpenReadOnly(tmp, att.cfg.MaxParallelism)
	if err != nil {
		return fmt.Errorf("%w: open the restored state of %q key groups %d..%d: %w", ErrRestoreRefused, ds.uid, s.FirstKeyGroup, s.LastKeyGroup, err)
	}
	_, err = ds.db.Import(src, lo, hi)
	if cerr := src.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("restore the state of %q subtask %d: import key groups %d..%d: %w", ds.uid, ds.subtask, lo, hi, err)
	}
	return nil
}

// fetchSnapshot puts the files of s in the new directory dir.
func (att *attempt) fetchSnapshot(s storage.DBSnapshot, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("restore state: %w", err)
	}
	for _, f := range s.Files {
		if err := att.store.GetDBFile(att.restored, f, filepath.Join(dir, f.Name)); err != nil {
			return fmt.Errorf("%w: %w", ErrRestoreRefused, err)
		}
	}
	return nil
}

func (att *attempt) trackDB(ds *dbState) {
	att.dbMu.Lock()
	att.dbs = append(att.dbs, ds)
	att.dbMu.Unlock()
}

// closeDBs closes the attempt's databases once nothing uses them: the
// subtasks have returned and the asynchronous checkpoint parts are done.
func (att *attempt) closeDBs() {
	att.dbMu.Lock()
	defer att.dbMu.Unlock()
	for _, ds := range att.dbs {
		if err := ds.db.Close(); err != nil {
			att.log.Warn("closing a state database failed", "dir", ds.dir, "err", err)
		}
	}
	att.dbs = nil
	if att.pool != nil {
		att.pool.Close()
	}
	if att.dbTemp && att.dbDir != "" {
		_ = os.RemoveAll(att.dbDir)
	}
}

// checkpointDB runs the synchronous part of checkpoint cp for ds and
// starts the asynchronous part, which acknowledges the barrier.
func (att *attempt) checkpointDB(cp int64, n *Node, part int, ds *dbState, first, last int, blobs map[string][]byte) error {
	if att.store == nil {
		att.ack(ackMsg{cp: cp, part: part, uid: n.uid})
		return nil
	}
	staging := fmt.Sprintf("%s.chk-%d", ds.dir, cp)
	_ = os.RemoveAll(staging)
	names, err := ds.db.Checkpoint(staging)
	if err != nil {
		_ = os.RemoveAll(staging)
		return fmt.Errorf("snapshot the state of %q subtask %d: %w", n.uid, ds.subtask, err)
	}
	att.writers.Add(1)
	go func() {
		defer att.writers.Done()
		defer os.RemoveAll(staging)
		snap, err := att.storeSnapshot(cp, ds, staging, names, first, last)
		if err == nil {
			err = failpoint.Inject(failpoint.AfterSnapshotWritten)
		}
		if err != nil {
			att.ack(ackMsg{cp: cp, part: part, err: fmt.Errorf("write state of %q subtask %d: %w", n.uid, ds.subtask, err)})
			return
		}
		att.ack(ackMsg{cp: cp, part: part, uid: n.uid, db: snap, blobs: blobs})
	}()
	return nil
}

// storeConcurrency bounds the files one subtask's snapshot stores at once.
const storeConcurrency = 8

// storeSnapshot stores the staged files of checkpoint cp: SSTs the store
// holds already are referenced, new ones go to the shared area, the rest
// is private to the checkpoint.
func (att *attempt) storeSnapshot(cp int64, ds *dbState, staging string, names []string, first, last int) (*storage.DBSnapshot, error) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	snap := &storage.DBSnapshot{FirstKeyGroup: first, LastKeyGroup: last}
	live := make(map[string]storage.DBFile, len(names))
	// files[i] is what the checkpoint stores of names[i]: an SST the store
	// holds already is referenced, the rest is put.
	files := make([]storage.DBFile, len(names))
	put := make([]bool, len(names))
	for i, name := range names {
		switch f, ok := ds.stored[name]; {
		case !strings.HasSuffix(name, ".sst"):
			files[i], put[i] = storage.DBFile{Name: name, Path: fmt.Sprintf("%s-%d.db.%s", sanitize(ds.uid), ds.subtask, name)}, true
		case ok:
			files[i] = f
		default:
			files[i], put[i] = storage.DBFile{Name: name, Path: storage.SharedName(cp, ds.instance+"-"+name), Shared: true}, true
		}
	}
	store := func(i int) error {
		if !put[i] {
			return nil
		}
		f, err := att.store.PutDBFile(cp, filepath.Join(staging, names[i]), files[i])
		files[i] = f
		return err
	}
	// The first file alone, then the rest at once: each put of the local
	// store ends in an fsync, and fsyncs issued together share the
	// journal's commits instead of waiting for one each (docs/design.md,
	// "Checkpoints under backpressure").
	if len(names) > 0 {
		if err := store(0); err != nil {
			return nil, err
		}
	}
	if len(names) > 1 {
		if err := failpoint.Inject(failpoint.MidStateUpload); err != nil {
			return nil, err
		}
		errs := make([]error, len(names))
		sem := make(chan struct{}, storeConcurrency)
		var wg sync.WaitGroup
		for i := 1; i < len(names); i++ {
			if !put[i] {
				continue
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				errs[i] = store(i)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return nil, err
			}
		}
	}
	for i, name := range names {
		if strings.HasSuffix(name, ".sst") {
			live[name] = files[i]
		}
	}
	snap.Files = files
	if len(snap.Files) == 0 {
		return nil, errors.New("the database checkpoint holds no files")
	}
	// SSTs are immutable and never come back once compacted away, so
	// what the newest snapshot does not hold is never needed again. A
	// snapshot older than a savepoint that passed says nothing about what
	// the store holds now (forgetStored).
	switch {
	case cp < ds.forgotAt:
	case cp > ds.newest:
		ds.newest = cp
		ds.stored = live
	default:
		for k, v := range live {
			ds.stored[k] = v
		}
	}
	return snap, nil
}
