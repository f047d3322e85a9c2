package storage

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// pendingName is the manifest of a checkpoint whose commit point is
// external (a Kafka transaction): written before the commit point, renamed
// to _manifest once the commit point is known to have committed it.
const pendingName = "_manifest.pending"

// stateIDName holds the store's state id, under the root.
const stateIDName = "STATE_ID"

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
	if m == nil {
		return "", errors.New("storage: write pending manifest: the manifest is nil")
	}
	if m.Savepoint {
		return "", fmt.Errorf("storage: write pending manifest of checkpoint %d: the manifest is marked as a savepoint", m.CheckpointID)
	}
	if m.CheckpointID < 0 {
		return "", fmt.Errorf("storage: write pending manifest: checkpoint id %d is negative", m.CheckpointID)
	}
	return writeManifestFile(s.Dir(m.CheckpointID), pendingName, m)
}

// Confirm makes checkpoint id committed after its external commit point
// recorded it with the manifest checksum sum: it renames the pending
// manifest with that checksum to _manifest and syncs the directory.
// Confirming a checkpoint whose _manifest already has that checksum does
// nothing, so recovery can repeat it. A manifest with another checksum
// yields an error matching ErrManifestMismatch; none at all, ErrNoManifest.
func (s *Store) Confirm(id int64, sum string) error {
	dir := s.Dir(id)
	got, err := fileSHA256(filepath.Join(dir, manifestName))
	switch {
	case err == nil && got == sum:
		return nil
	case err == nil:
		return s.mismatch(id, manifestName, got, sum)
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("storage: confirm checkpoint %d: %w", id, err)
	}
	got, err = fileSHA256(filepath.Join(dir, pendingName))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("storage: confirm checkpoint %d: %s: %w", id, dir, ErrNoManifest)
	case err != nil:
		return fmt.Errorf("storage: confirm checkpoint %d: %w", id, err)
	case got != sum:
		return s.mismatch(id, pendingName, got, sum)
	}
	if err := os.Rename(filepath.Join(dir, pendingName), filepath.Join(dir, manifestName)); err != nil {
		return fmt.Errorf("storage: confirm checkpoint %d: %w", id, err)
	}
	return syncDir(dir)
}

func (s *Store) mismatch(id int64, name, got, want string) error {
	return fmt.Errorf("storage: checkpoint %d: %s has SHA-256 %s, the commit record names %s: %w",
		id, filepath.Join(s.Dir(id), name), short(got), short(want), ErrManifestMismatch)
}

func short(sum string) string {
	if len(sum) > 12 {
		return sum[:12] + "…"
	}
	return sum
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
		if st, err := os.Lstat(filepath.Join(s.Dir(id), pendingName)); err == nil && st.Mode().IsRegular() {
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
	var high int64
	if n := len(committed); n > 0 {
		high = committed[n-1]
	}
	if n := len(uncommitted); n > 0 {
		high = max(high, uncommitted[n-1])
	}
	return high, nil
}

// StateID returns the id of this state directory, creating it on first
// use: 32 random hex digits in R/STATE_ID. It tells two installations of a
// job with the same name apart (their commit records carry it); a copy of
// the directory keeps it, as a moved installation should. The caller must
// hold the directory's lock.
func (s *Store) StateID() (string, error) {
	path := filepath.Join(s.root, stateIDName)
	data, err := os.ReadFile(path)
	if err == nil {
		id := strings.TrimSpace(string(data))
		if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
			return "", fmt.Errorf("storage: %s holds %q, not a state id (32 hex digits): restore the file from a backup, or remove it to give this state directory a new identity", path, id)
		}
		return id, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("storage: read state id: %w", err)
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("storage: new state id: %w", err)
	}
	id := hex.EncodeToString(b[:])
	if err := writeAtomic(s.root, stateIDName, func(w io.Writer) error {
		_, err := io.WriteString(w, id+"\n")
		return err
	}); err != nil {
		return "", err
	}
	if err := syncDir(s.root); err != nil {
		return "", err
	}
	return id, nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
