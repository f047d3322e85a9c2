package scaleout_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/connector/postgres"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/dbtest"
	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/scaleout"
	"github.com/onceflow/onceflow/state"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// A Go job whose last stage writes PostgreSQL (docs/design.md,
// "Scale-out"): each task's sink is named by the task, so its
// transaction is the task's commit point with a progress row of its
// own. Two instances in one process, b joins and leaves while input
// comes in. The tasks' offsets reach the group (Task.Source commits them
// as the instance's member: the group shows them caught up), the
// repartition topic is purged behind them, and psql finds every key's
// counts 1..n once each.
func TestScaleOutGoJobIntoPostgres(t *testing.T) {
	dsn, srv := dbtest.Postgres(t)
	db := dsn[strings.LastIndex(dsn, "/")+1 : strings.Index(dsn, "?")]
	if err := srv.Exec(context.Background(), db, "CREATE TABLE counts (k text NOT NULL, n bigint NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	c := kafkatest.Start(t, broker.Config{Topics: map[string]int32{"in": 4}, GroupSessionTimeout: 6 * time.Second})
	dir := t.TempDir()
	const repart = "pj-by-key"
	type count struct {
		k string
		n int64
	}
	stages := []scaleout.Stage{
		{Topics: []string{"in"}, Build: func(tk *scaleout.Task) (*flow.Env, error) {
			env := flow.New(append(tk.Options(), flow.Checkpointing(100*time.Millisecond))...)
			src, err := tk.Source(kafka.SourceConfig{StartupMode: kafka.StartEarliest})
			if err != nil {
				return nil, err
			}
			return env, tk.Repartition(flow.From(env, src, flow.UID("in")), 1, func(r kafka.Record) string { return string(r.Key) })
		}},
		{Topics: []string{repart}, Build: func(tk *scaleout.Task) (*flow.Env, error) {
			env := flow.New(append(tk.Options(), flow.Checkpointing(100*time.Millisecond))...)
			src, err := tk.Source(kafka.SourceConfig{})
			if err != nil {
				return nil, err
			}
			sink, err := postgres.NewSink(postgres.Config[count]{DSN: dsn, Table: "counts", Columns: []string{"k", "n"},
				Row: func(c count) ([]any, error) { return []any{c.k, c.n}, nil }})
			if err != nil {
				return nil, err
			}
			tk.OnClose(sink.Close)
			counts := flow.Process(flow.KeyBy(flow.From(env, src, flow.UID("in")), func(r kafka.Record) string { return string(r.Key) }), "count",
				func(s *state.Store) flow.ProcessFunc[kafka.Record, count] {
					n := state.NewValue[int64](s, "n")
					return func(_ flow.Context, r kafka.Record, out flow.Collector[count]) error {
						v, _ := n.Get()
						n.Set(v + 1)
						out.Emit(count{string(r.Key), v + 1})
						return nil
					}
				}, flow.UID("count"))
			flow.To(counts, sink, flow.UID("out"))
			return env, nil
		}},
	}
	type inst struct {
		cancel context.CancelFunc
		done   chan error
	}
	start := func(name string) *inst {
		in, err := scaleout.New(scaleout.Config{Job: "pj", Client: kafka.ClientConfig{Brokers: []string{c.Addr}}, Instance: name,
			StateDir: filepath.Join(dir, "state"), Checkpoints: filepath.Join(dir, "shared"), Stages: stages})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		i := &inst{cancel: cancel, done: make(chan error, 1)}
		go func() { i.done <- in.Run(ctx) }()
		return i
	}
	stop := func(name string, i *inst) {
		i.cancel()
		select {
		case err := <-i.done:
			if err != nil {
				t.Fatalf("instance %s: %v", name, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("instance %s did not stop", name)
		}
	}
	cl := c.Client(t, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	const keys = 40
	produce := func(from, n int) {
		var rs []*kgo.Record
		for i := from; i < from+n; i++ {
			rs = append(rs, &kgo.Record{Topic: "in", Key: []byte("k" + strconv.Itoa(i%keys)), Value: []byte("seq-" + strconv.Itoa(i))})
		}
		if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	adm := kadm.NewClient(c.Client(t))
	caughtUp := func(what string) {
		for deadline := time.Now().Add(time.Minute); !kafkatest.CaughtUp(t.Context(), adm, "pj", "in") || !kafkatest.CaughtUp(t.Context(), adm, "pj", repart); {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not caught up within a minute", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	produce(0, 2000)
	a := start("a")
	caughtUp("a alone")
	b := start("b")
	produce(2000, 2000)
	time.Sleep(2 * time.Second) // b takes partitions
	produce(4000, 2000)
	caughtUp("a and b")
	stop("b", b)
	produce(6000, 2000)
	caughtUp("a again")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		starts, err := adm.ListStartOffsets(t.Context(), repart)
		if err != nil {
			t.Fatal(err)
		}
		purged := false
		starts.Each(func(o kadm.ListedOffset) { purged = purged || o.Offset > 0 })
		if purged {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no record of %s was deleted within 30 s after its readers' database commits passed them", repart)
		}
	}
	stop("a", a)
	const perKey = 8000 / keys
	if got, err := srv.Psql(db, "SELECT count(*), count(DISTINCT (k, n)), count(DISTINCT k), min(n), max(n) FROM counts"); err != nil || got != fmt.Sprintf("8000|8000|%d|1|%d", keys, perKey) {
		t.Errorf("counts (rows, distinct rows, keys, min, max) = %s (%v), want every key's counts 1..%d once", got, err, perKey)
	}
	if got, _ := srv.Psql(db, "SELECT count(*) FROM onceflow_progress WHERE job LIKE 'pj-"+repart+"-%' AND checkpoint > 0"); got != "4" {
		t.Errorf("%s progress rows of the second stage's tasks, want 4 (one per task)", got)
	}
}
