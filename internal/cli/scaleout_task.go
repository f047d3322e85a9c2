package cli

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/jobfile"
	"github.com/onceflow/onceflow/pipeline"
	"github.com/onceflow/onceflow/state"
)

// toRepartition readies the records of a segment before a cut for its
// repartition topic: unchanged, but for the topic and the partition the
// next keyed step's key gives (state.Hash of the key, modulo the topic's
// partitions), so that every record of a key reaches the same task. A
// record whose key cannot be computed is a poison record for
// errors.policy, here as it would be at the keyed step.
func toRepartition(s flow.Stream[kafka.Record], jf *jobfile.JobFile) (flow.Stream[kafka.Record], flow.Stream[flow.Failure[kafka.Record]], error) {
	t := jf.Task
	keyOf, err := pipeline.Keys(KafkaAccess, t.OutKey)
	if err != nil {
		return s, flow.Stream[flow.Failure[kafka.Record]]{}, fmt.Errorf("%s: the repartition key %s: %w", jf.Path, t.OutKey, err)
	}
	n := uint32(t.OutPartitions)
	out, bad := flow.TryMap(s, func(r kafka.Record) (kafka.Record, error) {
		k, err := keyOf(r)
		if err != nil {
			return r, fmt.Errorf("record %s: key %s for the repartition topic %s: %w", r, t.OutKey, t.Out, err)
		}
		r.Topic, r.Partition, r.Offset = t.Out, int32(state.Hash(k)%n), 0
		return r, nil
	}, jf.Errors.Policy, flow.UID("repartition"), flow.Name("to-"+t.Out))
	return out, bad, nil
}

// purger deletes the records of a repartition topic's partition that its
// task committed past, at most every purgeEvery, after a checkpoint: they
// are never read again (a restore resumes at the committed offset), and
// the topic keeps them forever otherwise (retention.ms -1).
type purger struct {
	so   *scaleOut
	p    kafka.Partition
	log  *slog.Logger
	src  *kafka.Source
	mu   sync.Mutex
	last time.Time
	busy bool
	done int64 // offset deleted up to
}

const purgeEvery = 5 * time.Second

func (pg *purger) OnCheckpointCompleted(flow.CheckpointCompleted) {
	pg.mu.Lock()
	if pg.busy || time.Since(pg.last) < purgeEvery || pg.src == nil {
		pg.mu.Unlock()
		return
	}
	at, ok := pg.src.CommittedOffsets()[pg.p]
	if !ok || at <= pg.done {
		pg.mu.Unlock()
		return
	}
	pg.busy, pg.last = true, time.Now()
	pg.mu.Unlock()
	go func() {
		err := deleteRecordsBefore(pg.so.cc, pg.p, at)
		pg.mu.Lock()
		pg.busy = false
		if err == nil {
			pg.done = at
		}
		pg.mu.Unlock()
		if err != nil {
			pg.log.Warn("could not delete the repartition topic's records the task committed past (retried after the next checkpoint)", "partition", pg.p.String(), "before", at, "err", err)
		}
	}()
}

// deleteRecordsBefore deletes the records of p below offset at.
func deleteRecordsBefore(cc kafka.ClientConfig, p kafka.Partition, at int64) error {
	cl, err := cc.NewClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: p.Topic, Partition: p.Partition, At: at})
	resps, err := kadm.NewClient(cl).DeleteRecords(ctx, offs)
	if err != nil {
		return err
	}
	return resps.Error()
}
