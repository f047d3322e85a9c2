// Command enrich joins two Kafka topics in one two-input keyed operator and
// writes the result to a custom exactly-once sink registered from this
// module, while its job process is killed with SIGKILL and restarted
// several times; it checks that the committed output holds every joined
// order exactly once.
//
// The job:
//
//	orders   (topic, 3 partitions: key customer, value "order amount") ─┐
//	                                                  flow.Connect by customer → flow.CoProcess "join" → epoch-files sink
//	profiles (topic, 2 partitions: key customer, value name)          ─┘
//
// The CoProcess keeps each customer's name in keyed state (state.Value)
// and joins each order with it; an order that arrives before its
// customer's profile waits in keyed state (state.List) and is emitted
// when the profile arrives. Both inputs are Kafka sources (bounded, so the
// job ends), checkpoints are exactly-once, and the commit point is the
// checkpoint manifest; the sink takes part in it by two-phase commit (see
// sink.go): each subtask's epoch is a file prepared at the barrier and
// renamed into place after the checkpoint committed. The sink's
// connector.Spec is registered in this module's init, and the program
// checks that connector.Lookup finds it next to onceflow's own connectors.
//
// How it runs: this process (the parent) starts an in-process Kafka broker
// (franz-go's kfake), produces the input, and runs the job in a child
// process (this same program, re-executed). It SIGKILLs the child six
// times and restarts it on the same state directory and output directory
// each time; the broker outlives every child. The kills take turns at
// three moments: as soon as the sink prepared an epoch (its file appears,
// before the checkpoint commits: recovery must abort it and write its
// records again), right after a checkpoint committed (before the sink
// renamed its epochs: recovery must commit them from the restored
// checkpoint), and at a random moment. The child says on stdout when the
// job started and when each checkpoint starts and commits (flow hooks),
// which is how the parent aims. The last child runs to the end of the
// input. The parent then reads the committed output files and checks
// them: every order exactly once, with its customer's name and amount,
// nothing extra, nothing left prepared, and both ways through the join
// (profile first, order first) taken.
//
// Run it with `go run ./enrich` from the examples directory; it exits 1 if
// the output is wrong. ENRICH_SEED=<n> repeats the kill delays of a run (the
// moments they land at depend on timing too).
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/state"
)

const (
	customers = 60
	orders    = 1500
	kills     = 6 // SIGKILLs of the job process before it may finish

	parallelism = 2 // of the join and the sink

	childEnv = "ENRICH_CHILD" // set in the child: "<brokers>;<dir>"
)

func main() {
	if arg := os.Getenv(childEnv); arg != "" {
		if err := child(arg); err != nil {
			fmt.Fprintln(os.Stderr, "enrich child:", err)
			os.Exit(2)
		}
		return
	}
	if err := parent(); err != nil {
		fmt.Fprintln(os.Stderr, "enrich: FAIL:", err)
		os.Exit(1)
	}
	fmt.Println("enrich: OK")
}

// The input, the same in every process.

func customerOf(i int) string { return fmt.Sprintf("c%03d", i) }
func nameOf(c string) string  { return "name-of-" + c }

// orderAt is order i: its id, its customer and its amount in cents.
func orderAt(i int) (id, cust string, cents int) {
	return fmt.Sprintf("o%05d", i), customerOf((i*37 + i/7) % customers), 100 + (i*7919)%9900
}

// expected is every committed line's first four fields, by order id.
func expected() map[string]string {
	want := map[string]string{}
	for i := range orders {
		id, c, cents := orderAt(i)
		want[id] = fmt.Sprintf("%s %s %s %d", id, c, nameOf(c), cents)
	}
	return want
}

