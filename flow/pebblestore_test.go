package flow_test

import (
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
	"github.com/onceflow/onceflow/internal/checkpoint/storage"
)

// putCountingStore is a local store that counts the database files being
// stored at once. A put waits (up to 500 ms) for a second one to arrive
// until two have been seen together.
type putCountingStore struct {
	storage.Storage
	in, most atomic.Int64
}

func (s *putCountingStore) PutDBFile(id int64, src string, f storage.DBFile) (storage.DBFile, error) {
	s.raise(s.in.Add(1))
	defer s.in.Add(-1)
	for i := 0; i < 100 && s.most.Load() < 2; i++ {
		time.Sleep(5 * time.Millisecond)
		s.raise(s.in.Load())
	}
	return s.Storage.PutDBFile(id, src, f)
}

// raise makes most at least n.
func (s *putCountingStore) raise(n int64) {
	for {
		m := s.most.Load()
		if m >= n || s.most.CompareAndSwap(m, n) {
			return
		}
	}
}

// A subtask's Pebble snapshot puts its files (new sstables, MANIFEST,
// OPTIONS, markers) into the store at once after the first, not one after
// another: each put of the local store ends in an fsync, and fsyncs issued
// together share the journal's commits (docs/design.md, "Checkpoints under
// backpressure").
func TestPebbleSnapshotStoresItsFilesAtOnce(t *testing.T) {
	const keys, perKey = 50, 4
	stateDir := t.TempDir()
	store := &putCountingStore{}
	open := func(dir, job string) (flow.CheckpointStore, error) {
		s, err := storage.Open(filepath.Join(dir, job))
		store.Storage = s
		return store, err
	}
	sink := flowtest.NewSink[count]()
	src := flowtest.NewSource(flowtest.Split(events(keys, perKey), 1), flowtest.Unbounded())
	env := pebbleCountJob(src, sink, 1, flow.Checkpointing(20*time.Millisecond), flow.StateDir(stateDir), flow.CheckpointStorage(open))
	runUntilCommitted(t, env, sink, keys*perKey)
	if got := store.most.Load(); got < 2 {
		t.Fatalf("at most %d database file was stored at a time, want the files of a snapshot stored together", got)
	}
}
