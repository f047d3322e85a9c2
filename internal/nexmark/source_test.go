package nexmark

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
	"github.com/onceflow/onceflow/state"
)

// readAll opens subtask sub of par on src, restored from pos, and polls
// until the reader has yielded limit events (or all, limit < 0). It
// returns the events in order and the reader's snapshot.
func readAll(t *testing.T, src *Source, sub, par int, pos map[string][]byte, limit int) ([]Event, map[string][]byte) {
	t.Helper()
	r, err := src.Open(context.Background(), flow.SourceContext{Subtask: sub, Parallelism: par}, pos)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []Event
	for limit < 0 || len(out) < limit {
		err := r.Poll(context.Background(), func(e Event) { out = append(out, e) })
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	snap, err := r.Snapshot(1)
	if err != nil {
		t.Fatal(err)
	}
	return out, snap
}

// eventKey identifies an event by its JSON.
func eventKey(e Event) string { return string(e.AppendJSON(nil)) }

// Whatever the split count, the parallelism and where a restore
// happens, the source yields the generator's first Events events, each
// once, each split in event-time order.
func TestSourceYieldsTheGeneratorsEvents(t *testing.T) {
	cfg := Config{Seed: 9}
	const events = 5003
	g := mustNew(t, cfg)
	want := map[string]int{}
	for range events {
		want[eventKey(g.Next())]++
	}
	for _, tc := range []struct{ splits, par, restorePar int }{{1, 1, 1}, {3, 2, 3}, {8, 3, 2}, {4, 4, 1}} {
		src := &Source{Config: cfg, Events: events, Splits: tc.splits, PerPoll: 100}
		if n, _ := src.ParallelismHint(context.Background()); n != tc.splits {
			t.Fatalf("parallelism hint %d, want %d", n, tc.splits)
		}
		got := map[string]int{}
		// First run: each subtask reads about 700 events, then a
		// checkpoint; the restored run, at another parallelism, reads
		// the rest.
		restored := map[string][]byte{}
		for sub := range tc.par {
			evs, snap := readAll(t, src, sub, tc.par, nil, 700)
			for _, e := range evs {
				got[eventKey(e)]++
			}
			maps.Copy(restored, snap)
		}
		if len(restored) != tc.splits {
			t.Fatalf("%+v: the snapshots name %d splits, want %d", tc, len(restored), tc.splits)
		}
		for sub := range tc.restorePar {
			evs, _ := readAll(t, src, sub, tc.restorePar, restored, -1)
			last := Timestamp(-1 << 62)
			for _, e := range evs {
				got[eventKey(e)]++
				if tc.restorePar == tc.splits && e.DateTime() < last {
					t.Fatalf("%+v: split %d goes back in event time", tc, sub)
				}
				last = e.DateTime()
			}
		}
		if !maps.Equal(got, want) {
			n := 0
			for _, c := range got {
				n += c
			}
			t.Errorf("%+v: the source yielded %d events (%d distinct), the generator's %d are %d distinct", tc, n, len(got), events, len(want))
		}
	}
	// A position the source cannot have written is refused.
	src := &Source{Config: cfg, Events: 10, Splits: 2}
	if _, err := src.Open(context.Background(), flow.SourceContext{Subtask: 0, Parallelism: 1},
		map[string][]byte{SplitName(0): {99}}); err == nil {
		t.Error("a position beyond the split's end was accepted")
	}
}

// bidsPerAuction is the reference: bids per auction over the first n
// events, computed plainly.
func bidsPerAuction(t *testing.T, cfg Config, n int64) map[string]int64 {
	g := mustNew(t, cfg)
	out := map[string]int64{}
	for range n {
		if e := g.Next(); e.Type == BidEvent {
			out[strconv.FormatInt(e.Bid.Auction, 10)]++
		}
	}
	return out
}

type auctionCount struct {
	Auction string
	N       int64
}

// A flow job over the source counts bids per auction exactly as a plain
// loop over the generator does, with checkpoints along the way.
func TestSourceInAFlowJob(t *testing.T) {
	cfg := Config{Seed: 21}
	const events = 30_000
	src := &Source{Config: cfg, Events: events, Splits: 4, PerPoll: 256}
	sink := flowtest.NewSink[auctionCount]()
	env := flow.New(
		flow.JobName("nexmark-bids-per-auction"),
		flow.Parallelism(2),
		flow.Checkpointing(20*time.Millisecond),
		flow.StateDir(t.TempDir()),
		flow.Logger(slog.New(slog.NewTextHandler(io.Discard, nil))),
	)
	bids := flow.Filter(flow.From(env, flow.Source[Event](src)), func(e Event) bool { return e.Type == BidEvent })
	counts := flow.Process(flow.KeyBy(bids, func(e Event) string { return strconv.FormatInt(e.Bid.Auction, 10) }), "bids-per-auction",
		func(s *state.Store) flow.ProcessFunc[Event, auctionCount] {
			n := state.NewValue[int64](s, "n")
			return func(ctx flow.Context, _ Event, out flow.Collector[auctionCount]) error {
				v, _ := n.Get()
				n.Set(v + 1)
				out.Emit(auctionCount{ctx.Key(), v + 1})
				return nil
			}
		})
	flow.To(counts, sink)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := env.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sink.Err(); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	var total int64
	for _, c := range sink.Committed() {
		got[c.Auction] = max(got[c.Auction], c.N)
		total++
	}
	want := bidsPerAuction(t, cfg, events)
	var nbids int64
	for _, n := range want {
		nbids += n
	}
	if total != nbids {
		t.Errorf("the job emitted %d running counts, the events hold %d bids", total, nbids)
	}
	if !maps.Equal(got, want) {
		keys := slices.Sorted(maps.Keys(want))
		for _, k := range keys[:min(len(keys), 5)] {
			t.Logf("auction %s: job %d, reference %d", k, got[k], want[k])
		}
		t.Errorf("bids per auction: the job's %d auctions differ from the reference's %d", len(got), len(want))
	}
	if sink.Commits() < 2 {
		t.Logf("only %d commits: the job was faster than its checkpoints", sink.Commits())
	}
}
