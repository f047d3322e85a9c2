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
func CopyTo(m *Manifest, dir string) (cp *Manifest, err error) {
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
	switch _, err := os.Lstat(filepath.Join(dir, manifestName)); {
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

	o := originOf(m)
	for _, uid := range slices.Sorted(maps.Keys(m.Operators)) {
		for _, f := range m.Operators[uid].Keyed {
			if err := copyVerified(m.Dir, dir, f, o); err != nil {
				return nil, err
			}
		}
	}
	cp = m.clone()
	for _, uid := range slices.Sorted(maps.Keys(cp.Operators)) {
		for _, db := range cp.Operators[uid].DB {
			for i, f := range db.Files {
				if err := copyDBFile(m, f, dir, o); err != nil {
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

// copyVerified copies state file f from srcDir to dstDir atomically,
// hashing it on the way; the copy is discarded unless it matches f.
func copyVerified(srcDir, dstDir string, f KeyedFile, o origin) error {
	path := filepath.Join(srcDir, f.Path)
	in, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return o.corrupt(path, "the state file is missing", nil)
	}
	if err != nil {
		return fmt.Errorf("storage: savepoint: %w", err)
	}
	defer in.Close()
	if err := checkSize(in, f.Size, path, o); err != nil {
		return err
	}
	return writeAtomic(dstDir, f.Path, func(w io.Writer) error {
		h := sha256.New()
		n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(in, f.Size))
		if err != nil {
			return fmt.Errorf("storage: savepoint: copy %s: %w", path, err)
		}
		if n != f.Size {
			return o.corrupt(path, fmt.Sprintf("the file shrank to %d bytes while being copied; the manifest records %d", n, f.Size), nil)
		}
		return checkSum(h, f.SHA256, path, o)
	})
}

// copyDBFile copies database file f of m into dir under f.Path, checked
// like copyVerified. Shared and private paths are distinct names, so the
// copies of a savepoint cannot collide.
func copyDBFile(m *Manifest, f DBFile, dir string, o origin) error {
	path := dbFilePath(m, f)
	return copyVerified(filepath.Dir(path), dir, KeyedFile{Path: f.Path, Size: f.Size, SHA256: f.SHA256}, o)
}
