// Package engine is onceflow's runtime: it runs a dataflow graph of typed
// operators as one job, with aligned checkpoints, a commit point, restarts
// and restores. flow wraps it (flow's Env builds a Graph, flow.Job wraps a
// RunningJob); nothing else calls it, and it imports nothing of flow
// (docs/design.md, "Packages and dependencies").
//
// A job is a Graph of Nodes: sources, operators and sinks, each with a uid
// that names its state and positions. Start plans the parallelism,
// validates the graph, and runs attempts until the job ends or fails for
// good; each attempt restores the state recovery chose, starts one
// goroutine per subtask of each chained task, and runs the coordinator
// loop that triggers checkpoints, collects acks and performs the commit
// point.
//
// It implements these sections of docs/design.md:
//
//   - "The exactly-once invariants" and "The checkpoint protocol": barrier
//     injection and alignment, snapshots, acks, the commit point, sink
//     commits after it.
//   - "External commit points: pending manifests" and "Recovery
//     decisions": what a (re)start restores, and when it refuses.
//   - "Graceful stop": stop, stop with a savepoint, the final checkpoint.
//   - "State and checkpoints", "State backends", "Incremental checkpoints"
//     and "Restore and rescale": keyed state per key group, Pebble
//     databases, rescaling on restore.
//   - "The runtime": tasks, chaining, exchanges and backpressure, failures.
//   - "Event time and timers": watermarks, idle splits, keyed timers.
//   - "Metrics and the REST API", "Time per operator": Stats, hooks, the
//     sampler.
//
// Files:
//
//	graph.go      Graph, Node, node options; uids, validation, parallelism
//	add.go        the generic constructors flow's operators call (AddMap, AddKeyed, AddSink, …)
//	batch.go      the batch operator: records handed over together, flushed by every control message
//	contracts.go  the source, sink and commit point contracts, CommitRecord (flow aliases them)
//	config.go     Config, its defaults and validation
//	errors.go     Rejected, Unrecoverable, TaskError
//	hooks.go      Hooks and their events (checkpoint started, completed, failed; restored; …)
//	job.go        RunningJob: Start, Wait, Stop, savepoints, Stats; the restart loop
//	recovery.go   what an attempt restores: reads the commit record, manifests, savepoints; acts on the decision
//	decide.go     the recovery decisions as a pure function of what recovery read (design "Recovery decisions")
//	runrecord.go  the run record: restarts counted across process crashes
//	attempt.go    one attempt: restore, subtasks, chaining, keyed state files
//	loop.go       the coordinator run loop: triggers, acks, commit, abort, savepoint replies
//	subtask.go    a subtask's goroutine and mail; the source loop; the sink operator
//	mailbox.go    the coordinator's never-blocking mailbox into each subtask
//	ops.go        operators: map, flat-map, filter, keyed, try-map; pending sink handles
//	exchange.go   exchanges between tasks: batches, keyed routing, barrier alignment
//	multi.go      nodes with several inputs: AddUnion, AddKeyed2 and the receive loop over all their channels
//	eventtime.go  watermark generation per split and combination over channels
//	timers.go     event- and processing-time timers of keyed operators
//	dbstate.go    Pebble-backed keyed state: open, checkpoint incrementally, import
//	heapstate.go  heap keyed state: incremental snapshot chains, their restore
//	sampler.go    time per operator and the slow-call warning
package engine
