// Package kafka connects onceflow jobs to Apache Kafka with exactly-once
// semantics.
//
// A [Source] reads partitions with explicit offsets (no consumer group
// membership): the offsets it has emitted are part of every checkpoint, so a
// restore resumes exactly where the checkpoint was taken. A [Sink] writes
// records inside Kafka transactions and owns the job's commit point
// (architecture §3.2): for checkpoint n it commits ONE transaction carrying
//
//   - the sink records of epoch n,
//   - the offsets of the sources named in [SinkConfig].OffsetsOf, committed
//     to each source's group with metadata "onceflow:<job>:<n>", and
//   - a progress marker {job, n} on a compacted topic (default
//     [DefaultProgressTopic], keyed by the job name).
//
// EndTxn(commit) is the commit point. On recovery [CommitPoint.LastCommitted]
// first fences the previous incarnation (InitProducerID on the stable
// transactional id "onceflow-<job>-0") and then reads the newest marker of
// the job with a read_committed consumer: present means checkpoint n is
// committed; otherwise the epoch's records were aborted and the job replays
// it from the checkpoint before.
//
// Transactions are sequential per producer, while a checkpoint's barrier
// reaches the sink subtasks at different times. A writer that prepared
// checkpoint n therefore holds the records it gets afterwards in memory until
// the commit point of n has run, and the commit point hands them to the next
// transaction. If checkpoint n is aborted (timed out, declined) without
// failing the job, its records stay in the open transaction and are
// committed with the next checkpoint, as the flow.Sink contract requires.
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
