package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Ceiling copies every record input holds now to output with the
// franz-go transactional loop [Run] measures as its ceiling (a
// read_committed GroupTransactSession committing every interval), so a
// benchmark with its own input (`onceflow nexmark run`, docs/benchmarks.md)
// can state its figures as ratios of the same yardstick. name makes the
// loop's group and transactional id unique.
func Ceiling(ctx context.Context, brokers []string, name, input, output string, interval time.Duration) error {
	b := &bench{cfg: Config{CheckpointInterval: interval}, brokers: brokers, prefix: name, input: input}
	cl, err := b.client()
	if err != nil {
		return err
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, input)
	cl.Close()
	if err != nil {
		return fmt.Errorf("end offsets of %s: %w", input, err)
	}
	b.ends = map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { b.ends[o.Partition] = o.Offset })
	return b.runCeiling(ctx, output)
}
