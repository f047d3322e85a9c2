package pipeline

// The tests run jobs on both state backends; Pebble plugs in by import,
// as in a user's program (docs/design.md, "State backends").
import _ "github.com/onceflow/onceflow/state/pebblestate"
