// Package sqlsink is what the database sinks (connector/postgres,
// connector/mysql) share: the flow.Sink and flow.CommitPoint of a table
// written in one of two deliveries (docs/design.md, "Database sinks").
// A database contributes a Driver: how to fence and recover, how to write
// a batch into the open transaction, how to commit it with the job's
// progress row, how to upsert a batch under an epoch fence.
package sqlsink

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/txhold"
)

// ErrFenced is wrapped by the commit error of an instance of a job that a
// newer one fenced (Recover): its transaction is rolled back and it must
// not commit again.
var ErrFenced = errors.New("fenced: a newer instance of the job took over")

// Batch is rows of one epoch (the checkpoint they belong to), and the
// dead letters of the records the sink rejected in it.
type Batch struct {
	Epoch int64
	Rows  [][]any
	// Retract, when not nil, has one entry per row: true for a
	// retraction, whose row's key is deleted (docs/design.md, "Database
	// sinks"). Nil when no row of the batch is one (tables with a key
	// only: the writer refuses a retraction into an appended table).
	Retract []bool
	Dead    []DeadLetter
}

// Split reduces the batch's rows to the last operation of each key (the
// key columns key, compared by KeyText) and returns the rows to upsert and
// those whose key to delete, each in the order of their last operation.
// Their keys are distinct, so the two may be written in either order.
// Without retractions it returns Rows as they are (a driver's upsert
// reduces them as it needs).
func (b Batch) Split(key []int) (upserts, deletes [][]any) {
	if b.Retract == nil {
		return b.Rows, nil
	}
	last := make(map[string]int, len(b.Rows))
	keys := make([]string, len(b.Rows))
	var sb strings.Builder
	for i, r := range b.Rows {
		sb.Reset()
		for _, k := range key {
			sb.WriteString(KeyText(r[k]))
			sb.WriteByte(0)
		}
		keys[i] = sb.String()
		last[keys[i]] = i
	}
	for i, r := range b.Rows {
		if last[keys[i]] != i {
			continue
		}
		if b.Retract[i] {
			deletes = append(deletes, r)
		} else {
			upserts = append(upserts, r)
		}
	}
	return upserts, deletes
}

// KeyText is a key value in a form equal for values the database takes
// as equal, as far as Go can tell: a number by its value whatever its Go
// type (1, an int64 1 and a float64 1.0 are one key), a time by its
// instant, bytes and text by their bytes. (A case-insensitive collation
// or type is the server's to know.)
func KeyText(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return "s" + x
	case []byte:
		return "s" + string(x)
	case time.Time:
		return "t" + x.UTC().Format(time.RFC3339Nano)
	}
	// Numbers and booleans by kind, whatever their Go type.
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Bool:
		return strconv.FormatBool(rv.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "n" + strconv.FormatInt(rv.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "n" + strconv.FormatUint(rv.Uint(), 10)
	case reflect.Float32, reflect.Float64:
		f := rv.Float()
		if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
			return "n" + strconv.FormatInt(int64(f), 10)
		}
		return "n" + strconv.FormatFloat(f, 'g', -1, 64)
	}
	return fmt.Sprintf("%T:%v", v, v)
}

// rowCount is what the batch holds, for the limit on held rows.
func (b Batch) rowCount() int64 { return int64(len(b.Rows) + len(b.Dead)) }

// DeadLetter is a record the sink rejected, kept in the dead-letter table
// (or hash) with the sink's output: one row per record, keyed by job, sink
// and ID, so that a replay writes it once.
type DeadLetter struct {
	// Sink is the uid of the sink operator that rejected the record.
	Sink string
	// ID identifies the record in its source (a Kafka record:
	// topic/partition/offset).
	ID         string
	Key, Value []byte
	Error      string
	// At is when it was rejected.
	At time.Time
}

// DeadLetters configures where a sink keeps the records it rejects: with
// flow.To(..., flow.OnRejected(flow.DeadLetterOnError)) a record whose row
// does not fit the table goes to Table, in the same transaction as the
// rows (exactly once with them), instead of failing the job.
type DeadLetters[T any] struct {
	// Table is the dead-letter table, created when missing (default
	// onceflow_dead_letters; Redis: the hash onceflow:dead:<job>).
	Table string
	// Of returns what is kept of a rejected record: its ID (unique in its
	// source, such as topic/partition/offset), key and value.
	Of func(rec T) (id string, key, value []byte)
}

// Check fills in the default table and checks the configuration; ident
// checks the table name in the database's rules. A nil d is no dead
// letters.
func (d *DeadLetters[T]) Check(ident func(what, name string) error) error {
	if d == nil {
		return nil
	}
	if d.Table == "" {
		d.Table = DefaultDeadLetterTable
	}
	var errs []error
	if ident != nil {
		errs = append(errs, ident("dead-letter table", d.Table))
	}
	if d.Of == nil {
		errs = append(errs, errors.New("DeadLetters.Of is nil: say what to keep of a rejected record (its id in the source, key and value)"))
	}
	return errors.Join(errs...)
}

// DefaultDeadLetterTable is the dead-letter table when none is named.
const DefaultDeadLetterTable = "onceflow_dead_letters"

// TxConn is the connection of a job instance's transactions
// (exactly-once). Its methods are called under the sink's mutex.
type TxConn interface {
	// Write writes b into the open transaction, beginning one when none
	// is open.
	Write(ctx context.Context, b Batch) error
	// Commit sets the job's progress row to rec under the instance's
	// fence (an error wrapping ErrFenced when the fence moved) and
	// commits the open transaction, beginning one if none is open.
	Commit(ctx context.Context, rec flow.CommitRecord) error
	// Rollback rolls the open transaction back, if any.
	Rollback()
	Close() error
}

// Fencer is a TxConn that knows the fence its Recover took: a number that
// grows with every instance of the job fencing the one before.
type Fencer interface {
	Fence() int64
}

// UpsertConn is one writer's connection (at-least-once).
type UpsertConn interface {
	// Upsert writes and commits b, each row fenced by b.Epoch: a row a
	// newer epoch wrote is left alone.
	Upsert(ctx context.Context, b Batch) error
	Close() error
}

