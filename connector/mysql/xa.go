package mysql

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/onceflow/onceflow/internal/sqlsink"
)

// Two-phase delivery through XA transactions. An XA transaction is named
// when it starts, before its checkpoint's id is known, so its xid
// (sqlsink.GID) carries the epoch the writer is in. Recovery does not need
// the id: the runtime commits the transactions the restored checkpoint
// names before it opens writers, and whatever a subtask finds prepared
// when it opens never reached a commit point and is rolled back.

var _ sqlsink.TwoPhaseDriver = (*driver)(nil)

// OpenPrepared opens a two-phase writer's connection after rolling back
// the XA transactions this subtask (and, for subtask 0, any subtask at or
// above parallelism) left prepared: the runtime committed the restored
// checkpoint's before it opened writers.
func (d *driver) OpenPrepared(ctx context.Context, job, uid string, subtask, parallelism int, restored int64) (sqlsink.PreparedConn, error) {
	c, err := d.conn(ctx)
	if err != nil {
		return nil, err
	}
	if err := d.describe(ctx, c); err != nil {
		c.Close()
		return nil, err
	}
	xids, err := recoverXIDs(ctx, c)
	if err != nil {
		c.Close()
		return nil, err
	}
	for _, x := range xids {
		sub, _, ok := sqlsink.ParseGID(x, job, uid)
		if !ok || (sub != subtask && !(subtask == 0 && sub >= parallelism)) {
			continue
		}
		if err := finishXA(ctx, c, "XA ROLLBACK", x); err != nil {
			c.Close()
			return nil, fmt.Errorf("roll back XA transaction %s, which no committed checkpoint up to the restored %d names: %w", x, restored, err)
		}
	}
	return &preparedConn{d: d, conn: c, job: job, uid: uid, subtask: subtask}, nil
}

// recoverXIDs lists the prepared XA transactions (XA RECOVER).
func recoverXIDs(ctx context.Context, c *sql.Conn) ([]string, error) {
	rows, err := c.QueryContext(ctx, "XA RECOVER")
	if err != nil {
		return nil, fmt.Errorf("XA RECOVER, to roll back what no checkpoint committed: %w (the sink's user needs the privilege to list XA transactions: XA_RECOVER_ADMIN on MySQL 8, SUPER on older servers)", explain(err))
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var format, gtridLen, bqualLen int
		var data []byte
		if err := rows.Scan(&format, &gtridLen, &bqualLen, &data); err != nil {
			return nil, err
		}
		if gtridLen <= len(data) {
			out = append(out, string(data[:gtridLen]))
		}
	}
	return out, rows.Err()
}

// CommitPrepared commits the XA transaction handle names; one that no
// longer exists was committed before.
func (d *driver) CommitPrepared(ctx context.Context, handle string) error {
	c, err := d.conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return finishXA(ctx, c, "XA COMMIT", handle)
}

// ListPrepared lists the prepared XA transactions whose xid starts with
// prefix.
func (d *driver) ListPrepared(ctx context.Context, prefix string) ([]string, error) {
	c, err := d.conn(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	xids, err := recoverXIDs(ctx, c)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(xids, func(x string) bool { return !strings.HasPrefix(x, prefix) }), nil
}

// RollbackPrepared rolls back the XA transaction gid; one that no longer
// exists was finished before.
func (d *driver) RollbackPrepared(ctx context.Context, gid string) error {
	c, err := d.conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return finishXA(ctx, c, "XA ROLLBACK", gid)
}

// Statements returns the SQL that commits and that rolls back the XA
// transaction gid.
func (d *driver) Statements(gid string) (commit, rollback string) {
	return "XA COMMIT " + quoteString(gid), "XA ROLLBACK " + quoteString(gid)
}

// xaAttachedWait bounds how long finishXA waits for the session that
// prepared a transaction to let go of it.
const xaAttachedWait = time.Minute

// finishXA runs verb (XA COMMIT or XA ROLLBACK) on the prepared
// transaction x. The server answers XAER_NOTA ("unknown XID") both for a
// transaction that no longer exists and for one still attached to the
// session that prepared it: a writer's session that was just closed, or a
// crashed process's, until the server has cleaned it up. Taking the
// second for the first would leave the transaction prepared, and the next
// start would roll back rows of a committed checkpoint. XA RECOVER lists
// it in both states, so the statement is retried while it is listed.
func finishXA(ctx context.Context, c *sql.Conn, verb, x string) error {
	ctx, cancel := context.WithTimeout(ctx, xaAttachedWait)
	defer cancel()
	backoff := 5 * time.Millisecond
	for {
		_, err := c.ExecContext(ctx, verb+" "+quoteString(x))
		if err == nil {
			return nil
		}
		if !isNotXA(err) {
			return fmt.Errorf("%s %s: %w", verb, x, explain(err))
		}
		xids, rerr := recoverXIDs(ctx, c)
		if rerr != nil {
			return rerr
		}
		if !slices.Contains(xids, x) {
			return nil // finished before
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s %s: the prepared transaction stayed attached to another session for %v (is an earlier instance of the job still running? stop it, or end its connection): %w", verb, x, xaAttachedWait, ctx.Err())
		case <-t.C:
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

// isNotXA reports the error of an XA transaction that does not exist
// (XAER_NOTA).
func isNotXA(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1397
}

func quoteString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// preparedConn is a two-phase writer's connection.
type preparedConn struct {
	d        *driver
	conn     *sql.Conn
	job, uid string
	subtask  int
	open     string // the xid of the open XA transaction, "" when none
}

func (c *preparedConn) Write(ctx context.Context, b sqlsink.Batch) error {
	if c.conn == nil {
		conn, err := c.d.conn(ctx)
		if err != nil {
			return err
		}
		c.conn = conn
	}
	if c.open == "" {
		x := sqlsink.GID(c.job, c.uid, c.subtask, b.Epoch)
		if c.d.retracts {
			if err := readCommitted(ctx, c.conn); err != nil {
				return err
			}
		}
		if _, err := c.conn.ExecContext(ctx, "XA START "+quoteString(x)); err != nil {
			return fmt.Errorf("XA START %s: %w", x, explain(err))
		}
		c.open = x
	}
	return c.d.insert(ctx, c.conn, c.job, b, false)
}

// Prepare ends and prepares the open XA transaction; its xid is the
// handle.
func (c *preparedConn) Prepare(ctx context.Context, _ int64) ([]byte, error) {
	if c.open == "" {
		return nil, nil
	}
	x := c.open
	c.open = ""
	for _, q := range []string{"XA END ", "XA PREPARE "} {
		if _, err := c.conn.ExecContext(ctx, q+quoteString(x)); err != nil {
			return nil, fmt.Errorf("%s%s: %w", q, x, explain(err))
		}
	}
	// A session stays tied to the transaction it prepared until that is
	// committed, and the commit comes later from another session: leave
	// this one (the prepared transaction outlives it, MariaDB 10.5 and
	// MySQL 5.7.7 on) and take a new one for the next epoch.
	c.discard()
	return []byte(x), nil
}

// discard closes the connection for good instead of returning it to the
// pool.
func (c *preparedConn) discard() {
	if c.conn == nil {
		return
	}
	_ = c.conn.Raw(func(any) error { return sqldriver.ErrBadConn })
	_ = c.conn.Close()
	c.conn = nil
}

func (c *preparedConn) Close() error {
	// A connection with an open, unprepared XA transaction must not go
	// back to the pool either: closing it rolls the transaction back.
	c.discard()
	return nil
}
