package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The scale-out figures of docs/guarantees.md, by command:
//
//	ONCEFLOW_SCALEOUT_BENCH=1 go test -tags onceflow_faults -run TestScaleOutFigures -v -timeout 60m ./internal/e2e/
//
// ONCEFLOW_SCALEOUT_KEYS sets the state size of the rebalance runs
// (default 1000000), ONCEFLOW_SCALEOUT_RECORDS the input of the scaling
// runs (default 2000000).

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// produceKeys writes n records with keys k0..k(keys-1) in turn, fast.
func produceKeys(t *testing.T, addr, topic string, from, n, keys int) {
	t.Helper()
	cl := client(t, addr, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(20*time.Millisecond), kgo.ProducerBatchMaxBytes(1<<20))
	var wg sync.WaitGroup
	var failed error
	var mu sync.Mutex
	for i := from; i < from+n; i++ {
		wg.Add(1)
		cl.Produce(context.Background(), &kgo.Record{Key: []byte("k" + strconv.Itoa(i%keys)), Value: []byte("seq-" + strconv.Itoa(i))}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				failed = err
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	if failed != nil {
		t.Fatal(failed)
	}
}

func pct(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func TestScaleOutFigures(t *testing.T) {
	if os.Getenv("ONCEFLOW_SCALEOUT_BENCH") != "1" {
		t.Skip("set ONCEFLOW_SCALEOUT_BENCH=1 to measure scale-out (long)")
	}
	t.Run("scaling", func(t *testing.T) {
		records := envInt("ONCEFLOW_SCALEOUT_RECORDS", 2_000_000)
		var base float64
		for _, n := range []int{1, 2, 4} {
			dir := t.TempDir()
			addr := startBroker(t, filepath.Join(dir, "broker"))
			createTopic(t, addr, "in", 8)
			createTopic(t, addr, "out-sc", 8)
			produceKeys(t, addr, "in", 0, records, 100_000)
			f := &fleet{t: t, file: writeScaleOutJob(t, dir, "sc", addr, "out-sc", "pipeline:\n  - count: { key: record.key }"),
				log: &logWriter{t: t, name: "sc"}, run: map[string]*instanceProc{}}
			start := time.Now()
			for i := 0; i < n; i++ {
				f.start("i" + strconv.Itoa(i))
			}
			adm := kadm.NewClient(client(t, addr))
			waitCaughtUp(t, adm, "sc", "in", f)
			el := time.Since(start)
			f.stopAll()
			rate := float64(records) / el.Seconds()
			if n == 1 {
				base = rate
			}
			t.Logf("FIGURE scaling: %d instances: %d records in %v, %.0f records/s, %.2fx one instance", n, records, el.Round(time.Millisecond), rate, rate/base)
		}
	})
	t.Run("rebalance", func(t *testing.T) {
		keys := envInt("ONCEFLOW_SCALEOUT_KEYS", 1_000_000)
		dir := t.TempDir()
		addr := startBroker(t, filepath.Join(dir, "broker"))
		createTopic(t, addr, "in", 4)
		createTopic(t, addr, "out-rb", 4)
		produceKeys(t, addr, "in", 0, keys, keys) // every key once: the state
		f := &fleet{t: t, file: writeScaleOutJob(t, dir, "rb", addr, "out-rb", "pipeline:\n  - count: { key: record.key }"),
			log: &logWriter{t: t, name: "rb"}, run: map[string]*instanceProc{}}
		defer f.stopAll()
		f.start("a")
		f.start("b")
		adm := kadm.NewClient(client(t, addr))
		waitCaughtUp(t, adm, "rb", "in", f)
		t.Logf("FIGURE rebalance: state of %d keys built", keys)
		// A trickle of records on every partition: the time a
		// partition's committed offset takes to move again after its
		// instance went away is the rebalance's cost.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			cl := client(t, addr, kgo.DefaultProduceTopic("in"))
			for i := 0; ctx.Err() == nil; i++ {
				_ = cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k" + strconv.Itoa(i%keys)), Value: []byte("trickle-" + strconv.Itoa(i))})
				time.Sleep(5 * time.Millisecond)
			}
		}()
		committed := func() map[int32]int64 {
			out := map[int32]int64{}
			offs, err := adm.FetchOffsets(ctx, "rb")
			if err == nil {
				offs.Each(func(o kadm.OffsetResponse) {
					if o.Topic == "in" {
						out[o.Partition] = o.At
					}
				})
			}
			return out
		}
		owned := func(name string) []int32 { return instancePartitions(t, adm, "rb", name) }
		results := map[string][]time.Duration{}
		for round := 0; round < envInt("ONCEFLOW_SCALEOUT_ROUNDS", 5); round++ {
			for _, how := range []string{"SIGTERM", "SIGKILL"} {
				victim := []string{"a", "b"}[round%2]
				ps := owned(victim)
				if len(ps) == 0 {
					t.Logf("round %d: %s holds nothing yet; skipped", round, victim)
					continue
				}
				time.Sleep(time.Second)
				before := committed()
				start := time.Now()
				if how == "SIGKILL" {
					f.kill(victim)
				} else {
					f.stop(victim)
				}
				for {
					now := committed()
					moved := true
					for _, p := range ps {
						if now[p] <= before[p] {
							moved = false
						}
					}
					if moved {
						break
					}
					if time.Since(start) > 2*time.Minute {
						t.Fatalf("the partitions %v of %s did not move within 2 minutes after its %s\n%s", ps, victim, how, f.log)
					}
					time.Sleep(20 * time.Millisecond)
				}
				d := time.Since(start)
				results[how] = append(results[how], d)
				t.Logf("round %d: %s of %s (partitions %v): processed again after %v", round, how, victim, ps, d.Round(time.Millisecond))
				f.start(victim)
				time.Sleep(3 * time.Second) // it takes partitions back
			}
		}
		for how, ds := range results {
			t.Logf("FIGURE rebalance: %d keys, %s of an instance: partitions processed again after p50 %v, p99 %v, max %v (%d rounds; SIGKILL includes the 6 s session timeout)",
				keys, how, pct(ds, 0.5).Round(time.Millisecond), pct(ds, 0.99).Round(time.Millisecond), pct(ds, 1).Round(time.Millisecond), len(ds))
		}
	})
}
