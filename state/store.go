package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"time"
)

// ErrNoKey is returned (wrapped) when state is read or written outside the
// processing of a record, where there is no current key.
var ErrNoKey = errors.New("keyed state used without a current key: state is only reachable while a keyed operator processes a record")

// Store is what a keyed operator's setup function gets: the place its state
// handles are registered (NewValue, NewMap, NewList). It has no other use;
// the runtime drives the current key, snapshots and restores through a
// Runtime, which user code never sees.
type Store struct {
	sc *scope
}

// Runtime is the runtime's control over the keyed state of one keyed
// operator subtask: it sets the current key before each record, seals
// registration after setup, snapshots and restores key groups. It is not
// safe for concurrent use; the runtime drives it from the subtask's
// goroutine. Tests of process functions can drive one too.
type Runtime struct {
	sc *scope
}

// scope holds the state of the key groups first..last.
type scope struct {
	first, last, maxPar int
	backend             Backend // nil: Go values in the heap
	tables              []table
	byName              map[string]table
	sealed              bool
	key                 string
	kvKey               []byte // key, length-prefixed, for backend keys; built on demand
	local               int    // key group of key, minus first; -1 when no key is set
	now                 func() time.Time
	nowMs               int64
	orphans             map[int][]byte // restored state of names nobody registered, kept for the next snapshot (heap only; a Backend keeps it in orphanTable)
	ttlKey              []byte         // TTL index key being built
	sweepKeys           [][]byte       // due TTL index keys of one Sweep
	orphanNames         map[string]bool
	ttl                 bool // a handle has a TTL: Sweep has work
	tracking            bool // heap tables log their writes (TrackChanges)
	changedKeys         int  // record keys the last SnapshotChanges wrote
}

// NewRuntime returns keyed state for the key groups first..last (inclusive)
// out of maxParallelism, kept in backend (nil: in the Go heap). now is the
// processing-time clock used for TTL (nil: time.Now).
func NewRuntime(first, last, maxParallelism int, now func() time.Time, backend Backend) *Runtime {
	if first < 0 || last < first || last >= maxParallelism {
		panic(fmt.Sprintf("state: invalid key-group range %d..%d of %d", first, last, maxParallelism))
	}
	if now == nil {
		now = time.Now
	}
	return &Runtime{sc: &scope{first: first, last: last, maxPar: maxParallelism, backend: backend, byName: map[string]table{}, local: -1, now: now}}
}

// Store returns the store handles are registered in.
func (r *Runtime) Store() *Store { return &Store{sc: r.sc} }

// KeyGroups returns the inclusive key-group range this state owns.
func (r *Runtime) KeyGroups() (first, last int) { return r.sc.first, r.sc.last }

// SetKey makes key the current key and returns its key group. The runtime
// calls it before handing each record to the operator.
func (r *Runtime) SetKey(key string) int {
	kg := KeyGroup(key, r.sc.maxPar)
	r.SetKeyInGroup(key, kg)
	return kg
}

// SetKeyInGroup is SetKey for a caller that already computed the key group.
func (r *Runtime) SetKeyInGroup(key string, kg int) {
	s := r.sc
	if kg < s.first || kg > s.last {
		panic(fmt.Sprintf("state: key %q is in key group %d, outside this subtask's range %d..%d (records were routed to the wrong subtask)", key, kg, s.first, s.last))
	}
	s.key = key
	s.kvKey = s.kvKey[:0]
	s.local = kg - s.first
	s.nowMs = 0
}

// ClearKey leaves the record scope; state access fails until the next SetKey.
func (r *Runtime) ClearKey() { r.sc.local = -1 }

// CurrentKey returns the current key.
func (r *Runtime) CurrentKey() string { return r.sc.key }

// Seal forbids registering more state: handles must be created in the
// operator's setup function, before the first record.
func (r *Runtime) Seal() { r.sc.sealed = true }

func (s *scope) groups() int { return s.last - s.first + 1 }

// cur returns the local key-group index of the current key.
func (s *scope) cur() int {
	if s.local < 0 {
		panic(ErrNoKey)
	}
	return s.local
}

// kvPrefix returns the current key, length-prefixed: the start of every
// backend key of the current key's entries.
func (s *scope) kvPrefix() []byte {
	if len(s.kvKey) == 0 {
		s.kvKey = binary.AppendUvarint(s.kvKey, uint64(len(s.key)))
		s.kvKey = append(s.kvKey, s.key...)
	}
	return s.kvKey
}

func (s *scope) millis() int64 {
	if s.nowMs == 0 {
		s.nowMs = s.now().UnixMilli()
	}
	return s.nowMs
}

func (s *scope) register(t table) {
	name := t.name()
	if s.sealed {
		panic(fmt.Sprintf("onceflow: keyed state %q registered while processing records; create state handles in the operator's setup function", name))
	}
	if name == "" {
		panic("onceflow: keyed state needs a non-empty name")
	}
	if name[0] == 0 {
		panic(fmt.Sprintf("onceflow: keyed state name %q starts with a NUL byte, which is reserved for the runtime's own tables", name))
	}
	if _, dup := s.byName[name]; dup {
		panic(fmt.Sprintf("onceflow: keyed state %q registered twice in one operator; give each state its own name", name))
	}
	s.byName[name] = t
	s.tables = append(s.tables, t)
}

