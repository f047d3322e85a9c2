package state

import "hash/maphash"

// valueTable is the heap's table of one Value state in one key group: the
// entry of each record key.
//
// It is not a Go map because of the read-modify-write every keyed
// aggregate does per record: Get, then Set of the same key. A Go map
// hashes and probes for both, and for a key seen for the first time (most
// records of a job over many keys) both probes miss the CPU's caches. The
// table remembers where its last lookup ended, at the key's slot or at
// the empty slot the key would go in, and a Set of that key right after
// writes there: one hash and one probe per record (docs/design.md,
// "State backends").
//
// Open addressing with linear probing: hashes holds each slot's hash (0:
// empty), dense, so that a probe reads few cache lines; kvs the keys and
// entries. Deletion shifts the slots after the deleted one back, so no
// tombstones. The hash is maphash's, with a seed per process, so keys
// cannot be chosen to collide.
type valueTable[V any] struct {
	hashes []uint32
	kvs    []tableKV[V]
	n      int
	// last is where the last lookup of key ended: slot at, holding key
	// when found, else the empty slot key would be inserted in. Valid
	// while the table has not changed (set, del and grow reset it).
	last struct {
		key   string
		h     uint32
		at    int
		found bool
		valid bool
	}
}

type tableKV[V any] struct {
	key string
	e   entry[V]
}

var tableSeed = maphash.MakeSeed()

// tableHash is key's hash, never 0 (which marks an empty slot). Its low
// bits pick the first slot, so none is forced.
func tableHash(key string) uint32 {
	if h := uint32(maphash.String(tableSeed, key) >> 32); h != 0 {
		return h
	}
	return 1
}

// find looks key up and remembers where the lookup ended.
func (t *valueTable[V]) find(key string) (at int, found bool) {
	if t.last.valid && t.last.key == key {
		return t.last.at, t.last.found
	}
	h := tableHash(key)
	at, found = t.probe(key, h)
	t.last.key, t.last.h, t.last.at, t.last.found, t.last.valid = key, h, at, found, true
	return at, found
}

// probe returns key's slot, or the empty slot where the probe for it
// ended (-1 when the table has no slots).
func (t *valueTable[V]) probe(key string, h uint32) (int, bool) {
	if len(t.hashes) == 0 {
		return -1, false
	}
	mask := len(t.hashes) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		switch t.hashes[i] {
		case 0:
			return i, false
		case h:
			if t.kvs[i].key == key {
				return i, true
			}
		}
	}
}

// get returns key's entry.
func (t *valueTable[V]) get(key string) (entry[V], bool) {
	at, found := t.find(key)
	if !found {
		return entry[V]{}, false
	}
	return t.kvs[at].e, true
}

// set stores key's entry. A key already there keeps the string it was
// stored with.
func (t *valueTable[V]) set(key string, e entry[V]) {
	at, found := t.find(key)
	if found {
		t.kvs[at].e = e
		return
	}
	h := t.last.h
	if t.n+1 > len(t.hashes)*13/16 {
		t.grow()
		at, _ = t.probe(key, h)
	}
	t.hashes[at] = h
	t.kvs[at] = tableKV[V]{key: key, e: e}
	t.n++
	t.last.at, t.last.found = at, true
}

// del removes key; false when it was not there.
func (t *valueTable[V]) del(key string) bool {
	at, found := t.find(key)
	t.last.valid = false
	if !found {
		return false
	}
	mask := len(t.hashes) - 1
	// Shift back each slot after the hole whose probe started at or
	// before the hole, until an empty slot.
	hole := at
	for i := (at + 1) & mask; t.hashes[i] != 0; i = (i + 1) & mask {
		home := int(t.hashes[i]) & mask
		// i's probe passed the hole when home is not in (hole, i], cyclically.
		if (i-home)&mask >= (i-hole)&mask {
			t.hashes[hole], t.kvs[hole] = t.hashes[i], t.kvs[i]
			hole = i
		}
	}
	t.hashes[hole] = 0
	t.kvs[hole] = tableKV[V]{}
	t.n--
	return true
}

// grow doubles the slots (16 at first).
func (t *valueTable[V]) grow() {
	oldH, oldKV := t.hashes, t.kvs
	size := max(16, 2*len(oldH))
	t.hashes = make([]uint32, size)
	t.kvs = make([]tableKV[V], size)
	mask := size - 1
	for j, h := range oldH {
		if h == 0 {
			continue
		}
		i := int(h) & mask
		for t.hashes[i] != 0 {
			i = (i + 1) & mask
		}
		t.hashes[i], t.kvs[i] = h, oldKV[j]
	}
	t.last.valid = false
}

// len is the number of keys.
func (t *valueTable[V]) len() int { return t.n }

// each calls f with every key and its entry, in no set order; f must not
// change the table.
func (t *valueTable[V]) each(f func(key string, e entry[V])) {
	for i, h := range t.hashes {
		if h != 0 {
			f(t.kvs[i].key, t.kvs[i].e)
		}
	}
}
