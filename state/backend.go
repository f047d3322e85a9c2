package state

import (
	"fmt"
	"sync"
)

// Backend keeps the keyed state of one keyed operator subtask outside the Go
// heap: a state backend such as Pebble implements it, and the handles
// (Value, Map, List) run on it unchanged. Without one (a nil Backend given
// to NewRuntime) state lives in the Go heap as Go values: no codec runs per
// access, only at snapshot and restore. The runtime picks the backend per
// job; operators and handles never see which.
//
// A backend stores byte keys and values in tables named by state (a
// handle's name), sharded by key group. Keys within a table and key group
// sort bytewise; Range visits them in that order. The handles own the
// layout of keys and values (see the package doc of statetest for it);
// a backend only stores bytes.
//
// Methods are called from the subtask's goroutine only. A backend that
// fails (a disk error) returns the error; the handle then fails the task,
// and the job restores its last checkpoint.
type Backend interface {
	// Get returns the value of key in table state of key group kg. The
	// returned slice may be reused by the next call.
	Get(kg int, state string, key []byte) (value []byte, ok bool, err error)
	// Put sets key to value. The backend copies what it keeps.
	Put(kg int, state string, key, value []byte) error
	// Delete removes key.
	Delete(kg int, state string, key []byte) error
	// DeletePrefix removes every key that starts with prefix.
	DeletePrefix(kg int, state string, prefix []byte) error
	// Range calls fn for every key that starts with prefix, in key order,
	// until fn returns false. The slices fn gets are valid during the call
	// only. fn must not modify the backend.
	Range(kg int, state string, prefix []byte, fn func(key, value []byte) bool) error
}

// IncrementalDB is a Backend whose state lives in immutable files that a
// checkpoint stores once and later checkpoints reference (docs/design.md,
// "Incremental checkpoints"): the engine checkpoints, clips and merges it
// by key-group range when a job restores at another parallelism.
type IncrementalDB interface {
	Backend
	// Checkpoint writes a consistent copy of the database into dir (hard
	// links where it can) and returns the names of the files written.
	Checkpoint(dir string) ([]string, error)
	// Clip deletes every key outside the key groups first..last.
	Clip(first, last int) error
	// Import copies the keys of key groups lo..hi from src, a database of
	// the same backend opened read-only, and returns how many it copied.
	Import(src IncrementalDB, lo, hi int) (keys int64, err error)
	// DiskUsage is the bytes the database takes on disk.
	DiskUsage() int64
	Close() error
}

// DBProvider opens the databases of one run of a job's keyed subtasks,
// sharing a memory budget among them.
type DBProvider interface {
	Open(dir string, dbs, maxParallelism int) (IncrementalDB, error)
	// OpenReadOnly opens a checkpoint's copy to import from.
	OpenReadOnly(dir string, maxParallelism int) (IncrementalDB, error)
	// Close releases what the databases shared, after they are closed.
	Close()
}

// DBBackend is a registered backend of IncrementalDBs.
type DBBackend struct {
	// Name is what a job chooses it by ("pebble").
	Name string
	// NewProvider makes the provider of one run, with budget bytes of
	// memory for all its databases.
	NewProvider func(budget int64) DBProvider
}

var dbBackends struct {
	sync.RWMutex
	m map[string]DBBackend
}

// RegisterDBBackend makes b choosable by name. A backend's package
// registers itself in init, so a program links it only by importing it
// (state/pebblestate: import _ "github.com/onceflow/onceflow/state/pebblestate"),
// as database/sql links drivers; it panics on a name taken twice.
func RegisterDBBackend(b DBBackend) {
	dbBackends.Lock()
	defer dbBackends.Unlock()
	if dbBackends.m == nil {
		dbBackends.m = map[string]DBBackend{}
	}
	if _, dup := dbBackends.m[b.Name]; dup || b.Name == "" || b.NewProvider == nil {
		panic(fmt.Sprintf("state.RegisterDBBackend(%q): empty, incomplete or registered twice", b.Name))
	}
	dbBackends.m[b.Name] = b
}

// LookupDBBackend returns the registered backend called name.
func LookupDBBackend(name string) (DBBackend, bool) {
	dbBackends.RLock()
	defer dbBackends.RUnlock()
	b, ok := dbBackends.m[name]
	return b, ok
}
