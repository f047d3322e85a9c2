package statetest_test

import (
	"testing"

	"github.com/onceflow/onceflow/state"
	"github.com/onceflow/onceflow/state/statetest"
)

func TestMemoryBackendConforms(t *testing.T) {
	statetest.Conformance(t, func() state.Backend { return statetest.NewMemoryBackend() })
}
