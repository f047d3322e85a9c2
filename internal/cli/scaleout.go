package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/compile"
	"github.com/onceflow/onceflow/internal/jobfile"
	"github.com/onceflow/onceflow/internal/restart"
	"github.com/onceflow/onceflow/metrics"
)

// A scale-out instance (docs/design.md, "Scale-out"): a member of the
// job's consumer group runs, for every partition it is assigned, a task —
// the job's segment for that partition's topic, as a job of its own.

// scaleOut is one instance.
type scaleOut struct {
	e        *env
	jf       *jobfile.JobFile
	o        runOptions
	cc       kafka.ClientConfig
	instance string
	group    string
	segs     []jobfile.Segment
	// parts is the partition count of each repartition topic.
	parts map[string]int
	m     *kafka.Membership

	mu      sync.Mutex
	tasks   map[kafka.Partition]*task
	closing bool
	wg      sync.WaitGroup
	fatal   chan error
	metrics *taskMetrics
	// joined is closed once m is set: the member's first assignment can
	// come before NewMembership returns.
	joined chan struct{}
}

// task is the run of one partition's job on this instance.
type task struct {
	p    kafka.Partition
	seg  *jobfile.Segment
	name string
	// prev is the task this one replaces (the partition came back before
	// the old run ended): it must end first, it holds the local lock.
	prev    *task
	stopped atomic.Bool
	mu      sync.Mutex
	job     *flow.Job
	done    chan struct{}
	quit    chan struct{} // closed by stop
	started time.Time
	// runs counts the task's job starts; restarts the failed ones.
	runs, restarts atomic.Int64
	records        atomic.Int64
	lastCheckpoint atomic.Int64
}

// taskName names the job of partition p of job.
func taskName(job string, p kafka.Partition) string {
	return job + "-" + strings.NewReplacer("/", "-").Replace(p.Topic) + "-" + strconv.Itoa(int(p.Partition))
}

// instanceName is the instance's name: the flag, the file, the host.
func instanceName(flagValue string, jf *jobfile.JobFile) (string, error) {
	name := flagValue
	if name == "" {
		name = jf.ScaleOut.Instance
	}
	if name == "" {
		h, err := os.Hostname()
		if err != nil {
			return "", fmt.Errorf("scale-out: name this instance with --instance (the host name is unknown: %w)", err)
		}
		name = strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
				return r
			}
			return '-'
		}, h)
	}
	if !jobfile.ValidName(name) {
		return "", fmt.Errorf("%w: --instance %q may only use letters, digits, '.', '_' and '-'", errUsage, name)
	}
	return name, nil
}

