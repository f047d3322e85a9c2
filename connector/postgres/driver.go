package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/failpoint"
	"github.com/onceflow/onceflow/internal/sqlsink"
)

// driver is PostgreSQL's part of the database sink (internal/sqlsink).
type driver struct {
	dsn, table      string
	columns, key    []string
	epoch, progress string
	fenced          bool // at-least-once: upserts fenced by epoch
	// dead is the dead-letter table, "" when the sink keeps none.
	dead string

	// mu guards tokens: per sink uid, the attempt (its first checkpoint
	// id) whose at-least-once writers hold a token, and the token.
	mu     sync.Mutex
	tokens map[string][2]int64
}

var _ sqlsink.Driver = (*driver)(nil)

func (d *driver) Name() string { return "postgres" }

// connect opens a connection named for the job (application_name), so
// that the job's connections can be found and fenced.
func (d *driver) connect(ctx context.Context, role, job string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(d.dsn)
	if err != nil {
		return nil, fmt.Errorf("DSN %s: %v", RedactDSN(d.dsn), redactErr(err, d.dsn))
	}
	cfg.RuntimeParams["application_name"] = appName(role, job)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %v; check that the server runs and the DSN's host, port, user and database are right", RedactDSN(d.dsn), redactErr(err, d.dsn))
	}
	return conn, nil
}

// appName is the application_name of a connection: role "writer" for the
// one that commits, "reader" for Peek's.
func appName(role, job string) string {
	name := "onceflow " + role + ":" + job
	if len(name) > 63 {
		// The server keeps 63 bytes: a long name is cut and ends with a
		// hash of the whole job name, so that two jobs sharing a long
		// prefix do not fence each other.
		h := sha256.Sum256([]byte(job))
		name = name[:63-17] + ":" + hex.EncodeToString(h[:8])
	}
	return name
}

// column is a column of the table.
type column struct {
	name string
	oid  uint32
	typ  string
}

