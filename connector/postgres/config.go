package postgres

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/internal/sqlsink"
)

// Delivery is how the sink avoids duplicates; see the package doc.
type Delivery = connector.Delivery

const (
	// DeliveryExactlyOnce makes the database transaction the job's commit
	// point. The default.
	DeliveryExactlyOnce = connector.ExactlyOnce
	// DeliveryAtLeastOnce writes epoch-fenced upserts as records come; the
	// manifest write is the commit point.
	DeliveryAtLeastOnce = connector.AtLeastOnce
	// DeliveryTwoPhase makes the sink a participant of another commit
	// point (a Kafka sink's, or the manifest write): each subtask's rows
	// go into a transaction prepared at the barrier (PREPARE TRANSACTION)
	// and committed after the commit point (COMMIT PREPARED). Needs the
	// server's max_prepared_transactions above 0.
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
	// DSN is the server to write to: a URL (postgres://user:pw@host/db) or
	// key=value pairs, as libpq and pgx take them; the PG* environment
	// variables fill what it leaves out. Messages never show its password.
	DSN string
	// Table is the table the rows go to, optionally schema-qualified
	// (schema.table). It must exist.
	Table string
	// Columns are the table's columns Row fills, in order.
	Columns []string
	// Row returns the values of a record's row, one per column: Go values
	// pgx encodes for the columns' types (string, int64, float64, bool,
	// time.Time, []byte, nil for NULL, a map or struct for json/jsonb...).
	// A value that does not fit its column fails the record with an error
	// naming the column (flow.ErrUnrecoverable: the record would fail the
	// same way after a restart).
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
	// constraint). With a Key, a row whose key exists updates it; without
	// one, rows are appended. DeliveryAtLeastOnce needs one.
	Key []string
	// Delivery: DeliveryExactlyOnce (default), DeliveryAtLeastOnce or
	// DeliveryTwoPhase.
	Delivery Delivery
	// EpochColumn is the bigint column DeliveryAtLeastOnce writes each
	// row's epoch (checkpoint id) to (default onceflow_epoch).
	EpochColumn string
	// ProgressTable is the table of the jobs' progress rows
	// (DeliveryExactlyOnce; default onceflow_progress, created when
	// missing).
	ProgressTable string
	// BatchRows is how many rows go to the server at once (default 1000).
	BatchRows int
	// MaxHeldRows bounds the rows held in memory while the transaction
	// of a checkpoint that may still commit is open (DeliveryExactlyOnce;
	// default 200,000); beyond it writers wait.
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

// ValidateTable checks that name is a table name the sink accepts: a plain
// SQL name, optionally schema-qualified.
func ValidateTable(name string) error { return checkIdent("table", name) }

func checkIdent(what, name string) error { return sqlsink.CheckIdent(what, name, "schema") }

// ident quotes a possibly schema-qualified name for SQL.
func ident(name string) string {
	return pgx.Identifier(strings.Split(name, ".")).Sanitize()
}

func (c *Config[T]) withDefaults() {
	if c.Delivery == "" {
		c.Delivery = DeliveryExactlyOnce
	}
	sqlsink.Defaults(&c.EpochColumn, &c.ProgressTable, &c.BatchRows, &c.MaxHeldRows)
}

func (c *Config[T]) validate() error {
	var errs []error
	if c.DSN == "" {
		errs = append(errs, errors.New("no DSN: say which server to write to (postgres://user@host:5432/db)"))
	} else if _, err := pgx.ParseConfig(c.DSN); err != nil {
		errs = append(errs, fmt.Errorf("DSN %s: %v", RedactDSN(c.DSN), redactErr(err, c.DSN)))
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

// RedactDSN returns dsn with its password replaced by "xxxxx", for
// messages and logs.
func RedactDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" && u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		return u.String()
	}
	return kvPassword.ReplaceAllString(dsn, "${1}xxxxx")
}

var kvPassword = regexp.MustCompile(`(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// redactErr keeps the DSN's password out of an error's text.
func redactErr(err error, dsn string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if cfg, perr := pgx.ParseConfig(dsn); perr == nil && cfg.Password != "" {
		msg = strings.ReplaceAll(msg, cfg.Password, "xxxxx")
	}
	if u, perr := url.Parse(dsn); perr == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
	}
	if msg == err.Error() {
		return err
	}
	return errors.New(msg)
}
