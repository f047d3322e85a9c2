// Package mysql writes the records of a job into a MySQL or MariaDB table
// without duplicates (docs/design.md, "Database sinks"), with the same two
// deliveries as connector/postgres:
//
//   - DeliveryExactlyOnce (the default): the database transaction is the
//     job's commit point. One InnoDB transaction per checkpoint, on one
//     connection the sink's subtasks share, holds the checkpoint's rows and
//     the job's progress row (table onceflow_progress). Recovery reads the
//     progress row. No XA is needed. Recover kills the previous instance's
//     connection and increments the row's fence; a commit updates the row
//     only under its own fence.
//   - DeliveryAtLeastOnce: epoch-fenced upserts, INSERT … ON DUPLICATE KEY
//     UPDATE c = IF(t.epoch <= VALUES(epoch), VALUES(c), c), committed
//     batch by batch: a replay writes under a newer epoch, a zombie's older
//     epoch never overwrites a newer row.
//   - DeliveryTwoPhase: a participant of another commit point through XA
//     transactions (XA PREPARE at the barrier, XA COMMIT after the commit
//     point); needs MariaDB 10.5 or MySQL 5.7.7 or later, and the
//     privilege to run XA RECOVER.
//
// The DSN is go-sql-driver/mysql's: user:password@tcp(host:3306)/db. The
// table must be InnoDB (transactions). A value the server refuses for its
// column (strict mode, MariaDB's and MySQL's default) fails the record
// with the column named.
//
// Retractions (Config.Retracts: the records of an updating result that
// take a row back out, pipeline.RowKind -U and -D) delete the row of
// their key in every delivery, as in connector/postgres: one DELETE …
// WHERE key = ? per key after the batch came down to the last operation
// per key; fenced by the attempt token and by epoch in
// DeliveryAtLeastOnce. A retraction into a table without a Key fails the
// job. An at-least-once batch with deletes and, with Retracts set, every
// XA transaction run READ COMMITTED (no gap locks between the sink's
// writers), which needs binlog_format ROW or MIXED when binary logging
// is on.
package mysql

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/internal/sqlsink"
)

// Delivery is how the sink avoids duplicates; see the package doc.
type Delivery = connector.Delivery

const (
	// DeliveryExactlyOnce makes the database transaction the job's commit
	// point. The default.
	DeliveryExactlyOnce = connector.ExactlyOnce
	// DeliveryAtLeastOnce writes epoch-fenced upserts as records come.
	DeliveryAtLeastOnce = connector.AtLeastOnce
	// DeliveryTwoPhase makes the sink a participant of another commit
	// point (a Kafka sink's, or the manifest write) through XA
	// transactions: XA PREPARE at the barrier, XA COMMIT after the commit
	// point.
	DeliveryTwoPhase = connector.TwoPhase
)

// Defaults.
const (
	DefaultProgressTable = sqlsink.DefaultProgressTable
	DefaultEpochColumn   = sqlsink.DefaultEpochColumn
	DefaultBatchRows     = sqlsink.DefaultBatchRows
	DefaultMaxHeldRows   = sqlsink.DefaultMaxHeldRows
)

