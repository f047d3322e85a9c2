package engine

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/onceflow/onceflow/internal/checkpoint/storage"
	"github.com/onceflow/onceflow/internal/failpoint"
	"github.com/onceflow/onceflow/state"
)

// Incremental checkpoints of keyed state in the heap (docs/design.md,
// "Incremental checkpoints"). A keyed subtask keeps a chain: a full
// snapshot, then one delta per checkpoint with changes (the record keys
// written since the previous one, state.Runtime.SnapshotChanges), each a
// keyed state file in the store's shared area, written once and
// referenced by every later checkpoint of the chain. A checkpoint with no
// change writes nothing and references the chain as it is. The chain
// starts again with a full snapshot:
//
//   - when it holds heapMaxDeltas deltas, or its deltas add up to more
//     bytes than its full snapshot (and than heapMinDeltaBytes, so that a
//     small state is not written whole at every checkpoint while it
//     grows) and its files write more than twice the record keys the
//     state holds (deltas of new keys add to both: a growing state's
//     chain is the state itself, and a full snapshot would bound
//     nothing): a restore reads at most about twice the state, and the
//     store holds at most about twice the state per subtask. At its next
//     change, not at an idle checkpoint (heapChain.wantsFull);
//   - with TTL state, heapTTLAge checkpoints after its full snapshot, as
//     the heap drops expired entries only in full snapshots;
//   - after a savepoint (which references none of its files: once it
//     commits GC may remove them all), a failed write of the chain, a
//     restore that did not read exactly one chain of this store covering
//     exactly the subtask's key groups (at the same parallelism the chain
//     goes on: inheritedHeapChain), and when more was written than a
//     delta would save.
const (
	heapMaxDeltas     = 50
	heapMinDeltaBytes = 1 << 20
	heapTTLAge        = 100
)

// heapChain is the snapshot chain of one keyed subtask's heap state.
type heapChain struct {
	instance string // tells this subtask's files from every other's

	// On the subtask's goroutine, at barriers.
	deltas     int   // deltas since the full snapshot
	baseBytes  int64 // payload bytes of the full snapshot
	deltaBytes int64 // payload bytes of the deltas since
	// chainKeys is the record keys the chain's files write, the full
	// snapshot's and each delta's (-1: not known, a restored chain);
	// liveKeys the state's at the last checkpoint.
	chainKeys int
	liveKeys  int
	age       int  // checkpoints since the full snapshot
	restart   bool // the next checkpoint writes a full snapshot
	seq       int  // files written by this chain's subtask

	// The asynchronous writes of one chain run one after the other, each
	// after the one before it (prev), so each knows the files stored
	// before it.
	mu     sync.Mutex
	files  []storage.DBFile // the chain as stored
	broken bool             // a write failed: the chain is unusable
	prev   chan struct{}    // closed when the last write started has ended
}

func newHeapChain() *heapChain {
	var b [6]byte
	_, _ = rand.Read(b[:])
	done := make(chan struct{})
	close(done)
	return &heapChain{instance: hex.EncodeToString(b[:]), restart: true, prev: done}
}