// EpochReader is implemented by upsert connections whose rows carry the
// epoch that wrote them: HighestEpoch returns the highest one the table
// holds, 0 when it holds none.
type EpochReader interface {
	HighestEpoch(ctx context.Context) (int64, error)
}

// PreparedConn is one writer's connection in two-phase delivery: its rows
// go into a transaction of its own, prepared at each barrier and committed
// after the job's commit point.
type PreparedConn interface {
	// Write writes b into the open transaction, beginning one when none
	// is open (b.Epoch is the checkpoint it will most likely be prepared
	// for: the one after the last prepared).
	Write(ctx context.Context, b Batch) error
	// Prepare prepares the open transaction for checkpoint id and returns
	// the handle that commits it, nil when no transaction is open (nothing
	// to commit).
	Prepare(ctx context.Context, id int64) ([]byte, error)
	Close() error
}

// TwoPhaseDriver is implemented by drivers that can take part in another
// commit point with prepared transactions.
type TwoPhaseDriver interface {
	// OpenPrepared opens a two-phase writer's connection for subtask of
	// the sink uid (its transactions' ids are GIDs), after rolling back
	// every transaction this subtask (and, for subtask 0, every subtask at
	// or above parallelism) left prepared: the runtime has committed those
	// the restored checkpoint names before it opens writers, so what is
	// left never reached a commit point.
	OpenPrepared(ctx context.Context, job, uid string, subtask, parallelism int, restored int64) (PreparedConn, error)
	// CommitPrepared commits the prepared transaction a handle of
	// PreparedConn.Prepare names; one that no longer exists was committed
	// before (only checkpoints after the restored one are rolled back).
	CommitPrepared(ctx context.Context, handle string) error
	// ListPrepared returns the ids of the prepared transactions whose id
	// starts with prefix.
	ListPrepared(ctx context.Context, prefix string) ([]string, error)
	// RollbackPrepared rolls back the prepared transaction gid; one that
	// no longer exists was finished before.
	RollbackPrepared(ctx context.Context, gid string) error
	// Statements returns the SQL that commits and the SQL that rolls back
	// the prepared transaction gid, for an operator to run.
	Statements(gid string) (commit, rollback string)
}

// GID is the id of the transaction subtask of the sink uid of job
// prepared in epoch (or for checkpoint) id: a hash of the job and the sink
// (ids are bounded: XA allows 64 bytes, PostgreSQL 200), the subtask, and
// the epoch, which tells recovery whether to commit or roll it back.
func GID(job, uid string, subtask int, id int64) string {
	return GIDPrefix(job, uid) + strconv.Itoa(subtask) + ":" + strconv.FormatInt(id, 10)
}

// GIDPrefix is the start of every GID of the sink uid of job.
func GIDPrefix(job, uid string) string {
	h := sha256.Sum256([]byte(job + "\x00" + uid))
	return "onceflow:" + hex.EncodeToString(h[:8]) + ":"
}

// ParseGID returns the subtask and epoch of a GID of job and uid.
func ParseGID(gid, job, uid string) (subtask int, id int64, ok bool) {
	rest, found := strings.CutPrefix(gid, GIDPrefix(job, uid))
	if !found {
		return 0, 0, false
	}
	st, cp, found := strings.Cut(rest, ":")
	sub, err1 := strconv.Atoi(st)
	n, err2 := strconv.ParseInt(cp, 10, 64)
	return sub, n, found && err1 == nil && err2 == nil
}

// AttemptKey is the key of the progress-table row whose fence column
// holds the token of the newest attempt of at-least-once sink uid of job
// (docs/design.md, "Database sinks"): the first writer of an attempt
// increments it, and each batch writes only while it still holds the
// writer's token.
func AttemptKey(job, uid string) string {
	return "at-least-once attempt:" + uid + ":" + job
}

// AttemptFenced is the error of an at-least-once writer whose attempt a
// later one replaced: restarting would take the token back from the
// other instance, which would then be fenced in turn, so it is
// unrecoverable.
func AttemptFenced(db, job, uid, key, table string) error {
	return flow.Unrecoverable(fmt.Errorf("%w: another instance of job %q (or a later attempt of this one) took over the %s sink %s: the row %q of %s holds a newer attempt's token, and this writer's rows could replace the newer ones. If two instances of the job run at once, stop one",
		ErrFenced, job, db, uid, key, table))
}

// RowChecker is implemented by connections that check a row's values
// against the columns before it is batched: NewCheck returns a check for
// one writer (it need not be safe for concurrent use). A check may
// replace values in row; its error fails the record as unrecoverable.
type RowChecker interface {
	NewCheck() func(row []any) error
}

// Driver is a database's part.
type Driver interface {
	// Name names the database in messages ("postgres").
	Name() string
	// Peek returns the job's newest committed progress row, fencing
	// nobody.
	Peek(ctx context.Context, job string) (flow.CommitRecord, error)
	// Recover fences every earlier instance of the job (none can commit
	// afterwards; their open transactions are rolled back or waited for)
	// and returns the newest committed record and the connection of this
	// instance's transactions.
	Recover(ctx context.Context, job string) (flow.CommitRecord, TxConn, error)
	// OpenUpsert opens a writer's connection for at-least-once delivery of
	// the sink uid, checking the table. first is the attempt's first
	// checkpoint id (flow.SinkContext.FirstCheckpoint): the writers of
	// one attempt share it, and every batch of the writer has an epoch at
	// or above it. Drivers fence per attempt (Redis, and the SQL sinks
	// besides their epoch per row) and tell attempts apart by it.
	OpenUpsert(ctx context.Context, job, uid string, first int64) (UpsertConn, error)
}

// LoggerSetter is implemented by drivers that log: BindJob gives them the
// job's logger.
type LoggerSetter interface {
	SetLogger(*slog.Logger)
}

