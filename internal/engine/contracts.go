package engine

import (
	"context"
	"log/slog"
	"time"

	"github.com/onceflow/onceflow/internal/checkpoint"
)

// The contracts between the runtime and sources, sinks and commit points.
// They are declared once, here; flow re-exports them by alias with the
// documentation users read (flow.SourceReader, flow.SinkWriter,
// flow.CommitRecord, ...), so a user's value and flow's records pass to the
// engine unchanged, with no adapter, conversion or extra call per record.
// Only the commit point is adapted (JobCommitPoint): the engine also asks
// it for a start mark, a name and the user's value.

// SourceContext describes the source subtask being opened.
type SourceContext struct {
	Job         string
	UID         string
	Subtask     int
	Parallelism int
	// RestoredCheckpoint is the id of the checkpoint the job restores from,
	// 0 on a fresh start.
	RestoredCheckpoint int64
	// Checkpointing is the job's checkpoint configuration, defaults applied.
	Checkpointing checkpoint.Config
	Logger        *slog.Logger
}

// SourceReader reads the splits of one subtask (flow.SourceReader).
type SourceReader[T any] interface {
	// Poll hands the next records to emit and returns. It should return
	// within about 100ms when nothing is available, because barriers are
	// injected between polls. io.EOF means this subtask has no more input
	// (bounded sources); Poll is not called again.
	Poll(ctx context.Context, emit func(T)) error
	// Snapshot returns the position of every split the reader owns, such
	// that resuming from it replays nothing that was emitted before the
	// call and skips nothing after it.
	Snapshot(checkpointID int64) (map[string][]byte, error)
	// CheckpointCommitted tells the reader that the checkpoint is durable
	// (for example to commit offsets for monitoring). Failures are logged;
	// they never fail the job.
	CheckpointCommitted(ctx context.Context, checkpointID int64) error
	// Close releases the reader.
	Close() error
}

// SourceOpener opens the reader of one subtask (flow.Source.Open).
type SourceOpener[T any] func(ctx context.Context, sc SourceContext, restored map[string][]byte) (SourceReader[T], error)

// SinkContext describes the sink subtask being opened.
type SinkContext struct {
	Job         string
	UID         string
	Subtask     int
	Parallelism int
	// RestoredCheckpoint is the id of the checkpoint the job restores from,
	// 0 on a fresh start. Before Open the runtime has already committed the
	// handles that checkpoint holds; anything this sink prepared for a
	// later checkpoint never reached the commit point and must be aborted by
	// Open (for example prepared transactions with a higher id).
	RestoredCheckpoint int64
	// FirstCheckpoint is the id of the first checkpoint this run of the
	// job will take: above every id in the job's checkpoint storage and
	// commit record, so records written before the first barrier belong
	// to it. An id is not reused once anything of its checkpoint reached
	// the storage or the commit point; a checkpoint a crash cut off before
	// that (a sink had prepared it, nothing was stored) may have its id
	// taken again by the next run, so a sink aborts what it prepared above
	// RestoredCheckpoint in Open and never assumes an id is fresh. A sink that stamps records with their
	// checkpoint (epoch-fenced upserts) starts there. Ids begin again when
	// the storage is moved aside (offsets reset) or lost, so such a sink
	// also compares with the stamps its destination already holds.
	FirstCheckpoint int64
	// Checkpointing is the job's checkpoint configuration, defaults applied.
	Checkpointing checkpoint.Config
	Logger        *slog.Logger
}

// SinkWriter is one sink subtask's writer (flow.SinkWriter).
type SinkWriter[T any] interface {
	Write(ctx context.Context, rec T) error
	Prepare(ctx context.Context, checkpointID int64) (handle []byte, err error)
	Commit(ctx context.Context, checkpointID int64, handle []byte) error
	Close() error
}

// DeadLetterWriter is a sink writer that keeps rejected records itself
// (flow.DeadLetterWriter).
type DeadLetterWriter[T any] interface {
	WriteDeadLetter(ctx context.Context, rec T, cause error) error
}

