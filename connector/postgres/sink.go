package postgres

import (
	"fmt"

	"github.com/onceflow/onceflow/internal/sqlsink"
)

// Sink writes records into a PostgreSQL table; see the package doc. One
// Sink value is one operator of one job instance. It is a flow.Sink, a
// flow.CommitPointProvider (with exactly-once delivery) and a
// flow.JobBinder.
type Sink[T any] struct {
	*sqlsink.Sink[T]
}

// ErrFenced is wrapped by the commit error of an instance of the job that a
// newer one fenced (Recover): its transaction is rolled back and it must
// not commit again.
var ErrFenced = sqlsink.ErrFenced

// NewSink validates cfg and returns a sink.
func NewSink[T any](cfg Config[T]) (*Sink[T], error) {
	cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("postgres sink: %w", err)
	}
	d := &driver{dsn: cfg.DSN, table: cfg.Table, columns: cfg.Columns, key: cfg.Key, epoch: cfg.EpochColumn,
		progress: cfg.ProgressTable, fenced: cfg.Delivery == DeliveryAtLeastOnce}
	if cfg.DeadLetters != nil {
		d.dead = cfg.DeadLetters.Table
	}
	return &Sink[T]{sqlsink.New(sqlsink.Config[T]{
		Driver: d, Columns: cfg.Columns, Key: cfg.Key, Row: cfg.Row, Retracts: cfg.Retracts, Table: cfg.Table, ExactlyOnce: cfg.Delivery == DeliveryExactlyOnce, TwoPhase: cfg.Delivery == DeliveryTwoPhase,
		BatchRows: cfg.BatchRows, MaxHeldRows: cfg.MaxHeldRows, Job: cfg.Job, DeadLetters: cfg.DeadLetters,
	})}, nil
}