// Config is what every database sink has.
type Config[T any] struct {
	Driver  Driver
	Columns []string
	// Key are the columns a row is upserted by (empty: rows are
	// appended). A two-phase writer holds a row whose key a prepared,
	// not yet committed transaction wrote (see writer.locked).
	Key []string
	Row func(rec T) ([]any, error)
	// Retracts tells a retraction (docs/design.md, "Database sinks"): a
	// record that takes its row out of the result (pipeline.RowKind's
	// -U or -D). Its row's key is deleted; Row makes its row as for an
	// upsert. Nil: every record adds its row. A retraction into a table
	// without Key fails the job (unrecoverable), unless KeyedRows.
	Retracts func(rec T) bool
	// KeyedRows says that every row names what a retraction deletes,
	// though Key is empty (Redis: a row is a key's command).
	KeyedRows bool
	// Table names the table in messages.
	Table       string
	ExactlyOnce bool
	// TwoPhase makes the sink a participant of another commit point
	// (Driver must be a TwoPhaseDriver); ExactlyOnce is then false.
	TwoPhase    bool
	BatchRows   int
	MaxHeldRows int
	Job         string
	// DeadLetters, when set, makes the sink a flow.DeadLetterKeeper: the
	// records it rejects under OnRejected(DeadLetterOnError) go to the
	// drivers' dead-letter table, in the same transaction as the rows.
	DeadLetters *DeadLetters[T]
}

// Sink writes records into a table through its Driver; one Sink value is
// one operator of one job instance.
type Sink[T any] struct {
	cfg  Config[T]
	name string // "<driver> sink", the prefix of messages
	log  *slog.Logger

	// mu guards sess and hold; the commit point holds it throughout, so
	// no row enters a transaction it does not belong to.
	mu   sync.Mutex
	sess *session
	// hold keeps the batches written after a barrier whose checkpoint may
	// still commit, until it resolves.
	hold *txhold.Hold[Batch]

	// shift is what at-least-once writers of the attempt that starts at
	// checkpoint shiftFirst add to their epochs (see Open).
	shiftFirst, shift int64
	shiftSet          bool
}

// session is an instance's transaction connection and its writers.
type session struct {
	conn    TxConn
	writers int   // open writers; the last to close closes the session
	err     error // the first failure: the session is unusable
}

var (
	_ flow.Sink[int]           = (*Sink[int])(nil)
	_ flow.CommitPointProvider = (*Sink[int])(nil)
	_ flow.JobBinder           = (*Sink[int])(nil)
	_ flow.PreparedResolver    = (*Sink[int])(nil)
	_ flow.CommitPoint         = (*CommitPoint[int])(nil)
	_ flow.AbortNotifier       = (*CommitPoint[int])(nil)
	_ flow.AbortNotifier       = (*writer[int])(nil)
)

// New returns a sink; cfg is validated by the connector.
func New[T any](cfg Config[T]) *Sink[T] {
	return &Sink[T]{cfg: cfg, name: cfg.Driver.Name() + " sink", log: slog.New(slog.DiscardHandler), hold: txhold.New(int64(cfg.MaxHeldRows), Batch.rowCount)}
}

// BindJob learns the job's name and checks that exactly-once delivery runs
// in a job checkpointing exactly once.
func (s *Sink[T]) BindJob(info flow.JobInfo) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.Job == "" {
		s.cfg.Job = info.Name
	}
	if info.Logger != nil {
		s.log = info.Logger.With("sink", s.cfg.Driver.Name())
		if ls, ok := s.cfg.Driver.(LoggerSetter); ok {
			ls.SetLogger(s.log)
		}
	}
	if (s.cfg.ExactlyOnce || s.cfg.TwoPhase) && info.Checkpointing.Mode != flow.ExactlyOnce {
		return fmt.Errorf("%s: exactly-once and two-phase delivery need exactly-once checkpointing (the job's mode is %v): set delivery to at-least-once or the checkpointing mode to exactly-once", s.name, info.Checkpointing.Mode)
	}
	return nil
}

// Failures returns a sink for the failure stream of flow.TryMap (the
// records a pipeline step rejected under DeadLetterOnError): it writes
// each to the dead-letter table, in the same transaction as this sink's
// rows, so they commit exactly once with them. It needs DeadLetters.
func (s *Sink[T]) Failures() flow.Sink[flow.Failure[T]] { return failureSink[T]{s} }

type failureSink[T any] struct{ s *Sink[T] }

func (f failureSink[T]) Open(ctx context.Context, sc flow.SinkContext) (flow.SinkWriter[flow.Failure[T]], error) {
	if f.s.cfg.DeadLetters == nil {
		return nil, fmt.Errorf("%s: failures need a dead-letter table (DeadLetters)", f.s.name)
	}
	w, err := f.s.Open(ctx, sc)
	if err != nil {
		return nil, err
	}
	return failureWriter[T]{w.(*writer[T])}, nil
}

// ResolvePrepared settles what this sink's writers left prepared (see
// Sink.ResolvePrepared).
func (f failureSink[T]) ResolvePrepared(ctx context.Context, job, uid string, committed int64, known bool) error {
	return f.s.ResolvePrepared(ctx, job, uid, committed, known)
}

func (f failureSink[T]) Committer(ctx context.Context, job, uid string) (flow.SinkCommitter, error) {
	return f.s.Committer(ctx, job, uid)
}

// failureWriter writes failures as dead letters through a writer of the
// sink.
type failureWriter[T any] struct{ *writer[T] }

func (w failureWriter[T]) Write(ctx context.Context, f flow.Failure[T]) error {
	return w.WriteDeadLetter(ctx, f.Record, f.Err)
}

// KeepsDeadLetters reports whether rejected records can go to a
// dead-letter table (flow.DeadLetterKeeper).
func (s *Sink[T]) KeepsDeadLetters() bool { return s.cfg.DeadLetters != nil }

// CommitPoint returns the sink's commit point with exactly-once delivery,
// nil otherwise.
func (s *Sink[T]) CommitPoint() flow.CommitPoint {
	if !s.cfg.ExactlyOnce {
		return nil
	}
	return &CommitPoint[T]{s: s}
}

// Committer returns the committer of recovery: in two-phase delivery it
// commits the prepared transactions the restored checkpoint names;
// otherwise there is nothing to commit (the transaction or each batch
// committed the rows).
func (s *Sink[T]) Committer(context.Context, string, string) (flow.SinkCommitter, error) {
	if s.cfg.TwoPhase {
		return preparedCommitter{s.cfg.Driver.(TwoPhaseDriver)}, nil
	}
	return nopCommitter{}, nil
}

