// Package pebblestate keeps the keyed state of keyed operator subtasks in
// Pebble databases on local disk: a state.Backend for state larger than
// memory (docs/design.md, "State and checkpoints" and "Where an extension
// goes"). Each keyed subtask has its own DB; the DBs of one job share a
// Pool, which holds one block cache and so one memory budget.
//
// # Key layout
//
// Every key of a DB is
//
//	[key group: 2 bytes, big-endian][uvarint len(state name)][state name][key]
//
// The key group comes first, so one key group of a subtask is one
// contiguous span of keys, and so is the key-group range a subtask owns
// (key groups are ranges of keys, docs/design.md, "State and checkpoints").
// That is what makes a rescale cheap: Clip drops the key groups a DB no
// longer owns with two range deletions, and Import copies the spans of the
// key groups it gains as sorted sstables. The state name is
// length-prefixed, so no state's keys are a prefix of another's, and the
// keys of one state in one key group sort bytewise, as state.Backend
// requires of Range.
//
// # Durability
//
// The write-ahead log is off and no write is synced. The checkpoint is the
// durability: a keyed subtask only ever restarts from the state of a
// committed checkpoint (docs/design.md, "The exactly-once invariants" and
// "Recovery decisions"), never from what its local DB held when the process
// died, because everything written after that checkpoint belongs to an
// epoch that is replayed. A WAL would therefore only cost a write and an
// fsync per record for data nobody reads. For the same reason the DB's
// files are never fsynced either (noSyncFS). Checkpoint flushes the
// memtable and hard-links the DB's sstables into a checkpoint directory,
// unsynced: whoever keeps its files makes them durable (the checkpoint
// store fsyncs every file it stores, a hard link included, or uploads it).
// sstables are immutable, so a checkpoint with no writes since the last
// one lists the same sstables and only the new ones need to be stored
// again (an incremental checkpoint).
package pebblestate

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// DefaultBudget is the memory budget of a Pool made with a budget <= 0.
const DefaultBudget int64 = 256 << 20

// MaxKeyGroups is the largest maxParallelism a DB supports: key groups are
// stored in two bytes, and the successor of the last one must fit too.
const MaxKeyGroups = 1 << 15

const (
	// minMemTable is the smallest memtable a DB gets, however many share the
	// budget.
	minMemTable = 4 << 20
	// maxMemTable bounds the memtable of a DB (pebble needs < 4 GiB; larger
	// memtables only make flushes longer).
	maxMemTable = 256 << 20
	// memTables is how many memtables a DB may hold at once (one being
	// written, one being flushed) before writes wait for the flush.
	memTables = 2
)

// Pool shares one block cache, and so one memory budget, among the DBs of
// one job. Memtables are reserved out of the same cache, so the blocks
// cached shrink while memtables fill, and the memory of all the pool's DBs
// stays near the budget.
type Pool struct {
	budget    int64
	cache     *pebble.Cache
	fileCache *pebble.FileCache
	closeOnce sync.Once
	// fs is the file system under the DBs, vfs.Default unless a test
	// sets it.
	fs vfs.FS
}

// NewPool returns a pool with a memory budget in bytes (DefaultBudget when
// budget <= 0).
func NewPool(budget int64) *Pool {
	if budget <= 0 {
		budget = DefaultBudget
	}
	shards := 2 * runtime.GOMAXPROCS(0)
	return &Pool{
		budget:    budget,
		cache:     pebble.NewCache(budget - budget/readCacheShare),
		fileCache: pebble.NewFileCache(shards, 1000),
		fs:        vfs.Default,
	}
}

// Budget returns the pool's memory budget in bytes.
func (p *Pool) Budget() int64 { return p.budget }

// Close releases the pool's references to the shared caches. DBs still
// open hold their own and keep working until they are closed.
func (p *Pool) Close() {
	p.closeOnce.Do(func() {
		p.cache.Unref()
		p.fileCache.Unref()
	})
}

// readCacheShare: the DBs' read caches (cache.go) share 1/readCacheShare of
// the budget; Pebble's block cache, memtables included, has the rest. A
// quarter: with half, a keyed count over 1M keys ran 0.17x the Kafka
// ceiling instead of 0.12x, but a dedupe over 8M new keys (which the cache
// cannot help) held 755 MiB instead of about 430 (the Go heap's cache
// costs up to twice its live size with the collector's headroom).
const readCacheShare = 4

