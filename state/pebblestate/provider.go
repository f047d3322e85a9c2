package pebblestate

import "github.com/onceflow/onceflow/state"

// Name is the backend's name: state.backend: pebble in a job file,
// flow.StateBackend(flow.PebbleBackend) in Go.
const Name = "pebble"

// A program links Pebble by importing this package; the engine finds the
// backend by name (docs/design.md, "State backends").
func init() {
	state.RegisterDBBackend(state.DBBackend{Name: Name, NewProvider: func(budget int64) state.DBProvider { return provider{NewPool(budget)} }})
}

// provider is a Pool as a state.DBProvider.
type provider struct{ *Pool }

func (p provider) Open(dir string, dbs, maxParallelism int) (state.IncrementalDB, error) {
	db, err := p.Pool.Open(dir, dbs, maxParallelism)
	if err != nil {
		return nil, err // not a nil *DB in a non-nil interface
	}
	return db, nil
}

func (p provider) OpenReadOnly(dir string, maxParallelism int) (state.IncrementalDB, error) {
	db, err := p.Pool.OpenReadOnly(dir, maxParallelism)
	if err != nil {
		return nil, err
	}
	return db, nil
}

var _ state.IncrementalDB = (*DB)(nil)
