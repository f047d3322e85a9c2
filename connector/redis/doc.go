// Package redis writes the records of a job into Redis without duplicates
// (docs/design.md, "Database sinks"). Each record becomes one command on
// one key, chosen per sink: SET key value, HSET key field value, INCRBY key
// n or HINCRBY key field n. Two deliveries:
//
//   - DeliveryExactlyOnce (the default): Redis is the job's commit point.
//     The rows of a checkpoint are staged in a list of the job's own
//     (onceflow:stage:<job>:<fence>) as they come; at the checkpoint's
//     commit one Lua script, atomic like every Redis script, checks the
//     job's fence, applies the staged commands, records the checkpoint in
//     the job's progress hash (onceflow:progress:<job>) and drops the
//     stage. Recovery reads the progress hash. A zombie is fenced: Recover
//     increments the hash's fence, and a commit applies nothing unless the
//     fence is its own. Counters (INCRBY, HINCRBY) are exact only here.
//   - DeliveryAtLeastOnce: fenced writes, as records come, in batches
//     each applied by one script. The first writer of each attempt of the
//     job takes a token (INCR onceflow:attempt:<job>:<sink uid>); a batch
//     of a writer whose token was replaced (a zombie) is refused with
//     ErrFenced, unrecoverable, and writes nothing. A replay after a
//     failure writes the same values again under the newer attempt.
//     Only SET and HSET: a replayed increment would count twice.
//
// Retractions (Config.Retracts: the records of an updating result that
// take a row back out, pipeline.RowKind -U and -D) delete: SET's key
// (DEL), HSET's field (HDEL); the last command per key (field) of a
// commit or batch counts. A counter's retraction takes its increment
// back. In DeliveryAtLeastOnce deletes are fenced by the attempt token
// like SETs.
//
// # What the guarantee assumes of the server
//
// A commit is durable only as far as Redis makes it durable. Run the
// server with the append-only file and an fsync per write (appendonly yes,
// appendfsync always): then a committed checkpoint survives a crash of
// Redis. With appendfsync everysec (Redis' default when AOF is on) a crash
// of Redis can lose the last second of writes, the progress hash together
// with the rows (a script's effects are one MULTI/EXEC block in the AOF):
// the data stays consistent with the record, but older than the job's
// newest confirmed checkpoint, which the job then refuses to guess about
// (docs/design.md, "Recovery decisions"); restore the recorded checkpoint
// with --from-savepoint <state dir>/<job>/chk-<n>. With RDB snapshots only,
// minutes are lost that way. The sink logs a warning at start when the
// server's settings are weaker than appendfsync always.
//
// A single server or a primary: the scripts touch the stage, the progress
// hash and the records' keys together, which Redis Cluster refuses for keys
// in different slots. A script runs while the server serves nobody else, so
// a checkpoint of a million commands pauses the server for about a second;
// keep checkpoints small or the interval short.
package redis
