package pebblestate

import "github.com/cockroachdb/pebble/v2/vfs"

// noSyncFS is the file system of a writable DB: every file and directory
// it opens ignores Sync, SyncData and SyncTo. Nothing reads a DB's
// directory after a crash (a subtask restarts from a committed checkpoint,
// see the package doc), so its fsyncs bought nothing but time: a memtable
// flush synced its sstable and the MANIFEST, and Checkpoint synced the
// staging directory it writes (OPTIONS, marker, MANIFEST, the directory)
// although the checkpoint store copies or links those files and fsyncs
// what it keeps (docs/design.md, "Checkpoints under backpressure"). Under
// a backlog those fsyncs waited behind the writeback of the job's own
// flushes and compactions, in the part of a checkpoint that stops the
// subtask.
type noSyncFS struct{ vfs.FS }

func (fs noSyncFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	return noSync(fs.FS.Create(name, category))
}

func (fs noSyncFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	return noSync(fs.FS.Open(name, opts...))
}

func (fs noSyncFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return noSync(fs.FS.OpenReadWrite(name, category, opts...))
}

func (fs noSyncFS) OpenDir(name string) (vfs.File, error) {
	return noSync(fs.FS.OpenDir(name))
}

func (fs noSyncFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	return noSync(fs.FS.ReuseForWrite(oldname, newname, category))
}

// Unwrap returns the file system that syncs.
func (fs noSyncFS) Unwrap() vfs.FS { return fs.FS }

func noSync(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

// noSyncFile is a file of noSyncFS.
type noSyncFile struct{ vfs.File }

func (noSyncFile) Sync() error                             { return nil }
func (noSyncFile) SyncData() error                         { return nil }
func (noSyncFile) SyncTo(int64) (fullSync bool, err error) { return true, nil }
