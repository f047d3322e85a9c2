package engine

import "testing"

// A heap chain past its bounds (its deltas' bytes past its full
// snapshot's and its keys past twice the state's, or its delta count)
// starts again with a full snapshot at its next change, never at an idle checkpoint (nothing to add to the chain:
// a checkpoint with no new input stays free at any state size); a new or
// broken chain, and TTL state due for its expiry, write one whatever.
func TestHeapChainWantsFull(t *testing.T) {
	grown := func() *heapChain {
		// Three deltas that overwrote every key of the state.
		return &heapChain{baseBytes: 1 << 20, deltaBytes: 3 << 20, deltas: 3, chainKeys: 4000, liveKeys: 1000}
	}
	tests := []struct {
		name              string
		ch                *heapChain
		broken, ttl, idle bool
		want              bool
	}{
		{"new chain", &heapChain{restart: true}, false, false, true, true},
		{"broken chain", &heapChain{}, true, false, true, true},
		{"within bounds", &heapChain{baseBytes: 4 << 20, deltaBytes: 1 << 20, deltas: 1}, false, false, false, false},
		{"past its bytes, with changes", grown(), false, false, false, true},
		{"past its bytes, idle", grown(), false, false, true, false},
		// Deltas of new keys only: the chain is the state, written once.
		{"past its bytes by new keys", &heapChain{baseBytes: 1 << 20, deltaBytes: 3 << 20, deltas: 3, chainKeys: 4000, liveKeys: 4000}, false, false, false, false},
		{"past its bytes, half of it new keys", &heapChain{baseBytes: 1 << 20, deltaBytes: 3 << 20, deltas: 3, chainKeys: 4000, liveKeys: 2000}, false, false, false, false},
		{"past its bytes, more than twice the state's keys", &heapChain{baseBytes: 1 << 20, deltaBytes: 3 << 20, deltas: 3, chainKeys: 4001, liveKeys: 2000}, false, false, false, true},
		// A restored chain's keys are not known: its bytes decide.
		{"restored, past its bytes", &heapChain{baseBytes: 1 << 20, deltaBytes: 3 << 20, deltas: 3, chainKeys: -1, liveKeys: 4000}, false, false, false, true},
		{"past its delta count, idle", &heapChain{baseBytes: 8 << 20, deltas: heapMaxDeltas}, false, false, true, false},
		{"past its delta count, with changes", &heapChain{baseBytes: 8 << 20, deltas: heapMaxDeltas}, false, false, false, true},
		{"TTL due, idle", &heapChain{baseBytes: 8 << 20, age: heapTTLAge}, false, true, true, true},
		{"TTL not due, idle", &heapChain{baseBytes: 8 << 20, age: heapTTLAge - 1}, false, true, true, false},
	}
	for _, tt := range tests {
		if got := tt.ch.wantsFull(tt.broken, tt.ttl, tt.idle); got != tt.want {
			t.Errorf("%s: wantsFull = %v, want %v", tt.name, got, tt.want)
		}
	}
}
