// Package build makes a registered connector's sink for a job's records:
// the hook a sink connector registers next to its spec (package
// connector), typed by the record type R of the jobs that use it.
//
// Package connector stays the record-agnostic contract (standard library
// only); this package adds what a built sink needs, flow's sink types,
// and nothing else: a connector's package implements its hook once,
// generic in R (postgres.BuildSink[R]), and one line registers it for
// the job file's records (connector/all: build.Register("postgres",
// postgres.BuildSink[kafka.Record])), so the connector's own package
// does not link the Kafka client (docs/design.md, "Where an extension
// goes").
package build

import (
	"fmt"
	"reflect"
	"sync"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/flow"
)

// Context is what a sink's hook is given besides its section.
type Context[R any] struct {
	// Job is the job's name: sinks scope their transactions, epochs and
	// dead letters by it.
	Job string
	// Config is the sink's section, decoded and validated against its
	// spec, defaults filled in.
	Config *connector.Config
	// Role is how the sink delivers under the commit-point rules
	// (docs/design.md, "Database sinks"): connector.ExactlyOnce as the
	// job's commit point, connector.TwoPhase under another one, else the
	// job's delivery (connector.AtLeastOnce).
	Role connector.Delivery
	// Policy is errors.policy: with flow.DeadLetterOnError the sink keeps
	// the records it rejects (Sink.DeadLetters).
	Policy flow.ErrorPolicy
	// Sources are the job's built sources (*kafka.Source for a job
	// file), for a commit point that commits their positions.
	Sources []any
	// Columns and Row are the spec's columns field (connector.ColumnsValue)
	// compiled in the pipeline's expression language: the column names,
	// in the order written, and a record's values of them. Nil without
	// such a field.
	Columns []string
	Row     func(R) ([]any, error)
	// Retracts tells a retraction: a record that takes its row back out
	// of the result (pipeline.RowKind -U or -D); a sink with a key
	// deletes the key of its row (docs/design.md, "Database sinks"). Nil:
	// every record adds its row.
	Retracts func(R) bool
	// Value compiles one column source (connector.SourceValue) in the
	// pipeline's expression language.
	Value func(expr string) (func(R) (any, error), error)
	// DeadLetter is what a sink keeps of a record it rejects: an id (its
	// position in the source, or a hash of its contents), its key and its
	// value.
	DeadLetter func(R) (id string, key, value []byte)
}

// Sink is a built sink.
type Sink[R any] struct {
	Sink flow.Sink[R]
	// Close releases its connections once the job ended; nil: nothing to
	// release.
	Close func() error
	// DeadLetters, with flow.DeadLetterOnError, receives the pipeline's
	// poison records when this sink keeps the job's dead letters (no Kafka
	// sink); nil if it keeps none.
	DeadLetters flow.Sink[flow.Failure[R]]
}

// Func is a sink connector's hook.
type Func[R any] func(Context[R]) (Sink[R], error)

type key struct {
	name string
	rec  reflect.Type
}

var registry struct {
	sync.RWMutex
	hooks map[key]any
}

// Register adds the hook of the sink connector called name for records of
// type R; the connector's spec is registered with package connector. It
// panics on a name registered twice for R, as init-time registration
// should.
func Register[R any](name string, f Func[R]) {
	if f == nil {
		panic(fmt.Sprintf("build.Register(%q): nil hook", name))
	}
	k := key{name, reflect.TypeFor[R]()}
	registry.Lock()
	defer registry.Unlock()
	if registry.hooks == nil {
		registry.hooks = map[key]any{}
	}
	if _, dup := registry.hooks[k]; dup {
		panic(fmt.Sprintf("build.Register: %q is registered twice for %v", name, k.rec))
	}
	registry.hooks[k] = f
}

// Lookup returns the hook of the sink connector called name for records
// of type R.
func Lookup[R any](name string) (Func[R], bool) {
	registry.RLock()
	defer registry.RUnlock()
	f, ok := registry.hooks[key{name, reflect.TypeFor[R]()}]
	if !ok {
		return nil, false
	}
	return f.(Func[R]), true
}