// ResolvePrepared settles, on a start that restores no checkpoint, the
// transactions the sink's writers left prepared (flow.PreparedResolver):
// the job's commit record says that checkpoints up to committed
// committed, so what was prepared for them is committed (the sources'
// positions are past their records, nothing writes them again), and what
// was prepared for later ones never reached a commit point and is rolled
// back. Checkpoint ids continue above the record's, so no id of this run
// can be taken for one of these. Without a record (known false) the fate
// of a prepared transaction cannot be told: the start is refused with
// the transactions listed and the statements that settle them.
func (s *Sink[T]) ResolvePrepared(ctx context.Context, job, uid string, committed int64, known bool) error {
	if !s.cfg.TwoPhase {
		return nil
	}
	if s.cfg.Job != "" {
		job = s.cfg.Job
	}
	d := s.cfg.Driver.(TwoPhaseDriver)
	gids, err := d.ListPrepared(ctx, GIDPrefix(job, uid))
	if err != nil {
		return fmt.Errorf("%s: list the transactions an earlier run left prepared: %w", s.name, err)
	}
	type prepared struct {
		gid string
		id  int64
	}
	var found []prepared
	for _, g := range gids {
		if _, id, ok := ParseGID(g, job, uid); ok {
			found = append(found, prepared{g, id})
		}
	}
	if len(found) == 0 {
		return nil
	}
	slices.SortFunc(found, func(a, b prepared) int { return cmp.Compare(a.id, b.id) })
	if !known {
		var b strings.Builder
		for _, p := range found {
			c, r := d.Statements(p.gid)
			fmt.Fprintf(&b, "\n  checkpoint %d: %s   or   %s", p.id, c, r)
		}
		return flow.Unrecoverable(fmt.Errorf("%s: %d transactions of job %q are prepared in the database from an earlier run, and the commit point has no record of the job to tell whether their checkpoints committed (the record was deleted or expired; with Kafka: the job's progress group or topic). "+
			"Starting would drop them or commit them blindly. For each, commit it when its checkpoint's records are in the job's other outputs (for a Kafka topic: the committed records up to that checkpoint), otherwise roll it back, then start again:%s",
			s.name, len(found), job, b.String()))
	}
	var done, undone []int64
	for _, p := range found {
		if p.id <= committed {
			if err := d.CommitPrepared(ctx, p.gid); err != nil {
				return fmt.Errorf("%s: commit %s, prepared for checkpoint %d, which the commit record names committed (up to %d): %w", s.name, p.gid, p.id, committed, err)
			}
			done = append(done, p.id)
			continue
		}
		if err := d.RollbackPrepared(ctx, p.gid); err != nil {
			return fmt.Errorf("%s: roll back %s, prepared for checkpoint %d, after the last committed one (%d): %w", s.name, p.gid, p.id, committed, err)
		}
		undone = append(undone, p.id)
	}
	s.log.Info("settled the transactions an earlier run left prepared, by the commit record: those of committed checkpoints are committed, the others rolled back",
		"committed_checkpoint", committed, "committed", done, "rolled_back", undone)
	return nil
}

type preparedCommitter struct{ d TwoPhaseDriver }

func (c preparedCommitter) Commit(ctx context.Context, _ int64, handle []byte) error {
	if len(handle) == 0 {
		return nil
	}
	return c.d.CommitPrepared(ctx, string(handle))
}
func (preparedCommitter) Close() error { return nil }

type nopCommitter struct{}

func (nopCommitter) Commit(context.Context, int64, []byte) error { return nil }
func (nopCommitter) Close() error                                { return nil }

// Close closes the connection a Recover opened when no writer will use it
// (a job refused to start); writers close it themselves when the job
// ends.
func (s *Sink[T]) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeSessionLocked()
	return nil
}

// closeSessionLocked closes the session's connection; an open transaction
// rolls back with it.
func (s *Sink[T]) closeSessionLocked() {
	if s.sess == nil {
		return
	}
	s.sess.conn.Rollback()
	_ = s.sess.conn.Close()
	s.sess = nil
	s.hold.Wake()
}

