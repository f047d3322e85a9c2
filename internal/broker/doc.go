// Package broker runs an embedded, single-node, Kafka-compatible broker
// (franz-go's kfake) for `onceflow broker`, `onceflow demo` and tests.
//
// It listens on 127.0.0.1:9092 unless told otherwise, and only on this
// machine unless the address names another host: the broker has no
// authentication. With [Config.DataDir] it keeps its log, group offsets and
// transaction state on disk; without, in memory.
//
// # Facts the engine relies on
//
// Each fact is checked by a test in this package (facts_test.go,
// persist_test.go) against a running broker with a real franz-go client
// (kgo v1.22). They describe this broker, not every Kafka.
//
//  1. Transactions. Records of a committed transaction are visible to
//     read_committed consumers; records of an aborted one are not (they
//     stay in the log, read_uncommitted sees them). While a transaction is
//     open, read_committed stops at its first record (the last stable
//     offset), hiding later records of other producers too.
//
//  2. Offsets in a transaction. AddOffsetsToTxn(group) followed by
//     TxnOffsetCommit(generation -1, member "", metadata = checkpoint id)
//     stages offsets: kadm FetchOffsets shows the previous commit until
//     EndTxn commits, then the new offset with its metadata string intact;
//     an abort drops them. While staged, a RequireStable fetch answers
//     UNSTABLE_OFFSET_COMMIT. A group that never committed answers
//     GROUP_ID_NOT_FOUND. kgo's own transactional commit
//     (GroupTransactSession) needs a group membership and writes the member
//     id as metadata (kgo.PreTxnCommitFnContext can rewrite it), so the
//     connector sends the two requests itself with the producer id and
//     epoch from Client.ProducerID, and must have produced at least one
//     record in the transaction: kgo's EndTransaction sends nothing for a
//     transaction without produced records. TxnOffsetCommit v6 names
//     topics by topic id only.
//
//  3. Fencing. InitProducerID with a transactional id in use aborts that
//     id's open transaction and bumps its epoch. The older producer's
//     EndTxn(commit) then fails PRODUCER_FENCED if the new owner has begun
//     a transaction, but INVALID_TXN_STATE if the new owner only
//     initialized (kfake reads an EndTxn one epoch behind as a retry of
//     the EndTxn that bumped it), which is also the answer after a
//     transaction timeout (fact 5): that error alone cannot tell "fenced"
//     from "timed out". The older producer's produce fails
//     INVALID_PRODUCER_EPOCH, after which kgo refuses its commit with
//     OPERATION_NOT_ATTEMPTED without asking the broker. kgo makes all of
//     these fatal for the client: BeginTransaction keeps failing, even
//     after EndTransaction(TryAbort). [IsFenced] is true for
//     PRODUCER_FENCED and INVALID_PRODUCER_EPOCH. Any failed commit means
//     "not committed": recover from the last committed progress marker,
//     and re-initialize a producer only if this instance still owns the
//     work, since that fences whoever took over.
//
//  4. Persistence. Committed records and committed group offsets survive
//     Close and SIGKILL of the broker process alike. A transaction open at
//     Close stays open across the restart (as on Kafka): its owner can
//     still commit it, including its staged offsets, and a new producer with
//     the same transactional id aborts it. A transaction open
//     at a crash is aborted by the next Start before any client connects.
//     For that, Start repairs two kfake gaps after an unclean stop (see
//     repair.go): kfake aborts such a transaction without writing the abort
//     marker, which would hide the producer's later committed records from
//     readers that read across it, and it trusts a stale snapshot that
//     forgets a restored open transaction. The repair reads every
//     partition's batch headers once, so that start takes time in
//     proportion to the data.
//     KIP-848 consumer groups keep their members across Close, each with
//     its session: a member whose session ran out while the broker was
//     down is dropped, with its partitions, before kfake loads them (kfake
//     alone kept them owned by the dropped member, assigned to nobody
//     again; repair.go, pruneExpiredMembers).
//     Writes go to the operating system on every produce and commit, never
//     buffered in the process, so SIGKILL loses nothing acknowledged; an
//     operating system crash or power loss can lose recent writes unless
//     [Config.SyncWrites] is set. kfake's EndTxn is not crash-atomic: it
//     writes the partitions' markers and then the group offsets, so a crash
//     inside one EndTxn can commit some of it. Recovery should check that
//     the group offsets' metadata names the checkpoint of the last
//     committed progress marker.
//
//  5. Transaction timeout. The broker aborts a transaction its producer
//     left open past kgo.TransactionTimeout (the clock starts at the first
//     record), on a timer, within milliseconds of the deadline, and logs it
//     at warn level. The producer's commit then fails INVALID_TXN_STATE. A
//     TransactionTimeout above [Config.TxnMaxTimeout] (15 minutes unless
//     set) fails the producer's first BeginTransaction with
//     INVALID_TRANSACTION_TIMEOUT.
//
//  6. Fault injection. [Broker.Cluster] returns the kfake cluster.
//     Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err:
//     kerr.UnknownServerError}) answers the next EndTxn with that error
//     before the broker acts (Count 0 = once, -1 = until Remove; Hits and
//     Wait observe it; Topic, Group, TxnID narrow it). kgo retries
//     retriable errors (CONCURRENT_TRANSACTIONS) and the commit succeeds;
//     a non-retriable one fails EndTransaction, the transaction stays
//     uncommitted, and EndTransaction(TryAbort) makes the client usable
//     again. Cluster().ControlKey(int16(kmsg.EndTxn), fn) runs fn on the
//     next such request first: fn can answer it, drop the connection
//     (return an error), or pass (handled=false); KeepControl keeps fn for
//     more than one request.
package broker