// filterShare: a DB that starts empty gives 1/filterShare of its read
// cache's share to its key filter (filter.go): 4 MiB per DB of the default
// budget split among four, for about 3.3M keys at 1% false positives.
const filterShare = 4

// readCacheSize returns the read cache of each of dbs DBs (none for a
// read-only DB, which is read once, by Import).
func (p *Pool) readCacheSize(dbs int, readOnly bool) int64 {
	if readOnly {
		return 0
	}
	// The cache's arena and index are allocated as they grow and hold no
	// pointers: they are all of its memory, and leave no garbage.
	return p.budget / readCacheShare / int64(max(dbs, 1))
}

// memTableSize returns the memtable size of each of dbs DBs: a quarter of
// the budget split among them, at least minMemTable. A DB holds two
// memtables' worth most of the time (Pebble keeps the last flushed one to
// reuse its memory), so each memtable is half its share.
func (p *Pool) memTableSize(dbs int) uint64 {
	if dbs < 1 {
		dbs = 1
	}
	size := p.budget / 4 / int64(dbs) / 2
	return uint64(min(max(size, minMemTable), maxMemTable))
}

// options returns the Pebble options of a DB of this pool.
func (p *Pool) options(dbs int, readOnly bool) *pebble.Options {
	upper := max(1, runtime.GOMAXPROCS(0)/2)
	o := &pebble.Options{
		Cache:     p.cache,
		FileCache: p.fileCache,
		// The checkpoint is the durability (see the package doc).
		DisableWAL: true,
		// Writes are not synced, and neither are files: the checkpoint
		// store fsyncs the files it keeps (noSyncFS).
		FS:                          noSyncFS{p.fs},
		MemTableSize:                p.memTableSize(dbs),
		MemTableStopWritesThreshold: memTables,
		// Every checkpoint flushes an L0 file, and every compaction
		// rewrites sstables the next checkpoint must store again. Pebble
		// compacts L0 once it is L0CompactionThreshold/2 sublevels deep:
		// let four accumulate (bloom filters keep point reads cheap), and
		// stall writes only far later (a stall stops the subtask; a deep
		// L0 only slows reads).
		L0CompactionThreshold:     8,
		L0CompactionFileThreshold: 200,
		L0StopWritesThreshold:     32,
		// A subtask's goroutine needs a core too: one compaction per DB,
		// more only on larger machines when compactions fall behind.
		CompactionConcurrencyRange: func() (int, int) { return 1, upper },
		// Every checkpoint copies the MANIFEST, which grows by an edit
		// per flush and compaction until Pebble rotates it to a new one
		// holding only the current files: at 4 MiB a 50M-key dedupe
		// stored about 1 MiB of it per database at every idle
		// checkpoint.
		MaxManifestFileSize: 256 << 10,
		FormatMajorVersion:  pebble.FormatNewest,
		Logger:              slogLogger{},
		ReadOnly:            readOnly,
	}
	if readOnly {
		// A read-only open must not touch the checkpoint directory, not
		// even to create its LOCK file, and must not upgrade its format.
		o.FS = noLockFS{p.fs}
		o.FormatMajorVersion = pebble.FormatDefault
	}
	// Point reads (Value.Get) go through bloom filters in every level, so
	// a key in the memtable or nowhere costs no block read per L0 file.
	for i := range o.Levels {
		o.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		o.Levels[i].FilterType = pebble.TableFilter
	}
	o.EnsureDefaults()
	return o
}

// slogLogger forwards Pebble's log lines to log/slog: information at debug
// level, errors as warnings (Pebble retries what it can; what it cannot
// comes back as an error from a call), fatal errors as errors before the
// panic.
type slogLogger struct{}

func (slogLogger) Infof(format string, args ...any) {
	if slog.Default().Enabled(context.Background(), slog.LevelDebug) {
		slog.Debug("pebble: " + fmt.Sprintf(format, args...))
	}
}

func (slogLogger) Errorf(format string, args ...any) {
	slog.Warn("pebble: " + fmt.Sprintf(format, args...))
}

func (slogLogger) Fatalf(format string, args ...any) {
	msg := "pebble: " + fmt.Sprintf(format, args...)
	slog.Error(msg)
	panic(msg)
}

// noLockFS is the default file system without directory locks: a
// checkpoint directory opened read-only stays exactly as the checkpoint
// wrote it (Pebble would create a LOCK file in it otherwise).
type noLockFS struct{ vfs.FS }

func (noLockFS) Lock(string) (io.Closer, error) { return nopCloser{}, nil }

type nopCloser struct{}

func (nopCloser) Close() error { return nil }
