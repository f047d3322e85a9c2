// Command scaleout runs a job built in Go as two instances of one scale-out
// job (package scaleout), SIGKILLs one of them in the middle of the input,
// lets the other take its partitions over, starts the killed one again,
// and checks the committed output exactly.
//
// The job counts records per key:
//
//	in (topic, 4 partitions, keyed by Kafka's default partitioner)
//	    → keyed count (state.Value per key) → out (exactly-once Kafka sink)
//
// Each output record is a key and its running count, so the committed
// output of a key must be exactly 1, 2, …, n (n its input records): a
// record counted twice shows as a repeated count, a lost one as a gap.
//
// The input is keyed by record key and written with Kafka's default
// partitioner, so every record of a key is in one partition and the job
// needs one stage: each partition is a task (a complete exactly-once job
// for that partition, with its own checkpoints in a directory both
// instances share), and the group gives each instance some of the four.
//
// How it runs: this process (the parent) starts an in-process Kafka broker
// (franz-go's kfake, with a 6 s group session timeout), writes a first
// part of the input and starts two instances, "a" and "b": child
// processes running this same program. Once each holds partitions, it
// writes the rest of the input in small batches and, meanwhile, SIGKILLs
// "a" (its open transactions are aborted by the next owner, its partitions
// move to "b" after the session timeout, and "b" restores their
// checkpoints). Then it starts "a" again (the group hands partitions back:
// "b" stops those tasks with final checkpoints), waits until the group
// committed every input offset, stops both with SIGTERM (final
// checkpoints, then they leave the group) and reads "out" read_committed.
//
// Run it with `go run ./scaleout` from the examples directory; it exits 1
// if the output is wrong.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/scaleout"
	"github.com/onceflow/onceflow/state"
)

const (
	job        = "keycount"
	partitions = 4
	keys       = 50
	first      = 3000 // records written before the instances start
	records    = 9000 // all of them

	childEnv = "SCALEOUT_CHILD" // set in a child: "<brokers>;<dir>;<instance>"
)

func main() {
	if arg := os.Getenv(childEnv); arg != "" {
		if err := child(arg); err != nil {
			fmt.Fprintln(os.Stderr, "scaleout child:", err)
			os.Exit(2)
		}
		return
	}
	if err := parent(); err != nil {
		fmt.Fprintln(os.Stderr, "scaleout: FAIL:", err)
		os.Exit(1)
	}
	fmt.Println("scaleout: OK")
}

// keyOf is the key of input record i.
func keyOf(i int) string { return fmt.Sprintf("k%02d", (i*7+i/13)%keys) }

// The instance: the job, built in Go, run by package scaleout.

func child(arg string) error {
	parts := strings.Split(arg, ";")
	if len(parts) != 3 {
		return fmt.Errorf("%s=%q: want <brokers>;<dir>;<instance>", childEnv, arg)
	}
	brokers, dir, instance := strings.Split(parts[0], ","), parts[1], parts[2]
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("instance", instance)
	return scaleout.Run(ctx, scaleout.Config{
		Job:         job,
		Client:      kafka.ClientConfig{Brokers: brokers},
		Instance:    instance,
		StateDir:    filepath.Join(dir, "state"),  // this machine's
		Checkpoints: filepath.Join(dir, "shared"), // every instance's
		TaskOptions: []flow.Option{flow.Checkpointing(200 * time.Millisecond)},
		Logger:      log,
		Joined:      func() error { fmt.Printf("instance %s joined the group\n", instance); return nil },
		Stages:      []scaleout.Stage{{Topics: []string{"in"}, Build: countTask}},
	})
}

// countTask is the job of one partition of "in": count per key, write the
// running counts to "out" in the task's transactions.
func countTask(t *scaleout.Task) (*flow.Env, error) {
	env := flow.New(t.Options()...)
	src, err := t.Source(kafka.SourceConfig{StartupMode: kafka.StartEarliest})
	if err != nil {
		return nil, err
	}
	sink, err := t.Sink(kafka.SinkConfig{Topic: "out"})
	if err != nil {
		return nil, err
	}
	in := flow.From(env, src, flow.UID("in"))
	counts := flow.Process(flow.KeyBy(in, func(r kafka.Record) string { return string(r.Key) }), "count",
		func(s *state.Store) flow.ProcessFunc[kafka.Record, kafka.Record] {
			n := state.NewValue[int64](s, "n")
			return func(ctx flow.Context, r kafka.Record, out flow.Collector[kafka.Record]) error {
				c, _ := n.Get()
				n.Set(c + 1)
				out.Emit(kafka.Record{Key: r.Key, Value: strconv.AppendInt(nil, c+1, 10)})
				return nil
			}
		}, flow.UID("count"))
	flow.To(counts, sink, flow.UID("out"))
	return env, nil
}