// Config configures a Sink of records of type T.
type Config[T any] struct {
	// DSN is the server and database: user:password@tcp(host:3306)/db.
	// Messages never show its password.
	DSN string
	// Table is the table the rows go to (optionally db.table). It must
	// exist and be InnoDB.
	Table string
	// Columns are the table's columns Row fills, in order.
	Columns []string
	// Row returns the values of a record's row, one per column (string,
	// int64, float64, bool, time.Time, []byte, nil for NULL).
	Row func(rec T) ([]any, error)
	// Retracts, when set, tells a retraction: a record that takes its row
	// back out of the result (the old row of an update, or a deleted
	// row; a job file's records carry pipeline.RowKindHeader, and
	// kafkarec.RowKind(rec).Retracts() tells). The row Row makes of it
	// is deleted by its Key columns' values, in every delivery; rows of
	// one key in a batch come down to the last upsert or delete. Nil:
	// every record adds its row. A retraction into a table without Key
	// fails the job (an appended row cannot be taken back).
	Retracts func(rec T) bool
	// Key are the columns of the table's primary key (or another unique
	// key). With a Key, a row whose key exists is updated; without one,
	// rows are appended. DeliveryAtLeastOnce needs one.
	Key []string
	// Delivery: DeliveryExactlyOnce (default), DeliveryAtLeastOnce or
	// DeliveryTwoPhase.
	Delivery Delivery
	// EpochColumn is the BIGINT column DeliveryAtLeastOnce writes each
	// row's epoch to (default onceflow_epoch).
	EpochColumn string
	// ProgressTable is the table of the jobs' progress rows
	// (DeliveryExactlyOnce; default onceflow_progress, created when
	// missing).
	ProgressTable string
	// BatchRows is how many rows one INSERT carries (default 1000).
	BatchRows int
	// MaxHeldRows bounds the rows held in memory while the transaction of
	// a checkpoint that may still commit is open (default 200,000).
	MaxHeldRows int
	// Job is the job's name; flow sets it (BindJob) when empty.
	Job string
	// DeadLetters, when set, keeps the records whose row the table
	// refuses (a value that does not fit its column) in a dead-letter
	// table, in the same transaction as the rows, when the sink is added
	// with flow.OnRejected(flow.DeadLetterOnError). Without it (or with
	// the default policy) such a record stops the job.
	DeadLetters *DeadLetters[T]
}

// DeadLetters configures the dead-letter table: Table (default
// onceflow_dead_letters, created when missing, one row per rejected
// record keyed by job, sink and the record's ID) and Of, what is kept of a
// record (its ID in the source, such as topic/partition/offset, its key
// and value).
type DeadLetters[T any] = sqlsink.DeadLetters[T]

// quote quotes a possibly db-qualified name for SQL.
func quote(name string) string {
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = "`" + p + "`"
	}
	return strings.Join(parts, ".")
}

// ValidateTable checks that name is a table name the sink accepts: a plain
// SQL name, optionally qualified by its database.
func ValidateTable(name string) error { return checkIdent("table", name) }

func checkIdent(what, name string) error { return sqlsink.CheckIdent(what, name, "db") }

func (c *Config[T]) withDefaults() {
	if c.Delivery == "" {
		c.Delivery = DeliveryExactlyOnce
	}
	sqlsink.Defaults(&c.EpochColumn, &c.ProgressTable, &c.BatchRows, &c.MaxHeldRows)
}

func (c *Config[T]) validate() error {
	var errs []error
	if c.DSN == "" {
		errs = append(errs, errors.New("no DSN: say which server to write to (user:password@tcp(host:3306)/db)"))
	} else if cfg, err := mysql.ParseDSN(c.DSN); err != nil {
		errs = append(errs, fmt.Errorf("DSN %s: %v", RedactDSN(c.DSN), err))
	} else if cfg.DBName == "" {
		errs = append(errs, fmt.Errorf("DSN %s names no database: end it with /dbname", RedactDSN(c.DSN)))
	}
	if err := checkIdent("table", c.Table); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, sqlsink.Checks{
		Columns: c.Columns, Key: c.Key, HasRow: c.Row != nil,
		ExactlyOnce: c.Delivery == DeliveryExactlyOnce, AtLeastOnce: c.Delivery == DeliveryAtLeastOnce, TwoPhase: c.Delivery == DeliveryTwoPhase,
		Delivery:    string(c.Delivery),
		EpochColumn: c.EpochColumn, ProgressTable: c.ProgressTable, Ident: checkIdent,
	}.Errors()...)
	errs = append(errs, c.DeadLetters.Check(checkIdent))
	return errors.Join(errs...)
}

// RedactDSN returns dsn with its password replaced by "xxxxx".
func RedactDSN(dsn string) string {
	at := strings.LastIndex(dsn, "@")
	if at < 0 {
		return dsn
	}
	user := dsn[:at]
	if i := strings.Index(user, ":"); i >= 0 {
		return user[:i] + ":xxxxx" + dsn[at:]
	}
	return dsn
}

// redactErr keeps the DSN's password out of an error's text.
func redactErr(err error, dsn string) error {
	if err == nil {
		return nil
	}
	if cfg, perr := mysql.ParseDSN(dsn); perr == nil && cfg.Passwd != "" && strings.Contains(err.Error(), cfg.Passwd) {
		return errors.New(strings.ReplaceAll(err.Error(), cfg.Passwd, "xxxxx"))
	}
	return err
}
