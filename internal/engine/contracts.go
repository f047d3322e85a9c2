package engine

import (
	"context"
	"log/slog"
	"time"

	"github.com/onceflow/onceflow/internal/checkpoint"
)

// The engine's side of the contracts flow documents for users (flow.Source,
// flow.Sink, flow.CommitPoint, ...). Interfaces whose methods use only
// basic types, context.Context and type parameters have the same method
// sets as flow's, so a value implementing flow's interface is passed as the
// engine's without an adapter (and without an extra call per record). The
// contexts and records are structs with the same fields as flow's, so flow
// converts them with a type conversion.

// SourceContext describes the source subtask being opened.
type SourceContext struct {
	Job                string
	UID                string
	Subtask            int
	Parallelism        int
	RestoredCheckpoint int64
	Checkpointing      checkpoint.Config
	Logger             *slog.Logger
}

// SourceReader reads the splits of one subtask (flow.SourceReader).
type SourceReader[T any] interface {
	Poll(ctx context.Context, emit func(T)) error
	Snapshot(checkpointID int64) (map[string][]byte, error)
	CheckpointCommitted(ctx context.Context, checkpointID int64) error
	Close() error
}

// SourceOpener opens the reader of one subtask (flow.Source.Open).
type SourceOpener[T any] func(ctx context.Context, sc SourceContext, restored map[string][]byte) (SourceReader[T], error)

// SinkContext describes the sink subtask being opened.
type SinkContext struct {
	Job                string
	UID                string
	Subtask            int
	Parallelism        int
	RestoredCheckpoint int64
	FirstCheckpoint    int64
	Checkpointing      checkpoint.Config
	Logger             *slog.Logger
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
	Job         string
	Checkpoint  int64
	Manifest    string
	Incarnation string
	StateID     string
	Time        time.Time
}

// CommitPoint makes a checkpoint durable (flow.CommitPoint, through an
// adapter: its methods take CommitRecord).
type CommitPoint interface {
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
