package eval

import (
	"bytes"
	"sync"
	"unsafe"
)

// Reading a record's value once for several readers.
//
// One subtask often reads the same value several times in a row: the
// source's event time (ReadPaths), then the select of each branch that
// reads the source (a SQL view per event kind, as in Nexmark, where q8
// reads every event three times). Each read checks the whole value is
// JSON and scans it to find its members. So a read that scanned a value
// whole and found it one valid JSON object keeps an index of it: where
// each top-level member's key and value are, with a copy of the value's
// bytes. A later read whose value is byte for byte the same (compared,
// never trusted by its address: buffers are reused) goes straight to the
// members it wants and skips the others, and the check, unread: they were
// read and found valid already.
//
// The indexes live in a sync.Pool: a reader holds one from Get to Put,
// alone, so no reader can see another's half-built index, and the reads
// of one record by one goroutine, one after the other, mostly find the
// index the previous read left on their processor. A miss only costs the
// scan the read would have made anyway, and the copy: where 64 indexes in
// a row went unused (each value read once), only one value in 16 is
// indexed until a read uses one again.

// valueIndex is a JSON object value read whole and found valid: a copy of
// its text and its top-level members in the order they come.
type valueIndex struct {
	text    []byte
	members []memberSpan
	// built is false while members are not those of text (a read is
	// filling them, or failed to).
	built bool
	// unused counts the indexes built in a row that no read used; past
	// idleIndexes, only one value in indexEvery is indexed (skip counts
	// down to it), so a job whose values are each read once stops paying
	// for the copy and notices when that changes.
	unused, skip int
}

const (
	idleIndexes = 64
	indexEvery  = 16
)

// memberSpan is where one top-level member is in the value: its key's
// text (without the quotes; only keys without escapes are indexed) and
// its value's first byte.
type memberSpan struct {
	keyAt, keyLen int32
	at            int32
}

// maxIndexed bounds the values indexed, so a pool entry does not keep a
// large value's copy alive.
const maxIndexed = 64 << 10

var valueIndexes = sync.Pool{New: func() any { return new(valueIndex) }}

// getIndex returns a valueIndex for value: of value (built true) when the
// last read of the entry it takes was of the same bytes, otherwise an
// empty one (built false) to build with startIndex/addMember/finishIndex.
// The caller gives it back with putIndex.
func getIndex(value []byte) *valueIndex {
	ix := valueIndexes.Get().(*valueIndex)
	ix.check(value)
	return ix
}

// check leaves ix built only when it indexes value's bytes.
func (ix *valueIndex) check(value []byte) {
	if !ix.built {
		return
	}
	if bytes.Equal(ix.text, value) {
		ix.unused = 0
		return
	}
	ix.built = false
}

func putIndex(ix *valueIndex) { valueIndexes.Put(ix) }

// start prepares ix to index value as a scan of it goes; false when value
// is too large to index (the scan goes on without recording members).
func (ix *valueIndex) start(value []byte) bool {
	ix.built = false
	ix.members = ix.members[:0]
	if len(value) > maxIndexed {
		return false
	}
	if ix.unused >= idleIndexes {
		if ix.skip > 0 {
			ix.skip--
			return false
		}
		ix.skip = indexEvery - 1
	}
	return true
}

// add records a member: its key, read by p from keyAt on, and where its
// value starts. False when the key had an escape (the index is then
// abandoned: a hit reads its keys back from the value's text).
func (ix *valueIndex) add(p *scanner, key string, keyAt, at int) bool {
	if keyAt >= len(p.s) || len(key) > 0 && unsafe.StringData(key) != unsafe.StringData(p.s[keyAt:]) {
		return false
	}
	ix.members = append(ix.members, memberSpan{keyAt: int32(keyAt), keyLen: int32(len(key)), at: int32(at)})
	return true
}

// finish marks ix as the index of value, whose scan found it valid with
// every member recorded.
func (ix *valueIndex) finish(value []byte) {
	ix.text = append(ix.text[:0], value...)
	ix.built = true
	ix.unused++
}

// key is member m's key in s, the value ix indexes.
func (m memberSpan) key(s string) string { return s[m.keyAt : m.keyAt+m.keyLen] }
