package state

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
)

// Incremental snapshots of state in the heap (docs/design.md, "Incremental
// checkpoints"): once TrackChanges is on, every write through a handle
// notes its record key in a per-table, per-key-group change log, and
// SnapshotChanges writes only the record keys noted since the last
// snapshot, each one whole (its value, all its map entries, its list, its
// timers), or as deleted when it has nothing left. RestoreChanges applies
// such a delta over a restored snapshot. State changes only through the
// handles' writes (Set, Put, Add, Update, Delete, Clear, timer changes):
// a value changed in place after a Get is not noted, as a Backend would not
// see it either.
//
// Delta format, per key group: chunks (name, payload) as in a full
// snapshot, one per table with changes; a payload is
//
//	kind (1 byte) | uvarint n | n × (uvarint len + record key) | upserts
//
// where the n record keys are every key changed (each is cleared first),
// and upserts are the live ones among them in the table kind's snapshot
// format. The kind lets a delta of a state no handle registered (kept
// unclaimed) be applied to its bytes.

// Table kinds, as written in deltas.
const (
	kindValue  byte = 1
	kindMap    byte = 2
	kindList   byte = 3
	kindTimers byte = 4
)

// minChangeLimit is the change-log length a table always allows; beyond
// it, and beyond half the table's keys, a delta would cost about as much
// as a full snapshot, so the log is dropped and the next snapshot is full.
const minChangeLimit = 1 << 16

// changes is one table's change log.
type changes struct {
	on    bool       // tracking, and the log is complete
	lost  bool       // the log overflowed or state was restored: the next snapshot must be full
	keys  [][]string // per local key group: record keys written (may repeat)
	n     int        // len of all keys
	limit int
	live  func() int // the table's record keys, for the limit
}

// note records that key of local key group g was written.
func (c *changes) note(g int, key string) {
	if !c.on {
		return
	}
	c.keys[g] = append(c.keys[g], key)
	if c.n++; c.n >= c.limit {
		c.overflow()
	}
}

func (c *changes) overflow() {
	if l := max(minChangeLimit, c.live()/2); c.n < l {
		c.limit = l
		return
	}
	c.drop()
	c.on, c.lost = false, true
}

// drop forgets the log.
func (c *changes) drop() {
	for g := range c.keys {
		c.keys[g] = nil
	}
	c.n = 0
}

// reset starts a new log after a full snapshot (track: tracking is on).
func (c *changes) reset(groups int, track bool, live func() int) {
	if c.keys == nil {
		c.keys = make([][]string, groups)
	}
	c.drop()
	c.on, c.lost, c.live = track, false, live
	c.limit = minChangeLimit
}

// tracked is what a table offers to incremental snapshots (heap only).
type tracked interface {
	table
	changeLog() *changes
	kind() byte
	// liveKeys counts the record keys in the heap.
	liveKeys() int
	// encodeKey appends record key's live entries of local key group g
	// in the snapshot format; nothing when it has none.
	encodeKey(g int, key string, dst []byte, nowMs int64) []byte
	// clearKey removes every entry of record key in local key group g.
	clearKey(g int, key []byte) error
}

// TrackChanges makes the heap's tables log their writes from now on, so
// that SnapshotChanges can write only what changed. The first snapshot
// after it must be full (SnapshotChanges says so). It does nothing with a
// Backend.
func (r *Runtime) TrackChanges() {
	s := r.sc
	if s.backend != nil || s.tracking {
		return
	}
	s.tracking = true
	for _, t := range s.tables {
		if tt, ok := t.(tracked); ok {
			tt.changeLog().reset(s.groups(), false, tt.liveKeys)
			tt.changeLog().lost = true
		}
	}
}

// ResumeChanges says that the state is what the snapshots taken or
// restored so far hold, so that the next SnapshotChanges writes a delta
// over them: the runtime continues a restored chain of snapshots instead
// of writing a full one. Call it after TrackChanges and the restore,
// before any write.
func (r *Runtime) ResumeChanges() {
	s := r.sc
	if s.tracking {
		s.resetChanges()
	}
}

// Unchanged reports whether the state is known to be exactly what the
// last snapshot (full or incremental) holds: tracking is on, every log is
// complete, and no write was noted since. SnapshotChanges would then
// return no change.
func (r *Runtime) Unchanged() bool {
	s := r.sc
	if s.backend != nil || !s.tracking {
		return false
	}
	for _, t := range s.tables {
		tt, ok := t.(tracked)
		if !ok {
			return false
		}
		if c := tt.changeLog(); !c.on || c.n > 0 {
			return false
		}
	}
	return true
}

// HasTTL reports whether a handle has a TTL: the heap drops expired
// entries only in full snapshots.
func (r *Runtime) HasTTL() bool { return r.sc.ttl }

