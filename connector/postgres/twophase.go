package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/onceflow/onceflow/internal/sqlsink"
)

var _ sqlsink.TwoPhaseDriver = (*driver)(nil)

// OpenPrepared opens a two-phase writer's connection. It checks that the
// server allows prepared transactions, then rolls back what this subtask
// left prepared (and, for subtask 0, what any subtask at or above
// parallelism left: a rescale down leaves nobody else to): the runtime
// committed what the restored checkpoint names before it opened writers,
// so the rest never reached a commit point, and a prepared transaction
// left behind holds its locks and blocks VACUUM.
func (d *driver) OpenPrepared(ctx context.Context, job, uid string, subtask, parallelism int, restored int64) (sqlsink.PreparedConn, error) {
	conn, err := d.connect(ctx, "two-phase", job)
	if err != nil {
		return nil, err
	}
	c, err := d.openPrepared(ctx, conn, job, uid, subtask, parallelism, restored)
	if err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	return c, nil
}

func (d *driver) openPrepared(ctx context.Context, conn *pgx.Conn, job, uid string, subtask, parallelism int, restored int64) (*preparedConn, error) {
	var max int
	if err := conn.QueryRow(ctx, "SELECT current_setting('max_prepared_transactions')::int").Scan(&max); err != nil {
		return nil, fmt.Errorf("read max_prepared_transactions: %w", explain(err))
	}
	if max == 0 {
		return nil, fmt.Errorf("two-phase delivery prepares one transaction per subtask and checkpoint, and the server has max_prepared_transactions = 0 (PostgreSQL's default), which disables them: set max_prepared_transactions in postgresql.conf to at least the sink's parallelism times (tolerable failed checkpoints + 2) and restart the server, or use delivery exactly-once (the database transaction as the job's commit point; possible when the job has no other transactional sink)")
	}
	cols, err := d.describe(ctx, conn)
	if err != nil {
		return nil, err
	}
	if err := d.ensureDeadLetterTable(ctx, conn); err != nil {
		return nil, err
	}
	gids, err := listPrepared(ctx, conn, sqlsink.GIDPrefix(job, uid))
	if err != nil {
		return nil, err
	}
	for _, gid := range gids {
		sub, id, ok := sqlsink.ParseGID(gid, job, uid)
		if !ok || (sub != subtask && !(subtask == 0 && sub >= parallelism)) {
			continue
		}
		if _, err := conn.Exec(ctx, "ROLLBACK PREPARED "+quoteLiteral(gid)); err != nil && !notExist(err) {
			return nil, fmt.Errorf("roll back %s, prepared for checkpoint %d, which no committed checkpoint up to the restored %d names: %w", gid, id, restored, explain(err))
		}
	}
	return &preparedConn{d: d, conn: conn, cols: cols, job: job, uid: uid, subtask: subtask}, nil
}

func listPrepared(ctx context.Context, conn *pgx.Conn, prefix string) ([]string, error) {
	rows, err := conn.Query(ctx, "SELECT gid FROM pg_prepared_xacts WHERE database = current_database() AND starts_with(gid, $1)", prefix)
	if err != nil {
		return nil, fmt.Errorf("list prepared transactions: %w", explain(err))
	}
	gids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list prepared transactions: %w", explain(err))
	}
	return gids, nil
}

// ListPrepared lists the prepared transactions of the database whose gid
// starts with prefix, on a connection of its own.
func (d *driver) ListPrepared(ctx context.Context, prefix string) ([]string, error) {
	conn, err := d.connect(ctx, "committer", "")
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	return listPrepared(ctx, conn, prefix)
}

// RollbackPrepared rolls gid back on a connection of its own; a gid that
// no longer exists was finished before.
func (d *driver) RollbackPrepared(ctx context.Context, gid string) error {
	conn, err := d.connect(ctx, "committer", "")
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "ROLLBACK PREPARED "+quoteLiteral(gid)); err != nil && !notExist(err) {
		return fmt.Errorf("rollback prepared %s: %w", gid, explain(err))
	}
	return nil
}

// Statements returns the SQL that commits and that rolls back gid.
func (d *driver) Statements(gid string) (commit, rollback string) {
	return "COMMIT PREPARED " + quoteLiteral(gid), "ROLLBACK PREPARED " + quoteLiteral(gid)
}

// CommitPrepared commits gid on a connection of its own; a gid that no
// longer exists was committed before.
func (d *driver) CommitPrepared(ctx context.Context, gid string) error {
	conn, err := d.connect(ctx, "committer", "")
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return commitPrepared(ctx, conn, gid)
}

func commitPrepared(ctx context.Context, conn *pgx.Conn, gid string) error {
	if _, err := conn.Exec(ctx, "COMMIT PREPARED "+quoteLiteral(gid)); err != nil && !notExist(err) {
		return fmt.Errorf("commit prepared %s: %w", gid, explain(err))
	}
	return nil
}

// notExist reports the error of a prepared transaction that does not
// exist.
func notExist(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42704"
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// preparedConn is a two-phase writer's connection.
type preparedConn struct {
	d        *driver
	conn     *pgx.Conn
	cols     []column
	job, uid string
	subtask  int
	open     bool // a transaction is open
}

func (c *preparedConn) NewCheck() func([]any) error { return newCheck(c.d.table, c.cols) }

func (c *preparedConn) Write(ctx context.Context, b sqlsink.Batch) error {
	if !c.open {
		if _, err := c.conn.Exec(ctx, "BEGIN"); err != nil {
			return fmt.Errorf("begin a transaction: %w", explain(err))
		}
		c.open = true
	}
	return c.d.write(ctx, c.conn, c.job, b)
}

// Prepare prepares the open transaction for checkpoint id, under the gid
// it returns as the handle; nil when none is open.
func (c *preparedConn) Prepare(ctx context.Context, id int64) ([]byte, error) {
	if !c.open {
		return nil, nil
	}
	c.open = false
	gid := sqlsink.GID(c.job, c.uid, c.subtask, id)
	tag, err := c.conn.Exec(ctx, "PREPARE TRANSACTION "+quoteLiteral(gid))
	if err != nil {
		return nil, fmt.Errorf("prepare %s: %w", gid, explain(err))
	}
	// An aborted transaction "prepares" as a rollback, without an error.
	if tag.String() != "PREPARE TRANSACTION" {
		return nil, fmt.Errorf("prepare %s: the server answered %q: the transaction had failed and was rolled back", gid, tag.String())
	}
	return []byte(gid), nil
}

func (c *preparedConn) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.conn.Close(ctx)
}
