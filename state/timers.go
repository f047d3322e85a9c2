package state

import (
	"encoding/binary"
	"fmt"
)

// Timer domains: when a timer is due.
const (
	// EventTime timers are due when the operator's watermark reaches
	// their time.
	EventTime uint8 = 1
	// ProcessingTime timers are due when the wall clock does.
	ProcessingTime uint8 = 2
)

// Timer is one timer of a key: its domain and its time in ms since the
// Unix epoch.
type Timer struct {
	Domain uint8
	At     int64
}

// timersTable is the runtime's own table of timers, beside the handles'
// tables; its name starts with a NUL byte, which registration refuses for
// user state.
const timersTable = "\x00timers"

// Timers is the timer set of one keyed operator subtask: per key, a set
// of (domain, time) pairs. It is keyed state like the handles' (snapshot,
// restore and rescale carry it with its key groups, in the heap or in the
// Backend), so timers are checkpointed with the state they belong to
// (docs/design.md, "Event time and timers"). The runtime owns it: it adds
// and removes timers for the current key on behalf of the operator, and
// keeps the order in which they fall due itself (Each rebuilds it after a
// restore).
type Timers struct {
	s *scope
	// In the heap: per local key group, per key, the set. With a
	// Backend: nil.
	groups []map[string]map[Timer]struct{}
	key    []byte
	chg    changes
}

// Timers registers the subtask's timer set; call it before Seal, at most
// once.
func (r *Runtime) Timers() *Timers {
	s := r.sc
	if s.sealed {
		panic("onceflow: the timer set is registered after the operator's setup")
	}
	if _, dup := s.byName[timersTable]; dup {
		panic("onceflow: the timer set is registered twice")
	}
	t := &Timers{s: s}
	if s.backend == nil {
		t.groups = make([]map[string]map[Timer]struct{}, s.groups())
		for i := range t.groups {
			t.groups[i] = map[string]map[Timer]struct{}{}
		}
	}
	s.byName[timersTable] = t
	s.tables = append(s.tables, t)
	return t
}

func (t *Timers) name() string { return timersTable }

func (t *Timers) changeLog() *changes { return &t.chg }
func (t *Timers) kind() byte          { return kindTimers }
func (t *Timers) liveKeys() int       { return liveKeys(t.groups) }

func (t *Timers) encodeKey(g int, k string, dst []byte, _ int64) []byte {
	for tm := range t.groups[g][k] {
		dst = appendTimer(dst, []byte(k), tm)
	}
	return dst
}

func (t *Timers) clearKey(g int, k []byte) error {
	if t.groups != nil {
		delete(t.groups[g], string(k))
		return nil
	}
	return t.s.backend.DeletePrefix(t.s.first+g, timersTable, kvPrefixOf(k))
}

// kvKey returns the backend key of tm for the current key: the record key
// length-prefixed, the domain, the time (8 bytes big-endian, sign bit
// flipped so times sort in order).
func (t *Timers) kvKey(tm Timer) []byte {
	t.key = append(append(t.key[:0], t.s.kvPrefix()...), tm.Domain)
	t.key = binary.BigEndian.AppendUint64(t.key, uint64(tm.At)^(1<<63))
	return t.key
}

// Has reports whether the current key has timer tm.
func (t *Timers) Has(tm Timer) bool {
	if t.groups != nil {
		_, ok := t.groups[t.s.cur()][t.s.key][tm]
		return ok
	}
	_, ok, err := t.s.backend.Get(t.s.first+t.s.cur(), timersTable, t.kvKey(tm))
	if err != nil {
		backendFailed("timers", err)
	}
	return ok
}

// Add adds tm to the current key's timers; false when it was there.
func (t *Timers) Add(tm Timer) bool {
	if t.Has(tm) {
		return false
	}
	if t.groups != nil {
		g := t.groups[t.s.cur()]
		set := g[t.s.key]
		if set == nil {
			set = map[Timer]struct{}{}
			g[t.s.key] = set
		}
		set[tm] = struct{}{}
		t.chg.note(t.s.cur(), t.s.key)
		return true
	}
	if err := t.s.backend.Put(t.s.first+t.s.cur(), timersTable, t.kvKey(tm), nil); err != nil {
		backendFailed("timers", err)
	}
	return true
}

