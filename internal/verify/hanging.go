package verify

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// HangingPartition is an output partition a read_committed reader cannot
// read to its end because a transaction on it stays open.
type HangingPartition struct {
	Partition int32
	// LastStable is the partition's last stable offset when the check gave
	// up: read_committed readers stop there.
	LastStable int64
	// HighWatermark is the offset the last stable offset had to reach: the
	// high watermark when the check began (read-only check), or when it gave
	// up (sentinel check).
	HighWatermark int64
}

// partOffsets are a partition's last stable offset and high watermark.
type partOffsets struct{ lso, hwm int64 }

// settlePoll is how often the read-only check lists the offsets again.
const settlePoll = 200 * time.Millisecond

// checkHanging looks for output partitions held by an open transaction:
// with sentinels by writing one record to each and waiting for it to
// become visible, otherwise by reading offsets only (settle).
func checkHanging(ctx context.Context, cfg Config) ([]HangingPartition, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	list := func(ctx context.Context) (map[int32]partOffsets, error) { return listOffsets(ctx, adm, cfg.Output) }
	if !cfg.Sentinels {
		h, err := settle(ctx, list, cfg.SettleTimeout, settlePoll)
		if err != nil {
			return nil, fmt.Errorf("output %s: %w", cfg.Output, err)
		}
		return h, nil
	}
	parts, err := sentinels(ctx, cfg)
	if err != nil || len(parts) == 0 {
		return nil, err
	}
	offs, err := list(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]HangingPartition, len(parts))
	for i, p := range parts {
		out[i] = HangingPartition{Partition: p, LastStable: offs[p].lso, HighWatermark: offs[p].hwm}
	}
	return out, nil
}

// listOffsets returns the high watermark and last stable offset of every
// partition of topic. The high watermark is listed first, so a last stable
// offset below it means a record below that watermark was still undecided
// when the last stable offset was listed.
func listOffsets(ctx context.Context, adm *kadm.Client, topic string) (map[int32]partOffsets, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list the high watermarks of %s: %w", topic, err)
	}
	stable, err := adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = stable.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list the last stable offsets of %s: %w", topic, err)
	}
	out := map[int32]partOffsets{}
	ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = partOffsets{lso: -1, hwm: o.Offset} })
	stable.Each(func(o kadm.ListedOffset) {
		if x, ok := out[o.Partition]; ok {
			x.lso = o.Offset
			out[o.Partition] = x
		}
	})
	for p, x := range out {
		if x.lso < 0 {
			return nil, fmt.Errorf("list the last stable offsets of %s: partition %d missing from the answer", topic, p)
		}
	}
	return out, nil
}

// settle reports the partitions held by a transaction that stays open for
// timeout. A partition whose last stable offset (LSO) is below its high
// watermark (HWM) has an undecided transaction below the HWM; it is fine
// once its LSO reaches the HWM seen at the start — every transaction that
// was open then has ended — even if newer transactions keep it below the
// current HWM (a job still writing). list is polled every poll until no
// partition is left or timeout has passed.
func settle(ctx context.Context, list func(context.Context) (map[int32]partOffsets, error), timeout, poll time.Duration) ([]HangingPartition, error) {
	first, err := list(ctx)
	if err != nil {
		return nil, err
	}
	if len(first) == 0 {
		return nil, fmt.Errorf("the output topic has no partitions (does it exist?)")
	}
	target := map[int32]int64{} // partition -> the HWM its LSO must reach
	lso := map[int32]int64{}    // partition -> its LSO as last listed
	for p, o := range first {
		if o.lso < o.hwm {
			target[p], lso[p] = o.hwm, o.lso
		}
	}
	deadline := time.Now().Add(timeout)
	for len(target) > 0 {
		wait := min(poll, time.Until(deadline))
		if wait <= 0 {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		cur, err := list(ctx)
		if err != nil {
			return nil, err
		}
		for p, t := range target {
			o, ok := cur[p]
			if !ok {
				continue
			}
			lso[p] = o.lso
			if o.lso >= t {
				delete(target, p)
			}
		}
	}
	out := make([]HangingPartition, 0, len(target))
	for p, t := range target {
		out = append(out, HangingPartition{Partition: p, LastStable: lso[p], HighWatermark: t})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Partition < out[j].Partition })
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}
