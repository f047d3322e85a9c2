package storage

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Incremental keyed state (docs/design.md, "Incremental checkpoints").
//
// A keyed subtask whose state lives in an embedded database (Pebble)
// snapshots it as the database's own files instead of serialising every
// key. Its immutable data files (SSTs) are stored once, in the store's
// shared area, and every later checkpoint that still needs one references
// it again instead of writing it again; the small files that describe the
// database at one moment (its MANIFEST, OPTIONS and markers) are private
// to the checkpoint, inside its directory:
//
//	R/shared/<checkpoint id, 20 digits>-<rest>   written by that checkpoint, read by later ones
//	R/checkpoints/chk-<id>/<private files>
//
// A memory-backend subtask stores its snapshot chain (a full snapshot
// and its deltas, keyed state files) the same way: every file in the
// shared area, listed by a DBSnapshot of format FormatHeapChain.
//
// A shared file is needed as long as any checkpoint directory (committed
// or pending) lists it; GC deletes it when none does. The checkpoint id at
// the front of its name is the checkpoint that wrote it: GC never deletes a
// shared file of a checkpoint above the newest committed one, because that
// checkpoint may still be in flight and its manifest not yet written.

// DBSnapshot is the incremental snapshot of one keyed subtask's database:
// the files that, put in one directory under their Names, open as the
// database holding the key groups FirstKeyGroup..LastKeyGroup.
type DBSnapshot struct {
	// FirstKeyGroup and LastKeyGroup are the range the database held.
	FirstKeyGroup int `json:"first_key_group"`
	LastKeyGroup  int `json:"last_key_group"`
	// Format is what the files are: "" the files of an embedded database
	// (Pebble); FormatHeapChain keyed state files (the keyed file format)
	// of state kept in the heap, a full snapshot then its deltas in the
	// order they apply (manifest version 2).
	Format string `json:"format,omitempty"`
	// Files are the database's files.
	Files []DBFile `json:"files"`
}

// FormatHeapChain marks a DBSnapshot of heap state: Files[0] is a full
// snapshot, every later file a delta over the ones before it
// (state.Runtime.SnapshotChanges), all in the keyed state file format
// covering FirstKeyGroup..LastKeyGroup. docs/design.md, "Incremental
// checkpoints".
const FormatHeapChain = "heap-chain"

// KeyedFileOf is the keyed state file that f, a file of the heap chain
// db, holds, named by its Name in a directory GetDBFile put it in.
func KeyedFileOf(db DBSnapshot, f DBFile) KeyedFile {
	return KeyedFile{Path: f.Name, FirstKeyGroup: db.FirstKeyGroup, LastKeyGroup: db.LastKeyGroup, Size: f.Size, SHA256: f.SHA256}
}