// Remove removes tm from the current key's timers; false when it was not
// there.
func (t *Timers) Remove(tm Timer) bool {
	if !t.Has(tm) {
		return false
	}
	if t.groups != nil {
		g := t.groups[t.s.cur()]
		set := g[t.s.key]
		delete(set, tm)
		if len(set) == 0 {
			delete(g, t.s.key)
		}
		t.chg.note(t.s.cur(), t.s.key)
		return true
	}
	if err := t.s.backend.Delete(t.s.first+t.s.cur(), timersTable, t.kvKey(tm)); err != nil {
		backendFailed("timers", err)
	}
	return true
}

// Each calls fn for every timer of every key in the subtask's key groups,
// until fn returns false; fn must not change the timers.
func (t *Timers) Each(fn func(key string, kg int, tm Timer) bool) error {
	s := t.s
	for local := 0; local < s.groups(); local++ {
		kg := s.first + local
		if t.groups != nil {
			for k, set := range t.groups[local] {
				for tm := range set {
					if !fn(k, kg, tm) {
						return nil
					}
				}
			}
			continue
		}
		var bad error
		stop := false
		err := s.backend.Range(kg, timersTable, nil, func(key, _ []byte) bool {
			rk, rest, err := splitPrefix(key)
			if err != nil || len(rest) != 9 {
				bad = fmt.Errorf("damaged timer entry %x", key)
				return false
			}
			tm := Timer{Domain: rest[0], At: int64(binary.BigEndian.Uint64(rest[1:]) ^ (1 << 63))}
			if !fn(string(rk), kg, tm) {
				stop = true
				return false
			}
			return true
		})
		if err == nil {
			err = bad
		}
		if err != nil {
			return fmt.Errorf("read the timers of key group %d: %w", kg, err)
		}
		if stop {
			return nil
		}
	}
	return nil
}

// Snapshot format: per timer, uvarint len + key, the domain byte, varint
// time.
func (t *Timers) encode(g int, dst []byte, _ int64) ([]byte, error) {
	if t.groups != nil {
		for k, set := range t.groups[g] {
			for tm := range set {
				dst = appendTimer(dst, []byte(k), tm)
			}
		}
		return dst, nil
	}
	var bad error
	err := t.s.backend.Range(t.s.first+g, timersTable, nil, func(key, _ []byte) bool {
		rk, rest, err := splitPrefix(key)
		if err != nil || len(rest) != 9 {
			bad = fmt.Errorf("damaged timer entry %x", key)
			return false
		}
		dst = appendTimer(dst, rk, Timer{Domain: rest[0], At: int64(binary.BigEndian.Uint64(rest[1:]) ^ (1 << 63))})
		return true
	})
	if err == nil {
		err = bad
	}
	return dst, err
}

func appendTimer(dst, key []byte, tm Timer) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	dst = append(dst, key...)
	dst = append(dst, tm.Domain)
	return binary.AppendVarint(dst, tm.At)
}

func (t *Timers) decode(g int, src []byte) error {
	for len(src) > 0 {
		k, rest, err := readBytes(src)
		if err != nil {
			return err
		}
		if len(rest) < 2 {
			return errTruncated
		}
		tm := Timer{Domain: rest[0]}
		at, n := binary.Varint(rest[1:])
		if n <= 0 {
			return errTruncated
		}
		tm.At = at
		src = rest[1+n:]
		if tm.Domain != EventTime && tm.Domain != ProcessingTime {
			return fmt.Errorf("timer of key %q has unknown domain %d", k, tm.Domain)
		}
		if t.groups != nil {
			set := t.groups[g][string(k)]
			if set == nil {
				set = map[Timer]struct{}{}
				t.groups[g][string(k)] = set
			}
			set[tm] = struct{}{}
			continue
		}
		key := binary.AppendUvarint(nil, uint64(len(k)))
		key = append(key, k...)
		key = append(key, tm.Domain)
		key = binary.BigEndian.AppendUint64(key, uint64(tm.At)^(1<<63))
		if err := t.s.backend.Put(t.s.first+g, timersTable, key, nil); err != nil {
			return err
		}
	}
	return nil
}
