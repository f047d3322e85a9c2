package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

const (
	checkpointsDir = "checkpoints"
	dirPrefix      = "chk-"
	idDigits       = 20
)

// Store holds the checkpoints of one job under a root directory R, as
// R/checkpoints/chk-<id>. Its methods are safe for concurrent use; GC may
// run while a newer checkpoint is being written.
type Store struct {
	root string
	dir  string // R/checkpoints
}

// Open opens the checkpoint store rooted at root (for example
// ./onceflow-data/<job>), creating root/checkpoints if it is missing.
func Open(root string) (*Store, error) {
	if root == "" {
		return nil, errors.New("storage: the checkpoint root directory is empty; set it to a directory for this job's checkpoints, such as ./onceflow-data/<job>")
	}
	root = filepath.Clean(root)
	dir := filepath.Join(root, checkpointsDir)
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return nil, fmt.Errorf("storage: open checkpoint store: %w", err)
	}
	return &Store{root: root, dir: dir}, nil
}

// Root returns the root directory the store was opened with (cleaned).
func (s *Store) Root() string { return s.root }

// Dir returns the directory of checkpoint id, R/checkpoints/chk-<id>, with
// the id zero-padded to 20 digits so that names sort like ids.
func (s *Store) Dir(id int64) string {
	return filepath.Join(s.dir, fmt.Sprintf("%s%0*d", dirPrefix, idDigits, id))
}

// parseDirName accepts exactly the names Dir produces.
func parseDirName(name string) (int64, bool) {
	digits, ok := strings.CutPrefix(name, dirPrefix)
	if !ok || len(digits) != idDigits || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	id, err := strconv.ParseInt(digits, 10, 64)
	return id, err == nil
}

// Commit writes m as the manifest of checkpoint m.CheckpointID, atomically
// and durably (see WriteManifest). This is the commit point of a checkpoint
// when Kafka is not involved: before it returns the checkpoint does not
// exist, after it the checkpoint is what Latest restores.
func (s *Store) Commit(m *Manifest) error {
	if m == nil {
		return errors.New("storage: commit: the manifest is nil")
	}
	if m.Savepoint {
		return fmt.Errorf("storage: commit checkpoint %d: the manifest is marked as a savepoint; savepoints are written with CopyTo", m.CheckpointID)
	}
	if m.CheckpointID < 0 {
		return fmt.Errorf("storage: commit: checkpoint id %d is negative", m.CheckpointID)
	}
	return WriteManifest(s.Dir(m.CheckpointID), m)
}

// Load returns committed checkpoint id after checking its manifest and every
// state file it references (as Verify does). It is for restoring a specific
// checkpoint, such as the one named by a Kafka progress marker. A checkpoint
// that was never committed yields an error matching ErrNoManifest; damage a
// *CorruptError.
func (s *Store) Load(id int64) (*Manifest, error) {
	if id < 0 {
		return nil, fmt.Errorf("storage: load: checkpoint id %d is negative", id)
	}
	m, err := LoadManifest(s.Dir(id))
	if err != nil {
		return nil, err
	}
	if m.CheckpointID != id || m.Savepoint {
		return nil, (origin{id: id}).corrupt(filepath.Join(m.Dir, manifestName),
			fmt.Sprintf("the manifest describes %s %d, not checkpoint %d (was a directory copied or renamed?)", kind(m), m.CheckpointID, id), nil)
	}
	if err := Verify(m); err != nil {
		return nil, err
	}
	return m, nil
}

func kind(m *Manifest) string {
	if m.Savepoint {
		return "savepoint of checkpoint"
	}
	return "checkpoint"
}

// List returns the ids of the checkpoints that have a manifest, ascending.
// It does not check the manifests; Load and Latest do.
func (s *Store) List() ([]int64, error) {
	committed, _, err := s.scan()
	return committed, err
}

// scan sorts the checkpoint directories into committed (a _manifest exists)
// and uncommitted ones, both ascending. Entries that Dir would not have
// produced are not ours and are left out.
func (s *Store) scan() (committed, uncommitted []int64, err error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("storage: list checkpoints: %w", err)
	}
	for _, e := range entries {
		id, ok := parseDirName(e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		st, err := os.Lstat(filepath.Join(s.dir, e.Name(), manifestName))
		switch {
		case err == nil && st.Mode().IsRegular():
			committed = append(committed, id)
		case err == nil || errors.Is(err, os.ErrNotExist):
			uncommitted = append(uncommitted, id)
		default:
			return nil, nil, fmt.Errorf("storage: list checkpoints: %w", err)
		}
	}
	// ReadDir sorts by name and names sort like ids, but do not rely on it.
	slices.Sort(committed)
	slices.Sort(uncommitted)
	return committed, uncommitted, nil
}

// LatestOptions controls Store.Latest.
type LatestOptions struct {
	// AllowFallback lets Latest skip damaged checkpoints and return the
	// newest intact one. Restoring an older checkpoint replays records whose
	// output sinks may already have committed, so it is off by default and
	// should only be set on the user's explicit request.
	AllowFallback bool
}

// FallbackReport lists the damaged checkpoints Latest skipped, newest first,
// so that the caller can log what the fallback costs.
type FallbackReport struct {
	// Skipped holds one error per skipped checkpoint.
	Skipped []*CorruptError
}

