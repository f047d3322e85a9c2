package flow

import (
	"context"
	"log/slog"
	"time"

	"github.com/onceflow/onceflow/internal/engine"
)

// SourceContext describes the source subtask being opened.
type SourceContext = engine.SourceContext

// Source produces the records of a stream. It is opened once per subtask
// per (re)start of the job.
type Source[T any] interface {
	// Open returns the reader for one subtask. restored holds every split
	// position of this source (by its uid) in the checkpoint being restored,
	// from all subtasks of the previous run, whatever its parallelism was:
	// the reader takes the splits it owns now. restored is nil on a fresh
	// start; the source then applies its startup mode.
	Open(ctx context.Context, sc SourceContext, restored map[string][]byte) (SourceReader[T], error)
}

// SourceReader reads the splits of one subtask. Its methods are called from
// one goroutine.
type SourceReader[T any] = engine.SourceReader[T]

// ParallelismHinter is implemented by sources whose natural parallelism is
// known before the job starts (a Kafka source: its partition count).
type ParallelismHinter = engine.ParallelismHinter

// PriorProgressReporter is implemented by sources (and sinks) that can tell,
// outside the state directory, whether the job made progress before: a
// Kafka source finds offsets the job committed to its group. When the job
// has no checkpoint to restore, the runtime asks them; any answer makes the
// start refuse unless flow.StartFresh is set (docs/design.md, "Recovery
// decisions"), so a lost state directory or a deleted commit record is
// never silently answered with a fresh start.
type PriorProgressReporter = engine.PriorProgressReporter

// PreparedResolver is implemented by sinks whose prepared transactions
// outlive the process (two-phase database sinks). On a start that
// restores no checkpoint (--start-fresh, an offsets reset, a lost state
// directory) nothing in a manifest names them, yet the job's commit point
// may have committed their checkpoint: before anything is written, the
// runtime calls ResolvePrepared for each such sink with the checkpoint the
// commit record names (committed; known is false when the commit point
// has no record of the job). The sink commits what it prepared for
// checkpoints up to committed and rolls back the rest; when known is
// false and transactions are prepared, their fate cannot be told, and it
// returns an error marked Unrecoverable that lists them with the
// statements that resolve them (docs/design.md, "Database sinks").
type PreparedResolver = engine.PreparedResolver

// Positioner is implemented by source readers that can describe the record
// last emitted (for example "orders/3@1042"), so failures name it.
type Positioner = engine.Positioner

// Yielder is implemented by source readers whose Poll can stop part-way
// through the records it fetched, keeping the rest for the next Poll, so
// a checkpoint barrier goes in ahead of them: under backpressure a
// checkpoint then waits for the records already in the job, not for a
// whole poll's worth (docs/design.md, "Checkpoints under
// backpressure"). The Kafka source implements it.
type Yielder = engine.Yielder

// SinkContext describes the sink subtask being opened.
type SinkContext = engine.SinkContext

// Sink writes the records of a stream out of the job. The two-phase-commit
// contract of a sink subtask, driven by the runtime:
//
//   - Write is called for each record of the current epoch.
//   - Prepare(n) is called when barrier n reaches the sink: everything written
//     since the previous barrier is pre-committed (durable but invisible) and
//     the returned handle names it. The handle is stored in checkpoint n.
//   - Commit(n, handle) is called after checkpoint n reached its commit point,
//     for every prepared epoch up to n in order (an epoch whose checkpoint
//     failed without failing the job is committed with the next one). After
//     a crash it is called again on recovery with the handles stored in the
//     restored checkpoint, so it must be idempotent: committing something
//     already committed is a success.
//   - If checkpoint n is aborted (timeout, decline) and the job goes on, its
//     prepared epoch stays prepared and is committed with the next
//     successful checkpoint; writers implementing AbortNotifier are told.
//   - Prepared epochs are never aborted by the runtime while it runs: one
//     may belong to a checkpoint reaching its commit point at that moment.
//     On recovery the runtime commits the handles in the restored checkpoint
//     and Open aborts everything prepared with a higher id. Close aborts
//     what is written but not prepared.
//   - A handle may be nil (an epoch with nothing to commit later); Commit
//     then gets nil.
//   - After a restore with fewer subtasks than before, epochs prepared by
//     subtasks that no longer exist must be aborted too: the convention
//     (flowtest's sinks follow it) is that subtask i of the new parallelism
//     p aborts those of every former subtask j with j % p == i.
//
// A sink that does not need transactions (at-least-once) flushes in Prepare
// and does nothing in Commit.
type Sink[T any] interface {
	Open(ctx context.Context, sc SinkContext) (SinkWriter[T], error)
	// Committer returns an object that can commit handles without an open
	// writer; used on recovery before the writers are opened.
	Committer(ctx context.Context, job, uid string) (SinkCommitter, error)
}

// SinkCommitter commits prepared handles; see Sink.
type SinkCommitter = engine.SinkCommitter

