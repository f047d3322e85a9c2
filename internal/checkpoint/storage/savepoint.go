package storage

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
)

// CopyTo makes a savepoint: a self-contained copy of the checkpoint or
// savepoint described by m (read from m.Dir) in dir, with its own manifest
// marked Savepoint. It returns that manifest; m is not modified. Every file is
// checked against its recorded size and SHA-256 while it is copied, so a
// damaged source yields a *CorruptError rather than a damaged savepoint.
// The copy keeps m's CheckpointID and CreatedAt, which describe the state.
//
// dir is created if needed and must not already hold a manifest. If the copy
// fails, dir is removed again when CopyTo created it; otherwise files copied
// so far stay behind without a manifest, which no loader accepts.
//
// m must be in a local directory; Storage.CopyTo copies a checkpoint from
// wherever its store keeps it.
func CopyTo(m *Manifest, dir string) (*Manifest, error) {
	return CopyFrom(m, dir, openLocal)
}

// CopyTo makes a savepoint of checkpoint m of this store in dir (see the
// function CopyTo).
func (s *Store) CopyTo(m *Manifest, dir string) (*Manifest, error) {
	return CopyTo(m, dir)
}

// FileSource opens a file of the checkpoint or savepoint m for CopyFrom:
// name in m's directory or, when shared, in its store's shared area. It
// returns the content, its size and the path that names the file in
// errors; a missing file yields an error matching fs.ErrNotExist, with the
// path.
type FileSource func(m *Manifest, name string, shared bool) (r io.ReadCloser, size int64, path string, err error)

// openLocal is the FileSource of a local directory.
func openLocal(m *Manifest, name string, shared bool) (io.ReadCloser, int64, string, error) {
	path := dbFilePath(m, DBFile{Path: name, Shared: shared})
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, path, err
	}
	size, err := fileSize(f, path)
	if err != nil {
		_ = f.Close()
		return nil, 0, path, err
	}
	return f, size, path, nil
}

// CopyFrom is CopyTo reading m's files from open, for checkpoints kept
// elsewhere than in a local directory.
func CopyFrom(m *Manifest, dir string, open FileSource) (cp *Manifest, err error) {
	if m == nil || m.Dir == "" {
		return nil, errors.New("storage: savepoint: the manifest was not loaded from a directory")
	}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("storage: savepoint of checkpoint %d: %w", m.CheckpointID, err)
	}
	src, err1 := filepath.Abs(m.Dir)
	dst, err2 := filepath.Abs(dir)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("storage: savepoint: %w", err)
	}
	if src == dst {
		return nil, fmt.Errorf("storage: savepoint: %s is the directory of checkpoint %d itself; choose another directory", dir, m.CheckpointID)
	}
	switch _, err := os.Lstat(filepath.Join(dir, ManifestName)); {
	case err == nil:
		return nil, fmt.Errorf("storage: savepoint: %s already holds a checkpoint or savepoint; choose an empty directory", dir)
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("storage: savepoint: %w", err)
	}
	_, statErr := os.Stat(dir)
	created := errors.Is(statErr, os.ErrNotExist)
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return nil, fmt.Errorf("storage: savepoint: %w", err)
	}
	defer func() {
		if err != nil && created {
			_ = os.RemoveAll(dir)
		}
	}()

	o := OwnerOf(m)
	for _, uid := range slices.Sorted(maps.Keys(m.Operators)) {
		for _, f := range m.Operators[uid].Keyed {
			if err := copyVerified(open, m, f.Path, false, dir, f, o); err != nil {
				return nil, err
			}
		}
	}
	cp = m.clone()
	for _, uid := range slices.Sorted(maps.Keys(cp.Operators)) {
		for _, db := range cp.Operators[uid].DB {
			for i, f := range db.Files {
				// Shared and private paths are distinct names, so the
				// copies of a savepoint cannot collide.
				kf := KeyedFile{Path: f.Path, Size: f.Size, SHA256: f.SHA256}
				if err := copyVerified(open, m, f.Path, f.Shared, dir, kf, o); err != nil {
					return nil, err
				}
				db.Files[i].Shared = false
			}
		}
	}
	cp.Savepoint = true
	cp.Dir = ""
	if err := WriteManifest(dir, cp); err != nil {
		return nil, err
	}
	return cp, nil
}

// copyVerified copies file name of m (as open finds it), which f
// describes, to dstDir atomically, hashing it on the way; the copy is
// discarded unless it matches f.
func copyVerified(open FileSource, m *Manifest, name string, shared bool, dstDir string, f KeyedFile, o Owner) error {
	in, size, path, err := open(m, name, shared)
	if errors.Is(err, os.ErrNotExist) {
		return o.MissingStateFile(path)
	}
	if err != nil {
		return fmt.Errorf("storage: savepoint: %w", err)
	}
	defer in.Close()
	if err := checkSize(size, f.Size, path, o); err != nil {
		return err
	}
	return writeAtomic(dstDir, f.Path, func(w io.Writer) error {
		h := sha256.New()
		n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(in, f.Size))
		if err != nil {
			return fmt.Errorf("storage: savepoint: copy %s: %w", path, err)
		}
		if n != f.Size {
			return o.Corrupt(path, fmt.Sprintf("the file shrank to %d bytes while being copied; the manifest records %d", n, f.Size), nil)
		}
		return checkSum(h, f.SHA256, path, o)
	})
}