func parent() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The registry is open to code outside onceflow: this module's init
	// registered the sink next to onceflow's own connectors.
	spec, ok := connector.Lookup("epoch-files")
	if !ok || spec.Sink == nil || !spec.Supports(connector.ExactlyOnce) {
		return fmt.Errorf("connector.Lookup(%q) = %+v, %v: the sink registered by this module is missing", "epoch-files", spec, ok)
	}
	if _, ok := connector.Lookup("kafka"); !ok {
		return errors.New(`connector.Lookup("kafka") found nothing`)
	}
	fmt.Printf("connectors registered: %s (epoch-files from this module)\n", strings.Join(connector.Names(), ", "))

	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "orders"), kfake.SeedTopics(2, "profiles"))
	if err != nil {
		return err
	}
	defer cluster.Close()
	brokers := strings.Join(cluster.ListenAddrs(), ",")
	if err := produce(ctx, cluster.ListenAddrs()); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "onceflow-enrich-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	self, err := os.Executable()
	if err != nil {
		return err
	}

	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("ENRICH_SEED"); s != "" {
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			return fmt.Errorf("ENRICH_SEED: %w", err)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	modes := []killMode{killPrepared, killCommitted, killRandom}
	killed := 0
	for run := 1; ; run++ {
		if run > kills+5 {
			return fmt.Errorf("the job did not finish in %d runs", run-1)
		}
		mode, delay := noKill, time.Duration(0)
		if killed < kills {
			mode, delay = modes[killed%len(modes)], time.Duration(50+rng.IntN(250))*time.Millisecond
		}
		res, err := runChild(ctx, self, brokers+";"+dir, filepath.Join(dir, "output"), mode, delay)
		if err != nil {
			return fmt.Errorf("run %d: %w", run, err)
		}
		committed, err := countLines(filepath.Join(dir, "output", "out"))
		if err != nil {
			return err
		}
		if res.killed {
			killed++
			fmt.Printf("run %d: restored checkpoint %s; SIGKILLed %s (%s); %d lines committed so far\n",
				run, res.restored, res.how, mode, committed)
			continue
		}
		fmt.Printf("run %d: restored checkpoint %s, ran to the end: %s\n", run, res.restored, res.summary)
		break
	}
	if killed < kills {
		return fmt.Errorf("only %d of %d kills landed while the job ran (seed %d)", killed, kills, seed)
	}
	if err := check(filepath.Join(dir, "output")); err != nil {
		return fmt.Errorf("%w (seed %d)", err, seed)
	}
	fmt.Printf("%d SIGKILLs (seed %d); the committed output holds each of %d orders exactly once with its customer's name\n",
		killed, seed, orders)
	return nil
}

type childResult struct {
	killed   bool
	how      string // where the kill landed
	restored string // the checkpoint the child restored, as it said
	summary  string // its last line when it ran to the end
}

// Where a kill lands. The job process says on stdout when it started and
// when each checkpoint starts and completes (flow hooks); the parent also
// sees the sink's epoch files appear. So besides killing at a random
// moment it can aim at the two windows of the two-phase commit.
type killMode int

const (
	noKill killMode = iota
	// killRandom: delay after the job started.
	killRandom
	// killPrepared: in the first checkpoint started after delay, as soon
	// as the sink prepared its epoch (a file of that checkpoint appears),
	// before the checkpoint committed if the kill is fast enough: the
	// restored job must abort that epoch and write its records again.
	killPrepared
	// killCommitted: as soon as a checkpoint after delay committed, before
	// the sink renamed its epochs if the kill is fast enough: recovery must
	// commit them from the restored checkpoint's handles.
	killCommitted
)

func (m killMode) String() string {
	return [...]string{"none", "at a random moment", "after the sink prepared a checkpoint", "right after a checkpoint committed"}[m]
}

// runChild runs the job in a child process and kills it with SIGKILL as
// mode says; if the child ends first, it was not killed.
func runChild(ctx context.Context, self, arg, outDir string, mode killMode, delay time.Duration) (childResult, error) {
	var res childResult
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), childEnv+"="+arg)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return res, err
	}
	if err := cmd.Start(); err != nil {
		return res, err
	}
	var killOnce sync.Once
	var sentKill atomic.Bool
	kill := func(how string) {
		killOnce.Do(func() {
			sentKill.Store(true)
			res.how = how
			cmd.Process.Signal(syscall.SIGKILL)
		})
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	armed := make(chan struct{}) // closed delay after the job started
	var target int64             // killPrepared: the checkpoint aimed at
	stopWatch := func() {}       // stops watching target's files
	defer func() { stopWatch() }()
	for line := range lines {
		verb, val, _ := strings.Cut(line, " ")
		id, _ := strconv.ParseInt(val, 10, 64)
		switch verb {
		case "started":
			res.restored = val
			if mode == noKill {
				break
			}
			time.AfterFunc(delay, func() {
				close(armed)
				if mode == killRandom {
					kill(fmt.Sprintf("%v after the job started", delay))
				}
			})
		case "checkpoint-started":
			if mode != killPrepared || target != 0 || !closed(armed) {
				break
			}
			target = id
			stop := make(chan struct{})
			stopWatch = sync.OnceFunc(func() { close(stop) })
			go func() {
				for {
					if f := epochFileOf(outDir, id); f != "" {
						kill(fmt.Sprintf("when %s appeared", f))
						return
					}
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
					}
				}
			}()
		case "checkpoint-completed":
			switch {
			case mode == killCommitted && closed(armed):
				kill(fmt.Sprintf("when checkpoint %d committed", id))
			case mode == killPrepared && id == target:
				stopWatch() // nothing prepared in time (or empty epochs): aim at the next one
				target = 0
			}
		case "done":
			res.summary = val
		}
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) && sentKill.Load() {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			res.killed = true
			return res, nil
		}
	}
	if err != nil {
		return res, fmt.Errorf("the job process failed: %w", err)
	}
	if res.summary == "" {
		return res, errors.New("the job process exited without finishing the job")
	}
	return res, nil
}

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// epochFileOf returns the name of a file the sink wrote for checkpoint id,
// prepared or committed, or "" if there is none yet.
func epochFileOf(dir string, id int64) string {
	for sub := range parallelism {
		h := handleOf(sub, id)
		for _, f := range []string{filepath.Join("pending", h+".tmp"), filepath.Join("out", h+".txt")} {
			if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
				return f
			}
		}
	}
	return ""
}

