package pebblestate

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/onceflow/onceflow/state"
)

var _ state.Backend = (*DB)(nil)

// DB is the keyed state of one keyed operator subtask in a Pebble database.
// It implements state.Backend. Like the Backend, it is driven from the
// subtask's goroutine only: its methods, Checkpoint included, are not safe
// for concurrent use (DiskUsage is).
type DB struct {
	db       *pebble.DB
	opts     *pebble.Options
	dir      string
	maxPar   int
	readOnly bool
	// dirty is set by every write since the last checkpoint: a checkpoint
	// of a clean DB needs no flush.
	dirty bool

	key   []byte // the key of Get, Put, Delete
	val   []byte // the value Get returns
	lower []byte // the bounds of Range and DeletePrefix
	upper []byte
	// ranging counts the Range calls in progress: a Range from inside
	// another's fn gets bounds of its own.
	ranging  int
	iterOpts pebble.IterOptions
	// cache answers Get for recently read and written keys, and holds
	// the writes not yet in Pebble (cache.go).
	cache readCache
	// filter answers Get for keys never written, while it is complete
	// (filter.go).
	filter keyFilter
	// batch collects the dirty entries of the cache on their way to
	// Pebble (flushDirty), committed every batchOps writes and at the end
	// of the flush.
	batch   *pebble.Batch
	batched int
	// written counts the writes that reached the batch (for tests).
	written int64
	// getIter answers Get's cache misses: one iterator whose per-level
	// iterators are reused from read to read (a new one per read costs a
	// third more). It sees the DB as it was when it was made, so every
	// change to the DB closes it (changed) and the next miss makes a new
	// one; until then the changes not in it are in the batch, so in the
	// cache.
	getIter *pebble.Iterator
	// rangeIter answers Range (outside another Range's fn) likewise,
	// its bounds set per call.
	rangeIter  *pebble.Iterator
	rangeStale bool
	// The table of the last write and its hash (markDirty).
	spanKG    int
	spanState string
	spanSum   uint64
	spanOK    bool
}

// changed closes Get's iterator after a change to the DB.
func (d *DB) changed() {
	if d.getIter != nil {
		_ = d.getIter.Close()
		d.getIter = nil
	}
	if d.rangeIter != nil {
		if d.ranging > 0 {
			// A Range in progress still reads it: closed when it ends.
			d.rangeStale = true
			return
		}
		_ = d.rangeIter.Close()
		d.rangeIter = nil
	}
}

// flushDirty writes the cache's dirty entries to Pebble and commits them:
// after it, Pebble holds every write (cache.go).
func (d *DB) flushDirty() error {
	if d.cache.hasDirty() {
		err := d.cache.takeDirty(func(key, val []byte, absent bool) error {
			if err := d.batchWrite(key, val, absent); err != nil {
				return fmt.Errorf("pebblestate: write to %s: %w", d.dir, err)
			}
			return nil
		})
		if err != nil {
			d.cache.clear() // what it held is lost: the task fails
			return err
		}
	}
	return d.commitBatch()
}

// markDirty notes in the cache's span filter the spans of d.key, a key
// just written with hash sum, whose [key group][state] part is ns bytes
// long.
func (d *DB) markDirty(kg int, st string, ns int, sum uint64) {
	// The table's hash, kept for the next write of the same table.
	if d.spanKG != kg || d.spanState != st || !d.spanOK {
		d.spanKG, d.spanState, d.spanOK = kg, st, true
		d.spanSum = d.cache.sum(d.key[:ns])
	}
	d.cache.markSpan(d.spanSum)
	switch u := segmentLen(d.key[ns:]); {
	case u == 0:
	case ns+u == len(d.key):
		d.cache.markSpan(sum) // the key is its segment
	default:
		d.cache.markSpan(d.cache.sum(d.key[:ns+u]))
	}
}

// mayBeDirty reports whether a key starting with lower, whose
// [key group][state] part is ns bytes long, may be dirty in the cache.
// A key starting with lower starts with lower's first segment too, if
// lower has a whole one, and then markDirty set that segment's bit.
func (d *DB) mayBeDirty(lower []byte, ns int) bool {
	if !d.cache.hasDirty() || !d.cache.maySpan(d.cache.sum(lower[:ns])) {
		return false
	}
	if u := segmentLen(lower[ns:]); u > 0 {
		return d.cache.maySpan(d.cache.sum(lower[:ns+u]))
	}
	return true
}