// describe reads the table's columns and checks those the sink writes,
// the key's constraint and the epoch column.
func (d *driver) describe(ctx context.Context, conn *pgx.Conn) ([]column, error) {
	var relid uint32
	if err := conn.QueryRow(ctx, "SELECT to_regclass($1)::oid", ident(d.table)).Scan(&relid); err != nil || relid == 0 {
		if err == nil || strings.Contains(err.Error(), "cannot scan NULL") {
			return nil, fmt.Errorf("table %s does not exist in database %q: create it (the sink writes columns %s)", d.table, conn.Config().Database, strings.Join(d.wantColumns(), ", "))
		}
		return nil, fmt.Errorf("look up table %s: %w", d.table, err)
	}
	rows, err := conn.Query(ctx, `SELECT attname, atttypid, format_type(atttypid, atttypmod) FROM pg_attribute
		WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped`, relid)
	if err != nil {
		return nil, fmt.Errorf("read the columns of %s: %w", d.table, err)
	}
	have := map[string]column{}
	types := map[string]string{}
	for rows.Next() {
		var c column
		if err := rows.Scan(&c.name, &c.oid, &c.typ); err != nil {
			return nil, err
		}
		have[c.name], types[c.name] = c, c.typ
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the columns of %s: %w", d.table, err)
	}
	if missing := sqlsink.Missing(d.columns, types, false); len(missing) > 0 {
		return nil, fmt.Errorf("table %s has no column %s (it has %s): add it or fix the sink's columns", d.table, strings.Join(missing, ", "), sqlsink.Columns(types))
	}
	cols := make([]column, len(d.columns))
	for i, name := range d.columns {
		cols[i] = have[name]
	}
	if d.fenced {
		if types[d.epoch] != "bigint" {
			return nil, fmt.Errorf("table %s has no bigint column %s, where at-least-once delivery writes each row's epoch to fence replays: ALTER TABLE %s ADD COLUMN %s bigint NOT NULL DEFAULT 0",
				d.table, d.epoch, ident(d.table), pgx.Identifier{d.epoch}.Sanitize())
		}
	}
	if len(d.key) > 0 {
		var unique bool
		err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = $1 AND i.indisunique
			AND (SELECT array_agg(a.attname::text ORDER BY a.attname) FROM pg_attribute a WHERE a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)) = $2)`,
			relid, slices.Sorted(slices.Values(d.key))).Scan(&unique)
		if err != nil {
			return nil, fmt.Errorf("read the unique indexes of %s: %w", d.table, err)
		}
		if !unique {
			return nil, fmt.Errorf("table %s has no primary key or unique constraint on (%s), which updates by key need: ALTER TABLE %s ADD PRIMARY KEY (%s)",
				d.table, strings.Join(d.key, ", "), ident(d.table), strings.Join(d.key, ", "))
		}
	}
	return cols, nil
}

func (d *driver) wantColumns() []string {
	cols := slices.Clone(d.columns)
	if d.fenced {
		cols = append(cols, d.epoch+" bigint")
	}
	return cols
}

func (d *driver) progressSQL() string { return ident(d.progress) }

// ensureDeadLetterTable creates the dead-letter table when the sink keeps
// dead letters and it is missing. Its key (job, sink, id) makes a replayed
// dead letter a no-op.
func (d *driver) ensureDeadLetterTable(ctx context.Context, conn *pgx.Conn) error {
	if d.dead == "" {
		return nil
	}
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", ident(d.dead)).Scan(&exists); err != nil {
		return fmt.Errorf("look up the dead-letter table %s: %w", d.dead, explain(err))
	}
	if exists {
		return nil
	}
	_, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+ident(d.dead)+` (
		job text NOT NULL,
		sink text NOT NULL,
		id text NOT NULL,
		key bytea,
		value bytea,
		error text NOT NULL,
		rejected_at timestamptz NOT NULL,
		epoch bigint NOT NULL,
		PRIMARY KEY (job, sink, id))`)
	if err != nil {
		// Writers opening together race to create it; one wins.
		if conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", ident(d.dead)).Scan(&exists) == nil && exists {
			return nil
		}
		return fmt.Errorf("create the dead-letter table %s (rejected records are kept there): %w; create it yourself or grant CREATE", d.dead, explain(err))
	}
	return nil
}

// writeDead inserts b's dead letters; one already there (a replay) is
// left alone.
func (d *driver) writeDead(ctx context.Context, q querier, job string, b sqlsink.Batch) error {
	if len(b.Dead) == 0 {
		return nil
	}
	for dead := range slices.Chunk(b.Dead, maxParams/8) {
		var sb strings.Builder
		sb.WriteString("INSERT INTO " + ident(d.dead) + " (job, sink, id, key, value, error, rejected_at, epoch) VALUES ")
		args := make([]any, 0, 8*len(dead))
		for i, x := range dead {
			if i > 0 {
				sb.WriteString(", ")
			}
			n := len(args)
			fmt.Fprintf(&sb, "($%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d)", n+1, n+2, n+3, n+4, n+5, n+6, n+7, n+8)
			args = append(args, job, x.Sink, x.ID, x.Key, x.Value, x.Error, x.At, b.Epoch)
		}
		sb.WriteString(" ON CONFLICT (job, sink, id) DO NOTHING")
		if _, err := q.Exec(ctx, sb.String(), args...); err != nil {
			return fmt.Errorf("write %d dead letters into %s: %w", len(dead), d.dead, explain(err))
		}
	}
	return nil
}

// ensureProgressTable creates the progress table when it is missing.
func (d *driver) ensureProgressTable(ctx context.Context, conn *pgx.Conn) error {
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", d.progressSQL()).Scan(&exists); err != nil {
		return fmt.Errorf("look up the progress table %s: %w", d.progress, explain(err))
	}
	if exists {
		return nil
	}
	_, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+d.progressSQL()+` (
		job text PRIMARY KEY,
		checkpoint bigint NOT NULL,
		manifest text NOT NULL,
		incarnation text NOT NULL,
		state_id text NOT NULL,
		committed_at timestamptz,
		fence bigint NOT NULL,
		owner_pid integer NOT NULL
	)`)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return nil // another instance created it at the same moment
	}
	if err != nil {
		return fmt.Errorf("create the progress table %s (the commit point of exactly-once delivery keeps one row per job there): %w; create it yourself or grant CREATE on the schema", d.progress, explain(err))
	}
	return nil
}

func scanRecord(row pgx.Row, job string) (flow.CommitRecord, int64, error) {
	var r flow.CommitRecord
	var fence int64
	var at *time.Time
	if err := row.Scan(&r.Checkpoint, &r.Manifest, &r.Incarnation, &r.StateID, &at, &fence); err != nil {
		return flow.CommitRecord{}, 0, err
	}
	if r.Checkpoint <= 0 && r.StateID == "" {
		return flow.CommitRecord{}, fence, nil // no record, no start mark
	}
	r.Job = job
	if at != nil {
		r.Time = *at
	}
	return r, fence, nil
}

// Peek reads the job's progress row on a connection of its own: the last
// committed checkpoint (an open transaction's update is invisible).
func (d *driver) Peek(ctx context.Context, job string) (flow.CommitRecord, error) {
	conn, err := d.connect(ctx, "reader", job)
	if err != nil {
		return flow.CommitRecord{}, err
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", d.progressSQL()).Scan(&exists); err != nil || !exists {
		return flow.CommitRecord{}, explain(err)
	}
	rec, _, err := scanRecord(conn.QueryRow(ctx, `SELECT checkpoint, manifest, incarnation, state_id, committed_at, fence FROM `+d.progressSQL()+` WHERE job = $1`, job), job)
	if errors.Is(err, pgx.ErrNoRows) {
		return flow.CommitRecord{}, nil
	}
	if err != nil {
		return flow.CommitRecord{}, fmt.Errorf("read the progress row of job %q: %w", job, explain(err))
	}
	return rec, nil
}

// Recover ends the job's other connections (their open transactions roll
// back), then increments the fence of the job's progress row, which waits
// for a transaction that already updated the row: afterwards no earlier
// instance can commit, because a commit updates the row only under the
// fence it read at its own start.
func (d *driver) Recover(ctx context.Context, job string) (flow.CommitRecord, sqlsink.TxConn, error) {
	conn, err := d.connect(ctx, "writer", job)
	if err != nil {
		return flow.CommitRecord{}, nil, err
	}
	rec, tc, err := d.fence(ctx, conn, job)
	if err != nil {
		conn.Close(context.Background())
		return flow.CommitRecord{}, nil, err
	}
	return rec, tc, nil
}

func (d *driver) fence(ctx context.Context, conn *pgx.Conn, job string) (flow.CommitRecord, *txConn, error) {
	cols, err := d.describe(ctx, conn)
	if err != nil {
		return flow.CommitRecord{}, nil, err
	}
	if err := d.ensureProgressTable(ctx, conn); err != nil {
		return flow.CommitRecord{}, nil, err
	}
	if err := d.ensureDeadLetterTable(ctx, conn); err != nil {
		return flow.CommitRecord{}, nil, err
	}
	// The job's other connections are earlier instances (or a second
	// instance of the same job, which must not run either): end them.
	// Without the privilege to, the fence below still waits for their
	// transactions.
	_, _ = conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name = $1 AND pid <> pg_backend_pid() AND datname = current_database()`, appName("writer", job))
	rec, fence, err := scanRecord(conn.QueryRow(ctx, `INSERT INTO `+d.progressSQL()+` AS p (job, checkpoint, manifest, incarnation, state_id, committed_at, fence, owner_pid)
		VALUES ($1, 0, '', '', '', NULL, 1, pg_backend_pid())
		ON CONFLICT (job) DO UPDATE SET fence = p.fence + 1, owner_pid = pg_backend_pid()
		RETURNING checkpoint, manifest, incarnation, state_id, committed_at, fence`, job), job)
	if err != nil {
		return flow.CommitRecord{}, nil, fmt.Errorf("fence the earlier instances of job %q in %s: %w", job, d.progress, explain(err))
	}
	return rec, &txConn{d: d, conn: conn, cols: cols, fence: fence, job: job}, nil
}

