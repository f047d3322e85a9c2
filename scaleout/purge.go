package scaleout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
)

// purger deletes the records of a repartition topic's partition that its
// task committed past, at most every purgeEvery, after a checkpoint: they
// are never read again (a restore resumes at the committed offset), and
// the topic keeps them forever otherwise (retention.ms -1).
type purger struct {
	cc   kafka.ClientConfig
	p    kafka.Partition
	log  *slog.Logger
	mu   sync.Mutex
	src  *kafka.Source
	last time.Time
	busy bool
	done int64 // offset deleted up to
}

const purgeEvery = 5 * time.Second

func (pg *purger) setSource(src *kafka.Source) {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	pg.src = src
}

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
		err := deleteRecordsBefore(pg.cc, pg.p, at)
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

// ensureRepartitionTopics creates the repartition topics (the topics of
// the stages after the first) that do not exist yet and returns every
// one's partition count. A topic that exists with another count than
// asked is refused: records of a key would go elsewhere than its state.
func (in *Instance) ensureRepartitionTopics(ctx context.Context) (map[string]int, error) {
	cfg := in.cfg
	out := map[string]int{}
	if len(cfg.Stages) < 2 {
		return out, nil
	}
	cl, err := cfg.Client.NewClient()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	want := cfg.RepartitionPartitions
	if want == 0 {
		tds, err := adm.ListTopics(ctx, cfg.Stages[0].Topics...)
		if err != nil {
			return nil, fmt.Errorf("list the input topics: %w", err)
		}
		for _, td := range tds {
			want = max(want, len(td.Partitions))
		}
		if want == 0 {
			return nil, fmt.Errorf("none of the input topics %v exists: create them, or set %s", cfg.Stages[0].Topics, cfg.RepartitionSetting)
		}
	}
	for _, s := range cfg.Stages[1:] {
		topic := s.Topics[0]
		tds, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return nil, fmt.Errorf("list the repartition topic %s: %w", topic, err)
		}
		if td, ok := tds[topic]; ok && td.Err == nil {
			if n := len(td.Partitions); cfg.RepartitionPartitions != 0 && n != cfg.RepartitionPartitions {
				return nil, fmt.Errorf("the repartition topic %s has %d partitions, and %s asks for %d: its tasks' state is split by its partitions, so the count cannot change; remove the setting, or start the job anew under another name", topic, n, cfg.RepartitionSetting, cfg.RepartitionPartitions)
			}
			out[topic] = len(td.Partitions)
			continue
		}
		// Records are deleted once the reading task committed past them
		// (retention alone could drop records not yet read).
		resp, err := adm.CreateTopic(ctx, int32(want), -1, map[string]*string{"retention.ms": kadm.StringPtr("-1"), "cleanup.policy": kadm.StringPtr("delete")}, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return nil, fmt.Errorf("create the repartition topic %s (%d partitions): %w; create it yourself with that count, or grant the job's principal CREATE", topic, want, err)
		}
		if errors.Is(err, kerr.TopicAlreadyExists) {
			tds, err := adm.ListTopics(ctx, topic)
			if err != nil {
				return nil, err
			}
			out[topic] = len(tds[topic].Partitions)
			continue
		}
		out[topic] = want
	}
	return out, nil
}
