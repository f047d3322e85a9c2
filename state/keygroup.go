// Package state is onceflow's keyed state: values, maps and lists scoped to
// the key of the record being processed, optionally expiring after a TTL.
//
// Keyed state is sharded into key groups. A key belongs to key group
// hash(key) mod maxParallelism for the life of the job, and a subtask owns a
// contiguous range of key groups. Snapshots are written per key group, so a job
// can restart with a different parallelism (or move key groups to another
// process) and every key finds its state again. maxParallelism is therefore
// fixed once a job has state: changing it would move keys between groups.
//
// State handles are created in the setup function of a keyed operator (see
// flow.Process) from the *Store passed to it. The runtime scopes them to the
// key of the record being processed through a Runtime, which user code never
// sees; a test of a process function can make one (NewRuntime) to drive it.
//
// Where state lives is the runtime's choice, per job: in the Go heap as Go
// values (the default: no codec runs per access, only at snapshot and
// restore), or in a Backend that keeps bytes outside the heap (a disk-based
// store for state larger than memory). Handles and operators are the same
// either way, and so is the snapshot format, so a checkpoint taken with one
// restores into the other. statetest checks a Backend against the heap.
package state

// DefaultMaxParallelism is the number of key groups when the job does not set
// one (Flink uses the same default for small parallelism).
const DefaultMaxParallelism = 128

// Hash is the stable 32-bit hash keys are sharded by (FNV-1a followed by a
// murmur3 finaliser to spread short keys). It must never change: key groups in
// existing checkpoints depend on it.
func Hash(key string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

// KeyGroup returns the key group of key.
func KeyGroup(key string, maxParallelism int) int {
	return int(Hash(key) % uint32(maxParallelism))
}

// KeyGroupRange returns the inclusive key-group range owned by subtask index
// of parallelism subtasks. Ranges are contiguous, cover 0..maxParallelism-1 and
// differ in size by at most one.
func KeyGroupRange(index, parallelism, maxParallelism int) (first, last int) {
	first = (index*maxParallelism + parallelism - 1) / parallelism
	last = ((index+1)*maxParallelism - 1) / parallelism
	return first, last
}

// SubtaskForKeyGroup returns the subtask index owning key group kg; it is the
// inverse of KeyGroupRange.
func SubtaskForKeyGroup(kg, parallelism, maxParallelism int) int {
	return kg * parallelism / maxParallelism
}