// OpenUpsert opens an at-least-once writer's connection. The first writer
// of an attempt (first, the attempt's first checkpoint id, names it)
// takes a new token: it increments the fence of the sink's attempt row
// in the progress table (sqlsink.AttemptKey), which fences the writers
// of every attempt before it. The attempt's other writers share it.
func (d *driver) OpenUpsert(ctx context.Context, job, uid string, first int64) (sqlsink.UpsertConn, error) {
	conn, err := d.connect(ctx, "upserts", job)
	if err != nil {
		return nil, err
	}
	c, err := d.openUpsert(ctx, conn, job, uid, first)
	if err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	return c, nil
}

func (d *driver) openUpsert(ctx context.Context, conn *pgx.Conn, job, uid string, first int64) (*upsertConn, error) {
	cols, err := d.describe(ctx, conn)
	if err != nil {
		return nil, err
	}
	if err := d.ensureDeadLetterTable(ctx, conn); err != nil {
		return nil, err
	}
	key := sqlsink.AttemptKey(job, uid)
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.tokens[uid]
	if !ok || t[0] != first {
		if err := d.ensureProgressTable(ctx, conn); err != nil {
			return nil, err
		}
		var token int64
		if err := conn.QueryRow(ctx, `INSERT INTO `+d.progressSQL()+` AS p (job, checkpoint, manifest, incarnation, state_id, committed_at, fence, owner_pid)
			VALUES ($1, 0, '', '', '', NULL, 1, pg_backend_pid())
			ON CONFLICT (job) DO UPDATE SET fence = p.fence + 1, owner_pid = pg_backend_pid()
			RETURNING fence`, key).Scan(&token); err != nil {
			return nil, fmt.Errorf("take a token for this attempt (the row %q of %s, which fences the writers of earlier attempts): %w", key, d.progress, explain(err))
		}
		if d.tokens == nil {
			d.tokens = map[string][2]int64{}
		}
		t = [2]int64{first, token}
		d.tokens[uid] = t
	}
	return &upsertConn{d: d, conn: conn, cols: cols, job: job, uid: uid, key: key, token: t[1]}, nil
}

