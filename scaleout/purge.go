package scaleout

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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
	committed, ok := pg.src.CommittedOffsets()[pg.p]
	at := purgeOffset(committed)
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

// purgeOffset is the offset below which a partition whose task committed
// up to committed is purged: one less, so the record before committed
// stays. A partition purged to its end has no record left, and the
// embedded broker (kfake) restarted with such a partition in its data
// directory loads it empty at offset 0: new records took offsets the
// reading task had passed, and it skipped them (the chaos runs' early
// loss; docs/design.md, "Scale-out"). Kafka keeps a partition's offsets
// either way; one record more costs nothing there.
func purgeOffset(committed int64) int64 { return committed - 1 }

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
// one's partition count, as the brokers show it. A topic that exists with
// another count than asked is refused: records of a key would go
// elsewhere than its state.
//
// Instances started together race to create a topic: one creates it, the
// others get TOPIC_ALREADY_EXISTS and read its count. They read it from
// the brokers, not from the client's metadata cache (kadm's reads go
// through it), which still holds their own first look, "unknown topic",
// with no partitions; and they wait until the brokers' metadata shows the
// topic's partitions, which a broker that has not yet heard of the new
// topic does not. A count of 0 would fail every run of the first stage's
// tasks (they partition by state.Hash(key) modulo the count).
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
		n, err := partitionsOf(ctx, cl, topic)
		switch {
		case errors.Is(err, kerr.UnknownTopicOrPartition):
			// Records are deleted once the reading task committed past
			// them (retention alone could drop records not yet read).
			resp, err := adm.CreateTopic(ctx, int32(want), -1, map[string]*string{"retention.ms": kadm.StringPtr("-1"), "cleanup.policy": kadm.StringPtr("delete")}, topic)
			if err == nil {
				err = resp.Err
			}
			if err == nil {
				n = want
				break
			}
			if !errors.Is(err, kerr.TopicAlreadyExists) {
				return nil, fmt.Errorf("create the repartition topic %s (%d partitions): %w; create it yourself with that count, or grant the job's principal CREATE", topic, want, err)
			}
			// Another instance created it since the look above.
			in.log.Info("another instance created the repartition topic; reading its partition count", "topic", topic)
			if n, err = awaitPartitions(ctx, cl, topic); err != nil {
				return nil, err
			}
		case err == nil && n > 0:
		case err == nil || errors.Is(err, kerr.LeaderNotAvailable):
			// Being created (by another instance): not shown yet.
			if n, err = awaitPartitions(ctx, cl, topic); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("list the repartition topic %s: %w", topic, err)
		}
		if cfg.RepartitionPartitions != 0 && n != cfg.RepartitionPartitions {
			return nil, fmt.Errorf("the repartition topic %s has %d partitions, and %s asks for %d: its tasks' state is split by its partitions, so the count cannot change; remove the setting, or start the job anew under another name", topic, n, cfg.RepartitionSetting, cfg.RepartitionPartitions)
		}
		out[topic] = n
	}
	return out, nil
}

// topicShowsUp bounds how long an instance waits for the brokers'
// metadata to show a repartition topic another instance created.
var topicShowsUp = 30 * time.Second

// awaitPartitions reads the partition count of topic, which exists (or
// is being created), until the brokers' metadata shows its partitions;
// at most topicShowsUp.
func awaitPartitions(ctx context.Context, cl *kgo.Client, topic string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, topicShowsUp)
	defer cancel()
	for {
		n, err := partitionsOf(ctx, cl, topic)
		switch {
		case err == nil && n > 0:
			return n, nil
		case err == nil, errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.LeaderNotAvailable):
			// Not shown yet: a broker learns of a new topic from the
			// controller a moment after its creation.
		default:
			return 0, fmt.Errorf("read the partition count of the repartition topic %s: %w", topic, err)
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("the repartition topic %s exists (another instance created it), but the brokers' metadata showed no partitions of it within %v (last answer: %v): check the brokers, then start the instance again", topic, topicShowsUp, cmp.Or(err, errors.New("no partitions")))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// inputPartitions is the partition count of the input topic topic, read
// for the writers of a repartition topic: it waits while the brokers show
// the topic with no partitions or not at all (a topic being created, or
// brokers restarting). Taking such an answer as "no writers yet" would
// let the readers' watermark follow the first writer heard from, and
// make a slower writer's records late (the chaos run saw windows short
// of records at a job's start), so the instance waits, and says so.
func (in *Instance) inputPartitions(ctx context.Context, cl *kgo.Client, topic string) (int, error) {
	start := time.Now()
	logged := start
	for {
		n, err := partitionsOf(ctx, cl, topic)
		if err == nil && n > 0 {
			return n, nil
		}
		if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) && !errors.Is(err, kerr.LeaderNotAvailable) && ctx.Err() == nil && !kerr.IsRetriable(err) {
			return 0, err
		}
		if time.Since(logged) >= 10*time.Second {
			logged = time.Now()
			in.log.Warn("waiting for the input topic to show its partitions: the tasks after the repartition need to know every writer; create the topic, or check the brokers",
				"topic", topic, "waited", time.Since(start).Round(time.Second), "last_answer", cmp.Or(err, errors.New("no partitions")))
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("the input topic %s showed no partitions before the instance stopped (last answer: %v)", topic, cmp.Or(err, errors.New("no partitions")))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// partitionsOf asks the brokers for the partition count of topic,
// bypassing the client's metadata cache: the count of a topic that
// exists and shows partitions, 0 with no error for one that shows none
// yet, and the topic's error (UNKNOWN_TOPIC_OR_PARTITION for a topic
// that does not exist, LEADER_NOT_AVAILABLE for one being created).
func partitionsOf(ctx context.Context, cl *kgo.Client, topic string) (int, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	for _, t := range resp.Topics {
		if t.Topic != nil && *t.Topic == topic {
			if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
				return 0, err
			}
			return len(t.Partitions), nil
		}
	}
	return 0, kerr.UnknownTopicOrPartition
}

// listUpstreams names, for each stage after the first, the tasks of the
// stage before it (by their partitions, kafka.Partition.String): the
// writers of its repartition topic, whose watermark markers its tasks
// wait for before event time moves (docs/design.md, "Scale-out"). A task
// of a partition added later is heard from with its first marker.
func (in *Instance) listUpstreams(ctx context.Context) (map[int][]string, error) {
	cfg := in.cfg
	out := map[int][]string{}
	if len(cfg.Stages) < 2 {
		return out, nil
	}
	cl, err := cfg.Client.NewClient()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	for k := 1; k < len(cfg.Stages); k++ {
		var names []string
		for _, topic := range cfg.Stages[k-1].Topics {
			n, ok := in.parts[topic]
			if !ok {
				if n, err = in.inputPartitions(ctx, cl, topic); err != nil {
					return nil, fmt.Errorf("read the partition count of %s, whose tasks write the repartition topic %s: %w", topic, cfg.Stages[k].Topics[0], err)
				}
			}
			for p := range n {
				names = append(names, kafka.Partition{Topic: topic, Partition: int32(p)}.String())
			}
		}
		out[k] = names
	}
	return out, nil
}
