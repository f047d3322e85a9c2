package state

import (
	"encoding/binary"
	"fmt"
)

// With a Backend, expired entries are invisible to reads at once (their
// expiry is checked on every read) and are removed physically by Sweep,
// which the runtime calls as records flow (docs/design.md, "TTL that frees
// space"). A full scan per checkpoint, as the heap does, would defeat
// incremental checkpoints, so every write with a TTL also writes an entry in
// a per-key-group index table ordered by expiry time:
//
//	key: expiry (unix ms, 8 bytes big-endian) | uvarint len(state) | state | entry key
//
// Sweep reads that index from its start up to now: each index entry names
// a state entry that may have expired; if it has (a later write may have
// moved its expiry on), it is deleted, and the index entry goes either way.

// Tables of the runtime's own inside a Backend. Their names start with a
// NUL byte, which registration refuses for user state.
const (
	ttlTable    = "\x00ttl"
	orphanTable = "\x00orphans"
)

// indexExpiry records in the TTL index that key of state expires at exp.
func (s *scope) indexExpiry(kg int, state string, key []byte, exp int64) error {
	if exp == 0 {
		return nil
	}
	k := binary.BigEndian.AppendUint64(s.ttlKey[:0], uint64(exp))
	k = binary.AppendUvarint(k, uint64(len(state)))
	k = append(k, state...)
	k = append(k, key...)
	s.ttlKey = k
	return s.backend.Put(kg, ttlTable, k, nil)
}

// Sweep removes up to limit entries of the TTL index that are due, and the
// state entries they name that are still expired, from the backend; it
// returns how many state entries it removed. Without a Backend it does
// nothing: the heap drops expired entries at each full snapshot. The runtime
// calls it from the subtask's goroutine, between records. It does nothing
// when no handle has a TTL.
func (r *Runtime) Sweep(limit int) (removed int, err error) {
	s := r.sc
	if s.backend == nil || limit <= 0 || !s.ttl {
		return 0, nil
	}
	now := s.now().UnixMilli()
	for local := 0; local < s.groups() && limit > 0; local++ {
		kg := s.first + local
		due := s.sweepKeys[:0]
		err := s.backend.Range(kg, ttlTable, nil, func(key, _ []byte) bool {
			if len(key) < 8 || int64(binary.BigEndian.Uint64(key)) > now {
				return false
			}
			due = append(due, append([]byte(nil), key...))
			return len(due) < limit
		})
		s.sweepKeys = due
		if err != nil {
			return removed, fmt.Errorf("sweep expired state of key group %d: %w", kg, err)
		}
		for _, ik := range due {
			name, pk, err := readBytes(ik[8:])
			if err != nil {
				return removed, fmt.Errorf("sweep expired state of key group %d: damaged TTL index entry: %w", kg, err)
			}
			v, ok, err := s.backend.Get(kg, string(name), pk)
			if err != nil {
				return removed, err
			}
			if ok {
				if exp, _, derr := kvDecode(v); derr == nil && exp != 0 && exp <= now {
					if err := s.backend.Delete(kg, string(name), pk); err != nil {
						return removed, err
					}
					removed++
				}
			}
			if err := s.backend.Delete(kg, ttlTable, ik); err != nil {
				return removed, err
			}
			limit--
		}
	}
	return removed, nil
}