// txConn is the connection of an instance's transactions.
type txConn struct {
	d     *driver
	conn  *pgx.Conn
	cols  []column
	fence int64
	job   string
	tx    pgx.Tx // the open transaction, nil when none
}

// Fence is the fence Recover took (sqlsink.Fencer).
func (c *txConn) Fence() int64 { return c.fence }

func (c *txConn) NewCheck() func([]any) error { return newCheck(c.d.table, c.cols) }

func (c *txConn) begin(ctx context.Context) error {
	if c.tx != nil {
		return nil
	}
	tx, err := c.conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin a transaction: %w", explain(err))
	}
	c.tx = tx
	return nil
}

// Write writes b into the open transaction.
func (c *txConn) Write(ctx context.Context, b sqlsink.Batch) error {
	if err := c.begin(ctx); err != nil {
		return err
	}
	return c.d.write(ctx, c.tx, c.job, b)
}

// querier is a connection or a transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error)
}

// write writes b inside a transaction: its dead letters, then COPY when
// rows are appended, multi-row deletes and upserts when there is a key.
func (d *driver) write(ctx context.Context, q querier, job string, b sqlsink.Batch) error {
	if err := d.writeDead(ctx, q, job, b); err != nil {
		return err
	}
	if len(b.Rows) == 0 {
		return nil
	}
	if len(d.key) == 0 {
		if _, err := q.CopyFrom(ctx, pgx.Identifier(strings.Split(d.table, ".")), d.columns, pgx.CopyFromRows(b.Rows)); err != nil {
			return fmt.Errorf("copy %d rows into %s: %w", len(b.Rows), d.table, explain(err))
		}
		return nil
	}
	upserts, deletes := b.Split(d.keyIndexes())
	return d.writeKeyed(ctx, q, upserts, deletes, b.Epoch, false)
}

