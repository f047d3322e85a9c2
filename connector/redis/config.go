package redis

import (
	"errors"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/internal/sqlsink"
)

// Delivery is how the sink avoids duplicates; see the package doc.
type Delivery = connector.Delivery

const (
	// DeliveryExactlyOnce makes Redis the job's commit point. The default.
	DeliveryExactlyOnce = connector.ExactlyOnce
	// DeliveryAtLeastOnce writes SETs or HSETs as records come, fenced
	// per attempt of the job; the manifest write is the commit point.
	DeliveryAtLeastOnce = connector.AtLeastOnce
)

// Command is what the sink does with each record's Op.
type Command string

const (
	// CommandSet sets Op.Key to Op.Value (SET).
	CommandSet Command = "set"
	// CommandHSet sets field Op.Field of the hash Op.Key to Op.Value
	// (HSET).
	CommandHSet Command = "hset"
	// CommandIncrBy adds Op.By to the integer at Op.Key (INCRBY);
	// DeliveryExactlyOnce only.
	CommandIncrBy Command = "incrby"
	// CommandHIncrBy adds Op.By to field Op.Field of the hash Op.Key
	// (HINCRBY); DeliveryExactlyOnce only.
	CommandHIncrBy Command = "hincrby"
)

func (c Command) valid() bool {
	switch c {
	case CommandSet, CommandHSet, CommandIncrBy, CommandHIncrBy:
		return true
	}
	return false
}

// Counter reports whether the command adds to a value (INCRBY, HINCRBY).
func (c Command) Counter() bool { return c == CommandIncrBy || c == CommandHIncrBy }
func (c Command) hash() bool    { return c == CommandHSet || c == CommandHIncrBy }

// Op is what one record does: Command on Key (and Field for the hash
// commands) with Value (SET, HSET) or By (the counters).
type Op struct {
	Key   string
	Field string
	Value string
	By    int64
}

// Defaults.
const (
	DefaultBatchRows   = sqlsink.DefaultBatchRows
	DefaultMaxHeldRows = sqlsink.DefaultMaxHeldRows
	// DefaultKeyPrefix starts the names of the keys the sink keeps for
	// itself (progress, stage, attempt).
	DefaultKeyPrefix = "onceflow:"
)

// Config configures a Sink of records of type T.
type Config[T any] struct {
	// URL is the server: redis://[user:password@]host:port/db, or
	// rediss:// for TLS, as go-redis parses it. Messages never show its
	// password.
	URL string
	// Command is what each record's Op does (required).
	Command Command
	// Op returns what a record does. An error, an empty key, or an empty
	// field with a hash command fails the record as unrecoverable (it
	// would fail the same way after a restart).
	Op func(rec T) (Op, error)
	// Retracts, when set, tells a retraction: a record that takes its row
	// back out of the result (the old row of an update, or a deleted
	// row; a job file's records carry pipeline.RowKindHeader, and
	// kafkarec.RowKind(rec).Retracts() tells). Its Op's key is deleted
	// (set: DEL; hset: HDEL of the field), in either delivery; of the
	// commands on one key (field) in a commit or batch the last counts.
	// A counter's retraction takes its increment back (INCRBY -By).
	// Nil: every record adds.
	Retracts func(rec T) bool
	// Delivery: DeliveryExactlyOnce (default) or DeliveryAtLeastOnce.
	Delivery Delivery
	// KeyPrefix starts the names of the sink's own keys (default
	// "onceflow:").
	KeyPrefix string
	// BatchRows is how many commands go to the server at once (default
	// 1000).
	BatchRows int
	// MaxHeldRows bounds the commands held in memory while a checkpoint
	// that may still commit is open (DeliveryExactlyOnce; default
	// 200,000); beyond it writers wait.
	MaxHeldRows int
	// Job is the job's name; flow sets it (BindJob) when empty.
	Job string
	// DeadLetters, when set, keeps the records Op rejects (its error, an
	// empty key) in a hash, with the commands of their checkpoint, when
	// the sink is added with flow.OnRejected(flow.DeadLetterOnError):
	// field <sink uid>/<ID>, value a JSON object with the key, value,
	// error, time and epoch. Table is the hash (default
	// onceflow:dead:<job>); it must be the job's own: a commit watches it,
	// and another writer's change would abort the commit as if the job
	// were fenced.
	DeadLetters *DeadLetters[T]
}

// DeadLetters configures the dead-letter hash: Table names it, Of says
// what is kept of a record (its ID in the source, such as
// topic/partition/offset, its key and value).
type DeadLetters[T any] = sqlsink.DeadLetters[T]

func (c *Config[T]) withDefaults() {
	if c.Delivery == "" {
		c.Delivery = DeliveryExactlyOnce
	}
	if c.KeyPrefix == "" {
		c.KeyPrefix = DefaultKeyPrefix
	}
	if c.BatchRows <= 0 {
		c.BatchRows = DefaultBatchRows
	}
	if c.MaxHeldRows <= 0 {
		c.MaxHeldRows = DefaultMaxHeldRows
	}
}

func (c *Config[T]) validate() (*goredis.Options, error) {
	var errs []error
	if c.URL == "" {
		errs = append(errs, errors.New("URL is empty: name the server (redis://127.0.0.1:6379/0)"))
	}
	opts, err := goredis.ParseURL(c.URL)
	if c.URL != "" && err != nil {
		errs = append(errs, fmt.Errorf("URL %s: %v (the form is redis://[user:password@]host:port/db)", RedactURL(c.URL), err))
	}
	switch {
	case c.Command == "":
		errs = append(errs, errors.New("Command is empty: set, hset, incrby or hincrby"))
	case !c.Command.valid():
		errs = append(errs, fmt.Errorf("unknown command %q: set, hset, incrby or hincrby", c.Command))
	}
	if c.Op == nil {
		errs = append(errs, errors.New("Op is nil: it says what each record does"))
	}
	switch c.Delivery {
	case DeliveryExactlyOnce:
	case DeliveryAtLeastOnce:
		if c.Command.Counter() {
			errs = append(errs, fmt.Errorf("command %s with delivery at-least-once: a replayed increment would count twice; use delivery exactly-once (Redis as the commit point), or write totals with set/hset", c.Command))
		}
	default:
		errs = append(errs, fmt.Errorf("unknown delivery %q: exactly-once or at-least-once", c.Delivery))
	}
	if c.DeadLetters != nil && c.DeadLetters.Of == nil {
		errs = append(errs, errors.New("DeadLetters.Of is nil: say what to keep of a rejected record (its id in the source, key and value)"))
	}
	return opts, errors.Join(errs...)
}

// RedactURL hides the password of a redis:// URL.
func RedactURL(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return u
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return u
	}
	user, _, hasPw := strings.Cut(rest[:at], ":")
	if !hasPw {
		return u
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}
