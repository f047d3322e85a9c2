package pebblestate

// A cache of entries in front of Pebble, in memory the collector never
// scans.
//
// A Pebble point read builds an iterator over the memtables and every
// level (a few microseconds even when every block is cached), while the
// records of a keyed operator read the current key's state once or more
// each: profiles of a keyed count put four fifths of its time in Get. The
// cache keeps recently read and written entries by their full key, and
// answers "absent" as well.
//
// It is write-back: a Put or Delete changes the cache alone and marks the
// entry dirty; the DB writes the dirty entries to Pebble (through its
// batch) only when something reads Pebble itself or the cache must forget
// one (db.go, flushDirty): before a checkpoint, Clip or Import, before a
// Range or DeletePrefix whose keys may be dirty (the span filter below
// says), before an eviction, and when the log of dirty entries is long.
// A key updated at every record (an auction's maximum, a window's
// accumulator, a list's sequence counter) so reaches Pebble's memtable
// once per flush instead of once per record: the memtable inserts and the
// flushes and compactions of the rewritten keys were the pebble backend's
// largest cost over the memory backend in Nexmark q4, q5 and q7
// (docs/benchmarks.md). Nothing is lost by holding writes back: a DB is
// only ever restored from a checkpoint (pool.go, "Durability"), and the
// checkpoint writes the dirty entries first.
//
// The dirty entries are found through a log of their arena offsets and
// index tags (dirty), appended to when an entry becomes dirty or a dirty
// one moves; an offset whose entry moved or was replaced since fails the
// index check and is skipped. The span filter (spans) has a bit per hash of the
// [key group][state] part of every dirty key and of that part followed
// by the key's first length-prefixed segment (the record key of the
// state handles' layout, state/statetest): a Range or DeletePrefix whose
// prefix starts with such a segment needs the dirty entries written first
// only when its segment's bit is set, any other when its table's is.
//
// # Layout
//
// Entries are appended to one ring of bytes, the arena, oldest first:
//
//	[key length: 2 bytes][flags: 1 byte][0][value length: 4 bytes][key][value]
//
// and found through an open-addressing index of uint64 slots, each the
// entry's hash tag (high 32 bits) and its arena offset plus one (low 32
// bits; 0 is an empty slot), probed linearly from the slot the tag names.
// Neither holds a pointer, so a cache of millions of entries costs the
// collector nothing and leaves no garbage (a map of entries did both: its
// share of the budget had to be halved for the collector's headroom).
//
// An update of the same length is written in place; any other makes a new
// entry at the ring's end and leaves the old bytes as garbage. When the
// ring is full, an eighth of it is freed at its head: garbage costs
// nothing, an entry used since the ring last passed it moves to the end
// (CLOCK's second chance), any other is dropped, after the DB's batch is
// committed, because the cache may forget only what Pebble holds. The
// arena starts small and doubles, compacting the live entries, until it
// reaches its share of the budget.

import (
	"encoding/binary"
	"hash/maphash"
	"math"
)

const (
	entryHeader = 8
	flagAbsent  = 1
	flagSkip    = 2 // the rest of the arena up to its end is unused
	flagRef     = 4 // read or written since the ring last passed the entry
	flagDirty   = 8 // written since Pebble last got it
	// minArena is the arena a cache starts with.
	minArena = 64 << 10
	// maxArena keeps offsets in 32 bits.
	maxArena = 1 << 31
	// arenaPerSlot: while the arena grows, the index has a slot per
	// arenaPerSlot bytes of it (rounded down to a power of two, at most
	// 3/4 of them used); at full size, the index takes up to a third of
	// the cache's bytes and the arena the rest. A small entry (a counter:
	// a 20-byte key, a 2-byte value) takes 30 bytes of arena and 11 of
	// index, so a million counters fit in 41 MiB.
	arenaPerSlot = 16
	// dirtyLogMax is the longest the log of dirty entries gets before
	// they are written to Pebble: 512 KiB of tags and offsets (outside
	// the budget).
	dirtyLogMax = 1 << 16
	// spanWords is the size of the span filter in 64-bit words: 64K bits,
	// 8 KiB, cleared at every flush of the dirty entries.
	spanWords = 1024
)