// writeKeyed deletes the keys of deletes and upserts upserts (their keys
// are distinct: sqlsink.Batch.Split), fenced by epoch when fenced: a
// delete removes only a row of an epoch up to its own, as an upsert
// replaces only such a row.
func (d *driver) writeKeyed(ctx context.Context, q querier, upserts, deletes [][]any, epoch int64, fenced bool) error {
	for rows := range slices.Chunk(deletes, maxParams/len(d.key)-1) {
		query, args := d.deleteSQL(rows, epoch, fenced)
		if _, err := q.Exec(ctx, query, args...); err != nil {
			return fmt.Errorf("delete %d keys from %s: %w", len(rows), d.table, explain(err))
		}
	}
	n := len(d.columns)
	if fenced {
		n++
	}
	for rows := range slices.Chunk(upserts, maxParams/n) {
		query, args := d.insertSQL(rows, epoch, fenced)
		if _, err := q.Exec(ctx, query, args...); err != nil {
			return fmt.Errorf("upsert %d rows into %s: %w", len(rows), d.table, explain(err))
		}
	}
	return nil
}

// deleteSQL returns a DELETE of the keys of rows (a retraction's row:
// its key columns' values as for an upsert); fenced, of rows whose epoch
// is at most epoch.
func (d *driver) deleteSQL(rows [][]any, epoch int64, fenced bool) (string, []any) {
	var sb strings.Builder
	args := make([]any, 0, len(rows)*len(d.key)+1)
	sb.WriteString("DELETE FROM " + ident(d.table) + " WHERE ")
	if fenced {
		args = append(args, epoch)
		sb.WriteString(pgx.Identifier{d.epoch}.Sanitize() + " <= $1 AND ")
	}
	idx := d.keyIndexes()
	if len(idx) == 1 {
		sb.WriteString(pgx.Identifier{d.key[0]}.Sanitize() + " IN (")
		for i, r := range rows {
			if i > 0 {
				sb.WriteString(", ")
			}
			args = append(args, r[idx[0]])
			fmt.Fprintf(&sb, "$%d", len(args))
		}
		sb.WriteString(")")
		return sb.String(), args
	}
	sb.WriteString("(")
	for i, r := range rows {
		if i > 0 {
			sb.WriteString(" OR ")
		}
		sb.WriteString("(")
		for j, k := range idx {
			if j > 0 {
				sb.WriteString(" AND ")
			}
			args = append(args, r[k])
			fmt.Fprintf(&sb, "%s = $%d", pgx.Identifier{d.key[j]}.Sanitize(), len(args))
		}
		sb.WriteString(")")
	}
	sb.WriteString(")")
	return sb.String(), args
}

// Commit updates the progress row under the fence and commits.
func (c *txConn) Commit(ctx context.Context, rec flow.CommitRecord) error {
	if err := c.begin(ctx); err != nil {
		return err
	}
	tag, err := c.tx.Exec(ctx, `UPDATE `+c.d.progressSQL()+` SET checkpoint = $2, manifest = $3, incarnation = $4, state_id = $5, committed_at = $6
		WHERE job = $1 AND fence = $7`, c.job, rec.Checkpoint, rec.Manifest, rec.Incarnation, rec.StateID, rec.Time, c.fence)
	if err != nil {
		return fmt.Errorf("update the progress row: %w", explain(err))
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("%w: the progress row of job %q has a fence above this instance's %d", sqlsink.ErrFenced, c.job, c.fence)
	}
	if rec.Checkpoint == 0 {
		// A start mark (flow.StartMarker), not a checkpoint's commit.
	} else if err := failpoint.Inject(failpoint.BeforeDBCommit); err != nil {
		return err
	}
	tx := c.tx
	c.tx = nil
	if err := tx.Commit(ctx); err != nil {
		// The outcome is unknown when the connection broke during the
		// commit; Recover reads it from the progress row.
		return fmt.Errorf("commit: %w", explain(err))
	}
	return nil
}

func (c *txConn) Rollback() {
	if c.tx != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = c.tx.Rollback(ctx)
		cancel()
		c.tx = nil
	}
}

func (c *txConn) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.conn.Close(ctx)
}

