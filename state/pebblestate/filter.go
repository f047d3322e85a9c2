package pebblestate

// A filter of the keys a DB may hold, in memory, in front of the read
// cache and Pebble: a point read of a key the filter has never seen is
// answered "absent" at the cost of one cache line, where Pebble seeks its
// memtable's skiplist and consults a bloom filter per sstable it might be
// in (a block-cache lookup and a probe each). A keyed operator reads
// every key it has not met yet: a dedupe's every record, a count's first
// record of each key. Profiles of a keyed count over 5M distinct keys put
// three fifths of the pebble run's subtask time in those reads (issue 26,
// docs/benchmarks.md "Keyed count").
//
// The filter must never say "absent" of a key the DB holds: it is used
// only while it is complete, that is when every key the DB holds went
// through add. A DB opened on an empty directory (a fresh job, or a
// subtask restored by Import, which adds every key it copies) starts
// complete. A DB opened on a checkpoint's files (a restore) starts
// incomplete, and its reads go to the cache and Pebble as before, while a
// goroutine adds the keys of an iterator made at the open (the DB as
// restored) to a filter of its own; writes meanwhile add to the DB's
// filter, and once the scan ends the two are merged (a bitwise or, the
// same sizes and hashes) and the filter is complete. Deletes leave their
// keys in it (a bloom filter cannot forget), so a deleted key costs a
// Pebble read again, as every key did without the filter.
//
// It holds, besides every key, every key's first segment: the key up to
// the end of the length-prefixed record key that starts it in the state
// handles' layout (segmentEnd). A Range or DeletePrefix of a record key
// the filter has never seen (a join probing the other side for a key it
// never had: nearly every probe of Nexmark q7, half of q4's) is so
// answered without an iterator.
//
// It is a blocked bloom filter: a key sets filterProbes bits of one
// 512-bit block (a cache line), chosen by the key's 64-bit hash. Its size
// is fixed when the DB opens, from its share of the memory budget; past
// filterBitsPerKey bits per key its false positives grow (each one costs
// the Pebble read it would have cost anyway), and past four times its
// capacity it stops answering, since almost every key would pass it.

