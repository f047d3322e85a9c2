package engine

import "time"

// Hooks are the job's observers: flow turns the user's hook values
// (flow.HookCheckpointCompleted, ...) into these functions. Each is called
// from the job's run loop, so it must return quickly; nil hooks are skipped.
type Hooks struct {
	CheckpointStarted   func(CheckpointStarted)
	CheckpointCompleted func(CheckpointCompleted)
	CheckpointFailed    func(CheckpointFailed)
	Restored            func(Restored)
	Restarting          func(Restarting)
	JobEnded            func(JobEnded)
}

// CheckpointStarted is the trigger of a checkpoint or savepoint.
type CheckpointStarted struct {
	Job       string
	ID        int64
	Savepoint bool
	Time      time.Time
}

// CheckpointCompleted is a committed checkpoint.
type CheckpointCompleted struct {
	Job       string
	ID        int64
	Savepoint bool
	// Duration is from the trigger to the end of the commit point.
	Duration time.Duration
	// StateBytes is the size of all the keyed state files it needs.
	StateBytes int64
	// WrittenBytes is the part of StateBytes it wrote: all of it with the
	// memory backend, only new files with Pebble's incremental snapshots.
	WrittenBytes int64
	// Records is how many records the sinks wrote in the epochs it
	// committed.
	Records int64
	// Alignment is the longest time a subtask spent aligning its barriers
	// (from the first input's barrier to the last's).
	Alignment time.Duration
	// BarrierDelay is the longest time from the trigger until the
	// barrier reached a subtask's operators, aligned: how long it waited
	// behind the records queued before it (docs/design.md, "Checkpoints
	// under backpressure"). Flink calls the first part start delay.
	BarrierDelay time.Duration
	// CommitDuration is how long the commit point took (Kafka: the
	// transaction's offsets and EndTxn; a database: its COMMIT).
	CommitDuration time.Duration
	Time           time.Time
}

// CheckpointFailed is an aborted checkpoint or a failed commit.
type CheckpointFailed struct {
	Job       string
	ID        int64
	Savepoint bool
	Err       error
	Time      time.Time
}

// Restored is the start of an attempt from a checkpoint (ID 0: none).
type Restored struct {
	Job       string
	ID        int64
	Savepoint bool
	Dir       string
	Time      time.Time
	// AfterCrash is true for the first restore of a process that followed
	// one that did not stop gracefully (it counts as a restart).
	AfterCrash bool
}

// Restarting is a failover the restart strategy allowed.
type Restarting struct {
	Job     string
	Attempt int
	Delay   time.Duration
	Err     error
	Time    time.Time
}

// JobEnded is the end of the job (Err nil: it finished or was stopped).
type JobEnded struct {
	Job  string
	Err  error
	Time time.Time
}

func (h *Hooks) started(e CheckpointStarted) {
	if h.CheckpointStarted != nil {
		h.CheckpointStarted(e)
	}
}

func (h *Hooks) completed(e CheckpointCompleted) {
	if h.CheckpointCompleted != nil {
		h.CheckpointCompleted(e)
	}
}

func (h *Hooks) failed(e CheckpointFailed) {
	if h.CheckpointFailed != nil {
		h.CheckpointFailed(e)
	}
}

func (h *Hooks) restored(e Restored) {
	if h.Restored != nil {
		h.Restored(e)
	}
}

func (h *Hooks) restarting(e Restarting) {
	if h.Restarting != nil {
		h.Restarting(e)
	}
}

func (h *Hooks) ended(e JobEnded) {
	if h.JobEnded != nil {
		h.JobEnded(e)
	}
}