func runScaleOut(ctx context.Context, e *env, jf *jobfile.JobFile, o runOptions) error {
	if o.fromSavepoint != "" {
		return fmt.Errorf("%w: --from-savepoint does not go with scale-out: each task restores its own checkpoints", errUsage)
	}
	instance, err := instanceName(o.instance, jf)
	if err != nil {
		return err
	}
	cc, err := clientConfig(jf.Kafka)
	if err != nil {
		return err
	}
	segs, err := jobfile.PlanSegments(jf)
	if err != nil {
		return err
	}
	if err := ping(ctx, jf.Kafka, cc, o.connectTimeout, jf.OutputTopics()); err != nil {
		return err
	}
	so := &scaleOut{e: e, jf: jf, o: o, cc: cc, instance: instance, group: jf.Source.Group, segs: segs,
		tasks: map[kafka.Partition]*task{}, fatal: make(chan error, 1), metrics: &taskMetrics{cols: map[*metrics.Collector]bool{}}, joined: make(chan struct{})}
	if so.parts, err = ensureRepartitionTopics(ctx, cc, jf, segs); err != nil {
		return err
	}
	var topics []string
	for _, s := range segs {
		topics = append(topics, s.Topics...)
	}
	e.log.Info("starting scale-out instance", "job", jf.Job, "instance", instance, "group", so.group, "topics", strings.Join(topics, ","),
		"state_dir", so.stateDir(), "checkpoints", jf.State.Checkpoints, "segments", len(segs))
	m, err := kafka.NewMembership(kafka.MembershipConfig{
		Client: cc, Group: so.group, Topics: topics, Instance: instance, Logger: e.log,
		SessionTimeout: jf.ScaleOut.SessionTimeout, NextGen: jf.ScaleOut.GroupProtocol != jobfile.GroupProtocolClassic,
		DiscoveryInterval: jf.Source.DiscoveryInterval,
		OnAssigned:        so.assigned,
		OnRevoked:         func(_ context.Context, ps []kafka.Partition) { so.stopTasks(ps, "revoked") },
		OnLost:            func(_ context.Context, ps []kafka.Partition) { so.stopTasks(ps, "lost") },
	})
	if err != nil {
		close(so.joined)
		return err
	}
	so.m = m
	close(so.joined)
	e.log.Info("joined the group", "group", so.group, "protocol", m.Protocol())
	if listen := o.http.merged(jf.HTTP).listen; listen != "" {
		closeHTTP, err := so.serveInstance(listen)
		if err != nil {
			m.Close()
			return err
		}
		defer closeHTTP()
	}
	e.log.Info("instance started; stop it with Ctrl-C (its tasks take final checkpoints, then it leaves the group)", "job", jf.Job, "instance", instance)
	var t <-chan time.Time
	if o.status > 0 {
		tk := time.NewTicker(o.status)
		defer tk.Stop()
		t = tk.C
	}
	var result error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case result = <-so.fatal:
			e.log.Error("a task cannot go on; the instance stops", "err", result)
			break loop
		case <-t:
			e.log.Info("status", so.statusAttrs()...)
		}
	}
	so.mu.Lock()
	so.closing = true
	so.mu.Unlock()
	// The tasks stop with final checkpoints, then the member leaves the
	// group, so the others take the partitions over at once. Leaving waits
	// for the group client, which may be waiting for a rebalance to answer
	// its join: past a bound the instance exits anyway, and the group
	// drops it after the session timeout.
	so.stopTasks(slices.Collect(maps.Keys(so.snapshotTasks())), "stopping")
	left := make(chan struct{})
	go func() { m.Close(); close(left) }()
	select {
	case <-left:
	case <-time.After(10 * time.Second):
		e.log.Warn("leaving the group takes long (a rebalance is on); exiting: the group drops this instance after its session timeout", "group", so.group)
	}
	so.wg.Wait()
	e.log.Info("instance stopped", "job", jf.Job, "instance", instance)
	return result
}

// stateDir is the instance's own directory: its tasks' locks and state
// backend files.
func (so *scaleOut) stateDir() string {
	return filepath.Join(so.jf.State.Dir, so.jf.Job+".instances", so.instance)
}

func (so *scaleOut) snapshotTasks() map[kafka.Partition]*task {
	so.mu.Lock()
	defer so.mu.Unlock()
	return maps.Clone(so.tasks)
}

func (so *scaleOut) segmentOf(topic string) *jobfile.Segment {
	for i := range so.segs {
		if slices.Contains(so.segs[i].Topics, topic) {
			return &so.segs[i]
		}
	}
	return nil
}

// assigned starts a task per partition; it does not wait for them.
func (so *scaleOut) assigned(_ context.Context, ps []kafka.Partition) {
	so.mu.Lock()
	defer so.mu.Unlock()
	if so.closing {
		return
	}
	for _, p := range ps {
		seg := so.segmentOf(p.Topic)
		if seg == nil {
			continue // unreachable: the member subscribes to the segments' topics
		}
		t := &task{p: p, seg: seg, name: taskName(so.jf.Job, p), prev: so.tasks[p], done: make(chan struct{}), quit: make(chan struct{}), started: time.Now()}
		so.tasks[p] = t
		so.wg.Add(1)
		go so.runTask(t)
	}
}