// segmentEnd returns the length of a DB key's [key group][state] part and
// its first segment (the record key, in the handles' layout), 0 when the
// key has no whole segment or is no longer than it (the key itself is
// then in the key filter).
func segmentEnd(key []byte) int {
	if len(key) < 2 {
		return 0
	}
	l, w := binary.Uvarint(key[2:])
	if w <= 0 || uint64(len(key)-2-w) < l {
		return 0
	}
	ns := 2 + w + int(l)
	u := segmentLen(key[ns:])
	if u == 0 || ns+u == len(key) {
		return 0
	}
	return ns + u
}

// noSegment reports whether the key filter says no key starting with
// lower (a [key group][state][prefix] bound whose [key group][state] part
// is ns bytes long) was ever written: lower starts with a whole segment
// the filter has not seen.
func (d *DB) noSegment(lower []byte, ns int) bool {
	u := segmentLen(lower[ns:])
	return u > 0 && !d.filter.mayContain(d.cache.sum(lower[:ns+u]))
}

// segmentLen returns the length of b's first length-prefixed segment
// (uvarint n, then n bytes), 0 when b does not start with a whole one.
func segmentLen(b []byte) int {
	n, w := binary.Uvarint(b)
	if w <= 0 || uint64(len(b)-w) < n {
		return 0
	}
	return w + int(n)
}

// getIterOptions: Pebble skips the bloom filters of the last level unless
// asked, because they are large; but that level holds most keys, and
// without its filter every read of an absent key (a dedupe's every new key)
// reads and searches a data block there. A 50M-key dedupe spent a fifth of
// its time doing that.
var getIterOptions = pebble.IterOptions{UseL6Filters: true}

// lookup reads key from Pebble.
func (d *DB) lookup(key []byte) (val []byte, ok bool, err error) {
	if d.getIter == nil {
		if d.getIter, err = d.db.NewIter(&getIterOptions); err != nil {
			return nil, false, err
		}
	}
	it := d.getIter
	if !it.SeekPrefixGE(key) || !bytes.Equal(it.Key(), key) {
		return nil, false, it.Error()
	}
	v, err := it.ValueAndErr()
	return v, err == nil, err
}

// batchOps is how many writes a batch collects: one commit instead of
// batchOps, which is most of what a write costs.
const batchOps = 1024

// commitBatch commits the writes collected so far.
func (d *DB) commitBatch() error {
	if d.batched == 0 {
		return nil
	}
	err := d.batch.Commit(pebble.NoSync)
	d.batch.Reset()
	d.batched = 0
	d.changed()
	if err != nil {
		// What the batch held is lost: the cache must not claim it.
		d.cache.clear()
		return fmt.Errorf("pebblestate: write to %s: %w", d.dir, err)
	}
	return nil
}

// batchWrite adds a write to the batch (set, or delete when del).
func (d *DB) batchWrite(key, value []byte, del bool) error {
	if d.readOnly {
		return errors.New("the DB is open read-only")
	}
	if d.batch == nil {
		d.batch = d.db.NewBatch()
	}
	var err error
	if del {
		err = d.batch.Delete(key, nil)
	} else {
		err = d.batch.Set(key, value, nil)
	}
	if err != nil {
		return err
	}
	d.batched++
	d.written++
	if d.batched >= batchOps {
		return d.commitBatch()
	}
	return nil
}

// Open opens the DB in dir, creating it if it does not exist. dbs is how
// many DBs of this pool are expected to be open at once: their memtables
// share a quarter of the budget (each memtable at least 4 MiB), and the
// rest of the budget caches blocks. maxParallelism is the job's number of
// key groups (at most MaxKeyGroups).
func (p *Pool) Open(dir string, dbs, maxParallelism int) (*DB, error) {
	return p.open(dir, dbs, maxParallelism, false)
}

// OpenReadOnly opens a checkpoint directory written by DB.Checkpoint
// without changing it: reads work, writes fail. It is the source of Import
// when a job restores with another parallelism.
func (p *Pool) OpenReadOnly(dir string, maxParallelism int) (*DB, error) {
	return p.open(dir, 1, maxParallelism, true)
}