// Open opens subtask sc's writer: with exactly-once it writes through the
// session Recover opened, with at-least-once through a connection of its
// own.
func (s *Sink[T]) Open(ctx context.Context, sc flow.SinkContext) (flow.SinkWriter[T], error) {
	// The rows before the first barrier belong to the attempt's first
	// checkpoint, above every id used before: an epoch-fenced replay must
	// be newer than what a failed run wrote after the restored
	// checkpoint.
	epoch := max(sc.FirstCheckpoint, sc.RestoredCheckpoint+1)
	w := &writer[T]{s: s, epoch: epoch, subtask: sc.Subtask, uid: sc.UID}
	if s.cfg.TwoPhase {
		c, err := s.cfg.Driver.(TwoPhaseDriver).OpenPrepared(ctx, s.cfg.Job, sc.UID, sc.Subtask, sc.Parallelism, sc.RestoredCheckpoint)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		w.prepared = c
		for _, k := range s.cfg.Key {
			if i := slices.Index(s.cfg.Columns, k); i >= 0 {
				w.keyIdx = append(w.keyIdx, i)
			}
		}
		if len(w.keyIdx) > 0 {
			w.sent, w.locked = map[string]op{}, map[string]int64{}
		}
		if rc, ok := c.(RowChecker); ok {
			w.check = rc.NewCheck()
		}
		return w, nil
	}
	if s.cfg.ExactlyOnce {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.sess == nil {
			return nil, fmt.Errorf("%s: a writer opened before the commit point recovered (Recover opens the connection)", s.name)
		}
		s.sess.writers++
		if rc, ok := s.sess.conn.(RowChecker); ok {
			w.check = rc.NewCheck()
		}
		return w, nil
	}
	c, err := s.cfg.Driver.OpenUpsert(ctx, s.cfg.Job, sc.UID, sc.FirstCheckpoint)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	if er, ok := c.(EpochReader); ok {
		if w.shift, err = s.epochShift(ctx, er, sc.FirstCheckpoint, epoch); err != nil {
			c.Close()
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	w.conn = c
	if rc, ok := c.(RowChecker); ok {
		w.check = rc.NewCheck()
	}
	return w, nil
}

// epochShift returns what the at-least-once writers of the attempt
// starting at checkpoint first add to their epochs, the same for all of
// them: enough that the first epoch is at least every epoch in the
// table (an upsert replaces rows of its own epoch: after a crash the
// replay's first epoch is the one the crashed run was writing).
// Checkpoint ids continue above those of the job's checkpoint storage,
// but they begin again at 1 when the storage was moved aside (offsets
// reset) or lost, and a restored savepoint continues from its own id:
// without the shift the fenced upserts would leave alone every row an
// earlier run wrote with a higher epoch, however new the value.
func (s *Sink[T]) epochShift(ctx context.Context, er EpochReader, first, epoch int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shiftSet && s.shiftFirst == first {
		return s.shift, nil
	}
	high, err := er.HighestEpoch(ctx)
	if err != nil {
		return 0, fmt.Errorf("read the highest epoch of the table: %w", err)
	}
	s.shiftFirst, s.shift, s.shiftSet = first, max(0, high-epoch), true
	if s.shift > 0 {
		s.log.Info("the table holds rows of epochs above this run's checkpoint ids (its checkpoints were moved aside, lost or restored from an older savepoint): the rows this run writes carry epochs shifted up to them",
			"highest_epoch", high, "first_checkpoint", epoch, "shift", s.shift)
	}
	return s.shift, nil
}

// writer is one subtask's writer.
type writer[T any] struct {
	s        *Sink[T]
	conn     UpsertConn   // at-least-once only
	prepared PreparedConn // two-phase only
	subtask  int
	uid      string
	check    func([]any) error
	// epoch is the checkpoint the rows written now belong to (the last
	// prepared one plus one); at-least-once rows carry epoch+shift.
	epoch int64
	shift int64
	// Two-phase with a key: a prepared transaction keeps the locks of the
	// rows it upserted until COMMIT PREPARED, which only this writer's
	// goroutine sends. A later epoch's row with such a key waits in rows
	// until then: sent, its upsert would wait for that commit forever.
	// keyIdx are the key columns' indexes; sent the rows the open
	// transaction wrote, the last per key, and sentDead its dead
	// letters; locked the keys of the prepared, uncommitted epochs, with
	// their epoch; held what each of those epochs wrote, until its
	// commit. An aborted checkpoint's commit comes only with a later
	// one's, and that one's rows would wait for its locks: the writer
	// rolls the aborted epoch back and sends its rows again
	// (CheckpointAborted, docs/design.md "Two-phase database sinks").
	// A retraction is kept and sent again like an upsert: an op.
	keyIdx   []int
	sent     map[string]op
	sentDead []DeadLetter
	locked   map[string]int64
	held     []preparedEpoch
	aborted  map[int64]bool // checkpoints aborted before the writer prepared them
	rows     []op
	dead     []DeadLetter
	// err is the first failure to send rows: sticky, so that a batch
	// lost with a declined checkpoint (a savepoint's, or one the job
	// tolerates) fails the job at the next record instead of going
	// unnoticed while later checkpoints commit positions past it.
	err error
}

// op is a row to write: appended or upserted, or, del, a retraction,
// whose key is deleted.
type op struct {
	row []any
	del bool
}

// Write converts rec to a row, checks it, and sends the rows once
// BatchRows have come.
func (w *writer[T]) Write(ctx context.Context, rec T) error {
	if w.err != nil {
		return w.err
	}
	s := w.s
	del := s.cfg.Retracts != nil && s.cfg.Retracts(rec)
	if del && len(s.cfg.Key) == 0 && !s.cfg.KeyedRows {
		return flow.Unrecoverable(fmt.Errorf("%s: a retraction (a record that takes its row back out of the result: the old row of an update, or a deleted row) came for table %s, whose rows are appended: an appended row cannot be taken back. Declare the table's primary key as the sink's key (key: in a job file, Key in Go) so that rows are upserted by it and a retraction deletes its key, or write an append-only result to this table",
			s.name, s.cfg.Table))
	}
	row, err := s.cfg.Row(rec)
	if err != nil {
		if errors.Is(err, flow.ErrUnrecoverable) {
			// The record cannot make a row: rejected (see
			// flow.OnRejected).
			return flow.Rejected(fmt.Errorf("%s: the row of a record: %w", s.name, err))
		}
		return fmt.Errorf("%s: the row of a record: %w", s.name, err)
	}
	if len(row) != len(s.cfg.Columns) {
		return flow.Unrecoverable(fmt.Errorf("%s: Row returned %d values for the %d columns %v", s.name, len(row), len(s.cfg.Columns), s.cfg.Columns))
	}
	if w.check != nil {
		if err := w.check(row); err != nil {
			return flow.Rejected(fmt.Errorf("%s: %w", s.name, err))
		}
	}
	w.rows = append(w.rows, op{row: row, del: del})
	return w.maybeFlush(ctx)
}

// WriteDeadLetter keeps a record Write rejected, with the epoch's rows
// (flow.DeadLetterWriter).
func (w *writer[T]) WriteDeadLetter(ctx context.Context, rec T, cause error) error {
	if w.err != nil {
		return w.err
	}
	dl := w.s.cfg.DeadLetters
	if dl == nil {
		return fmt.Errorf("%s: no dead-letter table is configured", w.s.name)
	}
	id, key, value := dl.Of(rec)
	w.dead = append(w.dead, DeadLetter{Sink: w.uid, ID: id, Key: key, Value: value, Error: cause.Error(), At: time.Now()})
	return w.maybeFlush(ctx)
}

func (w *writer[T]) maybeFlush(ctx context.Context) error {
	if len(w.rows)+len(w.dead) >= w.s.cfg.BatchRows {
		return w.flush(ctx)
	}
	return nil
}

func (w *writer[T]) flush(ctx context.Context) (err error) {
	if w.err != nil {
		return w.err
	}
	if len(w.rows) == 0 && len(w.dead) == 0 {
		return nil
	}
	defer func() {
		if err != nil {
			w.err = fmt.Errorf("%w (an earlier batch of this writer was not written; the job must restart from its last checkpoint)", err)
		}
	}()
	rows := w.rows
	if len(w.locked) > 0 {
		var held []op
		rows, held = w.unlocked(w.rows)
		w.rows = held
		if len(rows) == 0 && len(w.dead) == 0 {
			return nil
		}
	} else {
		w.rows = nil
	}
	if w.sent != nil {
		for _, r := range rows {
			w.sent[w.keyOf(r.row)] = r
		}
		w.sentDead = append(w.sentDead, w.dead...)
	}
	b := Batch{Epoch: w.epoch, Rows: make([][]any, len(rows)), Dead: w.dead}
	for i, r := range rows {
		b.Rows[i] = r.row
		if r.del {
			if b.Retract == nil {
				b.Retract = make([]bool, len(rows))
			}
			b.Retract[i] = true
		}
	}
	w.dead = nil
	if w.prepared != nil {
		if err := w.prepared.Write(ctx, b); err != nil {
			return fmt.Errorf("%s: %w", w.s.name, err)
		}
		return nil
	}
	if w.conn != nil {
		b.Epoch += w.shift
		if err := w.conn.Upsert(ctx, b); err != nil {
			return fmt.Errorf("%s: %w", w.s.name, err)
		}
		return nil
	}
	return w.s.submit(ctx, b)
}

// Prepare sends the epoch's last rows: into the open transaction (or held
// for it) with exactly-once, committed with at-least-once.
func (w *writer[T]) Prepare(ctx context.Context, checkpointID int64) ([]byte, error) {
	if err := w.flush(ctx); err != nil {
		return nil, err
	}
	if w.prepared != nil {
		if w.aborted[checkpointID] {
			delete(w.aborted, checkpointID)
			// Already aborted (its barrier came late): preparing would
			// only lock keys until a later commit. The open transaction
			// goes on into the next checkpoint.
			w.epoch = checkpointID + 1
			if w.sent != nil {
				w.held = append(w.held, preparedEpoch{id: checkpointID, aborted: true})
			}
			return nil, nil
		}
		if len(w.rows) > 0 {
			// Rows of keys an earlier prepared checkpoint wrote, and its
			// commit has not come (checkpoints overlap): they cannot join
			// this transaction without waiting on its locks. This
			// checkpoint is declined; the rows stay for the next one.
			return nil, fmt.Errorf("%s: %d rows of checkpoint %d upsert keys that a prepared checkpoint still locks (its commit has not come): the checkpoint is declined and the rows go with the next one", w.s.name, len(w.rows), checkpointID)
		}
		w.epoch = checkpointID + 1
		h, err := w.prepared.Prepare(ctx, checkpointID)
		if err != nil {
			w.err = err // its rows are gone with the transaction
		}
		if w.sent != nil && len(h) > 0 {
			for k := range w.sent {
				w.locked[k] = checkpointID
			}
			w.held = append(w.held, preparedEpoch{id: checkpointID, gid: string(h), rows: w.sent, dead: w.sentDead})
			w.sent = map[string]op{}
		} else if w.sent != nil && err == nil {
			// Nothing to prepare, yet the barrier passed: this
			// checkpoint may commit, and with it any aborted one
			// before it (CheckpointAborted must leave those be).
			w.held = append(w.held, preparedEpoch{id: checkpointID})
		}
		w.sentDead = nil
		return h, err
	}
	if w.conn == nil {
		w.s.mu.Lock()
		w.s.hold.Prepared(checkpointID)
		w.s.mu.Unlock()
	}
	w.epoch = checkpointID + 1
	return nil, nil
}

// Commit commits what Prepare prepared (two-phase); otherwise the
// transaction or the batch committed the rows already.
func (w *writer[T]) Commit(ctx context.Context, id int64, handle []byte) error {
	if w.prepared == nil {
		return nil
	}
	if len(handle) > 0 {
		if err := w.s.cfg.Driver.(TwoPhaseDriver).CommitPrepared(ctx, string(handle)); err != nil {
			return err
		}
	}
	maps.DeleteFunc(w.locked, func(_ string, e int64) bool { return e <= id })
	w.held = slices.DeleteFunc(w.held, func(p preparedEpoch) bool { return p.id <= id })
	maps.DeleteFunc(w.aborted, func(e int64, _ bool) bool { return e <= id })
	return nil
}

// preparedEpoch is a checkpoint whose barrier a keyed two-phase writer
// passed and whose commit has not come: what its prepared transaction
// (gid; "" when there was nothing to prepare) wrote, the last row per
// key and the dead letters.
type preparedEpoch struct {
	id      int64
	gid     string
	rows    map[string]op
	dead    []DeadLetter
	aborted bool
}

// CheckpointAborted rolls back the transactions this writer prepared for
// aborted checkpoints after which it passed no barrier of a checkpoint
// that may still commit, and sends their rows again, ahead of the rows
// still to send. An aborted
// checkpoint's output commits with the next committed checkpoint, but a
// prepared transaction keeps its keys locked until its own commit: later
// rows of those keys would wait for it, and every later checkpoint would
// be declined (docs/design.md, "Two-phase database sinks"). A transaction
// followed by one still pending stays: that one's commit commits it too.
// A rollback that fails fails the job at its next record; recovery
// settles the transaction by the commit record.
func (w *writer[T]) CheckpointAborted(ctx context.Context, id int64) {
	if w.prepared == nil || w.err != nil {
		return
	}
	i := slices.IndexFunc(w.held, func(p preparedEpoch) bool { return p.id == id })
	if i < 0 {
		if id >= w.epoch {
			// Not prepared yet (its barrier has not come): it will
			// not be.
			if w.aborted == nil {
				w.aborted = map[int64]bool{}
			}
			w.aborted[id] = true
		}
		return
	}
	w.held[i].aborted = true
	from := len(w.held)
	for from > 0 && w.held[from-1].aborted {
		from--
	}
	var rows []op
	var dead []DeadLetter
	for _, p := range w.held[from:] {
		if p.gid == "" {
			continue // nothing was prepared
		}
		if err := w.s.cfg.Driver.(TwoPhaseDriver).RollbackPrepared(ctx, p.gid); err != nil {
			w.err = fmt.Errorf("%s: roll back the transaction of aborted checkpoint %d to send its rows again: %w", w.s.name, p.id, err)
			return
		}
		for k, r := range p.rows {
			if w.locked[k] == p.id {
				delete(w.locked, k)
			}
			rows = append(rows, r)
		}
		dead = append(dead, p.dead...)
	}
	w.held = w.held[:from]
	w.rows = append(rows, w.rows...)
	w.dead = append(dead, w.dead...)
}

// keyOf is row's key as one string (its key columns' values, each
// length-prefixed).
func (w *writer[T]) keyOf(row []any) string {
	var b []byte
	for _, i := range w.keyIdx {
		v := fmt.Sprint(row[i])
		b = strconv.AppendInt(b, int64(len(v)), 10)
		b = append(b, ':')
		b = append(b, v...)
	}
	return string(b)
}

// unlocked splits rows into those whose keys no prepared, uncommitted
// transaction wrote, in order, and the others.
func (w *writer[T]) unlocked(rows []op) (ok, held []op) {
	for _, r := range rows {
		if _, l := w.locked[w.keyOf(r.row)]; l {
			held = append(held, r)
		} else {
			ok = append(ok, r)
		}
	}
	return ok, held
}

// Close drops unsent rows (their epoch is replayed) and closes the
// writer's connection, or, for the session's last writer, the session's
// (an open transaction rolls back: the job ends after its last commit, or
// restarts and replays).
func (w *writer[T]) Close() error {
	w.rows, w.dead = nil, nil
	if w.prepared != nil {
		return w.prepared.Close() // an open, unprepared transaction rolls back
	}
	if w.conn != nil {
		return w.conn.Close()
	}
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess != nil {
		if s.sess.writers--; s.sess.writers == 0 {
			s.closeSessionLocked()
		}
	}
	return nil
}

// submit writes b into the open transaction, or holds it while a
// checkpoint before its epoch is unresolved, waiting for room when
// MaxHeldRows are held.
func (s *Sink[T]) submit(ctx context.Context, b Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		sess := s.sess
		if sess == nil {
			return fmt.Errorf("%s: the connection is closed (the job is restarting)", s.name)
		}
		if sess.err != nil {
			return fmt.Errorf("%s: %w", s.name, sess.err)
		}
		if !s.hold.MustHold(b.Epoch) {
			if err := sess.conn.Write(ctx, b); err != nil {
				sess.err = err
				s.hold.Wake()
				return fmt.Errorf("%s: %w", s.name, err)
			}
			return nil
		}
		if s.hold.Add(b.Epoch, b) {
			return nil
		}
		wake := s.hold.Released()
		s.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			s.mu.Lock()
			return ctx.Err()
		}
		s.mu.Lock()
	}
}

