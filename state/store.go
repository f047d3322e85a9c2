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

// Store holds the keyed state of one keyed operator subtask: every state it
// registered, for the key groups it owns. It is not safe for concurrent use;
// the runtime drives it from the subtask's goroutine.
type Store struct {
	first, last, maxPar int
	tables              []table
	byName              map[string]table
	sealed              bool
	key                 string
	local               int // key group of key, minus first; -1 when no key is set
	now                 func() time.Time
	nowMs               int64
	orphans             map[int][]byte // restored state of names nobody registered, kept for the next snapshot
}

// NewStore returns a store for the key groups first..last (inclusive) out of
// maxParallelism. now is the processing-time clock used for TTL (nil: time.Now).
func NewStore(first, last, maxParallelism int, now func() time.Time) *Store {
	if first < 0 || last < first || last >= maxParallelism {
		panic(fmt.Sprintf("state: invalid key-group range %d..%d of %d", first, last, maxParallelism))
	}
	if now == nil {
		now = time.Now
	}
	return &Store{first: first, last: last, maxPar: maxParallelism, byName: map[string]table{}, local: -1, now: now}
}

// KeyGroups returns the inclusive key-group range this store owns.
func (s *Store) KeyGroups() (first, last int) { return s.first, s.last }

// SetKey makes key the current key and returns its key group. The runtime
// calls it before handing each record to the operator.
func (s *Store) SetKey(key string) int {
	kg := KeyGroup(key, s.maxPar)
	s.SetKeyInGroup(key, kg)
	return kg
}

// SetKeyInGroup is SetKey for a caller that already computed the key group.
func (s *Store) SetKeyInGroup(key string, kg int) {
	if kg < s.first || kg > s.last {
		panic(fmt.Sprintf("state: key %q is in key group %d, outside this subtask's range %d..%d (records were routed to the wrong subtask)", key, kg, s.first, s.last))
	}
	s.key = key
	s.local = kg - s.first
	s.nowMs = 0
}

// ClearKey leaves the record scope; state access fails until the next SetKey.
func (s *Store) ClearKey() { s.local = -1 }

// CurrentKey returns the current key.
func (s *Store) CurrentKey() string { return s.key }

// Seal forbids registering more state: handles must be created in the
// operator's setup function, before the first record.
func (s *Store) Seal() { s.sealed = true }

func (s *Store) groups() int { return s.last - s.first + 1 }

// cur returns the local key-group index of the current key.
func (s *Store) cur() int {
	if s.local < 0 {
		panic(ErrNoKey)
	}
	return s.local
}

func (s *Store) millis() int64 {
	if s.nowMs == 0 {
		s.nowMs = s.now().UnixMilli()
	}
	return s.nowMs
}

func (s *Store) register(t table) {
	name := t.name()
	if s.sealed {
		panic(fmt.Sprintf("onceflow: keyed state %q registered while processing records; create state handles in the operator's setup function", name))
	}
	if name == "" {
		panic("onceflow: keyed state needs a non-empty name")
	}
	if _, dup := s.byName[name]; dup {
		panic(fmt.Sprintf("onceflow: keyed state %q registered twice in one operator; give each state its own name", name))
	}
	s.byName[name] = t
	s.tables = append(s.tables, t)
}

// Snapshot serialises the state of every key group that has any, dropping
// expired TTL entries. The result is the store's consistent state at the
// moment of the call; the caller may write it out while processing goes on.
func (s *Store) Snapshot() map[int][]byte {
	out := make(map[int][]byte)
	now := s.now().UnixMilli()
	var buf []byte
	for local := 0; local < s.groups(); local++ {
		kg := s.first + local
		var blob []byte
		for _, t := range s.tables {
			buf = t.encode(local, buf[:0], now)
			if len(buf) == 0 {
				continue
			}
			blob = appendChunk(blob, t.name(), buf)
		}
		if o, ok := s.orphans[kg]; ok {
			blob = append(blob, o...)
		}
		if len(blob) > 0 {
			out[kg] = blob
		}
	}
	return out
}

// Restore loads snapshot data for key groups in this store's range; groups
// outside it are ignored (they belong to another subtask after a rescale).
// State names that no handle registered are kept and written again by the
// next snapshot, so an operator that stops using a state does not destroy it
// by accident.
func (s *Store) Restore(groups map[int][]byte) error {
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
	return nil
}

// Unclaimed lists restored state names that no handle registered.
func (s *Store) Unclaimed() []string {
	seen := map[string]bool{}
	for _, data := range s.orphans {
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
	// encode appends the live entries of local key group g to dst.
	encode(g int, dst []byte, nowMs int64) []byte
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
