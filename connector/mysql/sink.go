package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/failpoint"
	"github.com/onceflow/onceflow/internal/sqlsink"
)

// Sink writes records into a MySQL or MariaDB table; see the package doc.
// One Sink value is one operator of one job instance. It is a flow.Sink,
// a flow.CommitPointProvider (with exactly-once delivery) and a
// flow.JobBinder.
type Sink[T any] struct {
	*sqlsink.Sink[T]
	d *driver
}

// ErrFenced is wrapped by the commit error of an instance of the job that a
// newer one fenced (Recover): its transaction is rolled back and it must
// not commit again.
var ErrFenced = sqlsink.ErrFenced

// NewSink validates cfg and returns a sink.
func NewSink[T any](cfg Config[T]) (*Sink[T], error) {
	cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("mysql sink: %w", err)
	}
	d := &driver{dsn: cfg.DSN, table: cfg.Table, columns: cfg.Columns, key: cfg.Key, epoch: cfg.EpochColumn,
		progress: cfg.ProgressTable, fenced: cfg.Delivery == DeliveryAtLeastOnce, retracts: cfg.Retracts != nil}
	if cfg.DeadLetters != nil {
		d.dead = cfg.DeadLetters.Table
	}
	return &Sink[T]{Sink: sqlsink.New(sqlsink.Config[T]{
		Driver: d, Columns: cfg.Columns, Key: cfg.Key, Row: cfg.Row, Retracts: cfg.Retracts, Table: cfg.Table, ExactlyOnce: cfg.Delivery == DeliveryExactlyOnce, TwoPhase: cfg.Delivery == DeliveryTwoPhase,
		BatchRows: cfg.BatchRows, MaxHeldRows: cfg.MaxHeldRows, Job: cfg.Job, DeadLetters: cfg.DeadLetters,
	}), d: d}, nil
}

// Close closes the connection a Recover opened when no writer will use it
// (a job refused to start), and the sink's connection pool.
func (s *Sink[T]) Close() error {
	return errors.Join(s.Sink.Close(), s.d.close())
}

// driver is MySQL's part of the database sink (internal/sqlsink).
type driver struct {
	dsn, table      string
	columns, key    []string
	epoch, progress string
	fenced          bool // at-least-once: upserts fenced by epoch
	// retracts: records may be retractions, whose keys are deleted.
	retracts bool
	// dead is the dead-letter table, "" when the sink keeps none.
	dead string

	mu sync.Mutex
	db *sql.DB // the pool the connections come from, opened at first use
	// cols describes the sink's columns, from the last describe.
	cols []column
	// tokenMu guards tokens: per sink uid, the attempt (its first
	// checkpoint id) whose at-least-once writers hold a token, and the
	// token. It is held while a token is taken, so the writers of an
	// attempt take one between them.
	tokenMu sync.Mutex
	tokens  map[string][2]int64
}

var _ sqlsink.Driver = (*driver)(nil)

func (d *driver) Name() string { return "mysql" }

func (d *driver) close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.db == nil {
		return nil
	}
	err := d.db.Close()
	d.db = nil
	return err
}

// conn returns a connection of its own from the pool.
func (d *driver) conn(ctx context.Context) (*sql.Conn, error) {
	d.mu.Lock()
	if d.db == nil {
		cfg, err := mysql.ParseDSN(d.dsn)
		if err != nil {
			d.mu.Unlock()
			return nil, fmt.Errorf("DSN %s: %v", RedactDSN(d.dsn), err)
		}
		// Rows are sent as text in the statement (the driver escapes
		// them): a multi-row INSERT of any size needs no prepared
		// statement.
		cfg.InterpolateParams = true
		cfg.ParseTime = true
		if cfg.Timeout == 0 {
			cfg.Timeout = 10 * time.Second
		}
		connector, err := mysql.NewConnector(cfg)
		if err != nil {
			d.mu.Unlock()
			return nil, fmt.Errorf("DSN %s: %v", RedactDSN(d.dsn), err)
		}
		d.db = sql.OpenDB(connector)
	}
	db := d.db
	d.mu.Unlock()
	c, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %v; check that the server runs and the DSN's host, port, user and database are right", RedactDSN(d.dsn), redactErr(err, d.dsn))
	}
	return c, nil
}