// resetChanges starts new change logs after a full snapshot.
func (s *scope) resetChanges() {
	if !s.tracking {
		return
	}
	for _, t := range s.tables {
		if tt, ok := t.(tracked); ok {
			tt.changeLog().reset(s.groups(), true, tt.liveKeys)
		}
	}
}

// SnapshotChanges returns, per key group, the changes since the last
// snapshot (full or incremental) in the delta format, and true; or false
// when they are not known (tracking is off or was just turned on, the
// log overflowed, state was restored since) and a full Snapshot must be
// taken instead. Key groups without changes are absent; no change at all
// gives an empty map. Expired entries are written as they are (a read
// checks their expiry); full snapshots drop them.
func (r *Runtime) SnapshotChanges() (map[int][]byte, bool, error) {
	s := r.sc
	if s.backend != nil || !s.tracking {
		return nil, false, nil
	}
	for _, t := range s.tables {
		if tt, ok := t.(tracked); ok && !tt.changeLog().on {
			return nil, false, nil
		}
	}
	out := make(map[int][]byte)
	now := s.now().UnixMilli()
	var buf []byte
	changed := 0
	for local := 0; local < s.groups(); local++ {
		var blob []byte
		for _, t := range s.tables {
			c := t.(tracked).changeLog()
			keys := c.keys[local]
			if len(keys) == 0 {
				continue
			}
			slices.Sort(keys)
			keys = slices.Compact(keys)
			changed += len(keys)
			buf = append(buf[:0], t.(tracked).kind())
			buf = binary.AppendUvarint(buf, uint64(len(keys)))
			for _, k := range keys {
				buf = binary.AppendUvarint(buf, uint64(len(k)))
				buf = append(buf, k...)
			}
			for _, k := range keys {
				buf = t.(tracked).encodeKey(local, k, buf, now)
			}
			blob = appendChunk(blob, t.name(), buf)
			if cap(c.keys[local]) > 4096 {
				c.keys[local] = nil
			} else {
				clear(c.keys[local][:cap(c.keys[local])])
				c.keys[local] = c.keys[local][:0]
			}
		}
		if len(blob) > 0 {
			out[s.first+local] = blob
		}
	}
	for _, t := range s.tables {
		t.(tracked).changeLog().n = 0
	}
	s.changedKeys = changed
	return out, true, nil
}

// ChangedKeys is the number of record keys the last SnapshotChanges wrote
// (a key counts once per table that changed it).
func (r *Runtime) ChangedKeys() int { return r.sc.changedKeys }

// LiveKeys is the number of record keys the heap's tables hold (a key
// counts once per table holding it), as ChangedKeys counts them; 0 with a
// Backend.
func (r *Runtime) LiveKeys() int {
	s := r.sc
	if s.backend != nil {
		return 0
	}
	n := 0
	for _, t := range s.tables {
		if tt, ok := t.(tracked); ok {
			n += tt.liveKeys()
		}
	}
	return n
}

// RestoreChanges applies deltas that SnapshotChanges wrote over restored
// state, in the order they were taken; key groups outside this state's
// range are ignored, as Restore does. It works with a Backend too (a heap
// checkpoint restored into one).
func (r *Runtime) RestoreChanges(groups map[int][]byte) error {
	s := r.sc
	kgs := make([]int, 0, len(groups))
	for kg := range groups {
		if kg >= s.first && kg <= s.last {
			kgs = append(kgs, kg)
		}
	}
	sort.Ints(kgs)
	for _, kg := range kgs {
		data := groups[kg]
		for len(data) > 0 {
			name, payload, rest, err := readChunk(data)
			if err != nil {
				return fmt.Errorf("restore changes of key group %d: %w", kg, err)
			}
			data = rest
			if err := s.applyChanges(kg, name, payload); err != nil {
				return fmt.Errorf("restore changes of state %q key group %d: %w", name, kg, err)
			}
		}
	}
	s.loseChanges()
	return nil
}

// loseChanges makes the next snapshot full: state changed other than
// through the handles.
func (s *scope) loseChanges() {
	for _, t := range s.tables {
		if tt, ok := t.(tracked); ok && s.tracking {
			tt.changeLog().drop()
			tt.changeLog().on, tt.changeLog().lost = false, true
		}
	}
}

// splitDelta splits a delta payload into its kind, the changed record
// keys and the upserts.
func splitDelta(payload []byte) (kind byte, keys [][]byte, upserts []byte, err error) {
	if len(payload) < 1 {
		return 0, nil, nil, errTruncated
	}
	kind = payload[0]
	if kind < kindValue || kind > kindTimers {
		return 0, nil, nil, fmt.Errorf("unknown state kind %d in a delta", kind)
	}
	n, k := binary.Uvarint(payload[1:])
	if k <= 0 || n > uint64(len(payload)) {
		return 0, nil, nil, errTruncated
	}
	rest := payload[1+k:]
	keys = make([][]byte, 0, n)
	for i := uint64(0); i < n; i++ {
		var key []byte
		if key, rest, err = readBytes(rest); err != nil {
			return 0, nil, nil, err
		}
		keys = append(keys, key)
	}
	return kind, keys, rest, nil
}