func (p *Pool) open(dir string, dbs, maxParallelism int, readOnly bool) (*DB, error) {
	if maxParallelism < 1 || maxParallelism > MaxKeyGroups {
		return nil, fmt.Errorf("pebblestate: open %s: maxParallelism %d is outside 1..%d", dir, maxParallelism, MaxKeyGroups)
	}
	how := "open"
	existed := false
	if readOnly {
		how = "open read-only"
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("pebblestate: %s %s: %w", how, dir, err)
		}
	} else if entries, err := os.ReadDir(dir); err == nil {
		existed = slices.ContainsFunc(entries, func(e os.DirEntry) bool { return strings.HasPrefix(e.Name(), "MANIFEST-") })
	}
	opts := p.options(dbs, readOnly)
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("pebblestate: %s %s: %w", how, dir, err)
	}
	if existed {
		// Pebble writes a MANIFEST of its own only at its first change to
		// the LSM. Until then a checkpoint copies the MANIFEST it found cut
		// to the length written since the open, zero bytes, and does not
		// open: a DB restored from a checkpoint and checkpointed with no
		// writes in between would hit that. A flush, even of an empty
		// memtable, writes a new MANIFEST.
		if err := db.Flush(); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("pebblestate: %s %s: flush: %w", how, dir, err)
		}
	}
	cacheSize := p.readCacheSize(dbs, readOnly)
	filterSize := cacheSize / filterShare
	cacheSize -= filterSize
	d := &DB{db: db, opts: opts, dir: dir, maxPar: maxParallelism, readOnly: readOnly, cache: newReadCache(cacheSize)}
	switch {
	case readOnly:
	case !existed:
		// An empty DB: every key it will hold goes through write or
		// Import, which add it to the filter.
		d.filter = newKeyFilter(filterSize)
	default:
		// The keys restored are added by a scan of the DB as it is
		// now (filter.go).
		it, err := db.NewIter(nil)
		if err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("pebblestate: %s %s: %w", how, dir, err)
		}
		d.filter = startScan(filterSize, it, d.cache.sum)
	}
	d.cache.beforeShrink = d.flushDirty
	return d, nil
}

// Dir returns the directory of the DB.
func (d *DB) Dir() string { return d.dir }

// appendPrefix appends the part of a key shared by every key of state in
// key group kg: [kg][uvarint len(state)][state].
func appendPrefix(dst []byte, kg int, st string) []byte {
	dst = append(dst, byte(kg>>8), byte(kg))
	dst = binary.AppendUvarint(dst, uint64(len(st)))
	return append(dst, st...)
}

// groupStart returns the first key of key group kg (kg may be maxPar: the
// end of the last group).
func groupStart(kg int) []byte { return []byte{byte(kg >> 8), byte(kg)} }

// keyEnd is above every key: key groups are below MaxKeyGroups, so the
// first byte of a key is below 0x80.
var keyEnd = []byte{0xff, 0xff}

// successor turns prefix into the smallest key above every key starting
// with it, in place. Every prefix here starts with a key group, whose first
// byte is below 0xff, so there always is one.
func successor(prefix []byte) []byte {
	for i := len(prefix) - 1; i >= 0; i-- {
		if prefix[i] != 0xff {
			prefix[i]++
			return prefix[:i+1]
		}
	}
	panic("pebblestate: no successor of an all-0xff key")
}

func (d *DB) checkGroup(op string, kg int, st string) error {
	if kg < 0 || kg >= d.maxPar {
		return fmt.Errorf("pebblestate: %s state %q in %s: key group %d is outside 0..%d", op, st, d.dir, kg, d.maxPar-1)
	}
	return nil
}

func (d *DB) failed(op string, kg int, st string, err error) error {
	return fmt.Errorf("pebblestate: %s state %q key group %d in %s: %w", op, st, kg, d.dir, err)
}

// Get implements state.Backend. The value is valid until the next call.
func (d *DB) Get(kg int, st string, key []byte) ([]byte, bool, error) {
	if err := d.checkGroup("get", kg, st); err != nil {
		return nil, false, err
	}
	d.key = append(appendPrefix(d.key[:0], kg, st), key...)
	sum := d.cache.sum(d.key)
	if !d.filter.mayContain(sum) {
		return nil, false, nil
	}
	if v, absent, ok := d.cache.getTag(d.key, tagOf(sum)); ok {
		if absent {
			return nil, false, nil
		}
		d.val = append(d.val[:0], v...) // a copy: a later Put must not change it
		return d.val, true, nil
	}
	v, ok, err := d.lookup(d.key)
	if err != nil {
		d.changed() // a fresh iterator next time
		return nil, false, d.failed("get", kg, st, err)
	}
	if !ok {
		if err := d.cache.setTag(d.key, nil, true, tagOf(sum)); err != nil {
			return nil, false, err
		}
		return nil, false, nil
	}
	d.val = append(d.val[:0], v...)
	if err := d.cache.setTag(d.key, d.val, false, tagOf(sum)); err != nil {
		return nil, false, err
	}
	return d.val, true, nil
}

