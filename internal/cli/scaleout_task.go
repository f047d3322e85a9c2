package cli

import (
	"fmt"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/pipeline"
	"github.com/onceflow/onceflow/state"
)

func (t *taskSpec) partitionsOrNil() map[string][]int32 {
	if t == nil {
		return nil
	}
	return t.partitions
}

// repartitions tells whether the task writes into a repartition topic.
func (t *taskSpec) repartitions() bool { return t != nil && t.out != "" }

// toRepartition readies the records of a segment before a cut for its
// repartition topic: unchanged, but for the topic and the partition the
// next keyed step's key gives (state.Hash of the key, modulo the topic's
// partitions), so that every record of a key reaches the same task. A
// record whose key cannot be computed is a poison record for
// errors.policy, here as it would be at the keyed step.
func toRepartition(s flow.Stream[kafka.Record], jf *JobFile) (flow.Stream[kafka.Record], flow.Stream[flow.Failure[kafka.Record]], error) {
	t := jf.task
	keyOf, err := pipeline.Keys(KafkaAccess, t.outKey)
	if err != nil {
		return s, flow.Stream[flow.Failure[kafka.Record]]{}, fmt.Errorf("%s: the repartition key %s: %w", jf.Path, t.outKey, err)
	}
	n := uint32(t.outPartitions)
	out, bad := flow.TryMap(s, func(r kafka.Record) (kafka.Record, error) {
		k, err := keyOf(r)
		if err != nil {
			return r, fmt.Errorf("record %s: key %s for the repartition topic %s: %w", r, t.outKey, t.out, err)
		}
		r.Topic, r.Partition, r.Offset = t.out, int32(state.Hash(k)%n), 0
		return r, nil
	}, jf.Errors.Policy, flow.UID("repartition"), flow.Name("to-"+t.out))
	return out, bad, nil
}
