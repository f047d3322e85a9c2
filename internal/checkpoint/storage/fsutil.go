package storage

import (
	"github.com/onceflow/onceflow/internal/failpoint"

	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

const (
	dirPerm  = 0o755
	filePerm = 0o644
	tmpExt   = ".tmp"
)

// writeAtomic writes dir/name through dir/name.tmp: write, fsync, rename. A
// crash leaves either the old state or the complete new file, plus possibly a
// stray .tmp that nothing ever reads. It does not fsync dir: callers make the
// new name durable with syncDir once per batch (the manifest write does it
// for all state files of a checkpoint, which is enough because an
// uncommitted checkpoint is never restored).
//
// If write fails, the temp file is removed and write's error is returned
// unchanged, so that it can carry a *CorruptError.
func writeAtomic(dir, name string, write func(io.Writer) error) (err error) {
	final := filepath.Join(dir, name)
	tmp := final + tmpExt
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, filePerm)
	if err != nil {
		return fmt.Errorf("storage: create %s: %w", tmp, err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(f, 256<<10)
	if err := write(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("storage: write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("storage: fsync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("storage: close %s: %w", tmp, err)
	}
	if name == ManifestName || name == PendingName {
		if err := failpoint.Inject(failpoint.MidManifestWrite); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("storage: rename %s to %s: %w", tmp, final, err)
	}
	return nil
}

// dirSynced, set by tests, is told each directory syncDir syncs.
var dirSynced func(dir string)

// syncDir makes the directory entries of dir (creations, renames, removals)
// durable.
func syncDir(dir string) error {
	if dirSynced != nil {
		dirSynced(dir)
	}
	if runtime.GOOS == "windows" {
		// Directories cannot be opened for fsync there; NTFS journals
		// metadata itself.
		return nil
	}
	return fsyncPath(dir, "fsync directory")
}

// fsyncPath opens path (a file or a directory), fsyncs and closes it; what
// names the step in the error.
func fsyncPath(path, what string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("storage: %s %s: %w", what, path, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("storage: %s %s: %w", what, path, err)
	}
	return nil
}

// CheckFileName enforces that state files are plain names inside their
// checkpoint directory: no subdirectories (so copies and GC stay simple), no
// escaping the directory, and nothing that collides with _manifest or with
// the .tmp files of atomic writes.
func CheckFileName(name string) error {
	switch {
	case name == "":
		return errors.New("the state file name is empty")
	case name == "." || name == ".." || strings.ContainsAny(name, `/\`) || !filepath.IsLocal(name):
		return fmt.Errorf("state file name %q must be a plain file name without directories", name)
	case strings.HasPrefix(name, "_"):
		return fmt.Errorf("state file name %q starts with '_', which is reserved for the manifest", name)
	case strings.HasSuffix(name, tmpExt):
		return fmt.Errorf("state file name %q ends in %s, which is reserved for files being written", name, tmpExt)
	}
	return nil
}
