package pebblestate

import (
	"fmt"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// syncCountingFS counts the fsyncs that reach the file system.
type syncCountingFS struct {
	vfs.FS
	syncs *atomic.Int64
}

func (fs syncCountingFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return syncCountingFile{f, fs.syncs}, nil
}

func (fs syncCountingFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return fs.wrap(fs.FS.Create(name, c))
}

func (fs syncCountingFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	return fs.wrap(fs.FS.Open(name, opts...))
}

func (fs syncCountingFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return fs.wrap(fs.FS.OpenReadWrite(name, c, opts...))
}

func (fs syncCountingFS) OpenDir(name string) (vfs.File, error) {
	return fs.wrap(fs.FS.OpenDir(name))
}

func (fs syncCountingFS) ReuseForWrite(o, n string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return fs.wrap(fs.FS.ReuseForWrite(o, n, c))
}

type syncCountingFile struct {
	vfs.File
	syncs *atomic.Int64
}

func (f syncCountingFile) Sync() error     { f.syncs.Add(1); return f.File.Sync() }
func (f syncCountingFile) SyncData() error { f.syncs.Add(1); return f.File.SyncData() }
func (f syncCountingFile) SyncTo(n int64) (bool, error) {
	f.syncs.Add(1)
	return f.File.SyncTo(n)
}

// TestWritableDBNeverSyncs: a DB's writes, memtable flushes and
// checkpoints reach the disk without a single fsync (noSyncFS; the
// checkpoint store makes what it keeps durable), and the checkpoints
// still read back everything. Pebble alone syncs its sstables, MANIFEST,
// OPTIONS, markers and directories.
func TestWritableDBNeverSyncs(t *testing.T) {
	var syncs atomic.Int64
	p := newPool(t)
	p.fs = syncCountingFS{vfs.Default, &syncs}
	d := openDB(t, p, t.TempDir(), 16)
	root := t.TempDir()
	for round := range 3 {
		for i := range 2000 {
			put(t, d, i%16, "s", fmt.Sprintf("key-%d-%04d", round, i), fmt.Sprintf("value-%d", i))
		}
		want := dump(t, d, "s")
		chk := filepath.Join(root, fmt.Sprintf("chk-%d", round))
		if _, err := d.Checkpoint(chk); err != nil {
			t.Fatal(err)
		}
		if n := syncs.Load(); n != 0 {
			t.Fatalf("round %d: %d fsyncs reached the disk, want none", round, n)
		}
		r := openReadOnly(t, p, chk, 16)
		if got := dump(t, r, "s"); !slices.Equal(got, want) {
			t.Fatalf("round %d: the checkpoint reads %d entries, want %d", round, len(got), len(want))
		}
	}
}
