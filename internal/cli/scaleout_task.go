package cli

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
)

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