// describe checks the table: it exists, has the columns, a unique key on
// the key, and the epoch column with at-least-once delivery.
func (d *driver) describe(ctx context.Context, c *sql.Conn) error {
	schema, table := splitName(d.table)
	rows, err := c.QueryContext(ctx, `SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, CHARACTER_MAXIMUM_LENGTH, NUMERIC_PRECISION, NUMERIC_SCALE, EXTRA FROM information_schema.COLUMNS
		WHERE TABLE_SCHEMA = COALESCE(NULLIF(?, ''), DATABASE()) AND TABLE_NAME = ?`, schema, table)
	if err != nil {
		return fmt.Errorf("read the columns of %s: %w", d.table, explain(err))
	}
	have := map[string]string{}
	byName := map[string]column{}
	for rows.Next() {
		var name, typ, full, nullable, extra string
		var maxChars, precision, scale sql.NullInt64
		if err := rows.Scan(&name, &typ, &full, &nullable, &maxChars, &precision, &scale, &extra); err != nil {
			rows.Close()
			return err
		}
		have[strings.ToLower(name)] = typ
		byName[strings.ToLower(name)] = column{name: name, typ: strings.ToLower(typ), unsigned: strings.Contains(strings.ToLower(full), "unsigned"),
			nullable: nullable == "YES", maxChars: maxChars.Int64, precision: precision.Int64, scale: scale.Int64,
			nullFills: strings.Contains(strings.ToLower(extra), "auto_increment") || strings.EqualFold(typ, "timestamp")}
	}
	cols := make([]column, len(d.columns))
	for i, name := range d.columns {
		cols[i] = byName[strings.ToLower(name)]
		cols[i].name = name
	}
	d.mu.Lock()
	d.cols = cols
	d.mu.Unlock()
	if err := rows.Close(); err != nil {
		return err
	}
	if len(have) == 0 {
		return fmt.Errorf("table %s does not exist: create it (ENGINE=InnoDB; the sink writes columns %s)", d.table, strings.Join(d.columns, ", "))
	}
	var engine sql.NullString
	if err := c.QueryRowContext(ctx, `SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = COALESCE(NULLIF(?, ''), DATABASE()) AND TABLE_NAME = ?`, schema, table).Scan(&engine); err != nil {
		return fmt.Errorf("read the engine of %s: %w", d.table, explain(err))
	}
	if !strings.EqualFold(engine.String, "InnoDB") {
		return fmt.Errorf("table %s uses the %s engine, which has no transactions: rows written before a crash would stay and be written again; ALTER TABLE %s ENGINE=InnoDB", d.table, engine.String, quote(d.table))
	}
	if missing := sqlsink.Missing(d.columns, have, true); len(missing) > 0 {
		return fmt.Errorf("table %s has no column %s (it has %s): add it or fix the sink's columns", d.table, strings.Join(missing, ", "), sqlsink.Columns(have))
	}
	if d.fenced && have[strings.ToLower(d.epoch)] != "bigint" {
		return fmt.Errorf("table %s has no BIGINT column %s, where at-least-once delivery writes each row's epoch to fence replays: ALTER TABLE %s ADD COLUMN %s BIGINT NOT NULL DEFAULT 0",
			d.table, d.epoch, quote(d.table), quote(d.epoch))
	}
	if len(d.key) > 0 {
		want := strings.ToLower(strings.Join(slices.Sorted(slices.Values(d.key)), ","))
		var n int
		err := c.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT LOWER(GROUP_CONCAT(COLUMN_NAME ORDER BY COLUMN_NAME SEPARATOR ',')) AS cols
			FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = COALESCE(NULLIF(?, ''), DATABASE()) AND TABLE_NAME = ? AND NON_UNIQUE = 0
			GROUP BY INDEX_NAME) k WHERE k.cols = ?`, schema, table, want).Scan(&n)
		if err != nil {
			return fmt.Errorf("read the unique keys of %s: %w", d.table, explain(err))
		}
		if n == 0 {
			return fmt.Errorf("table %s has no primary or unique key on (%s), which updates by key need: ALTER TABLE %s ADD PRIMARY KEY (%s)",
				d.table, strings.Join(d.key, ", "), quote(d.table), strings.Join(d.key, ", "))
		}
	}
	// Every writer's connection is described when it opens: the
	// dead-letter table is there before the first row.
	return d.ensureDeadLetterTable(ctx, c)
}

func (d *driver) progressSQL() string { return quote(d.progress) }

// tableExists reports whether the (possibly db-qualified) table exists.
func tableExists(ctx context.Context, c *sql.Conn, name string) (bool, error) {
	schema, table := splitName(name)
	var n int
	err := c.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = COALESCE(NULLIF(?, ''), DATABASE()) AND TABLE_NAME = ?`, schema, table).Scan(&n)
	return n > 0, err
}