// The parent: broker, input, instances, the kill, the check.

type proc struct {
	name string
	cmd  *exec.Cmd
	done chan error
}

func parent() error {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "in", "out"),
		kfake.BrokerConfigs(map[string]string{
			"group.consumer.session.timeout.ms":    "6000",
			"group.consumer.heartbeat.interval.ms": "600",
		}))
	if err != nil {
		return err
	}
	defer cluster.Close()
	addrs := cluster.ListenAddrs()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	dir, err := os.MkdirTemp("", "onceflow-scaleout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	start := func(name string) (*proc, error) {
		cmd := exec.CommandContext(ctx, self)
		cmd.Env = append(os.Environ(), childEnv+"="+strings.Join(addrs, ",")+";"+dir+";"+name)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		p := &proc{name: name, cmd: cmd, done: make(chan error, 1)}
		go func() { p.done <- cmd.Wait() }()
		return p, nil
	}
	cc := kafka.ClientConfig{Brokers: addrs}

	if err := produce(ctx, cl, 0, first); err != nil {
		return err
	}
	a, err := start("a")
	if err != nil {
		return err
	}
	b, err := start("b")
	if err != nil {
		return err
	}
	procs := []*proc{a, b}
	defer func() {
		for _, p := range procs {
			_ = p.cmd.Process.Kill()
		}
	}()
	held, err := waitGroup(ctx, cc, procs, func(m map[string][]kafka.Partition) bool { return len(m["a"]) > 0 && len(m["b"]) > 0 })
	if err != nil {
		return fmt.Errorf("both instances holding partitions: %w", err)
	}
	fmt.Printf("instances a and b joined the group: a holds %v, b holds %v\n", held["a"], held["b"])

	// The rest of the input arrives in batches; "a" dies halfway through
	// them, so records of its partitions come before and after the kill.
	fed, half := make(chan error, 1), make(chan struct{})
	go func() {
		for i := first; i < records; i += 100 {
			if i == (first+records)/2 {
				close(half)
			}
			if err := produce(ctx, cl, i, min(i+100, records)); err != nil {
				fed <- err
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		fed <- nil
	}()
	<-half
	ends, err := adm.ListEndOffsets(ctx, "in")
	if err != nil {
		return err
	}
	offs, err := adm.FetchOffsets(ctx, job)
	if err != nil {
		return err
	}
	var committed, written int64
	for _, p := range held["a"] {
		end, _ := ends.Lookup(p.Topic, p.Partition)
		written += end.Offset
		if o, ok := offs.Lookup(p.Topic, p.Partition); ok {
			committed += o.At
		}
	}
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	if err := <-a.done; err == nil || !strings.Contains(err.Error(), "killed") {
		return fmt.Errorf("instance a ended with %v before the SIGKILL", err)
	}
	fmt.Printf("SIGKILLed instance a halfway through the input (its tasks had committed %d of the %d records of their partitions)\n", committed, written)
	procs = []*proc{b}
	held, err = waitGroup(ctx, cc, procs, func(m map[string][]kafka.Partition) bool { return len(m) == 1 && len(m["b"]) == partitions })
	if err != nil {
		return fmt.Errorf("b taking a's partitions over: %w", err)
	}
	fmt.Printf("after the session timeout b holds %v\n", held["b"])
	if err := <-fed; err != nil {
		return err
	}

	// "a" comes back on the same state directory: the group hands it
	// partitions, whose tasks b stops with final checkpoints.
	if a, err = start("a"); err != nil {
		return err
	}
	procs = append(procs, a)
	held, err = waitGroup(ctx, cc, procs, func(m map[string][]kafka.Partition) bool { return len(m["a"]) > 0 && len(m["b"]) > 0 })
	if err != nil {
		return fmt.Errorf("a rejoining: %w", err)
	}
	fmt.Printf("a started again: a holds %v, b holds %v\n", held["a"], held["b"])
	if err := waitCaughtUp(ctx, adm, procs); err != nil {
		return err
	}
	for _, p := range procs {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			return err
		}
	}
	for _, p := range procs {
		select {
		case err := <-p.done:
			if err != nil {
				return fmt.Errorf("instance %s stopped with %v after SIGTERM", p.name, err)
			}
		case <-ctx.Done():
			return fmt.Errorf("instance %s did not stop after SIGTERM", p.name)
		}
	}
	procs = nil
	fmt.Println("both instances stopped with final checkpoints")
	return check(ctx, addrs)
}