// stopTasks stops the tasks of ps, each with a final checkpoint, and
// waits until they ended (at most the stop timeout and a margin).
func (so *scaleOut) stopTasks(ps []kafka.Partition, why string) {
	so.mu.Lock()
	var ts []*task
	for _, p := range ps {
		if t := so.tasks[p]; t != nil {
			ts = append(ts, t)
			delete(so.tasks, p)
		}
	}
	so.mu.Unlock()
	for _, t := range ts {
		t.stop()
	}
	limit := time.After(so.o.stopTimeout + 10*time.Second)
	for _, t := range ts {
		select {
		case <-t.done:
		case <-limit:
			so.e.log.Warn("a task did not stop in time; its partition is given up anyway (its next owner fences it)", "task", t.name, "why", why)
			return
		}
	}
	if len(ts) > 0 {
		so.e.log.Info("tasks stopped", "why", why, "tasks", len(ts))
	}
}

func (t *task) stop() {
	if !t.stopped.Swap(true) {
		close(t.quit)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.job != nil {
		t.job.Stop()
	}
}

// runTask runs a task's job until it is stopped, restarting it after
// failures while the instance still holds the partition: a zombie whose
// partition moved learns it from its member and does not recover (which
// would fence the new owner).
func (so *scaleOut) runTask(t *task) {
	defer so.wg.Done()
	defer close(t.done)
	if t.prev != nil {
		<-t.prev.done
	}
	<-so.joined
	log := so.e.log.With("task", t.name)
	delay := time.Second
	for !t.stopped.Load() && so.m != nil && so.m.Owns(t.p) {
		err := so.runTaskOnce(t, log)
		if err == nil || t.stopped.Load() {
			return
		}
		if errors.Is(err, flow.ErrUnrecoverable) || errors.Is(err, flow.ErrRestoreRefused) || errors.Is(err, flow.ErrInvalidJob) {
			select {
			case so.fatal <- fmt.Errorf("task %s (partition %s): %w", t.name, t.p, err):
			default:
			}
			return
		}
		t.restarts.Add(1)
		log.Error("task failed; it restarts from its last committed checkpoint", "err", err, "delay", delay)
		select {
		case <-time.After(delay):
		case <-t.quit:
		}
		delay = min(2*delay, 30*time.Second)
	}
}

func (so *scaleOut) runTaskOnce(t *task, log *slog.Logger) error {
	tj := so.taskFile(t)
	te := &env{stdout: so.e.stdout, stderr: so.e.stderr, log: log}
	col := metrics.New()
	so.metrics.add(col)
	defer so.metrics.remove(col)
	opts := append(so.o.flowOptions(), flow.FencedCheckpointIDs(), flow.WithHooks(col))
	var pg *purger
	if t.seg.Index > 0 {
		// The task reads a repartition topic: what it committed past is
		// deleted (docs/design.md, "Scale-out").
		pg = &purger{so: so, p: t.p, log: log}
		opts = append(opts, flow.WithHooks(pg))
	}
	b, err := compile.Job(tj, so.cc, te.log, opts...)
	if err != nil {
		return err
	}
	defer func() { _ = b.CloseSink() }()
	if t.stopped.Load() {
		return nil
	}
	if pg != nil {
		pg.src = b.Sources[0]
	}
	job, err := b.Env.Start(context.Background())
	if err != nil {
		return err
	}
	t.runs.Add(1)
	t.mu.Lock()
	t.job = job
	stop := t.stopped.Load()
	t.mu.Unlock()
	if stop {
		job.Stop()
	}
	err = job.Wait()
	st := job.Stats()
	t.records.Add(st.RecordsIn)
	t.lastCheckpoint.Store(st.LastCheckpoint)
	t.mu.Lock()
	t.job = nil
	t.mu.Unlock()
	return err
}

// checkpoint is the newest checkpoint the task's job committed.
func (t *task) checkpoint() int64 {
	t.mu.Lock()
	j := t.job
	t.mu.Unlock()
	if j != nil {
		if c := j.Stats().LastCheckpoint; c > 0 {
			return c
		}
	}
	return t.lastCheckpoint.Load()
}

// taskFile is the job file of task t: the user's, for one partition of
// its segment, with the instance's own state directory.
func (so *scaleOut) taskFile(t *task) *jobfile.JobFile {
	tj := *so.jf
	tj.Job = t.name
	tj.Source.Topics = []string{t.p.Topic}
	tj.Source.TopicRegex = ""
	tj.Source.Group = so.group
	tj.Pipeline = t.seg.Steps
	tj.State.Dir = so.stateDir()
	tj.HTTP = jobfile.HTTPConfig{}
	tj.RestartSet, tj.Restart = true, restart.Config{Strategy: restart.None}
	tj.Task = &jobfile.TaskSpec{Partitions: map[string][]int32{t.p.Topic: {t.p.Partition}}}
	if t.seg.Index > 0 {
		// A repartition topic is read from its start on a fresh task.
		tj.Source.Startup = jobfile.Startup{Mode: jobfile.StartEarliest}
	}
	if t.seg.Out != "" {
		tj.Task.Out, tj.Task.OutKey, tj.Task.OutPartitions = t.seg.Out, t.seg.OutKey, so.parts[t.seg.Out]
		tj.Sink = jobfile.SinkConfig{Topic: t.seg.Out, Delivery: jobfile.DeliveryExactlyOnce, MaxHeldBytes: so.jf.Sink.MaxHeldBytes, TransactionTimeout: so.jf.Sink.TransactionTimeout}
	}
	return &tj
}

// statusAttrs is the instance's status line.
func (so *scaleOut) statusAttrs() []any {
	ts := so.snapshotTasks()
	names := make([]string, 0, len(ts))
	var restarts int64
	for _, t := range ts {
		names = append(names, t.p.String())
		restarts += t.restarts.Load()
	}
	slices.Sort(names)
	gen, _ := so.m.Generation()
	return []any{"instance", so.instance, "generation", gen, "tasks", len(ts), "partitions", strings.Join(names, ","), "task_restarts", restarts}
}

// ensureRepartitionTopics creates the repartition topics that do not
// exist yet and returns every one's partition count. A topic that exists
// with another count than asked is refused: records of a key would go
// elsewhere than its state.
func ensureRepartitionTopics(ctx context.Context, cc kafka.ClientConfig, jf *jobfile.JobFile, segs []jobfile.Segment) (map[string]int, error) {
	out := map[string]int{}
	if len(segs) < 2 {
		return out, nil
	}
	cl, err := cc.NewClient()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	want := jf.ScaleOut.RepartitionPartitions
	if want == 0 {
		tds, err := adm.ListTopics(ctx, jf.Source.Topics...)
		if err != nil {
			return nil, fmt.Errorf("list the input topics: %w", err)
		}
		for _, td := range tds {
			want = max(want, len(td.Partitions))
		}
	}
	for _, s := range segs[:len(segs)-1] {
		tds, err := adm.ListTopics(ctx, s.Out)
		if err != nil {
			return nil, fmt.Errorf("list the repartition topic %s: %w", s.Out, err)
		}
		if td, ok := tds[s.Out]; ok && td.Err == nil {
			if n := len(td.Partitions); jf.ScaleOut.RepartitionPartitions != 0 && n != jf.ScaleOut.RepartitionPartitions {
				return nil, fmt.Errorf("the repartition topic %s has %d partitions, and scale-out.repartition-partitions asks for %d: its tasks' state is split by its partitions, so the count cannot change; remove the setting, or start the job anew under another name", s.Out, n, jf.ScaleOut.RepartitionPartitions)
			}
			out[s.Out] = len(td.Partitions)
			continue
		}
		// Records are deleted once the reading task committed past them
		// (retention alone could drop records not yet read).
		resp, err := adm.CreateTopic(ctx, int32(want), -1, map[string]*string{"retention.ms": kadm.StringPtr("-1"), "cleanup.policy": kadm.StringPtr("delete")}, s.Out)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return nil, fmt.Errorf("create the repartition topic %s (%d partitions): %w; create it yourself with that count, or grant the job's principal CREATE", s.Out, want, err)
		}
		if errors.Is(err, kerr.TopicAlreadyExists) {
			tds, err := adm.ListTopics(ctx, s.Out)
			if err != nil {
				return nil, err
			}
			out[s.Out] = len(tds[s.Out].Partitions)
			continue
		}
		out[s.Out] = want
	}
	return out, nil
}