// SinkOpener opens the writer of one subtask (flow.Sink.Open).
type SinkOpener[T any] func(ctx context.Context, sc SinkContext) (SinkWriter[T], error)

// SinkCommitter commits prepared handles on recovery (flow.SinkCommitter).
type SinkCommitter interface {
	Commit(ctx context.Context, checkpointID int64, handle []byte) error
	Close() error
}

// CommitterOpener returns a sink's recovery committer (flow.Sink.Committer).
type CommitterOpener func(ctx context.Context, job, uid string) (SinkCommitter, error)

// CommitRecord is what a commit point records (flow.CommitRecord).
type CommitRecord struct {
	// Job is the job's name.
	Job string
	// Checkpoint is the checkpoint's id; 0 in a zero record and in a
	// start mark.
	Checkpoint int64
	// Manifest is the hex SHA-256 of the checkpoint's manifest file, so
	// that a restore uses exactly the manifest that was committed.
	Manifest string
	// Incarnation identifies the run of the job (from one restore to the
	// next failure) that committed the checkpoint.
	Incarnation string
	// StateID identifies the state directory of the installation that
	// committed it; two installations of a job with the same name have
	// different ones.
	StateID string
	// Time is when the commit was attempted.
	Time time.Time
}

// JobCommitPoint is the job's commit point as the engine drives it: a
// flow.CommitPoint (or a sink's) through flow's adapter, which adds the
// start mark, the name and the user's value.
type JobCommitPoint interface {
	Peek(ctx context.Context) (CommitRecord, error)
	Recover(ctx context.Context) (CommitRecord, error)
	Commit(ctx context.Context, rec CommitRecord) error
	// MarkStart records a start mark (flow.StartMarker); ok is false when
	// the commit point cannot.
	MarkStart(ctx context.Context, rec CommitRecord) (ok bool, err error)
	// Name names the commit point in manifests ("kafka").
	Name() string
	// Unwrap returns what the user gave (for AbortNotifier).
	Unwrap() any
}

// FenceEpocher is a commit point whose Recover gives the job an epoch
// that grows with every incarnation fencing the one before (the Kafka
// producer's epoch); see Config.FencedCheckpointIDs.
type FenceEpocher interface {
	FenceEpoch() int64
}

// AbortNotifier is told of checkpoints aborted while the job goes on.
type AbortNotifier interface {
	CheckpointAborted(ctx context.Context, checkpointID int64)
}

// ParallelismHinter gives a source's natural parallelism.
type ParallelismHinter interface {
	ParallelismHint(ctx context.Context) (int, error)
}

// PriorProgressReporter tells of a job's earlier progress outside the state
// directory.
type PriorProgressReporter interface {
	// PriorProgress describes each piece of earlier progress of job found
	// (for example "group g has offsets committed by checkpoint 41 of job
	// j"), none when there is none.
	PriorProgress(ctx context.Context, job string) ([]string, error)
}

// PreparedResolver settles the transactions a sink left prepared, on a
// start that restores no checkpoint (flow.PreparedResolver).
type PreparedResolver interface {
	ResolvePrepared(ctx context.Context, job, uid string, committed int64, known bool) error
}

// Positioner names the record a source reader emitted last.
type Positioner interface {
	Position() string
}

// Yielder is implemented by source readers whose Poll can stop part-way
// through what it fetched (flow.Yielder): a barrier then goes in ahead
// of the records fetched but not emitted yet, instead of waiting behind
// them while the job is backpressured (docs/design.md, "Checkpoints
// under backpressure").
type Yielder interface {
	// SetYield is called once, before the first Poll, with a function
	// that reports whether a barrier (or the end of the stream) is
	// waiting. Poll calls it between records; once it returns true, Poll
	// returns without emitting more, keeps the records it has not
	// emitted for the next Poll, and Snapshot positions every split right
	// after its last record emitted. yield is cheap (one atomic load).
	SetYield(yield func() bool)
}