// produce writes the input: the orders, then the profiles, so that many
// orders are read before their customer's profile.
func produce(ctx context.Context, brokers []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := range orders {
		id, c, cents := orderAt(i)
		recs = append(recs, &kgo.Record{Topic: "orders", Key: []byte(c), Value: fmt.Appendf(nil, "%s %d", id, cents)})
	}
	for i := range customers {
		c := customerOf(i)
		recs = append(recs, &kgo.Record{Topic: "profiles", Key: []byte(c), Value: []byte(nameOf(c))})
	}
	return cl.ProduceSync(ctx, recs...).FirstErr()
}

// check reads the committed output: every order exactly once, with the
// right customer, name and amount, nothing else, nothing left prepared.
func check(dir string) error {
	want := expected()
	seen := map[string]int{}
	paths := map[string]int{}
	files, err := filepath.Glob(filepath.Join(dir, "out", "*.txt"))
	if err != nil {
		return err
	}
	var bad []string
	for _, f := range files {
		err := readLines(f, func(line string) {
			fields := strings.Fields(line)
			if len(fields) != 5 {
				bad = append(bad, line)
				return
			}
			id, path := fields[0], fields[4]
			if w, ok := want[id]; !ok || w != strings.Join(fields[:4], " ") || (path != "direct" && path != "buffered") {
				bad = append(bad, line)
				return
			}
			seen[id]++
			paths[path]++
		})
		if err != nil {
			return err
		}
	}
	var missing, dup []string
	for id := range want {
		switch n := seen[id]; {
		case n == 0:
			missing = append(missing, id)
		case n > 1:
			dup = append(dup, id)
		}
	}
	if len(bad)+len(missing)+len(dup) > 0 {
		return fmt.Errorf("output is not exactly the joined orders: %d wrong lines (first %q), %d orders missing (first %v), %d duplicated (first %v)",
			len(bad), bad[:min(3, len(bad))], len(missing), missing[:min(5, len(missing))], len(dup), dup[:min(5, len(dup))])
	}
	left, err := filepath.Glob(filepath.Join(dir, "pending", "*"))
	if err != nil {
		return err
	}
	if len(left) > 0 {
		return fmt.Errorf("%d prepared epochs were neither committed nor aborted: %v", len(left), left)
	}
	// Both ways through the join were taken (across all runs).
	if paths["direct"] == 0 || paths["buffered"] == 0 {
		return fmt.Errorf("the join never took one of its paths: %v", paths)
	}
	fmt.Printf("checked %d committed lines in %d epoch files: %d orders found their profile, %d waited for it\n",
		len(want), len(files), paths["direct"], paths["buffered"])
	return nil
}

func countLines(dir string) (int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, f := range files {
		if err := readLines(f, func(string) { n++ }); err != nil {
			return 0, err
		}
	}
	return n, nil
}

func readLines(path string, fn func(string)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fn(sc.Text())
	}
	return sc.Err()
}

// The job, run by the child.

// Order is an order as the join keeps it while it waits for its profile.
type Order struct {
	ID       string
	Customer string
	Cents    int
}

type Profile struct {
	Customer string
	Name     string
}

