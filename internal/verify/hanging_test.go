package verify

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// scripted returns a lister that answers with steps in turn and then
// repeats the last one, and a counter of its calls.
func scripted(steps ...map[int32]partOffsets) (func(context.Context) (map[int32]partOffsets, error), *int) {
	calls := 0
	return func(context.Context) (map[int32]partOffsets, error) {
		s := steps[min(calls, len(steps)-1)]
		calls++
		return s, nil
	}, &calls
}

func TestSettle(t *testing.T) {
	for _, tt := range []struct {
		name  string
		steps []map[int32]partOffsets
		want  []HangingPartition
		calls int // lists made; 0: don't check (the ones that time out poll until then)
	}{
		{
			name:  "all stable: one listing, no wait",
			steps: []map[int32]partOffsets{{0: {5, 5}, 1: {0, 0}}},
			calls: 1,
		},
		{
			name:  "open transaction that never ends",
			steps: []map[int32]partOffsets{{0: {5, 5}, 1: {2, 3}}},
			want:  []HangingPartition{{Partition: 1, LastStable: 2, HighWatermark: 3}},
		},
		{
			name: "ends on the third listing",
			steps: []map[int32]partOffsets{
				{0: {2, 7}, 1: {4, 4}},
				{0: {2, 7}, 1: {4, 4}},
				{0: {8, 8}, 1: {4, 4}},
			},
			calls: 3,
		},
		{
			name: "a job still writing: settled once the LSO passes the first HWM, though it stays below the current one",
			steps: []map[int32]partOffsets{
				{0: {2, 7}},
				{0: {7, 12}},
			},
			calls: 2,
		},
		{
			name: "the LSO moves but not up to the first HWM: reported with the last LSO",
			steps: []map[int32]partOffsets{
				{0: {1, 1}, 1: {2, 7}, 2: {0, 9}},
				{0: {1, 1}, 1: {6, 11}, 2: {0, 9}},
			},
			want: []HangingPartition{{Partition: 1, LastStable: 6, HighWatermark: 7}, {Partition: 2, LastStable: 0, HighWatermark: 9}},
		},
		{
			name: "one settles, one hangs",
			steps: []map[int32]partOffsets{
				{0: {3, 4}, 1: {2, 3}},
				{0: {4, 4}, 1: {2, 3}},
			},
			want: []HangingPartition{{Partition: 1, LastStable: 2, HighWatermark: 3}},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			list, calls := scripted(tt.steps...)
			timeout := 50 * time.Millisecond
			if tt.want == nil {
				timeout = 10 * time.Second // must settle long before
			}
			start := time.Now()
			got, err := settle(context.Background(), list, timeout, time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("hanging %+v, want %+v", got, tt.want)
			}
			if tt.calls != 0 && *calls != tt.calls {
				t.Fatalf("%d listings, want %d", *calls, tt.calls)
			}
			if tt.want != nil && time.Since(start) < timeout {
				t.Fatalf("reported hanging after %v, before the timeout %v", time.Since(start), timeout)
			}
		})
	}
}

func TestSettleErrors(t *testing.T) {
	if _, err := settle(context.Background(), func(context.Context) (map[int32]partOffsets, error) { return map[int32]partOffsets{}, nil }, time.Second, time.Millisecond); err == nil {
		t.Fatal("a topic without partitions must be an error")
	}
	boom := errors.New("boom")
	n := 0
	list := func(context.Context) (map[int32]partOffsets, error) {
		n++
		if n > 1 {
			return nil, boom
		}
		return map[int32]partOffsets{0: {1, 2}}, nil
	}
	if _, err := settle(context.Background(), list, time.Second, time.Millisecond); !errors.Is(err, boom) {
		t.Fatalf("error %v, want the lister's", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	list, _ = scripted(map[int32]partOffsets{0: {1, 2}})
	if _, err := settle(ctx, list, time.Minute, time.Millisecond); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
}