func (s *scope) applyChanges(kg int, name string, payload []byte) error {
	kind, keys, upserts, err := splitDelta(payload)
	if err != nil {
		return err
	}
	if t, ok := s.byName[name]; ok {
		tt, ok := t.(tracked)
		if !ok || tt.kind() != kind {
			return fmt.Errorf("the delta holds a state of kind %s, the handle registered under that name is another kind", kindName(kind))
		}
		for _, k := range keys {
			if err := tt.clearKey(kg-s.first, k); err != nil {
				return err
			}
		}
		return t.decode(kg-s.first, upserts)
	}
	// A state no handle registered: apply the delta to its bytes.
	cleared := make(map[string]bool, len(keys))
	for _, k := range keys {
		cleared[string(k)] = true
	}
	if s.backend != nil {
		old, _, err := s.backend.Get(kg, orphanTable, []byte(name))
		if err != nil {
			return err
		}
		merged, err := mergeRecords(kind, old, cleared, upserts)
		if err != nil {
			return err
		}
		s.noteOrphan(name)
		return s.backend.Put(kg, orphanTable, []byte(name), merged)
	}
	var out []byte
	found := false
	data := s.orphans[kg]
	for len(data) > 0 {
		n, p, rest, err := readChunk(data)
		if err != nil {
			return err
		}
		data = rest
		if n == name {
			found = true
			if p, err = mergeRecords(kind, p, cleared, upserts); err != nil {
				return err
			}
		}
		out = appendChunk(out, n, p)
	}
	if !found {
		out = appendChunk(out, name, upserts)
	}
	if s.orphans == nil {
		s.orphans = map[int][]byte{}
	}
	s.orphans[kg] = out
	return nil
}

func kindName(kind byte) string {
	switch kind {
	case kindValue:
		return "value"
	case kindMap:
		return "map"
	case kindList:
		return "list"
	case kindTimers:
		return "timers"
	}
	return fmt.Sprintf("%d", kind)
}

// mergeRecords returns old (a payload of the kind's snapshot format)
// without the records of the cleared keys, followed by upserts.
func mergeRecords(kind byte, old []byte, cleared map[string]bool, upserts []byte) ([]byte, error) {
	out := make([]byte, 0, len(old)+len(upserts))
	for len(old) > 0 {
		key, n, err := nextRecord(kind, old)
		if err != nil {
			return nil, err
		}
		if !cleared[string(key)] {
			out = append(out, old[:n]...)
		}
		old = old[n:]
	}
	return append(out, upserts...), nil
}

// nextRecord returns the record key of the first record of src, in the
// snapshot format of kind, and the record's length.
func nextRecord(kind byte, src []byte) (key []byte, n int, err error) {
	key, rest, err := readBytes(src)
	if err != nil {
		return nil, 0, err
	}
	skipVarint := func() error {
		_, k := binary.Varint(rest)
		if k <= 0 {
			return errTruncated
		}
		rest = rest[k:]
		return nil
	}
	skipBytes := func() error {
		_, r, err := readBytes(rest)
		rest = r
		return err
	}
	switch kind {
	case kindValue:
		if err := skipVarint(); err != nil {
			return nil, 0, err
		}
		if err := skipBytes(); err != nil {
			return nil, 0, err
		}
	case kindMap, kindList:
		cnt, k := binary.Uvarint(rest)
		if k <= 0 || cnt > uint64(len(rest)) {
			return nil, 0, errTruncated
		}
		rest = rest[k:]
		for i := uint64(0); i < cnt; i++ {
			if kind == kindMap {
				if err := skipBytes(); err != nil {
					return nil, 0, err
				}
			}
			if err := skipVarint(); err != nil {
				return nil, 0, err
			}
			if err := skipBytes(); err != nil {
				return nil, 0, err
			}
		}
	case kindTimers:
		if len(rest) < 1 {
			return nil, 0, errTruncated
		}
		rest = rest[1:]
		if err := skipVarint(); err != nil {
			return nil, 0, err
		}
	default:
		return nil, 0, fmt.Errorf("unknown state kind %d", kind)
	}
	return key, len(src) - len(rest), nil
}

// kvPrefixOf is the length-prefixed record key, the start of every
// backend key of its entries.
func kvPrefixOf(key []byte) []byte {
	return append(binary.AppendUvarint(make([]byte, 0, len(key)+2), uint64(len(key))), key...)
}
