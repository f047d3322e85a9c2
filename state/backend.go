package state

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
