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

// Names inside a job's root R, the same in every implementation of
// Storage (a local directory, or a key prefix in object storage):
//
//	R/STATE_ID
//	R/checkpoints/chk-<id, 20 digits>/<state files>, _manifest, _manifest.pending
//	R/shared/<checkpoint id, 20 digits>-<rest>
const (
	// CheckpointsDir holds one directory per checkpoint (DirName).
	CheckpointsDir = "checkpoints"
	// SharedDir holds the database files checkpoints share (SharedName).
	SharedDir = "shared"
	// ManifestName is a committed checkpoint's manifest, in its directory.
	ManifestName = "_manifest"
	// PendingName is the manifest of a checkpoint whose commit point is
	// external (a Kafka transaction): written before the commit point,
	// renamed to _manifest once the commit point is known to have
	// committed it.
	PendingName = "_manifest.pending"
	// StateIDName holds the store's state id, in R.
	StateIDName = "STATE_ID"

	dirPrefix = "chk-"
	idDigits  = 20
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
	dir := filepath.Join(root, CheckpointsDir)
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
	return filepath.Join(s.dir, DirName(id))
}

// DirName returns the name of checkpoint id's directory, chk-<id>, with
// the id zero-padded to 20 digits so that names sort like ids.
func DirName(id int64) string {
	return fmt.Sprintf("%s%0*d", dirPrefix, idDigits, id)
}

// ParseDirName accepts exactly the names DirName produces.
func ParseDirName(name string) (int64, bool) {
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
	if err := CheckCommit(m, false); err != nil {
		return err
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
	if err := CheckCheckpoint(m, id, filepath.Join(m.Dir, ManifestName)); err != nil {
		return nil, err
	}
	if err := Verify(m); err != nil {
		return nil, err
	}
	return m, nil
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
		id, ok := ParseDirName(e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		st, err := os.Lstat(filepath.Join(s.dir, e.Name(), ManifestName))
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
	return FindLatest(ids, s.Load, opts, s.dir)
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
	committed, uncommitted, err := s.scan()
	if err != nil {
		return nil, err
	}
	plan, err := PlanGC(committed, uncommitted, retain, keep)
	if err != nil || len(committed) == 0 {
		return nil, err
	}
	if err := s.checkSharedOf(committed[len(committed)-1]); err != nil {
		// Older checkpoints are all a fallback has left: keep them.
		return nil, err
	}
	var removed []int64
	var errs []error
	for _, id := range plan {
		_, isCommitted := slices.BinarySearch(committed, id)
		if err := s.remove(id, isCommitted); err != nil {
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
	if err := s.gcShared(committed[len(committed)-1]); err != nil {
		errs = append(errs, err)
	}
	return removed, errors.Join(errs...)
}

// checkSharedOf checks that every shared file committed checkpoint id
// references is in the shared area. GC calls it before removing anything:
// when one is missing the store is damaged, and removing older
// checkpoints would leave nothing to fall back to.
func (s *Store) checkSharedOf(id int64) error {
	m, err := LoadManifest(s.Dir(id))
	if err != nil {
		// Unreadable: gcShared keeps every shared file then.
		return nil
	}
	o := OwnerOf(m)
	return m.EachFile(func(string, KeyedFile) error { return nil }, func(_ string, f DBFile) error {
		if !f.Shared {
			return nil
		}
		path := dbFilePath(m, f)
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("storage: gc refused, nothing removed: %w", o.MissingDBFile(path, f))
		} else if err != nil {
			return fmt.Errorf("storage: gc: %w", err)
		}
		return nil
	})
}

// remove deletes a checkpoint directory. A committed one loses its manifest
// first, durably, so that a crash halfway through leaves an uncommitted
// directory (garbage) rather than a committed checkpoint with missing files
// (damage that a fallback would report).
func (s *Store) remove(id int64, committed bool) error {
	dir := s.Dir(id)
	if committed {
		if err := os.Remove(filepath.Join(dir, ManifestName)); err != nil && !errors.Is(err, os.ErrNotExist) {
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

// Storage is where a job's checkpoints live: Store keeps them in a local
// directory, internal/checkpoint/s3store in S3-compatible object storage.
// Every implementation has the semantics documented on Store's methods and
// lays its checkpoints out as CheckpointsDir describes; the manifest
// codec, the keyed file format, the damage reports (*CorruptError) and the
// rules of Latest, GC and Confirm are this package's, shared by all of
// them (EncodeManifest, ParseKeyedFile, Owner, FindLatest, PlanGC, ...).
// The engine uses nothing else of this package for a job's own
// checkpoints. Savepoints are self-contained local directories, made by
// Storage.CopyTo from a checkpoint wherever it is kept and read with
// LoadManifest; the engine restores them through its Storage too, so
// ReadKeyed and GetDBFile accept a savepoint's manifest as well.
type Storage interface {
	// Root names the storage in messages.
	Root() string
	// Dir names checkpoint id's location in messages and in Manifest.Dir.
	Dir(id int64) string
	// StateID returns the storage's identity (see Store.StateID).
	StateID() (string, error)
	WriteKeyedFile(id int64, name string, first, last int, groups map[int][]byte) (KeyedFile, error)
	// ReadKeyed reads the key groups lo..hi of f, a state file of m (a
	// checkpoint of this storage or a savepoint).
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
	// CopyTo makes a savepoint of checkpoint m in the local directory
	// dir (see the function CopyTo).
	CopyTo(m *Manifest, dir string) (*Manifest, error)
}

var _ Storage = (*Store)(nil)

// ReadKeyed reads the key groups lo..hi of state file f of m (see
// ReadKeyedFile).
func (s *Store) ReadKeyed(m *Manifest, f KeyedFile, lo, hi int) (map[int][]byte, error) {
	return ReadKeyedFile(m.Dir, f, lo, hi)
}
