// Package scaleout runs a job built in Go as one of several instances that
// share its work through a Kafka consumer group (docs/design.md,
// "Scale-out: instances in one consumer group"): the same model as a job
// file with scale-out enabled, which the onceflow binary runs with this
// package.
//
// A job is a list of stages (sub-topologies). The group assigns the
// partitions of the stages' topics to the instances; for each partition it
// is given, an instance runs a task: a complete exactly-once job for that
// one partition, built by the stage's Build function, named
// <job>-<topic>-<partition>, with its own transactional id, checkpoints
// (in Config.Checkpoints or Config.CheckpointStorage, which every instance reaches) and local state
// (under the instance's directory in Config.StateDir). A failed task
// restarts under the job's restart strategy (Config.Restart, default
// exponential-delay) while its instance owns the partition, stops with a
// final checkpoint when the group takes the partition away, and is
// restored from its checkpoints by whichever instance gets the partition
// next; a paused instance's tasks are fenced by their new owners'
// transactions and by fenced checkpoint ids. A failure the strategy does
// not restart, or that no restart can mend (flow.ErrUnrecoverable,
// flow.ErrRestoreRefused, flow.ErrInvalidJob), stops the instance.
// Instance.Tasks tells each task's last failure and what is wrong with it
// (TaskStatus.Problem).
//
// Build makes the task's job with the helpers of Task, which bind it to
// its partition:
//
//   - flow.New(t.Options()...): the task's name, state directory, shared
//     checkpoints, fenced checkpoint ids, metrics and purging hooks;
//   - t.Source: the Kafka source of the task's partition alone;
//   - t.Sink: the exactly-once Kafka sink whose transactions commit that
//     source's offsets (to Config.Group, so lag tools see the whole job);
//     or, in the last stage, an exactly-once database sink of the
//     Build's own (connector/postgres, connector/mysql, connector/redis;
//     its Job left empty, so the task's name): its transaction is the
//     task's commit point, its progress row the task's, and the source
//     commits its offsets to Config.Group as the instance's member
//     (Task.CommitGroupOffsets);
//   - t.Repartition: for a stage whose keyed step needs records partitioned
//     by another key than the input's, the sink into a later stage's
//     topic, each record in partition state.Hash(key) modulo its
//     partitions. The instance creates that topic (Config.RepartitionPartitions),
//     the later stage's tasks read it from its start and delete what they
//     committed past. Watermarks cross it as markers: with event time
//     the later stage's watermark is the smallest of the writing tasks'
//     (Task.Upstreams, Task.MarkAs).
//
// Instance.Savepoint takes a savepoint of the whole job, every task of
// every stage on whichever instance runs it, asked at any one instance
// (the instances carry the request through the shared checkpoint
// directory, or with checkpoints in object storage through that storage,
// Config.SavepointPlace, which keeps the savepoint too); with stop the stages stop one after the other, each after
// reading its repartition topic to the end the one before left, and
// every instance's Run returns. Config.FromSavepoint, given to every
// instance of a later start at any instance count, restores it
// (docs/design.md, "Scale-out": savepoints of the whole job).
//
// An input written with Kafka's default partitioner is partitioned by
// record key, so a count by record key needs one stage:
//
//	err := scaleout.Run(ctx, scaleout.Config{
//		Job:         "clicks-per-user",
//		Client:      kafka.ClientConfig{Brokers: []string{"kafka:9092"}},
//		Instance:    hostname,               // each instance its own
//		StateDir:    "/var/lib/onceflow",    // this machine's
//		Checkpoints: "/mnt/shared/onceflow", // every instance's (or CheckpointStorage: S3)
//		TaskOptions: []flow.Option{flow.Checkpointing(5 * time.Second)},
//		Stages: []scaleout.Stage{{Topics: []string{"clicks"}, Build: func(t *scaleout.Task) (*flow.Env, error) {
//			env := flow.New(t.Options()...)
//			src, err := t.Source(kafka.SourceConfig{StartupMode: kafka.StartEarliest})
//			if err != nil {
//				return nil, err
//			}
//			sink, err := t.Sink(kafka.SinkConfig{Topic: "clicks-per-user"})
//			if err != nil {
//				return nil, err
//			}
//			counts := flow.Process(flow.KeyBy(flow.From(env, src, flow.UID("clicks")), byKey), "count", count)
//			flow.To(counts, sink, flow.UID("counts"))
//			return env, nil
//		}}},
//	})
//
// See the package's example for two stages, and the examples module's
// scaleout program for a run with two instances, one of them killed.
package scaleout