// Put implements state.Backend. Pebble copies key and value into its
// memtable.
func (d *DB) Put(kg int, st string, key, value []byte) error {
	return d.write("put", kg, st, key, value, false)
}

// Delete implements state.Backend.
func (d *DB) Delete(kg int, st string, key []byte) error {
	return d.write("delete", kg, st, key, nil, true)
}

// write sets key to value, or deletes it when del: in the cache, which
// writes it to Pebble later (cache.go), or, when the cache cannot hold
// it, in Pebble at once.
func (d *DB) write(op string, kg int, st string, key, value []byte, del bool) error {
	if err := d.checkGroup(op, kg, st); err != nil {
		return err
	}
	if d.readOnly {
		return d.failed(op, kg, st, errors.New("the DB is open read-only"))
	}
	d.key = appendPrefix(d.key[:0], kg, st)
	ns := len(d.key)
	d.key = append(d.key, key...)
	sum := d.cache.sum(d.key)
	// A key the filter has never seen, while it has been complete since
	// the DB was empty, was never written nor read from Pebble, so the
	// cache does not hold it: no need to look, and a delete of it needs
	// no entry (the filter answers for it).
	unseen := d.filter.sinceEmpty && !d.filter.mayContain(sum)
	if unseen && del {
		return nil
	}
	if !del {
		// Before the write: the filter may hold keys the DB does
		// not, never the other way round.
		d.filter.add(sum)
		if n := segmentEnd(d.key); n > 0 {
			d.filter.addOnce(d.cache.sum(d.key[:n]))
		}
	}
	d.dirty = true
	// A failure here is a failed write of the dirty entries, already
	// wrapped.
	cached, err := d.cache.write(d.key, value, del, !unseen, tagOf(sum))
	if err != nil {
		return err
	}
	if cached {
		// After the write: making room for it may have written the
		// dirty entries, and emptied the span filter.
		d.markDirty(kg, st, ns, sum)
		return nil
	}
	if err := d.batchWrite(d.key, value, del); err != nil {
		return d.failed(op, kg, st, err)
	}
	return d.commitBatch()
}

// pointDeleteMax is the most keys DeletePrefix deletes one by one; above
// it, one range deletion removes them.
//
// Pebble keeps the range deletions of a memtable fragmented for reads and
// fragments all of them again at the first read after each new one, so a
// range deletion per cleared key (a Map or List cleared at every record)
// makes reads quadratic in the memtable's deletions (BenchmarkMapClear:
// 0.8 ms a record on average over 200k records, 4 µs without). Few keys are cheaper to delete one by
// one, and large prefixes, whose range deletions are rare, still take one.
const pointDeleteMax = 64

// DeletePrefix implements state.Backend: it deletes the keys it finds one
// by one when they are few (pointDeleteMax), or with one range deletion.
func (d *DB) DeletePrefix(kg int, st string, prefix []byte) error {
	if err := d.checkGroup("delete prefix", kg, st); err != nil {
		return err
	}
	opts, ns := d.bounds(kg, st, prefix)
	if d.noSegment(opts.LowerBound, ns) {
		return nil
	}
	if d.mayBeDirty(opts.LowerBound, ns) {
		if err := d.flushDirty(); err != nil {
			return err
		}
	}
	it, err := d.db.NewIter(opts)
	if err != nil {
		return d.failed("delete prefix", kg, st, err)
	}
	// The iterator reads the DB as it was when it was made, so the batch
	// can collect the deletions while it moves.
	var b *pebble.Batch
	n := 0
	// A key of the range in the cache is in Pebble or cached as absent,
	// never dirty (mayBeDirty), so forgetting it loses nothing.
	for ok := it.First(); ok && n <= pointDeleteMax; ok = it.Next() {
		if b == nil {
			b = d.db.NewBatch()
		}
		d.cache.drop(it.Key())
		if err := b.Delete(it.Key(), nil); err != nil {
			_ = b.Close()
			_ = it.Close()
			return d.failed("delete prefix", kg, st, err)
		}
		n++
	}
	err = it.Close()
	switch {
	case err != nil:
	case n > pointDeleteMax:
		// Which cached keys lie in the range is not known: forget them
		// all, after writing the dirty ones.
		if err = d.flushDirty(); err != nil {
			break
		}
		d.cache.clear()
		err = d.db.DeleteRange(opts.LowerBound, opts.UpperBound, pebble.NoSync)
	case n > 0:
		err = b.Commit(pebble.NoSync)
	}
	if b != nil {
		_ = b.Close()
	}
	if err != nil {
		return d.failed("delete prefix", kg, st, err)
	}
	if n > 0 {
		d.dirty = true
		d.changed()
	}
	return nil
}