// DBFile is one file of a DBSnapshot.
type DBFile struct {
	// Name is the file's name in the database directory.
	Name string `json:"name"`
	// Path is where its bytes are: for a shared file, its name in the
	// store's shared area (see SharedName); otherwise a file name in the
	// checkpoint's (or savepoint's) directory.
	Path string `json:"path"`
	// Shared marks a file in the shared area.
	Shared bool `json:"shared,omitempty"`
	// Size and SHA256 (lower-case hex) describe the content.
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// SharedName returns the shared-area name of a file first written by
// checkpoint id: the id, zero-padded, then rest (which makes the name
// unique, such as a database instance id and the file's name in it).
func SharedName(id int64, rest string) string {
	return fmt.Sprintf("%0*d-%s", idDigits, id, rest)
}

// sharedID parses the checkpoint id at the front of a shared name.
func sharedID(name string) (int64, bool) {
	if len(name) <= idDigits || name[idDigits] != '-' || strings.Trim(name[:idDigits], "0123456789") != "" {
		return 0, false
	}
	id, err := strconv.ParseInt(name[:idDigits], 10, 64)
	return id, err == nil
}

func (s *Store) sharedPath(name string) string { return filepath.Join(s.root, SharedDir, name) }

// dbFilePath returns where f of the checkpoint or savepoint m lies on a
// local filesystem. A shared file is found from m.Dir, which is
// R/checkpoints/chk-<id> for a checkpoint of a local Store.
func dbFilePath(m *Manifest, f DBFile) string {
	if f.Shared {
		return filepath.Join(filepath.Dir(filepath.Dir(m.Dir)), SharedDir, f.Path)
	}
	return filepath.Join(m.Dir, f.Path)
}

// PutDBFile stores the local file src as f for checkpoint id: in the
// shared area under f.Path when f.Shared, otherwise in the checkpoint's
// directory. It fills in f.Size and f.SHA256 from what it stored. A
// shared file is hard-linked when src is on the same filesystem (database
// files are immutable), copied otherwise; either way it is synced. Like
// WriteKeyedFile, the new directory entry becomes durable with the
// manifest write (which syncs the shared area first when it lists a
// shared file).
func (s *Store) PutDBFile(id int64, src string, f DBFile) (DBFile, error) {
	if err := CheckDBFilePut(id, f); err != nil {
		return DBFile{}, err
	}
	if !f.Shared {
		return s.putPrivate(id, src, f)
	}
	dir := filepath.Join(s.root, SharedDir)
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return DBFile{}, fmt.Errorf("storage: create %s: %w", dir, err)
	}
	dst := s.sharedPath(f.Path)
	tmp := dst + tmpExt
	_ = os.Remove(tmp)
	if err := os.Link(src, tmp); err != nil {
		// Another filesystem (or no hard links): copy.
		if err := writeAtomic(dir, f.Path, func(w io.Writer) error { return copyFrom(w, src) }); err != nil {
			return DBFile{}, err
		}
	} else {
		if err := syncFile(tmp); err != nil {
			_ = os.Remove(tmp)
			return DBFile{}, err
		}
		if err := os.Rename(tmp, dst); err != nil {
			_ = os.Remove(tmp)
			return DBFile{}, fmt.Errorf("storage: rename %s: %w", tmp, err)
		}
	}
	size, sum, err := sizeAndSum(dst)
	if err != nil {
		return DBFile{}, fmt.Errorf("storage: read back %s: %w", dst, err)
	}
	f.Size, f.SHA256 = size, sum
	return f, nil
}

// CheckDBFilePut checks the name under which PutDBFile is asked to store f
// for checkpoint id: a plain file name and, for a shared file, one that
// SharedName made for a checkpoint up to id.
func CheckDBFilePut(id int64, f DBFile) error {
	if err := CheckFileName(f.Path); err != nil {
		return fmt.Errorf("storage: store database file %s for checkpoint %d: %w", f.Name, id, err)
	}
	if got, ok := sharedID(f.Path); f.Shared && (!ok || got > id) {
		return fmt.Errorf("storage: shared file name %q does not start with a checkpoint id at most %d (use SharedName)", f.Path, id)
	}
	return nil
}

func (s *Store) putPrivate(id int64, src string, f DBFile) (DBFile, error) {
	dir := s.Dir(id)
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return DBFile{}, fmt.Errorf("storage: create checkpoint directory: %w", err)
	}
	h := sha256.New()
	var n int64
	err := writeAtomic(dir, f.Path, func(w io.Writer) error {
		cw := &countWriter{w: io.MultiWriter(w, h)}
		err := copyFrom(cw, src)
		n = cw.n
		return err
	})
	if err != nil {
		return DBFile{}, err
	}
	f.Size, f.SHA256 = n, hex.EncodeToString(h.Sum(nil))
	return f, nil
}

// GetDBFile puts file f of the checkpoint or savepoint m at the local path
// dst (which must not exist), checking its size and SHA-256 on the way: a
// missing or damaged file yields a *CorruptError naming it, and dst is
// removed again. The file is hard-linked where possible (it is immutable)
// and read once for the check either way.
func (s *Store) GetDBFile(m *Manifest, f DBFile, dst string) error {
	return RestoreDBFile(m, f, dst)
}