// upsertConn is an at-least-once writer's connection; token is its
// attempt's.
type upsertConn struct {
	d             *driver
	conn          *pgx.Conn
	cols          []column
	job, uid, key string
	token         int64
}

func (c *upsertConn) NewCheck() func([]any) error { return newCheck(c.d.table, c.cols) }

// HighestEpoch implements sqlsink.EpochReader: once per attempt, a scan of
// the table unless the epoch column is indexed.
func (c *upsertConn) HighestEpoch(ctx context.Context) (int64, error) {
	var high int64
	q := pgx.Identifier{c.d.epoch}.Sanitize()
	if err := c.conn.QueryRow(ctx, "SELECT COALESCE(max("+q+"), 0) FROM "+ident(c.d.table)).Scan(&high); err != nil {
		return 0, explain(err)
	}
	return high, nil
}

// Upsert writes b in a transaction of its own, fenced by epoch, unless a
// later attempt of the job took the attempt row's token. The check and
// the statements go in one pipeline (one round trip, one implicit
// transaction): the check reads the row FOR SHARE, so a new attempt's
// token waits for a batch that passed it, and it fails, aborting the
// batch, when the row holds another token.
func (c *upsertConn) Upsert(ctx context.Context, b sqlsink.Batch) error {
	batch := &pgx.Batch{}
	batch.Queue(`SELECT CASE WHEN f = $2 THEN 0 ELSE ('`+attemptFencedMark+` ' || COALESCE(f::text, 'none'))::int END
		FROM (SELECT (SELECT fence FROM `+c.d.progressSQL()+` WHERE job = $1 FOR SHARE) AS f) AS a`, c.key, c.token)
	if err := c.d.writeDead(ctx, batchQueue{batch}, c.job, b); err != nil {
		return err
	}
	upserts, deletes := b.Split(c.d.keyIndexes())
	if err := c.d.writeKeyed(ctx, batchQueue{batch}, upserts, deletes, b.Epoch, true); err != nil {
		return err
	}
	if err := c.conn.SendBatch(ctx, batch).Close(); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "22P02" && strings.Contains(pgErr.Message, attemptFencedMark) {
			return sqlsink.AttemptFenced(c.d.Name(), c.job, c.uid, c.key, c.d.progress)
		}
		return fmt.Errorf("upsert %d rows into %s: %w", len(b.Rows), c.d.table, explain(err))
	}
	return nil
}

// attemptFencedMark is in the error of an at-least-once batch whose
// attempt row holds another token.
const attemptFencedMark = "onceflow attempt fenced: the row holds token"

// batchQueue queues statements into a pipeline instead of running them.
type batchQueue struct{ b *pgx.Batch }

func (q batchQueue) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	q.b.Queue(sql, args...)
	return pgconn.CommandTag{}, nil
}

func (q batchQueue) CopyFrom(context.Context, pgx.Identifier, []string, pgx.CopyFromSource) (int64, error) {
	return 0, errors.New("COPY cannot go into a pipeline")
}

func (c *upsertConn) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.conn.Close(ctx)
}

// newCheck returns a writer's check of its rows against the columns'
// types: each value must encode for its column (pgx's own type map, one per
// writer: a pgtype.Map caches plans and is not safe for concurrent use);
// text goes into any column whose type reads it ("42" into a bigint), as
// the server's text input would.
func newCheck(table string, cols []column) func([]any) error {
	m := pgtype.NewMap()
	var buf []byte
	return func(row []any) error {
		for i, v := range row {
			t, known := m.TypeForOID(cols[i].oid)
			if v == nil || !known {
				continue // NULL, or a type of the database's own (an enum, a domain): the server checks it
			}
			var err error
			if buf, err = m.Encode(cols[i].oid, pgtype.BinaryFormatCode, v, buf[:0]); err == nil {
				continue
			}
			if s, ok := v.(string); ok {
				if x, perr := t.Codec.DecodeValue(m, cols[i].oid, pgtype.TextFormatCode, []byte(s)); perr == nil && x != nil {
					row[i] = x
					continue
				}
			}
			return fmt.Errorf("column %s of table %s is %s, and the record's value %#v (a %T) does not fit it: %v", cols[i].name, table, cols[i].typ, v, v, err)
		}
		return nil
	}
}