// splitName splits db.table; db is "" for an unqualified name.
func splitName(name string) (schema, table string) {
	if i := strings.IndexByte(name, '.'); i >= 0 {
		return name[:i], name[i+1:]
	}
	return "", name
}

// ensureDeadLetterTable creates the dead-letter table when the sink keeps
// dead letters and it is missing. Its key (job, sink, id) makes a replayed
// dead letter a no-op.
func (d *driver) ensureDeadLetterTable(ctx context.Context, c *sql.Conn) error {
	if d.dead == "" {
		return nil
	}
	if exists, err := tableExists(ctx, c, d.dead); err != nil || exists {
		return explain(err)
	}
	_, err := c.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+quote(d.dead)+` (
		job VARCHAR(191) NOT NULL,
		sink VARCHAR(191) NOT NULL,
		id VARCHAR(191) NOT NULL,
		k LONGBLOB NULL,
		v LONGBLOB NULL,
		error TEXT NOT NULL,
		rejected_at DATETIME(6) NOT NULL,
		epoch BIGINT NOT NULL,
		PRIMARY KEY (job, sink, id)) ENGINE=InnoDB`)
	if err != nil {
		return fmt.Errorf("create the dead-letter table %s (rejected records are kept there): %w; create it yourself or grant CREATE", d.dead, explain(err))
	}
	return nil
}

// insertDead inserts b's dead letters; one already there (a replay) is
// left alone.
func (d *driver) insertDead(ctx context.Context, ex execer, job string, b sqlsink.Batch) error {
	for dead := range slices.Chunk(b.Dead, 65535/8) {
		var sb strings.Builder
		sb.WriteString("INSERT INTO " + quote(d.dead) + " (job, sink, id, k, v, error, rejected_at, epoch) VALUES ")
		args := make([]any, 0, 8*len(dead))
		for i, x := range dead {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString("(?, ?, ?, ?, ?, ?, ?, ?)")
			args = append(args, job, x.Sink, x.ID, x.Key, x.Value, x.Error, x.At.UTC(), b.Epoch)
		}
		sb.WriteString(" ON DUPLICATE KEY UPDATE id = id")
		if _, err := ex.ExecContext(ctx, sb.String(), args...); err != nil {
			return fmt.Errorf("write %d dead letters into %s: %w", len(dead), d.dead, explain(err))
		}
	}
	return nil
}