func child(arg string) error {
	brokers, dir, ok := strings.Cut(arg, ";")
	if !ok {
		return fmt.Errorf("bad %s %q", childEnv, arg)
	}
	ctx := context.Background()
	client := kafka.ClientConfig{Brokers: strings.Split(brokers, ",")}
	orderSrc, err := kafka.NewSource(kafka.SourceConfig{Client: client, Topics: []string{"orders"}, Group: "enrich-orders", Bounded: true, MaxPollRecords: 5})
	if err != nil {
		return err
	}
	profileSrc, err := kafka.NewSource(kafka.SourceConfig{Client: client, Topics: []string{"profiles"}, Group: "enrich-profiles", Bounded: true, MaxPollRecords: 1})
	if err != nil {
		return err
	}

	env := flow.New(
		flow.JobName("enrich"),
		flow.StateDir(filepath.Join(dir, "state")),
		flow.Checkpointing(100*time.Millisecond),
		flow.CheckpointMode(flow.ExactlyOnce),
		flow.Logger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
		flow.WithHooks(progress{}),
	)
	// The sleeps stretch the run to a few seconds so that the kills land
	// mid-run; the profiles come slower than the orders, so many orders
	// arrive before their customer's profile.
	ordersIn := flow.Map(flow.From(env, orderSrc, flow.UID("orders")), func(r kafka.Record) Order {
		time.Sleep(6 * time.Millisecond)
		id, cents, _ := strings.Cut(string(r.Value), " ")
		n, _ := strconv.Atoi(cents)
		return Order{ID: id, Customer: string(r.Key), Cents: n}
	}, flow.Name("parse-orders"))
	profilesIn := flow.Map(flow.From(env, profileSrc, flow.UID("profiles")), func(r kafka.Record) Profile {
		time.Sleep(100 * time.Millisecond)
		return Profile{Customer: string(r.Key), Name: string(r.Value)}
	}, flow.Name("parse-profiles"))

	byCustomer := flow.Connect(
		flow.KeyBy(ordersIn, func(o Order) string { return o.Customer }),
		flow.KeyBy(profilesIn, func(p Profile) string { return p.Customer }))
	joined := flow.CoProcess(byCustomer, "join", func(s *state.Store) flow.CoProcessFuncs[Order, Profile, string] {
		name := state.NewValue[string](s, "name")
		waiting := state.NewList[Order](s, "waiting") // orders before the profile
		line := func(o Order, name, path string) string {
			return fmt.Sprintf("%s %s %s %d %s", o.ID, o.Customer, name, o.Cents, path)
		}
		return flow.CoProcessFuncs[Order, Profile, string]{
			OnLeft: func(_ flow.Context, o Order, out flow.Collector[string]) error {
				if n, ok := name.Get(); ok {
					out.Emit(line(o, n, "direct"))
					return nil
				}
				waiting.Add(o)
				return nil
			},
			OnRight: func(_ flow.Context, p Profile, out flow.Collector[string]) error {
				name.Set(p.Name)
				for _, o := range waiting.Get() {
					out.Emit(line(o, p.Name, "buffered"))
				}
				waiting.Clear()
				return nil
			},
		}
	}, flow.WithParallelism(parallelism))
	flow.To(joined, epochFiles{dir: filepath.Join(dir, "output")}, flow.UID("files"))

	job, err := env.Start(ctx)
	if err != nil {
		return err
	}
	// The restore happens as the job starts; say which checkpoint it
	// restored once it runs.
	for !job.Stats().Running {
		select {
		case <-job.Done():
		case <-time.After(5 * time.Millisecond):
			continue
		}
		break
	}
	fmt.Printf("started %d\n", job.Stats().RestoredCheckpoint)
	if err := job.Wait(); err != nil {
		return err
	}
	st := job.Stats()
	fmt.Printf("done %d checkpoints committed (job life), %d restarts (job life), %d records read by this process\n",
		st.CheckpointsCompleted, st.Restarts, st.RecordsIn)
	return nil
}

// progress tells the parent on stdout when each checkpoint starts and
// commits, so that it can aim its kills.
type progress struct{}

func (progress) OnCheckpointStarted(e flow.CheckpointStarted) {
	fmt.Printf("checkpoint-started %d\n", e.ID)
}

func (progress) OnCheckpointCompleted(e flow.CheckpointCompleted) {
	fmt.Printf("checkpoint-completed %d\n", e.ID)
}