// checkpointHeap runs the synchronous part of checkpoint cp for keyed
// heap state s, a full snapshot or a delta, and starts the asynchronous
// part, which stores it and acknowledges the barrier with the chain.
func (att *attempt) checkpointHeap(cp int64, n *Node, subtask, part int, s *state.Runtime, ch *heapChain, blobs map[string][]byte) error {
	ch.mu.Lock()
	broken := ch.broken
	ch.mu.Unlock()
	ch.liveKeys = s.LiveKeys()
	full := ch.wantsFull(broken, s.HasTTL(), s.Unchanged())
	var groups map[int][]byte
	if !full {
		d, ok, err := s.SnapshotChanges()
		if err != nil {
			return fmt.Errorf("snapshot the state of %q subtask %d: %w", n.uid, subtask, err)
		}
		full = !ok
		groups = d
	}
	if full {
		snap, err := s.Snapshot()
		if err != nil {
			return fmt.Errorf("snapshot the state of %q subtask %d: %w", n.uid, subtask, err)
		}
		groups = snap
		ch.deltas, ch.deltaBytes, ch.age, ch.restart = 0, 0, 0, false
		ch.baseBytes = payloadBytes(groups)
		ch.chainKeys = ch.liveKeys
	} else {
		ch.age++
		if len(groups) > 0 {
			ch.deltas++
			ch.deltaBytes += payloadBytes(groups)
			if ch.chainKeys >= 0 {
				ch.chainKeys += s.ChangedKeys()
			}
		}
	}
	var name string
	if full || len(groups) > 0 {
		ch.seq++
		kind := "delta"
		if full {
			kind = "full"
		}
		name = fmt.Sprintf("%06d.%s", ch.seq, kind)
	}
	root, err := att.dbRoot()
	if err != nil {
		return err
	}
	first, last := s.KeyGroups()
	prev, done := ch.prev, make(chan struct{})
	ch.prev = done
	att.writers.Add(1)
	go func() {
		defer att.writers.Done()
		defer close(done)
		<-prev
		snap, err := att.storeHeap(cp, n, subtask, ch, root, name, full, first, last, groups)
		if err == nil {
			err = failpoint.Inject(failpoint.AfterSnapshotWritten)
		}
		if err != nil {
			att.ack(ackMsg{cp: cp, part: part, err: fmt.Errorf("write state of %q subtask %d: %w", n.uid, subtask, err)})
			return
		}
		att.ack(ackMsg{cp: cp, part: part, uid: n.uid, db: snap, blobs: blobs})
	}()
	return nil
}

// wantsFull decides whether the next checkpoint writes a full snapshot
// (broken: the chain's last write failed; ttl: the state has a TTL;
// idle: nothing changed since the last snapshot). A chain that has
// grown past its bounds starts again at its next change, not at an idle
// checkpoint: an idle checkpoint adds nothing to the chain, so a restore
// reads no more for the wait, and a checkpoint with no new input stays
// free whatever the state's size (a full snapshot of 5M counters takes
// seconds, BenchmarkIdleCheckpoint).
func (ch *heapChain) wantsFull(broken, ttl, idle bool) bool {
	switch {
	case ch.restart || broken:
		return true
	case ttl && ch.age >= heapTTLAge:
		// Expired entries leave the heap only in full snapshots.
		return true
	case idle:
		return false
	}
	if ch.deltas >= heapMaxDeltas {
		return true
	}
	if ch.deltaBytes <= max(ch.baseBytes, heapMinDeltaBytes) {
		return false
	}
	// The deltas outweigh the full snapshot. While the state only grows
	// (deltas of new keys) the chain is the state itself, written once:
	// a full snapshot would bound nothing. So with the chain's keys
	// known, it starts again only when they are more than twice the
	// state's: the keys overwritten, not the keys added, make a restore
	// read more than the state.
	return ch.chainKeys < 0 || ch.chainKeys > 2*ch.liveKeys
}

func payloadBytes(groups map[int][]byte) int64 {
	var n int64
	for _, b := range groups {
		n += int64(len(b))
	}
	return n
}

// storeHeap stores the file name (none when "": no change) of the chain
// and returns the chain as checkpoint cp references it.
func (att *attempt) storeHeap(cp int64, n *Node, subtask int, ch *heapChain, root, name string, full bool, first, last int, groups map[int][]byte) (*storage.DBSnapshot, error) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if full {
		ch.files, ch.broken = nil, false
	}
	if ch.broken {
		return nil, errors.New("an earlier part of its incremental snapshot chain failed to be written; the next checkpoint writes a full snapshot")
	}
	if name != "" {
		f, err := att.putHeapFile(cp, n, subtask, ch, root, name, first, last, groups)
		if err != nil {
			ch.broken = true
			return nil, err
		}
		ch.files = append(ch.files, f)
	}
	return &storage.DBSnapshot{FirstKeyGroup: first, LastKeyGroup: last, Format: storage.FormatHeapChain, Files: append([]storage.DBFile(nil), ch.files...)}, nil
}