type readCache struct {
	seed  maphash.Seed
	arena []byte
	slots []uint64
	// head and tail are positions in the ring since the cache was made
	// (the arena offset is the position modulo len(arena)): the entries
	// live between them, the oldest at head.
	head, tail uint64
	used       int    // slots in use
	scratch    []byte // an entry on its way to the ring's end
	limit      int64
	// dirty logs the dirty entries (and stale ones) as index slots do:
	// hash tag in the high 32 bits, arena offset in the low.
	dirty []uint64
	// spans is the span filter of the dirty keys, spanned whether any
	// bit is set.
	spans   *[spanWords]uint64
	spanned bool
	// beforeShrink writes the dirty entries to Pebble and commits the
	// DB's batch: the cache may forget only what Pebble holds.
	beforeShrink func() error
}

func newReadCache(limit int64) readCache {
	return readCache{seed: maphash.MakeSeed(), limit: limit}
}

// sizes returns the largest arena and index of a cache of limit bytes: the
// index is the largest power of two of slots within a third of the bytes,
// the arena the rest (at most maxArena).
func sizes(limit int64) (arena, slots int) {
	slots = 1
	for int64(16*slots) <= limit/3 {
		slots *= 2
	}
	return int(min(limit-int64(8*slots), maxArena)), slots
}

func (c *readCache) hash(key []byte) uint32 { return tagOf(c.sum(key)) }

// sum is the 64-bit hash of key the DB computes once per access, for its
// key filter and (tagOf) the cache.
func (c *readCache) sum(key []byte) uint64 { return maphash.Bytes(c.seed, key) }

func tagOf(sum uint64) uint32 { return uint32(sum >> 32) }

func (c *readCache) mask() uint64 { return uint64(len(c.slots) - 1) }

// find returns the slot index of key, or -1.
func (c *readCache) find(key []byte, tag uint32) int {
	if len(c.slots) == 0 {
		return -1
	}
	m := c.mask()
	for i := uint64(tag) & m; ; i = (i + 1) & m {
		s := c.slots[i]
		if s == 0 {
			return -1
		}
		if uint32(s>>32) == tag && string(c.key(uint32(s)-1)) == string(key) {
			return int(i)
		}
	}
}

func (c *readCache) key(off uint32) []byte {
	kl := uint32(binary.LittleEndian.Uint16(c.arena[off:]))
	return c.arena[off+entryHeader : off+entryHeader+kl]
}

func (c *readCache) entry(off uint32) (key, val []byte, flags byte) {
	a := c.arena[off:]
	kl := int(binary.LittleEndian.Uint16(a))
	vl := int(binary.LittleEndian.Uint32(a[4:]))
	return a[entryHeader : entryHeader+kl], a[entryHeader+kl : entryHeader+kl+vl], a[2]
}

// get returns key's value, whether the DB holds none (absent), and whether
// the cache knows. The value is valid until the next change to the cache.
func (c *readCache) get(key []byte) (val []byte, absent, ok bool) {
	return c.getTag(key, c.hash(key))
}

// getTag is get with key's tag computed.
func (c *readCache) getTag(key []byte, tag uint32) (val []byte, absent, ok bool) {
	i := c.find(key, tag)
	if i < 0 {
		return nil, false, false
	}
	off := uint32(c.slots[i]) - 1
	_, v, f := c.entry(off)
	c.arena[off+2] = f | flagRef
	return v, f&flagAbsent != 0, true
}

// set records key's value (nil with absent: not in the DB) as Pebble
// holds it. It fails only when making room needed the dirty entries
// written and that failed.
func (c *readCache) set(key, val []byte, absent bool) error {
	return c.setTag(key, val, absent, c.hash(key))
}

