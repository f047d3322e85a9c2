package pebblestate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/onceflow/onceflow/state"
)

// Checkpoint writes the DB's state as files in dir, which must not
// exist: it writes the read cache's dirty entries to Pebble, flushes the
// memtable (when anything was written since the last checkpoint), then
// writes a Pebble checkpoint: the sstables hard-linked, the MANIFEST,
// OPTIONS and marker files copied, no WAL. Nothing is fsynced (see the
// package doc): the caller makes the files durable where it keeps them,
// as the checkpoint store does. It returns the names of the files in dir
// (dir has no subdirectories), sorted.
//
// This is the synchronous part of an incremental checkpoint
// (docs/design.md, "The checkpoint protocol", step 3): sstables never
// change, so one already stored by an earlier checkpoint need not be stored
// again, and a checkpoint with no writes since the last one lists the same
// sstables (unless a compaction rewrote them in between). Opening dir with
// OpenReadOnly, or a copy of it with Open, reads the state at the call.
func (d *DB) Checkpoint(dir string) ([]string, error) {
	if d.readOnly {
		return nil, fmt.Errorf("pebblestate: checkpoint of %s into %s: the DB is open read-only", d.dir, dir)
	}
	if _, err := os.Lstat(dir); err == nil {
		return nil, fmt.Errorf("pebblestate: checkpoint of %s into %s: %w", d.dir, dir, fs.ErrExist)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("pebblestate: checkpoint of %s into %s: %w", d.dir, dir, err)
	}
	// The cache's dirty entries first: the checkpoint holds every write.
	if err := d.flushDirty(); err != nil {
		return nil, err
	}
	// Get's iterator pins the files it reads: release them at least once
	// a checkpoint, so that files compacted away leave the disk even when
	// no write renews it.
	d.changed()
	if d.dirty {
		// Without a WAL, a checkpoint holds only what is in sstables.
		if err := d.db.Flush(); err != nil {
			return nil, fmt.Errorf("pebblestate: checkpoint of %s: flush: %w", d.dir, err)
		}
		d.dirty = false
	}
	if err := d.db.Checkpoint(dir); err != nil {
		return nil, fmt.Errorf("pebblestate: checkpoint of %s into %s: %w", d.dir, dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("pebblestate: checkpoint of %s into %s: %w", d.dir, dir, err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, ".log") {
			// Pebble copies the WAL files it knows of; with the WAL off
			// they hold no writes, and every write is in the sstables.
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return nil, fmt.Errorf("pebblestate: checkpoint of %s into %s: %w", d.dir, dir, err)
			}
			continue
		}
		if e.IsDir() {
			return nil, fmt.Errorf("pebblestate: checkpoint of %s into %s: unexpected directory %s", d.dir, dir, name)
		}
		names = append(names, name)
	}
	return names, nil
}

func (d *DB) checkRange(op string, first, last int) error {
	if first < 0 || last < first || last >= d.maxPar {
		return fmt.Errorf("pebblestate: %s %s: key groups %d..%d are not a range within 0..%d", op, d.dir, first, last, d.maxPar-1)
	}
	return nil
}

// Clip deletes every key outside key groups first..last, with at most two
// range deletions: compactions remove the data later. The runtime clips a
// DB restored from a checkpoint that covered more key groups than the
// subtask now owns (a rescale, docs/design.md, "State and checkpoints").
func (d *DB) Clip(first, last int) error {
	if err := d.checkRange("clip", first, last); err != nil {
		return err
	}
	if err := d.flushDirty(); err != nil {
		return err
	}
	d.cache.clear()
	d.changed()
	if first > 0 {
		if err := d.db.DeleteRange(groupStart(0), groupStart(first), pebble.NoSync); err != nil {
			return fmt.Errorf("pebblestate: clip %s to key groups %d..%d: %w", d.dir, first, last, err)
		}
		d.dirty = true
	}
	if err := d.db.DeleteRange(groupStart(last+1), keyEnd, pebble.NoSync); err != nil {
		return fmt.Errorf("pebblestate: clip %s to key groups %d..%d: %w", d.dir, first, last, err)
	}
	d.dirty = true
	return nil
}