import (
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

const (
	// filterBitsPerKey: about 1% false positives for a blocked filter
	// with filterProbes bits per key.
	filterBitsPerKey = 10
	filterProbes     = 7
	blockWords       = 8 // 512 bits
	// minFilterBytes is the smallest filter worth having.
	minFilterBytes = 64 << 10
)

type keyFilter struct {
	words    []uint64 // len a multiple of blockWords; nil: no filter
	blocks   uint64
	keys     int // keys added (a key added twice counts twice)
	capacity int
	complete bool // every key the DB holds was added
	// sinceEmpty: complete since the DB was empty, so a key it has not
	// seen was never read from Pebble either (and the read cache does
	// not hold it).
	sinceEmpty bool
	scan       *filterScan
}

// filterScan adds the keys a restored DB holds to a filter of their own,
// on a goroutine of its own.
type filterScan struct {
	words []uint64
	keys  int
	ok    bool        // the scan saw every key, without error
	done  atomic.Bool // words, keys and ok are final
	stop  atomic.Bool
	wg    sync.WaitGroup
}

// newKeyFilter returns a filter of about size bytes, complete: for a DB
// that starts empty.
func newKeyFilter(size int64) keyFilter {
	if size < minFilterBytes {
		return keyFilter{}
	}
	blocks := uint64(size / (8 * blockWords))
	return keyFilter{
		words:      make([]uint64, blocks*blockWords),
		blocks:     blocks,
		capacity:   int(blocks * blockWords * 64 / filterBitsPerKey),
		complete:   true,
		sinceEmpty: true,
	}
}

// useful reports whether mayContain can answer false.
func (f *keyFilter) useful() bool {
	if f.scan != nil && f.scan.done.Load() {
		f.merge()
	}
	return f.complete && f.words != nil && f.keys <= 4*f.capacity
}

// startScan makes f, of about size bytes, complete once a goroutine has
// added every key of it (an iterator over the DB as opened) with sum.
// The iterator is closed by the goroutine.
func startScan(size int64, it *pebble.Iterator, sum func([]byte) uint64) keyFilter {
	f := newKeyFilter(size)
	if f.words == nil {
		_ = it.Close()
		return f
	}
	f.complete, f.sinceEmpty = false, false
	sc := &filterScan{words: make([]uint64, len(f.words))}
	f.scan = sc
	blocks, limit := f.blocks, 4*f.capacity
	sc.wg.Add(1)
	go func() {
		defer sc.wg.Done()
		tmp := keyFilter{words: sc.words, blocks: blocks}
		ok := true
		for valid := it.First(); valid; valid = it.Next() {
			tmp.add(sum(it.Key()))
			if n := segmentEnd(it.Key()); n > 0 {
				tmp.addOnce(sum(it.Key()[:n]))
			}
			if tmp.keys > limit || (tmp.keys%4096 == 0 && sc.stop.Load()) {
				ok = false // too many keys to help, or closing
				break
			}
		}
		if it.Error() != nil {
			ok = false
		}
		if it.Close() != nil {
			ok = false
		}
		sc.keys, sc.ok = tmp.keys, ok
		sc.done.Store(true)
	}()
	return f
}

// merge adds the finished scan's keys to f.
func (f *keyFilter) merge() {
	sc := f.scan
	f.scan = nil
	if !sc.ok || f.words == nil {
		f.lose()
		return
	}
	for i, w := range sc.words {
		f.words[i] |= w
	}
	f.keys += sc.keys
	f.complete = true
}

// stopScan ends the scan, if one runs, and waits for it: before the DB
// closes, as its iterator must be closed first.
func (f *keyFilter) stopScan() {
	if sc := f.scan; sc != nil {
		sc.stop.Store(true)
		sc.wg.Wait()
	}
}

// positions returns the block of h and the start and step of its bits.
func (f *keyFilter) positions(h uint64) (block []uint64, a, b uint32) {
	// The block from the hash's high bits, the bits in it from its low
	// ones: independent of each other.
	hi, _ := bits.Mul64(h, f.blocks)
	i := hi * blockWords
	a = uint32(h)
	b = uint32(h)>>9 | 1
	return f.words[i : i+blockWords : i+blockWords], a, b
}

// add notes the key of hash h.
func (f *keyFilter) add(h uint64) {
	if f.words == nil {
		return
	}
	blk, a, b := f.positions(h)
	for range filterProbes {
		blk[(a>>6)&(blockWords-1)] |= 1 << (a & 63)
		a += b
	}
	f.keys++
}

// addOnce notes the key of hash h unless the filter may hold it already:
// for a record key's segment, which every key of a list or map repeats.
func (f *keyFilter) addOnce(h uint64) {
	if f.words == nil {
		return
	}
	blk, a, b := f.positions(h)
	for range filterProbes {
		if blk[(a>>6)&(blockWords-1)]&(1<<(a&63)) == 0 {
			f.add(h)
			return
		}
		a += b
	}
}

// mayContain reports whether the key of hash h may be in the DB; false
// only when the filter is useful and has never seen it.
func (f *keyFilter) mayContain(h uint64) bool {
	if !f.useful() {
		return true
	}
	blk, a, b := f.positions(h)
	for range filterProbes {
		if blk[(a>>6)&(blockWords-1)]&(1<<(a&63)) == 0 {
			return false
		}
		a += b
	}
	return true
}

// lose makes the filter answer "may contain" from now on: keys reached
// the DB without add.
func (f *keyFilter) lose() {
	f.stopScan()
	f.complete, f.sinceEmpty = false, false
	f.words = nil
	f.scan = nil
}