// setTag is set with key's tag computed.
func (c *readCache) setTag(key, val []byte, absent bool, tag uint32) error {
	var flags byte
	if absent {
		flags = flagAbsent
	}
	_, err := c.setAt(key, val, flags, tag, c.find(key, tag))
	return err
}

// write records a write of key, to reach Pebble later (absent: a
// delete). known is false when key is not in the cache (the DB knows it
// never saw it). It reports whether the cache holds the write: when not
// (too large, or no room), the caller must write it to Pebble itself.
func (c *readCache) write(key, val []byte, absent, known bool, tag uint32) (bool, error) {
	flags := byte(flagDirty)
	if absent {
		flags |= flagAbsent
	}
	i := -1
	if known {
		i = c.find(key, tag)
	}
	return c.setAt(key, val, flags, tag, i)
}

// setAt sets key's entry, with key's slot (-1: none) found; it reports
// whether the cache holds the entry.
func (c *readCache) setAt(key, val []byte, flags byte, tag uint32, i int) (bool, error) {
	if i >= 0 {
		off := uint32(c.slots[i]) - 1
		if _, v, f := c.entry(off); len(v) == len(val) {
			copy(v, val)
			if flags&flagDirty != 0 && f&flagDirty == 0 {
				c.logDirty(tag, off)
			}
			c.arena[off+2] = flags | f&flagDirty | flagRef
			return true, c.checkLog()
		}
	}
	size := entryHeader + len(key) + len(val)
	if len(key) > math.MaxUint16 || int64(size) > c.limit/8 || c.limit <= 0 {
		// Too large to be worth caching: Pebble answers, once it holds
		// the write, so the dirty entries are written before the cache
		// forgets the key.
		return false, c.forget(i)
	}
	if i >= 0 {
		c.remove(i)
	}
	off, err := c.alloc(size)
	if err != nil {
		return false, err
	}
	if off < 0 {
		return false, c.forget(-1)
	}
	a := c.arena[off:]
	binary.LittleEndian.PutUint16(a, uint16(len(key)))
	a[2], a[3] = flags, 0
	binary.LittleEndian.PutUint32(a[4:], uint32(len(val)))
	copy(a[entryHeader:], key)
	copy(a[entryHeader+len(key):], val)
	c.insert(tag, uint32(off))
	if flags&flagDirty != 0 {
		c.logDirty(tag, uint32(off))
	}
	return true, c.checkLog()
}

func (c *readCache) logDirty(tag, off uint32) {
	c.dirty = append(c.dirty, uint64(tag)<<32|uint64(off))
}

// checkLog has the dirty entries written once their log is long.
func (c *readCache) checkLog() error {
	if len(c.dirty) >= dirtyLogMax && c.beforeShrink != nil {
		return c.beforeShrink()
	}
	return nil
}

// takeDirty calls fn for every dirty entry (absent: a delete) and marks
// it clean, then empties the log and the span filter. It stops at fn's
// first error.
func (c *readCache) takeDirty(fn func(key, val []byte, absent bool) error) error {
	n := uint32(len(c.arena))
	for _, e := range c.dirty {
		tag, off := uint32(e>>32), uint32(e)
		if off+entryHeader > n {
			continue
		}
		a := c.arena[off:]
		kl := uint32(binary.LittleEndian.Uint16(a))
		vl := binary.LittleEndian.Uint32(a[4:])
		f := a[2]
		if f&(flagDirty|flagSkip) != flagDirty || uint64(off)+entryHeader+uint64(kl)+uint64(vl) > uint64(n) {
			continue
		}
		k, v := a[entryHeader:entryHeader+kl], a[entryHeader+kl:entryHeader+kl+vl]
		// A stale offset: the entry moved, was replaced or dropped.
		if i := c.find(k, tag); i < 0 || uint32(c.slots[i])-1 != off {
			continue
		}
		if err := fn(k, v, f&flagAbsent != 0); err != nil {
			return err
		}
		c.arena[off+2] &^= flagDirty
	}
	c.dirty = c.dirty[:0]
	c.resetSpans()
	return nil
}

// hasDirty reports whether any entry may be dirty.
func (c *readCache) hasDirty() bool { return len(c.dirty) > 0 }

