package storage

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func pendingManifest(id int64) *Manifest {
	return &Manifest{Job: "orders", CheckpointID: id, MaxParallelism: testMaxParallelism, CommitPoint: "kafka", Incarnation: "inc",
		Operators: map[string]*OperatorState{"source": {Parallelism: 1, Blobs: map[string][]byte{"orders-0": []byte("7")}}}}
}

// A pending manifest is not a committed checkpoint until Confirm: List,
// Latest and GC treat it as uncommitted; HighestID and Pending see it.
func TestPendingIsNotCommittedUntilConfirmed(t *testing.T) {
	s := newStore(t)
	writeCheckpoint(t, s, 1)
	sum, err := s.WritePending(pendingManifest(2))
	if err != nil {
		t.Fatal(err)
	}
	if ids, _ := s.List(); !slices.Equal(ids, []int64{1}) {
		t.Errorf("List = %v, want [1]: a pending checkpoint is not committed", ids)
	}
	if m, _, err := s.Latest(LatestOptions{}); err != nil || m.CheckpointID != 1 {
		t.Errorf("Latest = %v, %v; want checkpoint 1", m, err)
	}
	if ids, _ := s.Pending(); !slices.Equal(ids, []int64{2}) {
		t.Errorf("Pending = %v, want [2]", ids)
	}
	if h, _ := s.HighestID(); h != 2 {
		t.Errorf("HighestID = %d, want 2", h)
	}
	if _, err := LoadManifest(s.Dir(2)); !errors.Is(err, ErrNoManifest) {
		t.Errorf("LoadManifest of a pending checkpoint: %v, want ErrNoManifest", err)
	}

	if err := s.Confirm(2, "0000"+sum[4:]); !errors.Is(err, ErrManifestMismatch) {
		t.Errorf("Confirm with another checksum: %v, want ErrManifestMismatch", err)
	}
	m, err := s.LoadCommitted(2, sum)
	if err != nil || m.CheckpointID != 2 || m.Incarnation != "inc" || m.CommitPoint != "kafka" {
		t.Fatalf("LoadCommitted = %+v, %v", m, err)
	}
	if err := s.Confirm(2, sum); err != nil {
		t.Errorf("second Confirm: %v (must be idempotent)", err)
	}
	if ids, _ := s.List(); !slices.Equal(ids, []int64{1, 2}) {
		t.Errorf("List after Confirm = %v, want [1 2]", ids)
	}
	if ids, _ := s.Pending(); len(ids) != 0 {
		t.Errorf("Pending after Confirm = %v, want none", ids)
	}
	if err := s.Confirm(3, sum); !errors.Is(err, ErrNoManifest) {
		t.Errorf("Confirm of a checkpoint that was never written: %v, want ErrNoManifest", err)
	}
	if err := s.Confirm(2, "ffff"+sum[4:]); !errors.Is(err, ErrManifestMismatch) {
		t.Errorf("Confirm of a committed checkpoint with another checksum: %v, want ErrManifestMismatch", err)
	}
}

// GC removes pending checkpoints older than the newest committed one (their
// transactions aborted) and keeps newer ones (their outcome may still be
// confirmed by recovery).
func TestGCRemovesAbortedPending(t *testing.T) {
	s := newStore(t)
	writeCheckpoint(t, s, 1)
	if _, err := s.WritePending(pendingManifest(2)); err != nil {
		t.Fatal(err)
	}
	writeCheckpoint(t, s, 3)
	if _, err := s.WritePending(pendingManifest(4)); err != nil {
		t.Fatal(err)
	}
	removed, err := s.GC(1)
	if err != nil || !slices.Equal(removed, []int64{1, 2}) {
		t.Errorf("GC = %v, %v; want [1 2] removed", removed, err)
	}
	if ids, _ := s.Pending(); !slices.Equal(ids, []int64{4}) {
		t.Errorf("Pending after GC = %v, want [4]", ids)
	}
}

func TestStateID(t *testing.T) {
	s := newStore(t)
	id, err := s.StateID()
	if err != nil || len(id) != 32 {
		t.Fatalf("StateID = %q, %v", id, err)
	}
	again, err := Open(s.Root())
	if err != nil {
		t.Fatal(err)
	}
	if id2, err := again.StateID(); err != nil || id2 != id {
		t.Errorf("StateID after reopening = %q, %v; want %q", id2, err, id)
	}
	if other, _ := newStore(t).StateID(); other == id {
		t.Error("two state directories got the same id")
	}
	if err := os.WriteFile(filepath.Join(s.Root(), StateIDName), []byte("not an id\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StateID(); err == nil {
		t.Error("a damaged STATE_ID was accepted")
	}
}
