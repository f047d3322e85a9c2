// Package kafka connects onceflow jobs to Apache Kafka with exactly-once
// semantics.
//
// A [Source] reads partitions with explicit offsets (no consumer group
// membership): the offsets it has emitted are part of every checkpoint, so a
// restore resumes exactly where the checkpoint was taken. A [Sink] writes
// records inside Kafka transactions and owns the job's commit point
// (docs/design.md, "The Kafka commit point"): for checkpoint n it commits ONE
// transaction carrying
//
//   - the sink records of epoch n,
//   - the offsets of the sources named in [SinkConfig].OffsetsOf, committed
//     to each source's group with metadata "onceflow:<job>:<n>", and
//   - the commit record of checkpoint n: an offset committed to the job's
//     own progress group ("__onceflow_progress.<job>") on partition 0 of the
//     progress topic, whose metadata names the job, n, the SHA-256 of
//     checkpoint n's manifest, the run that wrote it and the state
//     directory's id.
//
// EndTxn(commit) is the commit point. On recovery [CommitPoint.Recover]
// first fences the previous incarnation (InitProducerID on the stable
// transactional id "onceflow-<job>-0", which aborts its open transaction)
// and then fetches the progress group's offsets with RequireStable: the
// broker answers as soon as no offset commit to that group is pending. Only
// the job's own transactions write to its group, so no other job sharing
// the cluster can delay or hide the answer; and the answer costs one
// request however many jobs and checkpoints the cluster has seen. A record
// present means checkpoint n is committed and the runtime restores exactly
// the manifest with the recorded checksum; absent means the job never
// committed (or the record was lost: the runtime then refuses to start over
// while other traces of the job's progress exist).
//
// Transactions are sequential per producer, while a checkpoint's barrier
// reaches the sink subtasks at different times. A writer that prepared
// checkpoint n therefore holds the records it gets afterwards in memory until
// n committed or was aborted, up to [SinkConfig].MaxHeldBytes; beyond that it
// blocks, and backpressure reaches the sources. When checkpoint n is aborted
// (timed out, declined) without failing the job, the held records join the
// open transaction, which the next checkpoint commits with epoch n's
// records, as the flow.Sink contract requires.
//
// Every broker call of a commit has a deadline (the checkpoint's, and at
// most half the transaction timeout), and a commit that fails aborts its
// transaction at once unless the producer was fenced, so readers with
// read_committed are not blocked until the broker's transaction timeout.
//
// [SinkConfig].Delivery trades this guarantee for speed: at-least-once
// writes with an idempotent producer and waits for the acknowledgements at
// each checkpoint, none does not wait. Neither is a commit point: the job's
// checkpoint manifest is, and the sources commit their offsets to their
// groups after each checkpoint.
//
// [Sink.DeadLetters] writes the failures of flow.TryMap to a dead-letter
// topic through the same producer, so with exactly-once a checkpoint's
// transaction commits each input record's output or its dead letter.
// [Source.Lag] reports how far the readers are behind the log end.
package kafka