// markSpan sets the span filter's bit of a hash.
func (c *readCache) markSpan(sum uint64) {
	if c.spans == nil {
		c.spans = new([spanWords]uint64)
	}
	b := sum % (spanWords * 64)
	c.spans[b/64] |= 1 << (b % 64)
	c.spanned = true
}

// maySpan reports whether the span filter's bit of a hash is set.
func (c *readCache) maySpan(sum uint64) bool {
	if !c.spanned {
		return false
	}
	b := sum % (spanWords * 64)
	return c.spans[b/64]&(1<<(b%64)) != 0
}

func (c *readCache) resetSpans() {
	if c.spanned {
		clear(c.spans[:])
		c.spanned = false
	}
}

// forget drops slot i (none when i < 0) after the dirty entries are
// written and the batch committed: the key's value, whatever it is now, is
// then Pebble's to answer.
func (c *readCache) forget(i int) error {
	if c.beforeShrink != nil {
		if err := c.beforeShrink(); err != nil {
			return err
		}
	}
	if i >= 0 && c.used > 0 {
		c.remove(i)
	}
	return nil
}

// insert adds a slot for the entry at off; the key is not in the index.
func (c *readCache) insert(tag, off uint32) {
	m := c.mask()
	i := uint64(tag) & m
	for c.slots[i] != 0 {
		i = (i + 1) & m
	}
	c.slots[i] = uint64(tag)<<32 | uint64(off+1)
	c.used++
}

// remove empties slot i, moving later slots of the same probe run back so
// that every key stays reachable from its home slot.
func (c *readCache) remove(i int) {
	m := c.mask()
	hole := uint64(i)
	for j := (hole + 1) & m; c.slots[j] != 0; j = (j + 1) & m {
		home := (c.slots[j] >> 32) & m
		// The slot at j may move to the hole unless its home lies
		// cyclically in (hole, j].
		if (hole < j && hole < home && home <= j) || (hole > j && (home > hole || home <= j)) {
			continue
		}
		c.slots[hole] = c.slots[j]
		hole = j
	}
	c.slots[hole] = 0
	c.used--
}

// drop forgets key, dirty or not: only for a key the caller deletes from
// Pebble, or whose write failed.
func (c *readCache) drop(key []byte) {
	if i := c.find(key, c.hash(key)); i >= 0 {
		c.remove(i)
	}
}

// clear forgets everything, dirty entries included: the caller writes
// them first, or has lost them (a failed commit).
func (c *readCache) clear() {
	clear(c.slots)
	c.head, c.tail, c.used = 0, 0, 0
	c.dirty = c.dirty[:0]
	c.resetSpans()
}

// alloc returns the arena offset of size free bytes at the ring's end,
// growing the arena or dropping the oldest entries to make room; -1 when
// the cache cannot hold it.
func (c *readCache) alloc(size int) (int, error) {
	if c.arena == nil && !c.grow() {
		return -1, nil
	}
	for {
		n := uint64(len(c.arena))
		off := c.tail % n
		need := uint64(size)
		if off+need > n {
			need += n - off // the entry starts at the arena's beginning
		}
		if c.tail-c.head+need <= n && (c.used+1)*4 <= len(c.slots)*3 {
			if off+uint64(size) > n {
				c.markSkip(off)
				c.tail += n - off
				off = 0
			}
			c.tail += uint64(size)
			return int(off), nil
		}
		if c.grow() {
			continue
		}
		if err := c.evict(max(need, n/8)); err != nil {
			return -1, err
		}
	}
}

func (c *readCache) markSkip(off uint64) {
	if off+entryHeader <= uint64(len(c.arena)) {
		c.arena[off+2] = flagSkip
	}
}

