package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrOutputMismatch is wrapped by the error of a run whose output is not
// exactly one record per input record.
var ErrOutputMismatch = errors.New("the output does not match the input")

// verifier checks the records of an output topic one by one, then as a
// whole.
type verifier interface {
	record(key, value []byte) error
	finish() error
}

// countOnly checks nothing per record: the count is checked by verifyOutput.
type countOnly struct{}

func (countOnly) record(_, _ []byte) error { return nil }
func (countOnly) finish() error            { return nil }

// countVerifier checks the keyed count job's output: for every key "key-k"
// the values are exactly 1..perKey[k], each once. That catches a replayed
// epoch whose state was not rewound, which a plain count cannot tell from
// a correct run when another record went missing.
type countVerifier struct {
	perKey []int
	seen   [][]bool
}

func (v *countVerifier) record(key, value []byte) error {
	if v.seen == nil {
		v.seen = make([][]bool, len(v.perKey))
	}
	ks, ok := bytes.CutPrefix(key, []byte("key-"))
	k, err := strconv.Atoi(string(ks))
	if !ok || err != nil || k < 0 || k >= len(v.perKey) {
		return fmt.Errorf("%w: unexpected key %q", ErrOutputMismatch, key)
	}
	n, err := strconv.Atoi(string(value))
	if err != nil || n < 1 || n > v.perKey[k] {
		return fmt.Errorf("%w: key %q has count %q, want 1..%d", ErrOutputMismatch, key, value, v.perKey[k])
	}
	if v.seen[k] == nil {
		v.seen[k] = make([]bool, v.perKey[k])
	}
	if v.seen[k][n-1] {
		return fmt.Errorf("%w: key %q has count %d twice", ErrOutputMismatch, key, n)
	}
	v.seen[k][n-1] = true
	return nil
}

func (v *countVerifier) finish() error {
	for k, want := range v.perKey {
		got := 0
		if v.seen == nil {
			v.seen = make([][]bool, len(v.perKey))
		}
		for _, s := range v.seen[k] {
			if s {
				got++
			}
		}
		if got != want {
			return fmt.Errorf("%w: key \"key-%d\" has %d distinct counts, want 1..%d", ErrOutputMismatch, k, got, want)
		}
	}
	return nil
}

// windowVerifier checks the window run's output: one result per key and
// window of the input, each counting that window's records.
type windowVerifier struct {
	want    map[string]int
	records int
	seen    map[string]bool
}

func (v *windowVerifier) record(key, value []byte) error {
	var w struct {
		Key         string `json:"key"`
		WindowStart int64  `json:"window_start"`
		N           int    `json:"n"`
	}
	if err := json.Unmarshal(value, &w); err != nil || w.Key != string(key) {
		return fmt.Errorf("%w: %q under key %q is not a window result", ErrOutputMismatch, value, key)
	}
	id := w.Key + "@" + strconv.FormatInt(w.WindowStart, 10)
	if v.seen == nil {
		v.seen = map[string]bool{}
	}
	if v.seen[id] {
		return fmt.Errorf("%w: window %s emitted twice", ErrOutputMismatch, id)
	}
	v.seen[id] = true
	if want, ok := v.want[id]; !ok || want != w.N {
		return fmt.Errorf("%w: window %s counts %d, want %d", ErrOutputMismatch, id, w.N, want)
	}
	return nil
}

func (v *windowVerifier) finish() error {
	if len(v.seen) != len(v.want) {
		return fmt.Errorf("%w: %d windows, want %d", ErrOutputMismatch, len(v.seen), len(v.want))
	}
	return nil
}

// verifyOutput reads topic with a read_committed consumer up to its last
// stable offsets and fails unless it holds exactly want records, each
// accepted by v. Every transaction on topic must have ended.
func verifyOutput(ctx context.Context, brokers []string, topic string, want int, v verifier) error {
	admCl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ClientID("onceflow-bench"))
	if err != nil {
		return fmt.Errorf("verify: kafka client: %w", err)
	}
	defer admCl.Close()
	ends, err := kadm.NewClient(admCl).ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("verify: last stable offsets of %s: %w", topic, err)
	}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.ClientID("onceflow-bench"),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// The last entry of a partition is a commit marker: reading it
		// is how the reader knows it reached the end.
		kgo.KeepControlRecords(),
	)
	if err != nil {
		return fmt.Errorf("verify: kafka client: %w", err)
	}
	defer cl.Close()
	got := 0
	var rerr error
	for len(left) > 0 && rerr == nil {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("verify %s: %w", topic, err)
		}
		if err := fs.Err(); err != nil {
			return fmt.Errorf("verify %s: %w", topic, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := left[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			if r.Offset+1 >= end {
				delete(left, r.Partition)
			}
			if r.Attrs.IsControl() {
				return
			}
			got++
			if rerr == nil {
				rerr = v.record(r.Key, r.Value)
			}
		})
	}
	if rerr != nil {
		return fmt.Errorf("verify %s: %w", topic, rerr)
	}
	if got != want {
		return fmt.Errorf("verify %s: %w: read_committed sees %d records, want %d (one per input record)", topic, ErrOutputMismatch, got, want)
	}
	if err := v.finish(); err != nil {
		return fmt.Errorf("verify %s: %w", topic, err)
	}
	return nil
}