// RestoreDBFile is GetDBFile for a checkpoint or savepoint m in a local
// directory, whatever store it belongs to (a savepoint belongs to none).
func RestoreDBFile(m *Manifest, f DBFile, dst string) error {
	src := dbFilePath(m, f)
	o := OwnerOf(m)
	st, err := os.Stat(src)
	if errors.Is(err, os.ErrNotExist) {
		return o.MissingDBFile(src, f)
	}
	if err != nil {
		return fmt.Errorf("storage: read %s: %w", src, err)
	}
	if err := CheckDBFile(f, src, o, st.Size(), ""); err != nil {
		return err
	}
	if err := linkOrCopy(src, dst, f.Shared); err != nil {
		return err
	}
	size, sum, err := sizeAndSum(dst)
	if err != nil {
		err = fmt.Errorf("storage: read %s: %w", src, err)
	} else {
		err = CheckDBFile(f, src, o, size, sum)
	}
	if err != nil {
		_ = os.Remove(dst)
	}
	return err
}

// linkOrCopy puts src at dst, which must not exist: a hard link where
// possible and link is set, else a copy (removed again if it fails). Only
// shared files, which are immutable SSTs, may be linked: a database
// appends to its MANIFEST, which must not reach back into the checkpoint.
func linkOrCopy(src, dst string, link bool) error {
	if link && os.Link(src, dst) == nil {
		return nil
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, filePerm)
	if err != nil {
		return fmt.Errorf("storage: restore database file: %w", err)
	}
	err = copyFrom(out, src)
	if cerr := out.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("storage: restore database file: %w", cerr)
	}
	if err != nil {
		_ = os.Remove(dst)
	}
	return err
}

// CheckDBFile checks database file f, stored at path (which o owns), of
// size bytes hashing to sum (lower-case hex; "" when not hashed yet),
// against f; a difference is a *CorruptError.
func CheckDBFile(f DBFile, path string, o Owner, size int64, sum string) error {
	switch {
	case size != f.Size:
		return o.Corrupt(path, fmt.Sprintf("the file has %d bytes but the manifest records %d", size, f.Size), nil)
	case sum != "" && sum != f.SHA256:
		return o.Corrupt(path, fmt.Sprintf("SHA-256 mismatch: the file hashes to %s but the manifest records %s (modified or damaged)", short(sum), short(f.SHA256)), nil)
	}
	return nil
}

// verifyDBFile checks f's size and SHA-256 without copying it.
func verifyDBFile(m *Manifest, f DBFile, o Owner) error {
	path := dbFilePath(m, f)
	size, sum, err := sizeAndSum(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return o.MissingDBFile(path, f)
	case err != nil:
		return fmt.Errorf("storage: read %s: %w", path, err)
	}
	return CheckDBFile(f, path, o, size, sum)
}

// validateDB checks the database snapshots of operator uid; paths collects
// the private file paths of the manifest to catch duplicates.
func validateDB(m *Manifest, uid string, op *OperatorState, paths map[string]string) error {
	for _, db := range op.DB {
		if err := checkRange(db.FirstKeyGroup, db.LastKeyGroup); err != nil {
			return fmt.Errorf("operator %q: database snapshot: %w", uid, err)
		}
		if db.LastKeyGroup >= m.MaxParallelism {
			return fmt.Errorf("operator %q: a database snapshot covers key group %d but there are only %d key groups", uid, db.LastKeyGroup, m.MaxParallelism)
		}
		switch {
		case db.Format != "" && db.Format != FormatHeapChain:
			return fmt.Errorf("operator %q: a state snapshot has the unknown format %q", uid, db.Format)
		case db.Format == FormatHeapChain && m.Version < 2:
			return fmt.Errorf("operator %q: a heap snapshot chain in a manifest of version %d (chains came with version 2)", uid, m.Version)
		case db.Format == FormatHeapChain && len(db.Files) == 0:
			return fmt.Errorf("operator %q: a heap snapshot chain without files", uid)
		}
		names := map[string]bool{}
		for _, f := range db.Files {
			if err := errors.Join(CheckFileName(f.Name), CheckFileName(f.Path)); err != nil {
				return fmt.Errorf("operator %q: database file: %w", uid, err)
			}
			if names[f.Name] {
				return fmt.Errorf("operator %q: database file %s is listed twice in one snapshot", uid, f.Name)
			}
			names[f.Name] = true
			switch {
			case f.Size < 0:
				return fmt.Errorf("operator %q: database file %s has negative size %d", uid, f.Name, f.Size)
			case !isSHA256Hex(f.SHA256):
				return fmt.Errorf("operator %q: database file %s has a malformed SHA-256 %q", uid, f.Name, f.SHA256)
			case f.Shared && m.Savepoint:
				return fmt.Errorf("operator %q: database file %s is shared, but a savepoint holds copies of all its files", uid, f.Name)
			case f.Shared:
				if _, ok := sharedID(f.Path); !ok {
					return fmt.Errorf("operator %q: shared file name %q does not start with a checkpoint id", uid, f.Path)
				}
				continue
			}
			if other, dup := paths[f.Path]; dup {
				return fmt.Errorf("file %s is listed twice (operators %q and %q)", f.Path, other, uid)
			}
			paths[f.Path] = uid
		}
	}
	return nil
}