// backendFailed fails the record being processed: the task fails and the
// job restores its last checkpoint.
func backendFailed(state string, err error) {
	panic(fmt.Errorf("onceflow: keyed state %q: the state backend failed: %w", state, err))
}

// Snapshot serialises the state of every key group that has any, dropping
// expired TTL entries. The result is the state at the moment of the call,
// in one format whatever the backend, so a checkpoint restores into any
// backend; the caller may write it out while processing goes on.
func (r *Runtime) Snapshot() (map[int][]byte, error) {
	s := r.sc
	out := make(map[int][]byte)
	now := s.now().UnixMilli()
	var buf []byte
	for local := 0; local < s.groups(); local++ {
		kg := s.first + local
		var blob []byte
		for _, t := range s.tables {
			var err error
			buf, err = t.encode(local, buf[:0], now)
			if err != nil {
				return nil, fmt.Errorf("snapshot state %q key group %d: %w", t.name(), kg, err)
			}
			if len(buf) == 0 {
				continue
			}
			blob = appendChunk(blob, t.name(), buf)
		}
		if o, ok := s.orphans[kg]; ok {
			blob = append(blob, o...)
		}
		if s.backend != nil {
			err := s.backend.Range(kg, orphanTable, nil, func(name, payload []byte) bool {
				blob = appendChunk(blob, string(name), payload)
				return true
			})
			if err != nil {
				return nil, fmt.Errorf("snapshot unclaimed state of key group %d: %w", kg, err)
			}
		}
		if len(blob) > 0 {
			out[kg] = blob
		}
	}
	s.resetChanges()
	return out, nil
}

// Restore loads snapshot data for key groups in this state's range; groups
// outside it are ignored (they belong to another subtask after a rescale).
// State names that no handle registered are kept and written again by the
// next snapshot, so an operator that stops using a state does not destroy it
// by accident.
func (r *Runtime) Restore(groups map[int][]byte) error {
	s := r.sc
	kgs := make([]int, 0, len(groups))
	for kg := range groups {
		kgs = append(kgs, kg)
	}
	sort.Ints(kgs)
	for _, kg := range kgs {
		if kg < s.first || kg > s.last {
			continue
		}
		data := groups[kg]
		for len(data) > 0 {
			name, payload, rest, err := readChunk(data)
			if err != nil {
				return fmt.Errorf("restore key group %d: %w", kg, err)
			}
			data = rest
			t, ok := s.byName[name]
			if !ok && s.backend != nil {
				// Kept in the backend, so that incremental snapshots of
				// it carry the state along as well.
				if err := s.backend.Put(kg, orphanTable, []byte(name), payload); err != nil {
					return fmt.Errorf("restore key group %d: %w", kg, err)
				}
				s.noteOrphan(name)
				continue
			}
			if !ok {
				if s.orphans == nil {
					s.orphans = map[int][]byte{}
				}
				s.orphans[kg] = appendChunk(s.orphans[kg], name, payload)
				continue
			}
			if err := t.decode(kg-s.first, payload); err != nil {
				return fmt.Errorf("restore state %q key group %d: %w", name, kg, err)
			}
		}
	}
	s.loseChanges()
	return nil
}

func (s *scope) noteOrphan(name string) {
	if s.orphanNames == nil {
		s.orphanNames = map[string]bool{}
	}
	s.orphanNames[name] = true
}

// Unclaimed lists restored state names that no handle registered.
func (r *Runtime) Unclaimed() []string {
	seen := map[string]bool{}
	for n := range r.sc.orphanNames {
		seen[n] = true
	}
	for _, data := range r.sc.orphans {
		for len(data) > 0 {
			name, _, rest, err := readChunk(data)
			if err != nil {
				break
			}
			seen[name] = true
			data = rest
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// table is one registered state, sharded by local key group.
type table interface {
	name() string
	// encode appends the live entries of local key group g to dst, in the
	// snapshot format of its kind, dropping expired ones.
	encode(g int, dst []byte, nowMs int64) ([]byte, error)
	// decode loads entries in that format into local key group g.
	decode(g int, src []byte) error
}

func appendChunk(dst []byte, name string, payload []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(name)))
	dst = append(dst, name...)
	dst = binary.AppendUvarint(dst, uint64(len(payload)))
	return append(dst, payload...)
}

func readChunk(src []byte) (name string, payload, rest []byte, err error) {
	nb, rest, err := readBytes(src)
	if err != nil {
		return "", nil, nil, err
	}
	payload, rest, err = readBytes(rest)
	return string(nb), payload, rest, err
}

var errTruncated = errors.New("state data truncated")

func readBytes(src []byte) (b, rest []byte, err error) {
	n, k := binary.Uvarint(src)
	if k <= 0 || uint64(len(src)-k) < n {
		return nil, nil, errTruncated
	}
	return src[k : k+int(n)], src[k+int(n):], nil
}
