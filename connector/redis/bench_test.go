package redis_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow/connector/redis"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
	"github.com/onceflow/onceflow/internal/dbtest"
)

// TestBenchRatios measures, in one run on one server, each delivery of the
// sink against a hand-written go-redis loop doing the same writes: with
// exactly-once, the loop sends each second's commands as one MULTI/EXEC
// transaction (pipelined); with at-least-once, pipelines of 1000 commands.
// Twice: over 10k keys (the sink merges a checkpoint's commands per key,
// the loop does not) and with a key per record (nothing to merge). Set
// ONCEFLOW_DBBENCH=1 to run it; ONCEFLOW_DBBENCH_ROWS sets the records
// (default 500k).
func TestBenchRatios(t *testing.T) {
	if os.Getenv("ONCEFLOW_DBBENCH") != "1" {
		t.Skip("set ONCEFLOW_DBBENCH=1 to run the sink benchmark")
	}
	rows := 500_000
	if n, err := strconv.Atoi(os.Getenv("ONCEFLOW_DBBENCH_ROWS")); err == nil {
		rows = n
	}
	for _, keys := range []int{10_000, rows} {
		t.Run(fmt.Sprintf("keys=%d", keys), func(t *testing.T) { benchRatios(t, rows, keys) })
	}
}

func benchRatios(t *testing.T, rows, keys int) {
	url, srv, db := dbtest.Redis(t)
	ctx := context.Background()
	opts, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	recs := make([]dbtest.Count, rows)
	for i := range recs {
		recs[i] = dbtest.Count{Key: "k" + strconv.Itoa(i%keys), N: int64(i)}
	}
	type result struct {
		name string
		d    time.Duration
	}
	var results []result
	run := func(name string, f func()) {
		if _, err := srv.Client(db, "FLUSHDB"); err != nil {
			t.Fatal(err)
		}
		cpu0 := serverCPU(t, srv, db)
		start := time.Now()
		f()
		results = append(results, result{name, time.Since(start)})
		t.Logf("%s: %v, server CPU %.2fs", name, time.Since(start).Round(time.Millisecond), serverCPU(t, srv, db)-cpu0)
	}
	// loop writes every record with add: in one transaction per second
	// (tx), or in pipelines of 1000.
	loop := func(tx bool, add func(p goredis.Pipeliner, c dbtest.Count)) func() {
		return func() {
			c := goredis.NewClient(opts)
			defer c.Close()
			newPipe := func() goredis.Pipeliner {
				if tx {
					return c.TxPipeline()
				}
				return c.Pipeline()
			}
			p, last := newPipe(), time.Now()
			for i := 0; i < len(recs); i += 1000 {
				for _, r := range recs[i:min(i+1000, len(recs))] {
					add(p, r)
				}
				if !tx || time.Since(last) >= time.Second {
					if _, err := p.Exec(ctx); err != nil {
						t.Fatal(err)
					}
					p, last = newPipe(), time.Now()
				}
			}
			if _, err := p.Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	set := func(p goredis.Pipeliner, c dbtest.Count) { p.Set(ctx, "n:"+c.Key, c.N, 0) }
	incr := func(p goredis.Pipeliner, c dbtest.Count) { p.IncrBy(ctx, "c:"+c.Key, 1) }
	job := func(name string, cfg redis.Config[dbtest.Count]) func() {
		return func() {
			cfg.BatchRows = 1000
			sink, err := redis.NewSink(cfg)
			if err != nil {
				t.Fatal(err)
			}
			env := flow.New(flow.JobName("bench-"+name), flow.Checkpointing(time.Second), flow.StateDir(t.TempDir()),
				flow.Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			flow.To(flow.From(env, flowtest.NewSource([][]dbtest.Count{recs}, flowtest.PerPoll(1000))), sink)
			if err := env.Run(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	setCfg := func(d redis.Delivery) redis.Config[dbtest.Count] {
		return redis.Config[dbtest.Count]{URL: url, Command: redis.CommandSet, Delivery: d,
			Op: func(c dbtest.Count) (redis.Op, error) {
				return redis.Op{Key: "n:" + c.Key, Value: strconv.FormatInt(c.N, 10)}, nil
			}}
	}
	run("hand-written loop, SET, MULTI/EXEC per second", loop(true, set))
	run("onceflow exactly-once, SET", job("set", setCfg(redis.DeliveryExactlyOnce)))
	run("hand-written loop, INCRBY, MULTI/EXEC per second", loop(true, incr))
	run("onceflow exactly-once, INCRBY", job("incr", sinkConfig(url, "incr")))
	if got, _ := srv.Client(db, "GET", "c:k0"); got != strconv.Itoa(rows/keys) {
		t.Errorf("c:k0 = %s after the job, want %d", got, rows/keys)
	}
	run("hand-written loop, SET, pipelines of 1000", loop(false, set))
	run("onceflow at-least-once, fenced SET", job("fenced", setCfg(redis.DeliveryAtLeastOnce)))
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n%d records, %d keys\n%-50s %12s %10s\n", rows, keys, "run", "records/s", "ratio")
	for i, r := range results {
		base := results[i/2*2].d
		fmt.Fprintf(&sb, "%-50s %12.0f %9.2fx\n", r.name, float64(rows)/r.d.Seconds(), base.Seconds()/r.d.Seconds())
	}
	t.Log(sb.String())
}

// serverCPU is the CPU time the Redis server has used, in seconds.
func serverCPU(t *testing.T, srv *dbtest.RedisServer, db int) float64 {
	info, err := srv.Client(db, "INFO", "cpu")
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Fields(info) {
		for _, name := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(line, name); ok {
				f, _ := strconv.ParseFloat(v, 64)
				sum += f
			}
		}
	}
	return sum
}
