package pebblestate

// A read cache of decoded entries in the Go heap, in front of Pebble.
//
// A Pebble point read builds an iterator over the memtables and every
// level (a few microseconds even when every block is cached), while the
// records of a keyed operator read the current key's state once or more
// each: profiles of a keyed count put four fifths of its time in Get. The
// cache keeps recently read and written entries by their full key, and
// answers "absent" as well. It is write-through: every Put and Delete goes
// to Pebble at once too, so Range, checkpoints and everything else read
// Pebble as before, and only the cache's own copies must be kept true:
// Put and Delete update them, DeletePrefix drops those it deletes, Clip and
// Import (which change many keys at once) empty it.
//
// Its size is bounded in bytes (Pool: a share of the memory budget); when
// full it drops an eighth of its entries, chosen by Go's map iteration,
// which is as good as any order for keys a hash spread over key groups.

type cacheEntry struct {
	val    []byte
	absent bool
}

// cacheOverhead approximates the bytes an entry costs besides its key and
// value: the map slot (at the map's load factor), the entry, the slice and
// string headers, the allocator's size classes.
const cacheOverhead = 128

type readCache struct {
	m     map[string]*cacheEntry
	bytes int64
	limit int64
	// beforeShrink commits the DB's batch: the cache may forget only
	// what Pebble holds.
	beforeShrink func() error
}

func newReadCache(limit int64) readCache {
	return readCache{m: map[string]*cacheEntry{}, limit: limit}
}

// get returns the entry of key, or nil. It does not allocate.
func (c *readCache) get(key []byte) *cacheEntry {
	return c.m[string(key)]
}

// set records key's value (nil with absent: not in the DB). An existing
// entry's buffer is reused.
func (c *readCache) set(key, val []byte, absent bool) {
	if e := c.m[string(key)]; e != nil {
		c.bytes += int64(len(val) - len(e.val))
		e.val = append(e.val[:0], val...)
		e.absent = absent
		return
	}
	c.m[string(key)] = &cacheEntry{val: append([]byte(nil), val...), absent: absent}
	c.bytes += int64(len(key) + len(val) + cacheOverhead)
	if c.bytes > c.limit {
		c.shrink()
	}
}

// drop forgets key.
func (c *readCache) drop(key []byte) {
	if e := c.m[string(key)]; e != nil {
		c.bytes -= int64(len(key) + len(e.val) + cacheOverhead)
		delete(c.m, string(key))
	}
}

// clear forgets everything.
func (c *readCache) clear() {
	clear(c.m)
	c.bytes = 0
}

// shrink drops entries until the cache holds at most 7/8 of its limit,
// once the batch is committed (if that fails, it keeps everything: the
// next write tries again).
func (c *readCache) shrink() {
	if c.beforeShrink != nil && c.beforeShrink() != nil {
		return
	}
	target := c.limit - c.limit/8
	for k, e := range c.m {
		if c.bytes <= target {
			return
		}
		c.bytes -= int64(len(k) + len(e.val) + cacheOverhead)
		delete(c.m, k)
	}
}