// SinkWriter is one subtask's writer; its methods are called from one
// goroutine. See Sink for the contract.
type SinkWriter[T any] = engine.SinkWriter[T]

// CommitPoint is the single atomic action that makes a checkpoint durable
// (docs/design.md, "The checkpoint protocol"). Without one the runtime
// writes the checkpoint manifest atomically and that write is the commit
// point. With one (the Kafka connector's transaction carrying the outputs,
// the source offsets and a commit record) the runtime first writes the
// manifest as pending, then calls Commit with the manifest's checksum, then
// confirms the manifest in the state directory. On recovery the commit
// point's record decides which checkpoint is committed; the runtime
// restores exactly the manifest the record names.
type CommitPoint interface {
	// Peek returns the newest commit record without side effects: it
	// fences nobody and waits for nobody's open commit. The runtime uses
	// it before Recover to refuse a start that would take over a job
	// another installation (another state directory) runs under the same
	// name. A zero record means none.
	Peek(ctx context.Context) (CommitRecord, error)
	// Recover fences every earlier incarnation of the job, so that none
	// can commit after it returns and any commit they left open is
	// aborted, then returns the newest committed record: the answer is
	// final. A zero Checkpoint means the job never committed one (or its
	// record was lost; the runtime then looks for other traces of the
	// job's progress before it starts fresh). The writers opened after
	// Recover belong to the new incarnation.
	Recover(ctx context.Context) (CommitRecord, error)
	// Commit makes checkpoint rec.Checkpoint durable in one atomic action
	// that records rec. The manifest is already written, pending, with the
	// checksum rec.Manifest. ctx carries the checkpoint's deadline; every
	// call to an external system must respect it. An error means the
	// checkpoint did not commit, or its outcome is unknown (Recover will
	// tell): the job fails over. Before returning an error Commit aborts
	// whatever it can abort, so that readers are not blocked by an open
	// transaction until it times out.
	Commit(ctx context.Context, rec CommitRecord) error
}

// StartMarker is implemented by commit points that can record a start
// mark: that the job started from its sources' startup modes with nothing
// committed (docs/design.md, "Recovery decisions"). The runtime calls
// MarkStart after Recover when it starts without a checkpoint to restore
// and the record names none, before anything is written. A Recover that
// later finds the mark, and no commit since, returns it: a record with
// Checkpoint 0 and the StateID, Incarnation and Time of the start. Then
// checkpoints the state directory holds only as pending were never
// committed, and a job that crashed before its first commit restarts from
// its startup modes instead of refusing to guess. MarkStart must be
// fenced like Commit, and must never replace a record of a committed
// checkpoint.
type StartMarker interface {
	MarkStart(ctx context.Context, rec CommitRecord) error
}

// CommitRecord is what a commit point records for a committed checkpoint,
// or, with Checkpoint 0 and a StateID, a start mark (see StartMarker).
type CommitRecord = engine.CommitRecord

// JobInfo describes the job a component runs in; see JobBinder.
type JobInfo struct {
	// Name is the job's name (flow.JobName).
	Name string
	// Checkpointing holds the checkpoint settings, defaults applied.
	Checkpointing CheckpointSettings
	// StopTimeout bounds a graceful stop (flow.StopTimeout).
	StopTimeout time.Duration
	// Logger is the job's logger.
	Logger *slog.Logger
}

// JobBinder is implemented by sources, sinks and commit points that need
// to know the job they run in before it starts (its name, its checkpoint
// settings). Env.Start calls BindJob once per job start, before anything
// runs; an error rejects the job (ErrInvalidJob) with the component's
// reason, so a setting that cannot work is reported before the first
// record rather than at the first checkpoint.
type JobBinder interface {
	BindJob(info JobInfo) error
}

// DeadLetterKeeper is implemented by sinks whose writers keep the records
// they reject: they implement DeadLetterWriter. KeepsDeadLetters may say
// no for a configuration without a place for them.
type DeadLetterKeeper interface {
	KeepsDeadLetters() bool
}

// DeadLetterWriter is implemented by the writers of a DeadLetterKeeper.
// Under OnRejected(DeadLetterOnError) the runtime calls WriteDeadLetter for
// each record Write rejected; the dead letter must become durable exactly
// when the record's epoch does (the database sinks write it to a
// dead-letter table in the same transaction as the rows).
type DeadLetterWriter[T any] = engine.DeadLetterWriter[T]

// AbortNotifier is implemented by sink writers and commit points that want
// to know that checkpoint id was aborted (timed out or declined) while the
// job keeps running. Nothing prepared for it may be thrown away: the job does
// not rewind, so those records are committed with the next checkpoint.
type AbortNotifier = engine.AbortNotifier

// CommitPointProvider is implemented by sinks that own the job's commit
// point.
type CommitPointProvider interface {
	CommitPoint() CommitPoint
}
