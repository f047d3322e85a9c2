package storage

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

var (
	// ErrNoManifest means a directory holds no committed manifest: it is not
	// a checkpoint or savepoint, or it was never committed.
	ErrNoManifest = errors.New("no committed manifest")

	// ErrUnsupportedVersion means a manifest is intact but was written in a
	// format this build does not understand (a newer onceflow wrote it).
	ErrUnsupportedVersion = errors.New("unsupported manifest version")

	// ErrAllCheckpointsCorrupt is returned by Store.Latest when fallback was
	// allowed but every committed checkpoint is damaged. It is not a
	// *CorruptError on purpose: the advice in CorruptError (use the fallback)
	// has already been followed.
	ErrAllCheckpointsCorrupt = errors.New("every committed checkpoint is damaged")
)

// CorruptError reports a committed checkpoint or savepoint whose manifest or
// state files are damaged: unreadable, a checksum or size that does not match,
// or a state file that is missing. A directory that was simply never
// committed (no _manifest) is not corrupt and never yields this error.
type CorruptError struct {
	// Path is the damaged file (the _manifest or a state file).
	Path string
	// Reason says how the file is damaged, in words a user understands.
	Reason string
	// CheckpointID is the checkpoint the file belongs to, or -1 when it is
	// not known (a manifest too damaged to read, outside a chk-<id> directory).
	CheckpointID int64
	// Savepoint is true when the file belongs to a savepoint rather than a
	// retained checkpoint; the remedies differ.
	Savepoint bool
	// Err is the underlying cause, if any (for example a JSON syntax error).
	Err error
}

// Error names the file, the damage and what the user can do about it.
func (e *CorruptError) Error() string {
	var b strings.Builder
	switch {
	case e.Savepoint:
		fmt.Fprintf(&b, "savepoint %s is damaged", filepath.Dir(e.Path))
	case e.CheckpointID >= 0:
		fmt.Fprintf(&b, "checkpoint %d is damaged", e.CheckpointID)
	default:
		b.WriteString("checkpoint is damaged")
	}
	fmt.Fprintf(&b, ": %s: %s", e.Path, e.Reason)
	if e.Err != nil {
		fmt.Fprintf(&b, " (%v)", e.Err)
	}
	if e.Savepoint {
		b.WriteString("; restore from another savepoint, or start without --from-savepoint to use the job's latest checkpoint")
	} else {
		b.WriteString("; restore from a savepoint (--from-savepoint DIR), or restart with --allow-checkpoint-fallback to use the previous checkpoint;" +
			" the fallback replays records whose output sinks may already have committed, so non-idempotent sinks may see duplicates")
	}
	return b.String()
}

// Unwrap returns the underlying cause, if any.
func (e *CorruptError) Unwrap() error { return e.Err }

// Owner says which checkpoint or savepoint a file belongs to, so that a
// CorruptError found deep inside a read can tell the user what to do.
// Every implementation of Storage reports damage through it.
type Owner struct {
	// CheckpointID is the checkpoint's id, -1 when it is not known.
	CheckpointID int64
	// Savepoint is true for a file of a savepoint.
	Savepoint bool
}

// originOfDir guesses the owner from a directory name when no manifest
// says better: checkpoints always live in chk-<id> directories; anything
// else was chosen by a user and is a savepoint.
func originOfDir(dir string) Owner {
	if id, ok := ParseDirName(filepath.Base(dir)); ok {
		return Owner{CheckpointID: id}
	}
	return Owner{CheckpointID: -1, Savepoint: true}
}

// OwnerOf returns the owner of the files of m.
func OwnerOf(m *Manifest) Owner {
	return Owner{CheckpointID: m.CheckpointID, Savepoint: m.Savepoint}
}

// Corrupt reports the file or object at path, which o owns, as damaged.
func (o Owner) Corrupt(path, reason string, cause error) *CorruptError {
	return &CorruptError{Path: path, Reason: reason, CheckpointID: o.CheckpointID, Savepoint: o.Savepoint, Err: cause}
}

// MissingStateFile reports the state file at path as missing.
func (o Owner) MissingStateFile(path string) *CorruptError {
	return o.Corrupt(path, "the state file is missing", nil)
}

// MissingDBFile reports database file f, expected at path, as missing.
func (o Owner) MissingDBFile(path string, f DBFile) *CorruptError {
	return o.Corrupt(path, "the database file "+f.Name+" is missing", nil)
}