// putHeapFile writes groups as a keyed state file in the scratch
// directory root and stores it in the shared area.
func (att *attempt) putHeapFile(cp int64, n *Node, subtask int, ch *heapChain, root, name string, first, last int, groups map[int][]byte) (storage.DBFile, error) {
	rest := fmt.Sprintf("%s-%d-%s-%s", sanitize(n.uid), subtask, ch.instance, name)
	_, content, err := storage.EncodeKeyedFile(cp, name, first, last, groups)
	if err != nil {
		return storage.DBFile{}, err
	}
	tmp := filepath.Join(root, fmt.Sprintf("%020d-%s", cp, rest))
	defer os.Remove(tmp)
	out, err := os.Create(tmp)
	if err != nil {
		return storage.DBFile{}, err
	}
	_, err = io.Copy(out, content)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return storage.DBFile{}, fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := failpoint.Inject(failpoint.MidStateUpload); err != nil {
		return storage.DBFile{}, err
	}
	return att.store.PutDBFile(cp, tmp, storage.DBFile{Name: name, Path: storage.SharedName(cp, rest), Shared: true})
}

// restoreHeapChain applies the heap chain snap of the restored
// checkpoint to s: its full snapshot, then its deltas in order; key
// groups outside s's range are left out.
func (att *attempt) restoreHeapChain(uid string, snap storage.DBSnapshot, s *state.Runtime) error {
	first, last := s.KeyGroups()
	dir, err := os.MkdirTemp("", "onceflow-restore-")
	if err != nil {
		return fmt.Errorf("restore the state of %q: %w", uid, err)
	}
	defer os.RemoveAll(dir)
	for i, f := range snap.Files {
		dst := filepath.Join(dir, f.Name)
		if err := att.store.GetDBFile(att.restored, f, dst); err != nil {
			return fmt.Errorf("%w: %w", ErrRestoreRefused, err)
		}
		groups, err := storage.ReadKeyedFile(dir, storage.KeyedFileOf(snap, f), max(first, snap.FirstKeyGroup), min(last, snap.LastKeyGroup))
		_ = os.Remove(dst)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrRestoreRefused, err)
		}
		if i == 0 {
			err = s.Restore(groups)
		} else {
			err = s.RestoreChanges(groups)
		}
		if err != nil {
			return fmt.Errorf("%w: operator %q: %s of its snapshot chain: %w", ErrRestoreRefused, uid, f.Name, err)
		}
	}
	return nil
}

// inheritedHeapChain returns the files of the restored checkpoint's heap
// chain that the subtask of uid owning key groups first..last can go on
// with: the restored checkpoint is one of this job's store (its files are
// shared files here, which GC keeps while a checkpoint lists them), and
// its state of those key groups is exactly one chain of that range. nil
// otherwise: the first checkpoint writes a full snapshot.
func (att *attempt) inheritedHeapChain(uid string, first, last int) []storage.DBFile {
	m := att.restored
	if m == nil || m.Savepoint || m.Dir != att.store.Dir(m.CheckpointID) {
		return nil
	}
	op := m.Operators[uid]
	if op == nil {
		return nil
	}
	for _, f := range op.Keyed {
		if f.LastKeyGroup >= first && f.FirstKeyGroup <= last {
			return nil
		}
	}
	var found []storage.DBFile
	for _, s := range op.DB {
		if s.LastKeyGroup < first || s.FirstKeyGroup > last {
			continue
		}
		if found != nil || s.Format != storage.FormatHeapChain || s.FirstKeyGroup != first || s.LastKeyGroup != last {
			return nil
		}
		for _, f := range s.Files {
			if !f.Shared {
				return nil
			}
		}
		found = s.Files
	}
	return found
}

// inherit makes the chain go on from files, a restored checkpoint's.
func (ch *heapChain) inherit(files []storage.DBFile) {
	ch.files = append([]storage.DBFile(nil), files...)
	ch.restart = false
	ch.deltas = len(files) - 1
	ch.age = ch.deltas
	ch.baseBytes = files[0].Size
	ch.chainKeys = -1 // a restored chain's: judged by its bytes
	for _, f := range files[1:] {
		ch.deltaBytes += f.Size
	}
	// Names go on after the last one's number, so that they stay
	// unique in the chain.
	_, _ = fmt.Sscanf(files[len(files)-1].Name, "%d.", &ch.seq)
}