// maxParams is PostgreSQL's limit of parameters in one statement.
const maxParams = 65535

// insertSQL returns a multi-row INSERT of rows: an upsert on the key when
// there is one (fenced by epoch when fenced), rows with the same key
// reduced to the last (one statement may not update a row twice).
func (d *driver) insertSQL(rows [][]any, epoch int64, fenced bool) (string, []any) {
	if len(d.key) > 0 {
		rows = lastPerKey(rows, d.keyIndexes())
	}
	cols := slices.Clone(d.columns)
	if fenced {
		cols = append(cols, d.epoch)
	}
	var sb strings.Builder
	sb.WriteString("INSERT INTO ")
	sb.WriteString(ident(d.table))
	sb.WriteString(" AS t (")
	for i, c := range cols {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(pgx.Identifier{c}.Sanitize())
	}
	sb.WriteString(") VALUES ")
	args := make([]any, 0, len(rows)*len(cols))
	for i, r := range rows {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteByte('(')
		for j := range cols {
			if j > 0 {
				sb.WriteString(", ")
			}
			fmt.Fprintf(&sb, "$%d", len(args)+1)
			if j < len(r) {
				args = append(args, r[j])
			} else {
				args = append(args, epoch)
			}
		}
		sb.WriteByte(')')
	}
	if len(d.key) == 0 {
		return sb.String(), args
	}
	sb.WriteString(" ON CONFLICT (")
	for i, k := range d.key {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(pgx.Identifier{k}.Sanitize())
	}
	sb.WriteString(") DO ")
	var set []string
	for _, c := range cols {
		if !slices.Contains(d.key, c) {
			q := pgx.Identifier{c}.Sanitize()
			set = append(set, q+" = EXCLUDED."+q)
		}
	}
	if len(set) == 0 {
		sb.WriteString("NOTHING")
		return sb.String(), args
	}
	sb.WriteString("UPDATE SET ")
	sb.WriteString(strings.Join(set, ", "))
	if fenced {
		q := pgx.Identifier{d.epoch}.Sanitize()
		fmt.Fprintf(&sb, " WHERE t.%s <= EXCLUDED.%s", q, q)
	}
	return sb.String(), args
}

func (d *driver) keyIndexes() []int {
	idx := make([]int, len(d.key))
	for i, k := range d.key {
		idx[i] = slices.Index(d.columns, k)
	}
	return idx
}

// lastPerKey returns rows with only the last row of each key, in the order
// of those last rows. Keys are compared by sqlsink.KeyText: as the database would see them as
// far as Go can tell: a number by its value whatever its Go type (1, an
// int64 1 and a float64 1.0 are one key), a time by its instant, bytes and
// text by their bytes. (A case-insensitive collation or type is the
// server's to know: two such keys in one statement fail it.)
func lastPerKey(rows [][]any, key []int) [][]any {
	last := make(map[string]int, len(rows))
	var sb strings.Builder
	keys := make([]string, len(rows))
	for i, r := range rows {
		sb.Reset()
		for _, k := range key {
			sb.WriteString(sqlsink.KeyText(r[k]))
			sb.WriteByte(0)
		}
		keys[i] = sb.String()
		last[keys[i]] = i
	}
	if len(last) == len(rows) {
		return rows
	}
	out := make([][]any, 0, len(last))
	for i, r := range rows {
		if last[keys[i]] == i {
			out = append(out, r)
		}
	}
	return out
}

// explain adds what to do to the server errors a user meets.
func explain(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	switch pgErr.Code {
	case "42501":
		return fmt.Errorf("%w (grant the sink's user the privilege: the sink inserts and updates the table's rows, and with exactly-once delivery reads and writes the progress table)", err)
	case "42P01":
		return fmt.Errorf("%w (create the table)", err)
	case "42703":
		return fmt.Errorf("%w (add the column or fix the sink's columns)", err)
	case "55P03", "57014":
		return fmt.Errorf("%w (a lock was not granted in time: another session holds the job's progress row or the table)", err)
	}
	return err
}
