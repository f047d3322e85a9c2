// Package flow builds and runs exactly-once stream processing jobs.
//
// A job is a dataflow graph: sources (From), operators (Map, FlatMap,
// Filter, TryMap, KeyBy followed by Process for keyed state, Rebalance,
// Union to merge streams, Connect and CoProcess for keyed state shared by
// two streams) and sinks (To), built on an Env that holds the job's
// options. Env.Run runs it
// until its input ends or its context is canceled; Env.Start returns a Job
// to stop, take savepoints from and observe.
//
//	env := flow.New(flow.JobName("count-per-user"), flow.Checkpointing(time.Second), flow.StateDir("./state"))
//	events := flow.From(env, source)
//	counts := flow.Process(flow.KeyBy(events, userOf), "count", countFn)
//	flow.To(counts, sink)
//	err := env.Run(ctx)
//
// Exactly-once comes from periodic checkpoints: barriers flow with the
// records, every operator snapshots its keyed state and every sink
// pre-commits when the barrier reaches it, and one atomic action — the
// checkpoint manifest's write, or a sink's CommitPoint such as a Kafka
// transaction — commits the checkpoint. After a failure the job restores the
// last committed checkpoint: source positions, keyed state and sink
// handles. The contracts a connector implements are Source, Sink and
// CommitPoint; JobBinder, PriorProgressReporter and the Hook interfaces are
// optional. docs/design.md in the repository describes the protocol and the
// recovery decisions in full.
//
// Records are never boxed: operators are generic over the record types and
// records travel between subtasks in batches.
package flow