func (d *driver) ensureProgressTable(ctx context.Context, c *sql.Conn) error {
	// A table someone created for the sink needs no CREATE privilege.
	if exists, err := tableExists(ctx, c, d.progress); err != nil || exists {
		return explain(err)
	}
	_, err := c.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+d.progressSQL()+` (
		job VARCHAR(255) NOT NULL PRIMARY KEY,
		checkpoint BIGINT NOT NULL,
		manifest VARCHAR(128) NOT NULL,
		incarnation VARCHAR(128) NOT NULL,
		state_id VARCHAR(128) NOT NULL,
		committed_at DATETIME(6) NULL,
		fence BIGINT NOT NULL,
		owner_conn BIGINT NOT NULL
	) ENGINE=InnoDB`)
	if err != nil {
		return fmt.Errorf("create the progress table %s (the commit point of exactly-once delivery keeps one row per job there): %w; create it yourself or grant CREATE", d.progress, explain(err))
	}
	return nil
}

func (d *driver) readRecord(ctx context.Context, c *sql.Conn, job string) (rec flow.CommitRecord, fence, owner int64, err error) {
	var at sql.NullTime
	err = c.QueryRowContext(ctx, `SELECT checkpoint, manifest, incarnation, state_id, committed_at, fence, owner_conn FROM `+d.progressSQL()+` WHERE job = ?`, job).
		Scan(&rec.Checkpoint, &rec.Manifest, &rec.Incarnation, &rec.StateID, &at, &fence, &owner)
	if err != nil {
		return flow.CommitRecord{}, 0, 0, err
	}
	if rec.Checkpoint <= 0 && rec.StateID == "" {
		return flow.CommitRecord{}, fence, owner, nil // no record, no start mark
	}
	rec.Job, rec.Time = job, at.Time
	return rec, fence, owner, nil
}

// Peek reads the job's progress row: the last committed checkpoint.
func (d *driver) Peek(ctx context.Context, job string) (flow.CommitRecord, error) {
	c, err := d.conn(ctx)
	if err != nil {
		return flow.CommitRecord{}, err
	}
	defer c.Close()
	if exists, err := tableExists(ctx, c, d.progress); err != nil || !exists {
		return flow.CommitRecord{}, explain(err)
	}
	rec, _, _, err := d.readRecord(ctx, c, job)
	if errors.Is(err, sql.ErrNoRows) {
		return flow.CommitRecord{}, nil
	}
	if err != nil {
		return flow.CommitRecord{}, fmt.Errorf("read the progress row of job %q: %w", job, explain(err))
	}
	return rec, nil
}

// Recover kills the previous instance's connection (its open transaction
// rolls back), then increments the progress row's fence, which waits for
// a transaction that already updated the row.
func (d *driver) Recover(ctx context.Context, job string) (flow.CommitRecord, sqlsink.TxConn, error) {
	c, err := d.conn(ctx)
	if err != nil {
		return flow.CommitRecord{}, nil, err
	}
	rec, fence, err := d.fence(ctx, c, job)
	if err != nil {
		c.Close()
		return flow.CommitRecord{}, nil, err
	}
	return rec, &txConn{d: d, conn: c, fence: fence, job: job}, nil
}

