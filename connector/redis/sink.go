package redis

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/sqlsink"
)

// Sink writes records into Redis; see the package doc. One Sink value is
// one operator of one job instance. It is a flow.Sink, a
// flow.CommitPointProvider (with exactly-once delivery) and a
// flow.JobBinder.
type Sink[T any] struct {
	*sqlsink.Sink[T]
}

var errEmptyKey = errors.New("the record's Op has an empty key")

// ErrFenced is wrapped by the commit error of an instance of the job that a
// newer one fenced (Recover): it must not commit again.
var ErrFenced = sqlsink.ErrFenced

// NewSink validates cfg and returns a sink.
func NewSink[T any](cfg Config[T]) (*Sink[T], error) {
	cfg.withDefaults()
	opts, err := cfg.validate()
	if err != nil {
		return nil, fmt.Errorf("redis sink: %w", err)
	}
	// Scripts of large checkpoints run longer than go-redis' default
	// read timeout (3 s); the sink's calls carry deadlines of their own.
	opts.ContextTimeoutEnabled = true
	if opts.ReadTimeout == 0 {
		opts.ReadTimeout = time.Minute
	}
	d := &driver{opts: opts, url: RedactURL(cfg.URL), command: cfg.Command, prefix: cfg.KeyPrefix}
	if cfg.DeadLetters != nil {
		d.keepDead, d.deadKeyName = true, cfg.DeadLetters.Table
	}
	cmd, op := cfg.Command, cfg.Op
	row := func(rec T) ([]any, error) {
		o, err := op(rec)
		if err != nil {
			return nil, flow.Unrecoverable(err)
		}
		if o.Key == "" {
			return nil, flow.Unrecoverable(errEmptyKey)
		}
		if d.ownKey(o.Key) {
			return nil, flow.Unrecoverable(fmt.Errorf("the record's key %q is one of the sink's own keys (progress, stage, attempt, dead letters): give the records' keys another prefix, or the sink another key prefix", o.Key))
		}
		if cmd.hash() && o.Field == "" {
			return nil, flow.Unrecoverable(fmt.Errorf("the record's Op has an empty field (key %q): command %s sets a field of a hash", o.Key, cmd))
		}
		if cmd.Counter() {
			return []any{o.Key, o.Field, strconv.FormatInt(o.By, 10)}, nil
		}
		return []any{o.Key, o.Field, o.Value}, nil
	}
	return &Sink[T]{sqlsink.New(sqlsink.Config[T]{
		Driver: d, Columns: []string{"key", "field", "value"}, Row: row, Retracts: cfg.Retracts, KeyedRows: true, ExactlyOnce: cfg.Delivery == DeliveryExactlyOnce,
		BatchRows: cfg.BatchRows, MaxHeldRows: cfg.MaxHeldRows, Job: cfg.Job, DeadLetters: cfg.DeadLetters,
	})}, nil
}