// sharedRefs returns the shared files the manifests of every checkpoint
// directory (committed or pending) reference; see SharedRefs.
func (s *Store) sharedRefs() (refs map[string]bool, ok bool) {
	committed, uncommitted, err := s.scan()
	if err != nil {
		return nil, false
	}
	return SharedRefs(slices.Concat(committed, uncommitted), func(id int64, name string) ([]byte, string, error) {
		path := filepath.Join(s.Dir(id), name)
		data, err := os.ReadFile(path)
		return data, path, err
	})
}

// SharedRefs returns the shared files that the manifests of checkpoints
// ids, committed or pending, reference. read returns the content of
// checkpoint id's manifest file name (ManifestName or PendingName) and the
// path naming it, or an error matching fs.ErrNotExist when there is none.
// ok is false when a manifest could not be read or decoded: then nothing
// can be known unreferenced.
func SharedRefs(ids []int64, read func(id int64, name string) (data []byte, path string, err error)) (refs map[string]bool, ok bool) {
	refs = map[string]bool{}
	for _, id := range ids {
		for _, name := range []string{ManifestName, PendingName} {
			data, path, err := read(id, name)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, false
			}
			m, err := DecodeManifest(data, path, Owner{CheckpointID: id})
			if err != nil {
				return nil, false
			}
			_ = m.EachFile(func(string, KeyedFile) error { return nil }, func(_ string, f DBFile) error {
				if f.Shared {
					refs[f.Path] = true
				}
				return nil
			})
		}
	}
	return refs, true
}

// gcShared removes shared files no checkpoint directory references, among
// those written by checkpoints up to newest (the newest committed one).
// Unfinished copies (.tmp) of such checkpoints go too.
func (s *Store) gcShared(newest int64) error {
	dir := filepath.Join(s.root, SharedDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("storage: gc shared files: %w", err)
	}
	refs, ok := s.sharedRefs()
	if !ok {
		// A damaged manifest: its references are unknown, so keep
		// everything until the damage is dealt with.
		return nil
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	var errs []error
	removed := false
	for _, name := range PlanSharedGC(names, newest, refs) {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("storage: gc shared file: %w", err))
			continue
		}
		removed = true
	}
	if removed {
		if err := syncDir(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// PlanSharedGC chooses, among the names in a store's shared area, those
// GC removes: names of shared files that no manifest references (refs,
// from SharedRefs) and unfinished copies (.tmp), both only of checkpoints
// up to newest, the newest committed one. A newer checkpoint may still be
// in flight, its manifest not yet written.
func PlanSharedGC(names []string, newest int64, refs map[string]bool) []string {
	var out []string
	for _, name := range names {
		base := strings.TrimSuffix(name, tmpExt)
		id, ok := sharedID(base)
		if !ok || id > newest || (base == name && refs[base]) {
			continue
		}
		out = append(out, name)
	}
	return out
}

// SharedFiles lists the names in the shared area, ascending (for tests and
// diagnostics).
func (s *Store) SharedFiles() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(s.root, SharedDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("storage: list shared files: %w", err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out, nil
}

func copyFrom(w io.Writer, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("storage: open %s: %w", src, err)
	}
	defer in.Close()
	if _, err := io.Copy(w, in); err != nil {
		return fmt.Errorf("storage: copy %s: %w", src, err)
	}
	return nil
}

func syncFile(path string) error { return fsyncPath(path, "fsync") }

func sizeAndSum(path string) (int64, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return 0, "", err
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