// importFileBytes is the size (keys and values) at which Import starts a new
// sstable.
const importFileBytes = 64 << 20

// Import copies every key of key groups lo..hi from src into d and returns
// how many it copied. src is typically a checkpoint opened with
// OpenReadOnly, d a DB of a subtask that gained those key groups in a
// rescale. The keys are written into sorted sstables next to d's files and
// ingested: no memtable, no compaction of the copied data on the way in.
// Keys d already has in lo..hi are shadowed by src's; keys of other key
// groups are untouched.
func (d *DB) Import(from state.IncrementalDB, lo, hi int) (keys int64, err error) {
	src, ok := from.(*DB)
	if !ok {
		return 0, fmt.Errorf("pebblestate: import into %s from a %T: only a pebblestate DB can be imported", d.dir, from)
	}
	if d.readOnly {
		return 0, fmt.Errorf("pebblestate: import into %s: the DB is open read-only", d.dir)
	}
	if src.maxPar != d.maxPar {
		return 0, fmt.Errorf("pebblestate: import from %s into %s: maxParallelism %d differs from %d", src.dir, d.dir, src.maxPar, d.maxPar)
	}
	if err := errors.Join(d.flushDirty(), src.flushDirty()); err != nil {
		return 0, err
	}
	d.cache.clear()
	d.changed()
	if err := d.checkRange("import into", lo, hi); err != nil {
		return 0, err
	}
	fail := func(err error) error {
		return fmt.Errorf("pebblestate: import key groups %d..%d from %s into %s: %w", lo, hi, src.dir, d.dir, err)
	}
	it, err := src.db.NewIter(&pebble.IterOptions{LowerBound: groupStart(lo), UpperBound: groupStart(hi + 1)})
	if err != nil {
		return 0, fail(err)
	}
	defer func() {
		if cerr := it.Close(); cerr != nil && err == nil {
			err = fail(cerr)
		}
	}()
	tmp, err := os.MkdirTemp(d.dir, "import-")
	if err != nil {
		return 0, fail(err)
	}
	defer func() {
		if rerr := os.RemoveAll(tmp); rerr != nil && err == nil {
			err = fail(rerr)
		}
	}()

	var (
		paths []string
		w     *sstable.Writer
		size  int
	)
	// The tables may land in any level (the lowest one they do not overlap).
	wopts := d.opts.MakeWriterOptions(0, d.db.TableFormat())
	finish := func() error {
		if w == nil {
			return nil
		}
		err := w.Close() // syncs the file
		w = nil
		return err
	}
	defer func() {
		if w != nil {
			_ = w.Close()
		}
	}()
	for ok := it.First(); ok; ok = it.Next() {
		if w == nil {
			path := filepath.Join(tmp, fmt.Sprintf("%06d.sst", len(paths)))
			f, err := vfs.Default.Create(path, vfs.WriteCategoryUnspecified)
			if err != nil {
				return 0, fail(err)
			}
			w = sstable.NewWriter(objstorageprovider.NewFileWritable(f), wopts)
			paths = append(paths, path)
			size = 0
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return 0, fail(err)
		}
		d.filter.add(d.cache.sum(it.Key()))
		if n := segmentEnd(it.Key()); n > 0 {
			d.filter.addOnce(d.cache.sum(it.Key()[:n]))
		}
		if err := w.Set(it.Key(), v); err != nil {
			return 0, fail(err)
		}
		keys++
		size += len(it.Key()) + len(v)
		if size >= importFileBytes {
			if err := finish(); err != nil {
				return 0, fail(err)
			}
		}
	}
	if err := it.Error(); err != nil {
		return 0, fail(err)
	}
	if err := finish(); err != nil {
		return 0, fail(err)
	}
	if len(paths) == 0 {
		return 0, nil
	}
	// An ingest that overlaps the memtable may wait in the memtable queue
	// as a flushable; the next checkpoint must flush it into the LSM.
	d.dirty = true
	if err := d.db.Ingest(context.Background(), paths); err != nil {
		return 0, fail(err)
	}
	return keys, nil
}
