// Package postgres writes the records of a job into a PostgreSQL table
// without duplicates (docs/design.md, "Database sinks"). Two deliveries:
//
//   - DeliveryExactlyOnce (the default): the database transaction is the
//     job's commit point. One transaction per checkpoint, on one connection
//     the sink's subtasks share, holds the checkpoint's rows and the job's
//     progress row (table onceflow_progress: job, checkpoint, manifest
//     checksum, incarnation, state directory id, fence). Recovery reads the
//     progress row: present means the checkpoint and its rows committed,
//     otherwise its epoch is replayed into a new transaction. No prepared
//     transactions are needed. Zombies are fenced: Recover terminates the
//     job's other connections and increments the row's fence, and every
//     commit updates the row only under its own fence.
//   - DeliveryAtLeastOnce: epoch-fenced upserts. Rows are written as they
//     come, in batches each committed on its own, with INSERT … ON CONFLICT
//     (key) DO UPDATE … WHERE table.epoch <= EXCLUDED.epoch: a replay after
//     a failure writes the same rows again under a newer epoch (checkpoint
//     ids only grow), and a zombie writing an older epoch cannot overwrite
//     a newer value. The table needs a primary key (Key) and a bigint epoch
//     column (EpochColumn). The table ends exactly as with exactly-once when
//     the rows are a function of the input (a pass-through, a count from
//     keyed state); readers may see a replayed row's older value for a
//     moment.
//   - DeliveryTwoPhase: a participant of another commit point (a Kafka
//     sink's in the same job, or the manifest write). Each subtask's rows
//     go into a transaction of its own, PREPARE TRANSACTION at the
//     barrier, COMMIT PREPARED after the commit point; opening a subtask
//     rolls back what it prepared after the restored checkpoint. Needs
//     max_prepared_transactions above 0.
//
// With a Key, rows with the same key update the row (last write wins);
// without one (exactly-once only), rows are appended with COPY.
//
// Retractions (Config.Retracts: the records of an updating result that
// take a row back out, pipeline.RowKind -U and -D) delete the row of
// their key, in every delivery: a batch comes down to the last upsert or
// delete per key, then DELETE … WHERE key IN (…) and the upserts. In
// DeliveryAtLeastOnce a delete is fenced like an upsert: by the attempt
// token (a zombie's late upsert or delete writes nothing) and by epoch
// (DELETE … WHERE epoch <= its epoch). A retraction into a table without
// a Key fails the job: declare the primary key.
package postgres