// produce writes input records [from, to) with their keys; the client's
// default partitioner (Kafka's: murmur2 of the key) picks the partition.
func produce(ctx context.Context, cl *kgo.Client, from, to int) error {
	rs := make([]*kgo.Record, 0, to-from)
	for i := from; i < to; i++ {
		rs = append(rs, &kgo.Record{Topic: "in", Key: []byte(keyOf(i)), Value: []byte("event-" + strconv.Itoa(i))})
	}
	return cl.ProduceSync(ctx, rs...).FirstErr()
}

// waitGroup waits until the group's assignment satisfies ok, checking
// that the instances are alive; it returns the assignment by instance.
func waitGroup(ctx context.Context, cc kafka.ClientConfig, procs []*proc, ok func(map[string][]kafka.Partition) bool) (map[string][]kafka.Partition, error) {
	for {
		if err := alive(procs); err != nil {
			return nil, err
		}
		view, err := kafka.DescribeGroup(ctx, cc, job)
		if err == nil {
			m := map[string][]kafka.Partition{}
			for _, mem := range view.Members {
				if len(mem.Partitions) > 0 {
					m[mem.ClientID] = append(m[mem.ClientID], mem.Partitions...)
				}
			}
			if ok(m) {
				for _, ps := range m {
					slices.SortFunc(ps, func(x, y kafka.Partition) int { return int(x.Partition - y.Partition) })
				}
				return m, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("timed out (last group state: %+v, %v)", view, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitCaughtUp waits until the group committed every input offset (each
// task commits its source's offsets to the group in its transactions).
func waitCaughtUp(ctx context.Context, adm *kadm.Client, procs []*proc) error {
	for {
		if err := alive(procs); err != nil {
			return err
		}
		ends, err := adm.ListEndOffsets(ctx, "in")
		if err != nil {
			return err
		}
		offs, err := adm.FetchOffsets(ctx, job)
		done := err == nil
		ends.Each(func(e kadm.ListedOffset) {
			if o, ok := offs.Lookup(e.Topic, e.Partition); !ok || o.At != e.Offset {
				done = false
			}
		})
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.New("the instances did not process the input in time")
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func alive(procs []*proc) error {
	for _, p := range procs {
		select {
		case err := <-p.done:
			return fmt.Errorf("instance %s ended on its own: %v", p.name, err)
		default:
		}
	}
	return nil
}

// check reads "out" read_committed and checks every key's counts: exactly
// 1 to n, in order, once each, n being the key's input records.
func check(ctx context.Context, addrs []string) error {
	want := map[string]int64{}
	for i := range records {
		want[keyOf(i)]++
	}
	rd, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeTopics("out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer rd.Close()
	last := map[string]int64{}
	total := 0
	// Read until every count is in, then a while longer: a count written
	// twice would come after them.
	for quiet := 10 * time.Second; ; {
		if total >= records {
			quiet = time.Second
		}
		pctx, cancel := context.WithTimeout(ctx, quiet)
		fs := rd.PollFetches(pctx)
		cancel()
		if pctx.Err() != nil && fs.NumRecords() == 0 {
			break
		}
		var bad error
		fs.EachError(func(_ string, _ int32, err error) {
			if bad == nil && !errors.Is(err, context.DeadlineExceeded) {
				bad = fmt.Errorf("reading out: %w", err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			total++
			k := string(r.Key)
			n, err := strconv.ParseInt(string(r.Value), 10, 64)
			if (err != nil || n != last[k]+1) && bad == nil {
				bad = fmt.Errorf("key %s: committed count %q after %d (partition %d offset %d): a record counted twice or lost", k, r.Value, last[k], r.Partition, r.Offset)
			}
			last[k] = n
		})
		if bad != nil {
			return bad
		}
	}
	for k, n := range want {
		if last[k] != n {
			return fmt.Errorf("key %s: final committed count %d, want %d", k, last[k], n)
		}
	}
	if len(last) != len(want) || total != records {
		return fmt.Errorf("out has %d counts of %d keys, want %d of %d", total, len(last), records, len(want))
	}
	fmt.Printf("out (read_committed) holds %d counts: for each of the %d keys exactly 1..n in order, n its input records, none twice\n", total, keys)
	return nil
}