// bounds returns iterator options bounded to the keys of state in key group
// kg that start with prefix, and the length of their [kg][state] part. They
// use the DB's buffers unless a Range is in progress, whose iterator still
// reads them.
func (d *DB) bounds(kg int, st string, prefix []byte) (opts *pebble.IterOptions, strip int) {
	var lower, upper []byte
	if d.ranging == 0 {
		opts, lower, upper = &d.iterOpts, d.lower[:0], d.upper[:0]
	} else {
		opts = &pebble.IterOptions{}
	}
	lower = appendPrefix(lower, kg, st)
	strip = len(lower)
	lower = append(lower, prefix...)
	upper = successor(append(upper, lower...))
	if d.ranging == 0 {
		d.lower, d.upper = lower, upper
	}
	opts.LowerBound, opts.UpperBound = lower, upper
	return opts, strip
}

// Range implements state.Backend: fn gets the keys of state in key group kg
// that start with prefix, without the key group and state name, in bytewise
// order. Its slices are valid during the call only.
func (d *DB) Range(kg int, st string, prefix []byte, fn func(key, value []byte) bool) (err error) {
	if err := d.checkGroup("range", kg, st); err != nil {
		return err
	}
	opts, strip := d.bounds(kg, st, prefix)
	if d.noSegment(opts.LowerBound, strip) {
		return nil
	}
	if d.mayBeDirty(opts.LowerBound, strip) {
		if err := d.flushDirty(); err != nil {
			return err
		}
	}
	var it *pebble.Iterator
	if d.ranging == 0 {
		// The DB's own iterator, reused until the DB changes (its level
		// iterators are reused too): bounds are cheaper than a new one.
		if d.rangeIter == nil {
			if d.rangeIter, err = d.db.NewIter(nil); err != nil {
				return d.failed("range", kg, st, err)
			}
		}
		it = d.rangeIter
		it.SetBounds(opts.LowerBound, opts.UpperBound)
	} else if it, err = d.db.NewIter(opts); err != nil {
		return d.failed("range", kg, st, err)
	}
	d.ranging++
	defer func() {
		d.ranging--
		if it == d.rangeIter {
			ierr := it.Error()
			if ierr != nil && err == nil {
				err = d.failed("range", kg, st, ierr)
			}
			if (ierr != nil || d.rangeStale) && d.ranging == 0 {
				// A fresh iterator next time.
				d.rangeStale = false
				_ = it.Close()
				d.rangeIter = nil
			}
			return
		}
		if cerr := it.Close(); cerr != nil && err == nil {
			err = d.failed("range", kg, st, cerr)
		}
	}()
	for ok := it.First(); ok; ok = it.Next() {
		v, verr := it.ValueAndErr()
		if verr != nil {
			return d.failed("range", kg, st, verr)
		}
		if !fn(it.Key()[strip:], v) {
			return nil
		}
	}
	if ierr := it.Error(); ierr != nil {
		return d.failed("range", kg, st, ierr)
	}
	return nil
}

// DiskUsage returns the bytes of the DB's live sstables and blob files.
// Unlike the other methods it may be called from any goroutine.
func (d *DB) DiskUsage() int64 {
	m := d.db.Metrics()
	return int64(m.Table.Local.LiveSize + m.BlobFiles.Local.LiveSize)
}

// Close closes the DB. Writes since the last checkpoint are not kept: the
// next open of the directory may or may not see them, so a DB is restored
// from a checkpoint, not reopened in place after a failure.
func (d *DB) Close() error {
	d.filter.stopScan()
	d.changed()
	if d.batch != nil {
		_ = d.batch.Close() // uncommitted writes are lost with the DB: the checkpoint is the durability
	}
	if err := d.db.Close(); err != nil {
		return fmt.Errorf("pebblestate: close %s: %w", d.dir, err)
	}
	return nil
}
