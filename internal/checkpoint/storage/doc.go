// Package storage keeps checkpoints and savepoints on a local filesystem,
// and holds what every other place for checkpoints shares with it (the
// Storage interface; internal/checkpoint/s3store keeps them in object
// storage): the manifest codec, the keyed state file format, damage
// reports and the rules of Latest, GC and Confirm.
//
// A job's checkpoints live under one root directory R:
//
//	R/checkpoints/chk-00000000000000000042/
//	    <state files>    one per operator subtask (or part of its key-group range)
//	    _manifest        written last; its presence is what makes checkpoint 42 committed
//
// The manifest is the commit point when Kafka is not involved
// (docs/design.md, invariant 3): it is written to _manifest.tmp, fsynced, renamed to _manifest and
// the directory is fsynced, so after a crash a checkpoint directory either
// has a complete, checksummed manifest or it was never committed. Directories
// without a manifest are garbage that GC removes; they are never restored.
//
// A manifest that exists but is damaged, or that references damaged state
// files, is a different matter: the checkpoint was committed, so silently
// restoring an older one would replay records whose effects may already be
// visible in sinks. Such damage surfaces as *CorruptError, and falling back
// to an older checkpoint needs the caller's explicit consent
// (LatestOptions.AllowFallback).
//
// Keyed state is stored per key group so that a job can restore with a
// different parallelism: a restoring subtask reads, from every file whose
// range overlaps the key groups it now owns, only the groups inside its range
// (ReadKeyedFile's lo..hi).
//
// Savepoints are self-contained copies of a checkpoint in a directory the
// user chooses (CopyTo); they share the manifest format and are read with
// LoadManifest and ReadKeyedFile.
package storage
