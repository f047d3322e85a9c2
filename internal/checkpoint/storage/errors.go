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

// origin says which checkpoint or savepoint a file belongs to, so that a
// CorruptError found deep inside a read can tell the user what to do.
type origin struct {
	id        int64
	savepoint bool
}

// originOfDir guesses the origin from a directory name when no manifest says
// better: checkpoints always live in chk-<id> directories; anything else was
// chosen by a user and is a savepoint.
func originOfDir(dir string) origin {
	if id, ok := parseDirName(filepath.Base(dir)); ok {
		return origin{id: id}
	}
	return origin{id: -1, savepoint: true}
}

func originOf(m *Manifest) origin {
	return origin{id: m.CheckpointID, savepoint: m.Savepoint}
}

func (o origin) corrupt(path, reason string, cause error) *CorruptError {
	return &CorruptError{Path: path, Reason: reason, CheckpointID: o.id, Savepoint: o.savepoint, Err: cause}
}