func (d *driver) fence(ctx context.Context, c *sql.Conn, job string) (flow.CommitRecord, int64, error) {
	if err := d.describe(ctx, c); err != nil {
		return flow.CommitRecord{}, 0, err
	}
	if err := d.ensureProgressTable(ctx, c); err != nil {
		return flow.CommitRecord{}, 0, err
	}
	// The previous instance's connection, if it is still there (same
	// user and database: connection ids start again after a server
	// restart), is a zombie: end it. Without the privilege to, the fence
	// below still waits for its transaction.
	if _, _, owner, err := d.readRecord(ctx, c, job); err == nil && owner > 0 {
		var alive int
		_ = c.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
			WHERE ID = ? AND ID <> CONNECTION_ID() AND USER = SUBSTRING_INDEX(CURRENT_USER(), '@', 1) AND DB = DATABASE()`, owner).Scan(&alive)
		if alive > 0 {
			_, _ = c.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", owner))
		}
	}
	if _, err := c.ExecContext(ctx, `INSERT INTO `+d.progressSQL()+` (job, checkpoint, manifest, incarnation, state_id, committed_at, fence, owner_conn)
		VALUES (?, 0, '', '', '', NULL, 1, CONNECTION_ID())
		ON DUPLICATE KEY UPDATE fence = fence + 1, owner_conn = CONNECTION_ID()`, job); err != nil {
		return flow.CommitRecord{}, 0, fmt.Errorf("fence the earlier instances of job %q in %s: %w", job, d.progress, explain(err))
	}
	rec, fence, _, err := d.readRecord(ctx, c, job)
	if err != nil {
		return flow.CommitRecord{}, 0, fmt.Errorf("read the progress row of job %q: %w", job, explain(err))
	}
	return rec, fence, nil
}

// OpenUpsert opens an at-least-once writer's connection. The first writer
// of an attempt (first, the attempt's first checkpoint id, names it)
// takes a new token: it increments the fence of the sink's attempt row
// in the progress table (sqlsink.AttemptKey), which fences the writers
// of every attempt before it. The attempt's other writers share it.
func (d *driver) OpenUpsert(ctx context.Context, job, uid string, first int64) (sqlsink.UpsertConn, error) {
	c, err := d.conn(ctx)
	if err != nil {
		return nil, err
	}
	if err := d.describe(ctx, c); err != nil {
		c.Close()
		return nil, err
	}
	key := sqlsink.AttemptKey(job, uid)
	token, err := d.attemptToken(ctx, c, key, uid, first)
	if err != nil {
		c.Close()
		return nil, err
	}
	return &upsertConn{d: d, conn: c, job: job, uid: uid, key: key, token: token}, nil
}

// attemptToken returns the token of the attempt starting at checkpoint
// first of sink uid, taking a new one when the attempt is new.
func (d *driver) attemptToken(ctx context.Context, c *sql.Conn, key, uid string, first int64) (int64, error) {
	d.tokenMu.Lock()
	defer d.tokenMu.Unlock()
	if t, ok := d.tokens[uid]; ok && t[0] == first {
		return t[1], nil
	}
	if err := d.ensureProgressTable(ctx, c); err != nil {
		return 0, err
	}
	// In a transaction: the row stays locked by the increment until the
	// token is read, so it is this increment's.
	var token int64
	err := d.inTx(ctx, c, func() error {
		if _, err := c.ExecContext(ctx, `INSERT INTO `+d.progressSQL()+` (job, checkpoint, manifest, incarnation, state_id, committed_at, fence, owner_conn)
			VALUES (?, 0, '', '', '', NULL, 1, CONNECTION_ID())
			ON DUPLICATE KEY UPDATE fence = fence + 1, owner_conn = CONNECTION_ID()`, key); err != nil {
			return explain(err)
		}
		return c.QueryRowContext(ctx, `SELECT fence FROM `+d.progressSQL()+` WHERE job = ?`, key).Scan(&token)
	})
	if err != nil {
		return 0, fmt.Errorf("take a token for this attempt (the row %q of %s, which fences the writers of earlier attempts): %w", key, d.progress, err)
	}
	if d.tokens == nil {
		d.tokens = map[string][2]int64{}
	}
	d.tokens[uid] = [2]int64{first, token}
	return token, nil
}

// inTx runs fn in a transaction on c (BEGIN and COMMIT statements, which
// take ctx), rolled back when fn fails.
func (d *driver) inTx(ctx context.Context, c *sql.Conn, fn func() error) error {
	if _, err := c.ExecContext(ctx, "BEGIN"); err != nil {
		return fmt.Errorf("begin a transaction: %w", explain(err))
	}
	if err := fn(); err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_, _ = c.ExecContext(rctx, "ROLLBACK")
		cancel()
		return err
	}
	if _, err := c.ExecContext(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("commit: %w", explain(err))
	}
	return nil
}

// txConn is the connection of an instance's transactions. It runs them
// with BEGIN, COMMIT and ROLLBACK statements rather than a *sql.Tx, whose
// Commit and Rollback take no context: every call gets the caller's
// deadline, so a server that stops answering fails the checkpoint
// instead of blocking the job.
type txConn struct {
	d     *driver
	conn  *sql.Conn
	fence int64
	job   string
	open  bool // a transaction is open
}

// Fence is the fence Recover took (sqlsink.Fencer).
func (c *txConn) Fence() int64 { return c.fence }

func (c *txConn) begin(ctx context.Context) error {
	if c.open {
		return nil
	}
	if _, err := c.conn.ExecContext(ctx, "BEGIN"); err != nil {
		return fmt.Errorf("begin a transaction: %w", explain(err))
	}
	c.open = true
	return nil
}

func (c *txConn) Write(ctx context.Context, b sqlsink.Batch) error {
	if err := c.begin(ctx); err != nil {
		return err
	}
	return c.d.insert(ctx, c.conn, c.job, b, false)
}

// Commit updates the progress row under the fence and commits.
func (c *txConn) Commit(ctx context.Context, rec flow.CommitRecord) error {
	if err := c.begin(ctx); err != nil {
		return err
	}
	res, err := c.conn.ExecContext(ctx, `UPDATE `+c.d.progressSQL()+` SET checkpoint = ?, manifest = ?, incarnation = ?, state_id = ?, committed_at = ?
		WHERE job = ? AND fence = ?`, rec.Checkpoint, rec.Manifest, rec.Incarnation, rec.StateID, rec.Time.UTC(), c.job, c.fence)
	if err != nil {
		return fmt.Errorf("update the progress row: %w", explain(err))
	}
	// Affected rows count changed rows; the checkpoint id always changes.
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("%w: the progress row of job %q has a fence above this instance's %d", sqlsink.ErrFenced, c.job, c.fence)
	}
	if rec.Checkpoint == 0 {
		// A start mark (flow.StartMarker), not a checkpoint's commit.
	} else if err := failpoint.Inject(failpoint.BeforeDBCommit); err != nil {
		return err
	}
	c.open = false
	if _, err := c.conn.ExecContext(ctx, "COMMIT"); err != nil {
		// The outcome is unknown when the connection broke during the
		// commit; Recover reads it from the progress row.
		return fmt.Errorf("commit: %w", explain(err))
	}
	return nil
}

func (c *txConn) Rollback() {
	if c.open {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = c.conn.ExecContext(ctx, "ROLLBACK")
		c.open = false
	}
}

func (c *txConn) Close() error { return c.conn.Close() }

// upsertConn is an at-least-once writer's connection; token is its
// attempt's.
type upsertConn struct {
	d             *driver
	conn          *sql.Conn
	job, uid, key string
	token         int64
}

// HighestEpoch implements sqlsink.EpochReader: once per attempt, a scan of
// the table unless the epoch column is indexed.
func (c *upsertConn) HighestEpoch(ctx context.Context) (int64, error) {
	var high int64
	if err := c.conn.QueryRowContext(ctx, "SELECT COALESCE(MAX("+quote(c.d.epoch)+"), 0) FROM "+quote(c.d.table)).Scan(&high); err != nil {
		return 0, explain(err)
	}
	return high, nil
}

// Upsert writes b in a transaction, fenced by epoch, unless a later
// attempt of the job took the attempt row's token: the transaction first
// reads the row LOCK IN SHARE MODE, so a new attempt's token waits for a
// batch that passed the check.
func (c *upsertConn) Upsert(ctx context.Context, b sqlsink.Batch) error {
	if b.Retract != nil {
		if err := readCommitted(ctx, c.conn); err != nil {
			return err
		}
	}
	return c.d.inTx(ctx, c.conn, func() error {
		var token int64
		err := c.conn.QueryRowContext(ctx, `SELECT fence FROM `+c.d.progressSQL()+` WHERE job = ? LOCK IN SHARE MODE`, c.key).Scan(&token)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("read the token of the sink's attempt: %w", explain(err))
		}
		if token != c.token {
			return sqlsink.AttemptFenced(c.d.Name(), c.job, c.uid, c.key, c.d.progress)
		}
		return c.d.insert(ctx, c.conn, c.job, b, true)
	})
}

func (c *upsertConn) Close() error { return c.conn.Close() }

// readCommitted makes the next transaction on c READ COMMITTED, for the
// transactions that delete while other writers of the sink write
// (at-least-once batches, XA transactions). Under REPEATABLE READ, the
// default, InnoDB locks the gap where a key to delete is missing (a key
// upserted and deleted within one batch never reached the table), and
// another writer's insert into that gap waits: the writers of
// at-least-once deadlock, and an XA transaction keeps the gap locked
// until its checkpoint commits, which waits for the writer stuck behind
// it. READ COMMITTED locks no gaps. (With binary logging on it needs
// binlog_format ROW or MIXED, MySQL's and MariaDB's defaults.)
func readCommitted(ctx context.Context, c *sql.Conn) error {
	if _, err := c.ExecContext(ctx, "SET TRANSACTION ISOLATION LEVEL READ COMMITTED"); err != nil {
		return fmt.Errorf("make the transaction READ COMMITTED (deletes under REPEATABLE READ lock gaps other writers insert into): %w", explain(err))
	}
	return nil
}

// execer is a connection or a transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// insert writes b with multi-row INSERTs: upserts on the key when there is
// one (fenced by epoch when fenced), after the deletes of its
// retractions' keys (sqlsink.Batch.Split). A statement the server refuses
// is tried again row by row, so that a row that cannot be written is
// named; in a transaction a failed statement rolls back alone.
func (d *driver) insert(ctx context.Context, ex execer, job string, b sqlsink.Batch, fenced bool) error {
	if err := d.insertDead(ctx, ex, job, b); err != nil {
		return err
	}
	upserts, deletes := b.Split(d.keyIndexes())
	if len(deletes) > 0 {
		query := d.deleteSQL(fenced)
		idx := d.keyIndexes()
		args := make([]any, len(idx), len(idx)+1)
		for _, r := range deletes {
			for i, k := range idx {
				args[i] = r[k]
			}
			if fenced {
				args = append(args[:len(idx)], b.Epoch)
			}
			if _, err := ex.ExecContext(ctx, query, args...); err != nil {
				return fmt.Errorf("delete the key %v from %s: %w", args[:len(idx)], d.table, explain(err))
			}
		}
	}
	cols := len(d.columns)
	if fenced {
		cols++
	}
	for rows := range slices.Chunk(upserts, 65535/cols) {
		query, args := d.insertSQL(rows, b.Epoch, fenced)
		_, err := ex.ExecContext(ctx, query, args...)
		if err == nil {
			continue
		}
		if !isDataError(err) {
			return fmt.Errorf("insert %d rows into %s: %w", len(rows), d.table, explain(err))
		}
		for _, r := range rows {
			query, args := d.insertSQL([][]any{r}, b.Epoch, fenced)
			if _, err := ex.ExecContext(ctx, query, args...); err != nil {
				if isDataError(err) {
					return flow.Unrecoverable(fmt.Errorf("table %s refuses the row %v: %w", d.table, r, err))
				}
				return fmt.Errorf("insert a row into %s: %w", d.table, explain(err))
			}
		}
	}
	return nil
}

func (d *driver) keyIndexes() []int {
	idx := make([]int, len(d.key))
	for i, k := range d.key {
		idx[i] = slices.Index(d.columns, k)
	}
	return idx
}

// deleteSQL returns the DELETE of one key (its columns' values, then,
// fenced, the epoch: a row is deleted only when its epoch is at most
// that, as a fenced upsert replaces only such a row). One key per
// statement: an equality on the whole unique key locks that row only,
// where InnoDB may run a list of keys (IN, OR) as a scan that waits on
// every row other writers of the sink hold, and they on its rows: a
// deadlock (seen with four at-least-once writers).
func (d *driver) deleteSQL(fenced bool) string {
	var where []string
	for _, k := range d.key {
		where = append(where, quote(k)+" = ?")
	}
	if fenced {
		where = append(where, quote(d.epoch)+" <= ?")
	}
	return "DELETE FROM " + quote(d.table) + " WHERE " + strings.Join(where, " AND ")
}

// insertSQL returns a multi-row INSERT of rows.
func (d *driver) insertSQL(rows [][]any, epoch int64, fenced bool) (string, []any) {
	cols := slices.Clone(d.columns)
	if fenced {
		cols = append(cols, d.epoch)
	}
	var sb strings.Builder
	sb.WriteString("INSERT INTO ")
	sb.WriteString(quote(d.table))
	sb.WriteString(" (")
	for i, c := range cols {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(quote(c))
	}
	sb.WriteString(") VALUES ")
	place := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ") + ")"
	args := make([]any, 0, len(rows)*len(cols))
	for i, r := range rows {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(place)
		args = append(args, r...)
		if fenced {
			args = append(args, epoch)
		}
	}
	if len(d.key) == 0 {
		return sb.String(), args
	}
	sb.WriteString(" ON DUPLICATE KEY UPDATE ")
	var set []string
	e := quote(d.epoch)
	for _, c := range d.columns {
		if slices.Contains(d.key, c) {
			continue
		}
		q := quote(c)
		if fenced {
			// Assignments run left to right and see the new values: the
			// epoch is assigned last, so these compare the old one.
			set = append(set, fmt.Sprintf("%s = IF(%s <= VALUES(%s), VALUES(%s), %s)", q, e, e, q, q))
		} else {
			set = append(set, fmt.Sprintf("%s = VALUES(%s)", q, q))
		}
	}
	if fenced {
		set = append(set, fmt.Sprintf("%s = GREATEST(%s, VALUES(%s))", e, e, e))
	}
	if len(set) == 0 { // every column is in the key
		k := quote(d.key[0])
		set = append(set, k+" = "+k)
	}
	sb.WriteString(strings.Join(set, ", "))
	return sb.String(), args
}

// isDataError reports whether the server refused a value (strict mode):
// the row, not the connection, is at fault.
func isDataError(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case 1048, // column cannot be null
		1264, // out of range
		1265, // data truncated
		1292, // incorrect value (dates, numbers)
		1366, // incorrect integer/string value
		1406, // data too long
		1452, // foreign key
		3140: // invalid JSON
		return true
	}
	return false
}

// explain adds what to do to the server errors a user meets.
func explain(err error) error {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return err
	}
	switch me.Number {
	case 1142, 1143, 1044, 1227:
		return fmt.Errorf("%w (grant the sink's user the privilege: it inserts and updates the table's rows, and with exactly-once delivery reads and writes the progress table)", err)
	case 1146:
		return fmt.Errorf("%w (create the table)", err)
	case 1054:
		return fmt.Errorf("%w (add the column or fix the sink's columns)", err)
	case 1205:
		return fmt.Errorf("%w (another session holds the rows: an earlier instance of the job, or a long transaction)", err)
	}
	return err
}

// newRowCheck returns the client-side check of a row (sqlsink.RowChecker).
func (d *driver) newRowCheck() func([]any) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return newCheck(d.table, d.cols)
}

func (c *txConn) NewCheck() func([]any) error       { return c.d.newRowCheck() }
func (c *upsertConn) NewCheck() func([]any) error   { return c.d.newRowCheck() }
func (c *preparedConn) NewCheck() func([]any) error { return c.d.newRowCheck() }