// releaseLocked writes the held rows that may enter the open transaction
// now and wakes the writers waiting for room.
func (s *Sink[T]) releaseLocked(ctx context.Context) {
	defer s.hold.Wake()
	if s.sess == nil || s.sess.err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := s.hold.Release(-1, func(b Batch) error { return s.sess.conn.Write(ctx, b) }); err != nil {
		s.sess.err = err
	}
}

// recoverTimeout bounds Peek and Recover: an unreachable server fails the
// start (the restart strategy tries again) instead of hanging it.
const recoverTimeout = 30 * time.Second

// CommitPoint is the database transaction as the job's commit point.
type CommitPoint[T any] struct {
	s *Sink[T]
}

// String names the commit point in checkpoint manifests.
func (c *CommitPoint[T]) String() string { return c.s.cfg.Driver.Name() }

// BindJob checks the sink against the job (see Sink.BindJob).
func (c *CommitPoint[T]) BindJob(info flow.JobInfo) error { return c.s.BindJob(info) }

// Peek reads the job's progress row without fencing anyone.
func (c *CommitPoint[T]) Peek(ctx context.Context) (flow.CommitRecord, error) {
	ctx, cancel := context.WithTimeout(ctx, recoverTimeout)
	defer cancel()
	rec, err := c.s.cfg.Driver.Peek(ctx, c.s.cfg.Job)
	if err != nil {
		return flow.CommitRecord{}, fmt.Errorf("%s commit point: %w", c.s.cfg.Driver.Name(), err)
	}
	return rec, nil
}