// Latest returns the newest committed checkpoint, with its manifest and
// state files checked (as Load does). Checkpoint directories without a
// complete _manifest were never committed and are skipped silently. A
// damaged committed checkpoint stops the search with a *CorruptError, unless
// opts.AllowFallback is set: then it is skipped, older ones are tried, and
// the returned report (nil when nothing was skipped) lists what was skipped.
// If fallback skipped every committed checkpoint, the error matches
// ErrAllCheckpointsCorrupt. With no committed checkpoint at all, Latest
// returns nil, nil, nil.
func (s *Store) Latest(opts LatestOptions) (*Manifest, *FallbackReport, error) {
	ids, err := s.List()
	if err != nil {
		return nil, nil, err
	}
	var report *FallbackReport
	for _, id := range slices.Backward(ids) {
		m, err := s.Load(id)
		var ce *CorruptError
		switch {
		case err == nil:
			return m, report, nil
		case errors.Is(err, ErrNoManifest):
			// GC removed it since List; it was not the newest, so go on.
			continue
		case errors.As(err, &ce) && opts.AllowFallback:
			if report == nil {
				report = &FallbackReport{}
			}
			report.Skipped = append(report.Skipped, ce)
		default:
			return nil, nil, err
		}
	}
	if report != nil {
		return nil, report, fmt.Errorf("storage: %w: all %d committed checkpoints in %s are damaged (newest: %s: %s); restore from a savepoint (--from-savepoint DIR), or move %s aside to start the job without state",
			ErrAllCheckpointsCorrupt, len(report.Skipped), s.dir, report.Skipped[0].Path, report.Skipped[0].Reason, s.dir)
	}
	return nil, nil, nil
}

// GC removes checkpoint directories that are no longer needed: committed
// checkpoints older than the newest retain ones, and uncommitted directories
// (aborted or crashed attempts) older than the newest committed checkpoint,
// then the shared database files no remaining checkpoint references.
// It never removes an id in keep (pass the checkpoint a fallback restored
// from, which may be older than the retained ones), nor any id at or above
// the newest committed one, since a newer checkpoint may be being written.
// Without any committed checkpoint it removes nothing. retain must be at
// least 1. It returns the removed ids, ascending, along with any removal
// errors; a failure to remove one directory does not stop the others.
func (s *Store) GC(retain int, keep ...int64) ([]int64, error) {
	if retain < 1 {
		return nil, fmt.Errorf("storage: gc: retain is %d; at least the newest checkpoint must be retained", retain)
	}
	committed, uncommitted, err := s.scan()
	if err != nil {
		return nil, err
	}
	if len(committed) == 0 {
		return nil, nil
	}
	newest := committed[len(committed)-1]
	protected := make(map[int64]bool, retain+len(keep))
	for _, id := range committed[max(0, len(committed)-retain):] {
		protected[id] = true
	}
	for _, id := range keep {
		protected[id] = true
	}
	isCommitted := make(map[int64]bool, len(committed))
	for _, id := range committed {
		isCommitted[id] = true
	}
	var removed []int64
	var errs []error
	for _, id := range slices.Sorted(slices.Values(slices.Concat(committed, uncommitted))) {
		if id >= newest || protected[id] {
			continue
		}
		if err := s.remove(id, isCommitted[id]); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, id)
	}
	if len(removed) > 0 {
		if err := syncDir(s.dir); err != nil {
			errs = append(errs, err)
		}
	}
	if err := s.gcShared(newest); err != nil {
		errs = append(errs, err)
	}
	return removed, errors.Join(errs...)
}

// remove deletes a checkpoint directory. A committed one loses its manifest
// first, durably, so that a crash halfway through leaves an uncommitted
// directory (garbage) rather than a committed checkpoint with missing files
// (damage that a fallback would report).
func (s *Store) remove(id int64, committed bool) error {
	dir := s.Dir(id)
	if committed {
		if err := os.Remove(filepath.Join(dir, manifestName)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("storage: gc checkpoint %d: %w", id, err)
		}
		if err := syncDir(dir); err != nil {
			return fmt.Errorf("storage: gc checkpoint %d: %w", id, err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("storage: gc checkpoint %d: %w", id, err)
	}
	return nil
}

// Storage is where a job's checkpoints live. Store (a local directory) is
// the implementation today; object storage implements the same methods
// later. The engine uses nothing else of this package for a job's own
// checkpoints; savepoints are self-contained directories (CopyTo,
// LoadManifest).
type Storage interface {
	// Root names the storage in messages.
	Root() string
	// Dir names checkpoint id's location in messages and in Manifest.Dir.
	Dir(id int64) string
	// StateID returns the storage's identity (see Store.StateID).
	StateID() (string, error)
	WriteKeyedFile(id int64, name string, first, last int, groups map[int][]byte) (KeyedFile, error)
	// ReadKeyed reads the key groups lo..hi of f, a state file of m.
	ReadKeyed(m *Manifest, f KeyedFile, lo, hi int) (map[int][]byte, error)
	// PutDBFile and GetDBFile store and fetch the files of incremental
	// database snapshots (see DBSnapshot).
	PutDBFile(id int64, src string, f DBFile) (DBFile, error)
	GetDBFile(m *Manifest, f DBFile, dst string) error
	Commit(m *Manifest) error
	WritePending(m *Manifest) (string, error)
	Confirm(id int64, sum string) error
	Load(id int64) (*Manifest, error)
	LoadCommitted(id int64, sum string) (*Manifest, error)
	Latest(opts LatestOptions) (*Manifest, *FallbackReport, error)
	List() ([]int64, error)
	Pending() ([]int64, error)
	HighestID() (int64, error)
	GC(retain int, keep ...int64) ([]int64, error)
}

var _ Storage = (*Store)(nil)

// ReadKeyed reads the key groups lo..hi of state file f of m (see
// ReadKeyedFile).
func (s *Store) ReadKeyed(m *Manifest, f KeyedFile, lo, hi int) (map[int][]byte, error) {
	return ReadKeyedFile(m.Dir, f, lo, hi)
}
