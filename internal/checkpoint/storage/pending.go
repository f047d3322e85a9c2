package storage

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// ErrManifestMismatch means the manifest on disk is not the one a commit
// record names (another checksum): the directory holds a checkpoint of the
// same id written by another run or another installation of the job.
var ErrManifestMismatch = errors.New("the manifest on disk is not the one the commit record names")

// WritePending writes m as the pending manifest of checkpoint
// m.CheckpointID (chk-<id>/_manifest.pending), atomically and durably like
// WriteManifest, and returns the hex SHA-256 of the file. A pending
// checkpoint is not committed: List, Latest and GC ignore it (GC removes it
// once a newer checkpoint is committed) until Confirm makes it committed.
// The external commit point records the checksum, so that recovery confirms
// exactly this file and nothing else.
func (s *Store) WritePending(m *Manifest) (string, error) {
	if err := CheckCommit(m, true); err != nil {
		return "", err
	}
	return writeManifestFile(s.Dir(m.CheckpointID), PendingName, m)
}

// Confirm makes checkpoint id committed after its external commit point
// recorded it with the manifest checksum sum: it renames the pending
// manifest with that checksum to _manifest and syncs the directory.
// Confirming a checkpoint whose _manifest already has that checksum does
// nothing, so recovery can repeat it. A manifest with another checksum
// yields an error matching ErrManifestMismatch; none at all, ErrNoManifest.
func (s *Store) Confirm(id int64, sum string) error {
	dir := s.Dir(id)
	path := func(name string) string { return filepath.Join(dir, name) }
	return ConfirmPending(id, sum, dir, path, func(name string) (string, error) {
		_, sum, err := sizeAndSum(path(name))
		return sum, err
	}, func() error {
		if err := os.Rename(path(PendingName), path(ManifestName)); err != nil {
			return fmt.Errorf("storage: confirm checkpoint %d: %w", id, err)
		}
		return syncDir(dir)
	})
}

// LoadCommitted returns checkpoint id, which an external commit point
// recorded as committed with manifest checksum sum: it confirms the pending
// manifest if that has not happened yet (Confirm), then loads and verifies
// it like Load.
func (s *Store) LoadCommitted(id int64, sum string) (*Manifest, error) {
	if err := s.Confirm(id, sum); err != nil {
		return nil, err
	}
	return s.Load(id)
}

// Pending returns the ids of checkpoints that have a pending manifest and
// no committed one, ascending: their commit point's outcome is not
// recorded in the store.
func (s *Store) Pending() ([]int64, error) {
	_, uncommitted, err := s.scan()
	if err != nil {
		return nil, err
	}
	var out []int64
	for _, id := range uncommitted {
		if st, err := os.Lstat(filepath.Join(s.Dir(id), PendingName)); err == nil && st.Mode().IsRegular() {
			out = append(out, id)
		}
	}
	return out, nil
}

// HighestID returns the highest checkpoint id of any directory in the
// store, committed or not, 0 if there is none. New checkpoints take higher
// ids, so that no checkpoint directory is ever written twice.
func (s *Store) HighestID() (int64, error) {
	committed, uncommitted, err := s.scan()
	if err != nil {
		return 0, err
	}
	return Highest(committed, uncommitted), nil
}

// StateID returns the id of this state directory, creating it on first
// use: 32 random hex digits in R/STATE_ID. It tells two installations of a
// job with the same name apart (their commit records carry it); a copy of
// the directory keeps it, as a moved installation should.
//
// Creating it is atomic, first writer wins, so that processes opening a
// fresh directory at once all get the same id: each writes its id to a
// temporary file of its own and syncs it, then hard-links it as STATE_ID,
// which fails when the name exists; the losers read the winner's id.
// Where the filesystem has no hard links, STATE_ID is created exclusively
// and written in place instead.
func (s *Store) StateID() (string, error) {
	path := filepath.Join(s.root, StateIDName)
	data, err := os.ReadFile(path)
	if err == nil {
		return ParseStateID(data, path)
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("storage: read state id: %w", err)
	}
	id, err := NewStateID()
	if err != nil {
		return "", err
	}
	tmp, err := writeTempID(s.root, id)
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp)
	switch err := os.Link(tmp, path); {
	case err == nil:
	case errors.Is(err, os.ErrExist):
		return readStateID(path)
	default:
		if err := createStateID(path, id); errors.Is(err, os.ErrExist) {
			return readStateID(path)
		} else if err != nil {
			return "", err
		}
	}
	if err := syncDir(s.root); err != nil {
		return "", err
	}
	return id, nil
}

// writeTempID writes id to a new temporary file of its own in dir, synced,
// and returns its path.
func writeTempID(dir, id string) (string, error) {
	f, err := os.CreateTemp(dir, StateIDName+".*"+tmpExt)
	if err != nil {
		return "", fmt.Errorf("storage: create state id: %w", err)
	}
	if err := writeIDAndClose(f, id); err != nil {
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("storage: write state id: %w", err)
	}
	return f.Name(), nil
}

// createStateID creates path exclusively and writes id into it, for
// filesystems without hard links; an existing path yields an error
// matching os.ErrExist.
func createStateID(path, id string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, filePerm)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return err
		}
		return fmt.Errorf("storage: create state id: %w", err)
	}
	if err := writeIDAndClose(f, id); err != nil {
		return fmt.Errorf("storage: write state id %s: %w", path, err)
	}
	return nil
}

// writeIDAndClose writes id and a newline to f, syncs and closes it.
func writeIDAndClose(f *os.File, id string) error {
	_, err := io.WriteString(f, id+"\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// readStateID reads the id another writer stored first.
func readStateID(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("storage: read state id: %w", err)
	}
	return ParseStateID(data, path)
}