// Recover fences every earlier instance of the job and returns its last
// committed checkpoint; the connection it opens is the one the writers of
// this (re)start use.
func (c *CommitPoint[T]) Recover(ctx context.Context) (flow.CommitRecord, error) {
	s := c.s
	ctx, cancel := context.WithTimeout(ctx, recoverTimeout)
	defer cancel()
	s.mu.Lock()
	s.closeSessionLocked()
	s.hold.Reset(0)
	s.mu.Unlock()
	rec, conn, err := s.cfg.Driver.Recover(ctx, s.cfg.Job)
	if err != nil {
		return flow.CommitRecord{}, fmt.Errorf("%s commit point: %w", s.cfg.Driver.Name(), err)
	}
	s.mu.Lock()
	s.sess = &session{conn: conn}
	s.hold.Reset(rec.Checkpoint)
	s.mu.Unlock()
	return rec, nil
}

// FenceEpoch is the fence Recover took (the connection's Fencer), 0
// before Recover: every later instance of the job that fenced this one
// has a higher one. A scale-out task starts its checkpoint ids above it
// (flow.FencedCheckpointIDs), so a fenced zombie task never writes into
// a checkpoint directory its successor uses (docs/design.md,
// "Scale-out").
func (c *CommitPoint[T]) FenceEpoch() int64 {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if c.s.sess == nil {
		return 0
	}
	if f, ok := c.s.sess.conn.(Fencer); ok {
		return f.Fence()
	}
	return 0
}

// Commit commits the open transaction with every row up to checkpoint
// rec.Checkpoint and the job's progress row naming it.
func (c *CommitPoint[T]) Commit(ctx context.Context, rec flow.CommitRecord) error {
	s := c.s
	name := s.cfg.Driver.Name()
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sess
	if sess == nil {
		return fmt.Errorf("%s commit point of checkpoint %d: no connection (Recover was not called)", name, rec.Checkpoint)
	}
	if sess.err != nil {
		return fmt.Errorf("%s commit point of checkpoint %d: the sink's transaction failed earlier: %w", name, rec.Checkpoint, sess.err)
	}
	// Rows held after checkpoints below rec.Checkpoint that were aborted
	// belong to this transaction.
	err := s.hold.Release(rec.Checkpoint, func(b Batch) error { return sess.conn.Write(ctx, b) })
	if err == nil {
		err = sess.conn.Commit(ctx, rec)
	}
	if err != nil {
		sess.err = err
		sess.conn.Rollback()
		s.hold.Wake()
		return fmt.Errorf("%s commit point of checkpoint %d: %w", name, rec.Checkpoint, err)
	}
	s.hold.Committed(rec.Checkpoint)
	s.releaseLocked(context.Background())
	return nil
}

