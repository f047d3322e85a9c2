package engine

import (
	"strings"
	"testing"
)

// The engine links no state backend: Pebble plugs in when a program
// imports state/pebblestate, which this test binary does not, so choosing
// it says how to link it instead of failing later (docs/design.md, "State
// backends").
func TestPebbleNotLinkedSaysHowToLinkIt(t *testing.T) {
	c := DefaultConfig()
	c.StateBackend = BackendPebble
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), `import _ "github.com/onceflow/onceflow/state/pebblestate"`) {
		t.Fatalf("Validate() = %v, want the import that links Pebble", err)
	}
	c.StateBackend = "rocks"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `state backend "rocks" is unknown`) {
		t.Fatalf("Validate() = %v, want an unknown backend", err)
	}
	c.StateBackend = BackendMemory
	if err := c.Validate(); err != nil {
		t.Fatalf("memory: %v", err)
	}
}