// evict frees at least bytes at the ring's head (or empties it), and
// slots until the index has room. Garbage is freed for nothing; an entry
// read or written since it was last passed is moved to the ring's end (a
// second chance, once per pass) when it fits there; any other is dropped,
// after the dirty entries are written and the batch committed.
func (c *readCache) evict(bytes uint64) error {
	n := uint64(len(c.arena))
	committed := false
	var freed, moved uint64
	for c.head < c.tail && (freed < bytes || (c.used+1)*4 > len(c.slots)*3) {
		off := c.head % n
		if off+entryHeader > n || c.arena[off+2]&flagSkip != 0 {
			c.head += n - off
			freed += n - off
			continue
		}
		k, v, f := c.entry(uint32(off))
		size := uint64(entryHeader + len(k) + len(v))
		i := c.find(k, c.hash(k))
		if i < 0 || uint64(uint32(c.slots[i])-1) != off {
			c.head += size // garbage: an older copy, or dropped
			freed += size
			continue
		}
		if end := c.tail % n; f&flagRef != 0 && moved < n && end+size <= n {
			// The head entry's bytes may lie where it moves to (the ring
			// is full): copy through the scratch buffer.
			c.scratch = append(c.scratch[:0], c.arena[off:off+size]...)
			c.head += size
			copy(c.arena[end:], c.scratch)
			c.arena[end+2] &^= flagRef
			c.slots[i] = c.slots[i]&^math.MaxUint32 | (end + 1)
			if f&flagDirty != 0 {
				c.logDirty(uint32(c.slots[i]>>32), uint32(end))
			}
			c.tail += size
			moved += size
			continue
		}
		if !committed && c.beforeShrink != nil {
			if err := c.beforeShrink(); err != nil {
				return err
			}
			committed = true
			if c.used == 0 {
				return nil // a failed commit emptied the cache
			}
		}
		c.remove(i)
		c.head += size
		freed += size
	}
	if c.head == c.tail {
		c.head, c.tail = 0, 0
	}
	return nil
}

// grow doubles the arena and the index up to the limit, moving the live
// entries to the new arena in their order; it reports whether it grew.
func (c *readCache) grow() bool {
	maxSize, maxSlots := sizes(c.limit)
	size := min(max(2*len(c.arena), minArena), maxSize)
	if size <= len(c.arena) {
		return false
	}
	slots := 8
	for slots*2 <= min(size/arenaPerSlot, maxSlots) {
		slots *= 2
	}
	old, oldHead, oldTail := c.arena, c.head, c.tail
	oldSlots := c.slots
	c.arena, c.slots = make([]byte, size), make([]uint64, slots)
	c.head, c.tail, c.used = 0, 0, 0
	c.dirty = c.dirty[:0] // logged anew at the entries' new offsets
	n := uint64(len(old))
	for p := oldHead; p < oldTail; {
		off := p % n
		if off+entryHeader > n || old[off+2]&flagSkip != 0 {
			p += n - off
			continue
		}
		kl := int(binary.LittleEndian.Uint16(old[off:]))
		vl := int(binary.LittleEndian.Uint32(old[off+4:]))
		sz := entryHeader + kl + vl
		p += uint64(sz)
		// Live only if the old index still points here.
		if !live(oldSlots, c.seed, uint32(off), old[off+entryHeader:off+entryHeader+uint64(kl)]) {
			continue
		}
		copy(c.arena[c.tail:], old[off:off+uint64(sz)])
		tag := c.hash(old[off+entryHeader : off+entryHeader+uint64(kl)])
		c.insert(tag, uint32(c.tail))
		if old[off+2]&flagDirty != 0 {
			c.logDirty(tag, uint32(c.tail))
		}
		c.tail += uint64(sz)
	}
	return true
}

// live reports whether the index slots point key at the entry at off.
func live(slots []uint64, seed maphash.Seed, off uint32, key []byte) bool {
	if len(slots) == 0 {
		return false
	}
	m := uint64(len(slots) - 1)
	tag := uint32(maphash.Bytes(seed, key) >> 32)
	for i := uint64(tag) & m; slots[i] != 0; i = (i + 1) & m {
		if uint32(slots[i]>>32) == tag && uint32(slots[i])-1 == off {
			return true
		}
	}
	return false
}