// MarkStart records a start mark (flow.StartMarker) in the job's progress
// row, in a transaction of its own under the fence Recover took: nobody
// can have committed since Recover read that the row names no checkpoint.
func (c *CommitPoint[T]) MarkStart(ctx context.Context, rec flow.CommitRecord) error {
	s := c.s
	name := s.cfg.Driver.Name()
	if rec.Checkpoint != 0 {
		return fmt.Errorf("%s commit point: a start mark names no checkpoint (got %d)", name, rec.Checkpoint)
	}
	ctx, cancel := context.WithTimeout(ctx, recoverTimeout)
	defer cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sess
	if sess == nil {
		return fmt.Errorf("%s commit point: MarkStart was called before Recover", name)
	}
	if sess.err != nil {
		return fmt.Errorf("%s commit point: the sink's connection failed earlier: %w", name, sess.err)
	}
	if last := s.hold.LastCommitted(); last != 0 {
		return fmt.Errorf("%s commit point: no start mark over the record of committed checkpoint %d", name, last)
	}
	if err := sess.conn.Commit(ctx, rec); err != nil {
		sess.err = err
		sess.conn.Rollback()
		return fmt.Errorf("%s commit point: record the job's start: %w", name, err)
	}
	return nil
}

// CheckpointAborted lets rows held after checkpoint id into the open
// transaction: id never commits, so they join the epoch the next commit
// covers.
func (c *CommitPoint[T]) CheckpointAborted(ctx context.Context, id int64) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold.Aborted(id)
	s.releaseLocked(ctx)
}

// The defaults every database sink shares.
const (
	DefaultProgressTable = "onceflow_progress"
	DefaultEpochColumn   = "onceflow_epoch"
	DefaultBatchRows     = 1000
	DefaultMaxHeldRows   = 200_000
)

// Defaults fills the settings every database sink has with the defaults
// where they are unset.
func Defaults(epochColumn, progressTable *string, batchRows, maxHeldRows *int) {
	if *epochColumn == "" {
		*epochColumn = DefaultEpochColumn
	}
	if *progressTable == "" {
		*progressTable = DefaultProgressTable
	}
	if *batchRows <= 0 {
		*batchRows = DefaultBatchRows
	}
	if *maxHeldRows <= 0 {
		*maxHeldRows = DefaultMaxHeldRows
	}
}

// Checks is the configuration every database sink validates the same way.
type Checks struct {
	Columns, Key  []string
	HasRow        bool
	ExactlyOnce   bool
	AtLeastOnce   bool
	TwoPhase      bool // with all three false: an unknown delivery
	Delivery      string
	EpochColumn   string
	ProgressTable string
	// Ident checks a table name in the database's rules.
	Ident func(what, name string) error
}

// PlainName matches a plain SQL name: letters, digits, _ and $, not
// starting with a digit.
var PlainName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]*$`)

// Errors returns what is wrong with c, each error on its own.
func (c Checks) Errors() []error {
	var errs []error
	if len(c.Columns) == 0 {
		errs = append(errs, errors.New("no columns: name the table's columns Row fills"))
	}
	for _, col := range slices.Concat(c.Columns, c.Key) {
		if !PlainName.MatchString(col) {
			errs = append(errs, fmt.Errorf("column %q is not a plain SQL name", col))
		}
	}
	for _, k := range c.Key {
		if !slices.Contains(c.Columns, k) {
			errs = append(errs, fmt.Errorf("key column %q is not among the columns %v", k, c.Columns))
		}
	}
	if !c.HasRow {
		errs = append(errs, errors.New("no Row function: say how a record becomes a row"))
	}
	switch {
	case c.TwoPhase:
	case c.ExactlyOnce:
		if err := c.Ident("progress table", c.ProgressTable); err != nil {
			errs = append(errs, err)
		}
	case c.AtLeastOnce:
		if len(c.Key) == 0 {
			errs = append(errs, errors.New("at-least-once delivery writes idempotent upserts: name the table's primary key columns (key)"))
		}
		if !PlainName.MatchString(c.EpochColumn) {
			errs = append(errs, fmt.Errorf("epoch column %q is not a plain SQL name", c.EpochColumn))
		}
		if slices.Contains(c.Columns, c.EpochColumn) {
			errs = append(errs, fmt.Errorf("epoch column %q is among the columns: the sink writes it itself", c.EpochColumn))
		}
	default:
		errs = append(errs, fmt.Errorf("unknown delivery %q: use exactly-once, at-least-once or two-phase", c.Delivery))
	}
	return errs
}

// CheckIdent checks a table name of up to two dotted plain names (schema
// or database, then table); qualifier names the first part in messages.
func CheckIdent(what, name, qualifier string) error {
	parts := strings.Split(name, ".")
	if name == "" || len(parts) > 2 {
		return fmt.Errorf("%s %q: want name or %s.name", what, name, qualifier)
	}
	for _, p := range parts {
		if !PlainName.MatchString(p) {
			return fmt.Errorf("%s %q: %q is not a plain SQL name (letters, digits, _, $; not starting with a digit)", what, name, p)
		}
	}
	return nil
}

// Columns lists a table's column names for messages, sorted.
func Columns(have map[string]string) string {
	return strings.Join(slices.Sorted(maps.Keys(have)), ", ")
}

// Missing returns the columns of want that have lacks (compared by
// lower).
func Missing(want []string, have map[string]string, lower bool) []string {
	var out []string
	for _, c := range want {
		if lower {
			c = strings.ToLower(c)
		}
		if _, ok := have[c]; !ok {
			out = append(out, c)
		}
	}
	return out
}
