package scaleout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/metrics"
)

// Config configures an instance.
type Config struct {
	// Job names the job. Every instance of a job has the same; a task's
	// job is named <Job>-<topic>-<partition>. Required.
	Job string
	// Group is the consumer group the instances share (and the source
	// offsets are committed to), default Job.
	Group string
	// Client is how the instance reaches Kafka: the group member, the
	// repartition topics, and the default of the tasks' sources and sinks.
	Client kafka.ClientConfig
	// Instance names this instance: its member in the group (its client
	// id) and its directory under StateDir. Letters, digits, '.', '_' and
	// '-'. Required.
	Instance string
	// StateDir is the local directory of the instance's tasks (locks,
	// Pebble databases): StateDir/<Job>.instances/<Instance>. Required.
	StateDir string
	// Checkpoints is where the tasks keep their checkpoints: a directory
	// every instance mounts (each task under Checkpoints/<task>), so a
	// task restores on whichever instance gets its partition. Required;
	// with CheckpointStorage it only names that storage in the logs.
	Checkpoints string
	// CheckpointStorage, when set, is the tasks' checkpoint storage
	// instead of the directory Checkpoints: s3.Checkpoints("s3://bucket/prefix",
	// …) of package checkpoint/s3, which a program links only if it
	// imports it.
	CheckpointStorage flow.Option
	// SavepointPlace is where the job's savepoints (Instance.Savepoint,
	// FromSavepoint) and the files that coordinate them are kept, a
	// place every instance reaches; default the directory Checkpoints
	// (DirPlace). With CheckpointStorage there is no default: set it to
	// the same storage, s3.SavepointPlace(ctx, "s3://bucket/prefix", …)
	// of package checkpoint/s3, or job savepoints are refused.
	SavepointPlace SavepointPlace
	// Stages are the job's sub-topologies, in order. The first reads the
	// job's input topics; each later one reads one repartition topic,
	// which an earlier stage writes with Task.Repartition. Required.
	Stages []Stage
	// RepartitionPartitions is the partition count of the repartition
	// topics the instance creates, default that of the widest input topic
	// of the first stage. An existing repartition topic with another count
	// is refused: its tasks' state is split by its partitions.
	RepartitionPartitions int
	// SessionTimeout is how long the group waits for a silent instance
	// before its partitions move, with the classic group protocol, default
	// 10s.
	SessionTimeout time.Duration
	// ClassicProtocol uses the classic group protocol even where every
	// broker speaks KIP-848's consumer protocol.
	ClassicProtocol bool
	// DiscoveryInterval is how soon partitions added to the stages'
	// topics are assigned (kafka.MembershipConfig.DiscoveryInterval).
	DiscoveryInterval time.Duration
	// StopTimeout bounds a task's final checkpoint when it stops
	// (flow.StopTimeout), default 1 minute (the engine's); the instance
	// waits that long and 10 s more for its tasks to end.
	StopTimeout time.Duration
	// Restart is the restart strategy of the tasks: the instance restarts
	// a failed task under it (each task with a strategy of its own, from
	// when the instance was given its partition), while it owns the
	// task's partition. The zero value is flow.ExponentialDelay with its
	// defaults, as a job that checkpoints has. When the strategy refuses
	// a restart (flow.NoRestart at the first failure, or its limits
	// reached), the task stays down and the instance stops: Run returns
	// the task's error, and the group gives its partitions to the other
	// instances. A restart option in TaskOptions is ignored: the task's
	// job does not restart itself.
	Restart flow.RestartConfig
	// TaskOptions are added to every task's options (Task.Options), after
	// the instance's own: the checkpoint interval, S3 checkpoint storage,
	// the state backend, hooks.
	TaskOptions []flow.Option
	// Logger logs the instance and, with a "task" attribute, its tasks;
	// default slog.Default().
	Logger *slog.Logger
	// RepartitionSetting is how errors name RepartitionPartitions, default
	// "RepartitionPartitions" (the job-file runner names its YAML key).
	RepartitionSetting string
	// FromSavepoint is a job savepoint to start from (Instance.Savepoint
	// took it; its directory, or its location in the SavepointPlace such
	// as s3://bucket/key, holds job-savepoint.json): each task starts
	// from its entry there, then from its own newer checkpoints (a task's
	// checkpoints record the savepoint they descend from). Give it to
	// every instance of the start. A savepoint of another job, other
	// stages or other partition counts is refused.
	FromSavepoint string
	// SavepointTimeout bounds how long a job savepoint waits for the
	// tasks of a stage to take theirs (Instance.Savepoint), default 2
	// minutes.
	SavepointTimeout time.Duration
	// Joined, when set, is called once the instance is a member of the
	// group (its tasks may be starting). An error stops the instance: it
	// leaves the group and Run returns the error.
	Joined func() error
}

// Stage is one sub-topology of a job.
type Stage struct {
	// Topics are the stage's input: each partition of each is a task.
	// The first stage's are the job's input topics; a later stage has
	// exactly one, the repartition topic it reads, which the instance
	// creates if it is missing.
	Topics []string
	// Build defines the job of task t: a flow.Env made with t.Options(),
	// its source made by t.Source (bound to the task's partition), its
	// output a sink made by t.Sink or t.Repartition. It is called for
	// every run of the task (a restart builds the job anew).
	Build func(t *Task) (*flow.Env, error)
}

// Instance is one instance of a scale-out job.
type Instance struct {
	cfg      Config
	log      *slog.Logger
	stateDir string
	// parts is the partition count of each repartition topic.
	parts map[string]int
	// upstreams names, for each stage after the first, the tasks of the
	// stage before it: the writers of its repartition topic, whose
	// watermark markers its tasks wait for.
	upstreams map[int][]string
	m         *kafka.Membership

	mu    sync.Mutex
	tasks map[kafka.Partition]*Task
	// stopping are the tasks stopTasks took out of tasks that have not
	// ended yet: a task given the partition again waits for its
	// predecessor (which holds the task's local lock) to end.
	stopping map[kafka.Partition]*Task
	closing  bool
	wg       sync.WaitGroup
	fatal    chan error
	// failed is the task failure that stops the instance, nil before.
	failed error
	// failures are the tasks' recent failures, oldest first, at most
	// maxFailures (under mu).
	failures []TaskFailure
	metrics  *taskMetrics
	// joined is closed once m is set: the member's first assignment can
	// come before NewMembership returns.
	joined chan struct{}
	ran    bool
	// restore names each task's savepoint in Config.FromSavepoint, a
	// location of place.
	restore map[string]string
	// restoreID names the restored job savepoint's local copies (its
	// creation time), when its place is not a filesystem.
	restoreID string
	// place keeps the job savepoints (Config.SavepointPlace), nil for
	// none: they are refused.
	place SavepointPlace
	// skipTo is, when a job savepoint of several stages is restored,
	// the lowest offset each repartition partition is read from
	// (restoreMarker).
	skipTo map[string]map[int32]int64
	// spSeen are the savepoint requests the instance saw in progress,
	// spWorking the task savepoints it is taking (under mu); spStopped is
	// closed when a stop it took part in completed.
	spSeen    map[string]bool
	spWorking map[string]bool
	// spSkipped are the partitions given to the instance whose tasks it
	// did not start, by the stop that had their savepoints (under mu).
	spSkipped map[kafka.Partition]string
	// spPauses are the pauses (running savepoints of several stages)
	// the instance saw in progress, until the tasks they stopped run
	// again (under mu).
	spPauses  map[string]*spRequest
	spStopped chan struct{}
	stopOnce  sync.Once
	// reportWarned is when writing the instance's report last failed
	// and was logged (the watcher's own).
	reportWarned time.Time
	// lostWait bounds how long a task failure that would stop the
	// instance waits for the member to say whether the task's partition
	// moved (lostMeanwhile); testOwns replaces the member's Owns in tests.
	lostWait time.Duration
	testOwns func(kafka.Partition) bool
}

// New checks cfg and returns the instance; Run runs it.
func New(cfg Config) (*Instance, error) {
	if cfg.Group == "" {
		cfg.Group = cfg.Job
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.StopTimeout == 0 {
		cfg.StopTimeout = time.Minute
	}
	if cfg.SavepointTimeout <= 0 {
		cfg.SavepointTimeout = 2 * time.Minute
	}
	if cfg.RepartitionSetting == "" {
		cfg.RepartitionSetting = "RepartitionPartitions"
	}
	restartErr := cfg.Restart.Validate()
	switch {
	case cfg.Job == "":
		return nil, errors.New("scale-out: Config.Job is empty: name the job (every instance of it the same)")
	case !validName(cfg.Job):
		return nil, fmt.Errorf("scale-out: Config.Job %q may only use letters, digits, '.', '_' and '-'", cfg.Job)
	case cfg.Instance == "":
		return nil, errors.New("scale-out: Config.Instance is empty: name this instance (each instance of the job differently, say after its host)")
	case !validName(cfg.Instance):
		return nil, fmt.Errorf("scale-out: Config.Instance %q may only use letters, digits, '.', '_' and '-'", cfg.Instance)
	case cfg.StateDir == "":
		return nil, errors.New("scale-out: Config.StateDir is empty: give the instance a local directory for its tasks' locks and state files")
	case cfg.Checkpoints == "":
		return nil, errors.New("scale-out: Config.Checkpoints is empty: give a checkpoint location every instance reaches (a shared directory, or S3), or a task could not restore on another instance")
	case len(cfg.Stages) == 0:
		return nil, errors.New("scale-out: Config.Stages is empty: the job needs at least one stage")
	case cfg.StopTimeout < 0:
		return nil, fmt.Errorf("scale-out: Config.StopTimeout is %v: give a positive duration, or 0 for the default", cfg.StopTimeout)
	case restartErr != nil:
		return nil, fmt.Errorf("scale-out: Config.Restart: %w", restartErr)
	case cfg.RepartitionPartitions < 0:
		return nil, fmt.Errorf("scale-out: Config.RepartitionPartitions is %d: give a positive count, or 0 for the default", cfg.RepartitionPartitions)
	}
	seen := map[string]int{}
	for i, s := range cfg.Stages {
		if len(s.Topics) == 0 {
			return nil, fmt.Errorf("scale-out: stage %d has no topics", i)
		}
		if i > 0 && len(s.Topics) != 1 {
			return nil, fmt.Errorf("scale-out: stage %d reads %d topics: a stage after the first reads exactly one, the repartition topic an earlier stage writes", i, len(s.Topics))
		}
		if s.Build == nil {
			return nil, fmt.Errorf("scale-out: stage %d has no Build function", i)
		}
		for _, t := range s.Topics {
			if j, ok := seen[t]; ok {
				return nil, fmt.Errorf("scale-out: topic %s is the input of stages %d and %d: a partition is one task, of one stage", t, j, i)
			}
			seen[t] = i
		}
	}
	lostWait := max(cfg.SessionTimeout, 10*time.Second)
	place := cfg.SavepointPlace
	if place == nil && cfg.CheckpointStorage == nil {
		place = DirPlace(cfg.Checkpoints)
	}
	return &Instance{cfg: cfg, log: cfg.Logger, lostWait: lostWait, place: place, stateDir: filepath.Join(cfg.StateDir, cfg.Job+".instances", cfg.Instance),
		tasks: map[kafka.Partition]*Task{}, stopping: map[kafka.Partition]*Task{}, fatal: make(chan error, 1), metrics: &taskMetrics{cols: map[*metrics.Collector]bool{}},
		joined: make(chan struct{}), spSeen: map[string]bool{}, spWorking: map[string]bool{}, spSkipped: map[kafka.Partition]string{}, spPauses: map[string]*spRequest{}, spStopped: make(chan struct{})}, nil
}

// Run is New, then Instance.Run.
func Run(ctx context.Context, cfg Config) error {
	in, err := New(cfg)
	if err != nil {
		return err
	}
	return in.Run(ctx)
}

// validName is the names an instance and a job may have: they name
// directories and Kafka clients.
func validName(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return s != "" && s != "." && s != ".."
}

// StateDir is the instance's own directory: its tasks' locks and state
// backend files.
func (in *Instance) StateDir() string { return in.stateDir }

// Run creates the missing repartition topics, joins the group and runs a
// task for each partition the group assigns this instance, until ctx is
// done or a task fails in a way a restart cannot mend (flow.ErrUnrecoverable,
// flow.ErrRestoreRefused, flow.ErrInvalidJob; Run returns that error).
// Then the tasks stop with final checkpoints and the instance leaves the
// group. Run may be called once.
func (in *Instance) Run(ctx context.Context) error {
	in.mu.Lock()
	ran := in.ran
	in.ran = true
	in.mu.Unlock()
	if ran {
		return errors.New("scale-out: Instance.Run was called twice: make a new Instance")
	}
	cfg := in.cfg
	// Before the instance joins, a stop (ctx cancelled) ends it with nil:
	// nothing ran, whatever it was waiting for failed because of the stop.
	early := func(err error) error {
		close(in.joined)
		if ctx.Err() != nil && !fatal(err) {
			in.log.Info("stopped before the instance joined its group: nothing ran", "interrupted", err)
			return nil
		}
		return err
	}
	var err error
	parts, err := in.ensureRepartitionTopics(ctx)
	if err != nil {
		return early(err)
	}
	in.mu.Lock()
	in.parts = parts // RepartitionPartitions may read it now
	in.mu.Unlock()
	if in.upstreams, err = in.listUpstreams(ctx); err != nil {
		return early(err)
	}
	if cfg.FromSavepoint != "" {
		if in.restore, in.skipTo, err = in.loadRestore(ctx); err != nil {
			return early(err)
		}
	}
	// A savepoint request in progress is known before the first tasks
	// start: a task a stop has taken the savepoint of does not start.
	in.pollSavepoints()
	quitWatch, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		in.watchSavepoints(quitWatch)
	}()
	defer func() {
		close(quitWatch)
		<-watched
		in.writeReport(true) // the instance stopped: onceflow status says so
	}()
	var topics []string
	for _, s := range cfg.Stages {
		topics = append(topics, s.Topics...)
	}
	in.log.Info("starting scale-out instance", "job", cfg.Job, "instance", cfg.Instance, "group", cfg.Group, "topics", strings.Join(topics, ","),
		"state_dir", in.stateDir, "checkpoints", cfg.Checkpoints, "segments", len(cfg.Stages))
	m, err := kafka.NewMembership(kafka.MembershipConfig{
		Client: cfg.Client, Group: cfg.Group, Topics: topics, Instance: cfg.Instance, Logger: in.log,
		SessionTimeout: cfg.SessionTimeout, NextGen: !cfg.ClassicProtocol,
		DiscoveryInterval: cfg.DiscoveryInterval,
		OnAssigned:        in.assigned,
		OnRevoked:         func(_ context.Context, ps []kafka.Partition) { in.stopTasks(ps, "revoked") },
		OnLost:            func(_ context.Context, ps []kafka.Partition) { in.stopTasks(ps, "lost") },
	})
	if err != nil {
		return early(err)
	}
	in.mu.Lock()
	in.m = m
	in.mu.Unlock()
	close(in.joined)
	in.log.Info("joined the group", "group", cfg.Group, "protocol", m.Protocol())
	var result error
	if cfg.Joined != nil {
		result = cfg.Joined()
	}
	if result == nil {
		select {
		case <-ctx.Done():
		case <-in.spStopped:
		case result = <-in.fatal:
			in.log.Error("a task cannot go on; the instance stops", "err", result)
		}
	}
	in.mu.Lock()
	in.closing = true
	in.mu.Unlock()
	// The tasks stop with final checkpoints, then the member leaves the
	// group, so the others take the partitions over at once. Leaving waits
	// for the group client, which may be waiting for a rebalance to answer
	// its join: past a bound the instance exits anyway, and the group
	// drops it after the session timeout.
	in.stopTasks(slices.Collect(maps.Keys(in.snapshot())), "stopping")
	left := make(chan struct{})
	go func() { m.Close(); close(left) }()
	select {
	case <-left:
	case <-time.After(10 * time.Second):
		in.log.Warn("leaving the group takes long (a rebalance is on); exiting: the group drops this instance after its session timeout", "group", cfg.Group)
	}
	in.wg.Wait()
	in.log.Info("instance stopped", "job", cfg.Job, "instance", cfg.Instance)
	return result
}

// membership is the group member, nil before Run joined.
func (in *Instance) membership() *kafka.Membership {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.m
}

// Generation is the group generation the instance's member is in and its
// member id; -1 and "" before it joined.
func (in *Instance) Generation() (int32, string) {
	m := in.membership()
	if m == nil {
		return -1, ""
	}
	return m.Generation()
}

// Failed is the task failure that stops the instance (and that Run
// returns): a task whose error no restart mends, or whose restart
// strategy refused a restart; nil while none did.
func (in *Instance) Failed() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.failed
}

// maxFailures bounds Instance.Failures, as the single-process REST API
// bounds its list of restarts.
const maxFailures = 100

// TaskFailure is a failure of one of the instance's tasks' jobs.
type TaskFailure struct {
	// Task is the task's name, Partition the partition it reads, Stage
	// its stage.
	Task      string
	Partition kafka.Partition
	Stage     int
	// Time is when the task's job failed, Err its error.
	Time time.Time
	Err  string
	// Restarts says the instance restarts the task (at RestartAt,
	// restart Attempt under Config.Restart); otherwise Down says why
	// not, and the instance stops.
	Restarts  bool
	RestartAt time.Time
	Attempt   int
	Down      string
}

// keepFailure adds f to the failure history.
func (in *Instance) keepFailure(f TaskFailure) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.failures = append(in.failures, f)
	if len(in.failures) > maxFailures {
		in.failures = slices.Clone(in.failures[len(in.failures)-maxFailures:])
	}
}

// Failures are the recent failures of the instance's tasks (of tasks it
// no longer runs too), newest first, at most 100: a task whose job fails
// is restarted by the instance, so TaskStatus shows its last failure
// only.
func (in *Instance) Failures() []TaskFailure {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := slices.Clone(in.failures)
	slices.Reverse(out)
	return out
}

// RepartitionPartitions is the partition count of each repartition
// topic (the input of each stage after the first), known once Run has
// created or read them; nil before.
func (in *Instance) RepartitionPartitions() map[string]int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return maps.Clone(in.parts)
}

// TaskStatus is a task of the instance, as Tasks shows it.
type TaskStatus struct {
	// Name is the task's job name, <job>-<topic>-<partition>.
	Name      string
	Partition kafka.Partition
	Stage     int
	// Running says the task's job runs (not starting, restarting or
	// stopping).
	Running bool
	// Runs counts the job's starts; Restarts the ones after a failure.
	Runs, Restarts int64
	// LastCheckpoint is the newest checkpoint the task's job committed, 0
	// before the first.
	LastCheckpoint int64
	// Since is when the instance was given the partition.
	Since time.Time
	// LastError is the error the task's job last failed with, "" while
	// it has not failed; LastFailure is when.
	LastError   string
	LastFailure time.Time
	// RestartAt is when the failed task restarts; zero unless it waits
	// to.
	RestartAt time.Time
	// Down says why the failed task will not restart ("" while it may):
	// its restart strategy refused, or no restart can mend its error.
	// The instance stops.
	Down string
	// Stats are the counters of the task's current job (zero while it
	// does not run): records, checkpoints completed and failed, the
	// last checkpoint's size and durations.
	Stats flow.Stats
	// Savepointed names the job savepoint request the task stopped with
	// its savepoint for, "" for none: a stop's (it does not run until the
	// job starts again) or a pause's (a running savepoint of several
	// stages: it runs again when the stage reading its output has taken
	// its savepoint, or the job savepoint ended). Paused says which.
	Savepointed string
	Paused      bool
	// Problem says what is wrong with the task, "" when nothing is: it
	// is down, it waits to restart, or it restarted and its job has not
	// completed a checkpoint since its failure. An instance is healthy
	// while none of its tasks has a problem.
	Problem string
}

// Tasks is the instance's tasks now, by topic and partition.
func (in *Instance) Tasks() []TaskStatus {
	var out []TaskStatus
	for p, t := range in.snapshot() {
		t.mu.Lock()
		running := t.job != nil && !t.stopped.Load()
		f, j, sp, paused := t.failure, t.job, t.savepointed, t.paused
		t.mu.Unlock()
		st := TaskStatus{Name: t.Name, Partition: p, Stage: t.Stage, Running: running, Runs: t.runs.Load(),
			Restarts: t.restarts.Load(), LastCheckpoint: t.checkpoint(), Since: t.started, Savepointed: sp, Paused: sp != "" && paused}
		if j != nil {
			st.Stats = j.Stats()
		}
		if f.err != nil {
			st.LastError, st.LastFailure, st.RestartAt, st.Down = f.err.Error(), f.at, f.restartAt, f.down
			st.Problem = f.problem(t, st)
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b TaskStatus) int {
		if c := strings.Compare(a.Partition.Topic, b.Partition.Topic); c != 0 {
			return c
		}
		return int(a.Partition.Partition - b.Partition.Partition)
	})
	return out
}

// Metrics collects the metrics of the tasks' current jobs (package
// metrics; label job_name is the task's name), for a Prometheus registry.
func (in *Instance) Metrics() prometheus.Collector { return in.metrics }

func (in *Instance) snapshot() map[kafka.Partition]*Task {
	in.mu.Lock()
	defer in.mu.Unlock()
	return maps.Clone(in.tasks)
}

func (in *Instance) stageOf(topic string) int {
	for i, s := range in.cfg.Stages {
		if slices.Contains(s.Topics, topic) {
			return i
		}
	}
	return -1
}

// assigned starts a task per partition; it does not wait for them.
func (in *Instance) assigned(_ context.Context, ps []kafka.Partition) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closing {
		return
	}
	for _, p := range ps {
		st := in.stageOf(p.Topic)
		if st < 0 {
			continue // unreachable: the member subscribes to the stages' topics
		}
		name := TaskName(in.cfg.Job, p)
		if id := in.blockedBySavepoint(name, st); id != "" {
			in.spSkipped[p] = id
			in.log.Info("not starting a task: the job is stopping with a savepoint, or pausing for one, which has the task's", "task", name, "request", id)
			continue
		}
		delete(in.spSkipped, p)
		prev := in.tasks[p]
		if prev == nil {
			// Lost or revoked, and given back before its task ended (the
			// member's loss and its new assignment come from different
			// goroutines): the new run waits for the old one, or it
			// would find the task's state directory locked and stop the
			// instance (seen in a chaos run after a pause).
			prev = in.stopping[p]
		}
		t := &Task{Partition: p, Stage: st, Name: name, StateDir: in.stateDir, in: in,
			prev: prev, done: make(chan struct{}), quit: make(chan struct{}), started: time.Now()}
		in.tasks[p] = t
		in.wg.Add(1)
		go in.runTask(t)
	}
}

// stopTasks stops the tasks of ps, each with a final checkpoint, and
// waits until they ended (at most the stop timeout and a margin).
func (in *Instance) stopTasks(ps []kafka.Partition, why string) {
	in.mu.Lock()
	var ts []*Task
	for _, p := range ps {
		if t := in.tasks[p]; t != nil {
			ts = append(ts, t)
			delete(in.tasks, p)
			in.stopping[p] = t
		}
	}
	in.mu.Unlock()
	for _, t := range ts {
		t.stop()
	}
	limit := time.After(in.cfg.StopTimeout + 10*time.Second)
	for _, t := range ts {
		select {
		case <-t.done:
			in.mu.Lock()
			if in.stopping[t.Partition] == t {
				delete(in.stopping, t.Partition)
			}
			in.mu.Unlock()
		case <-limit:
			in.log.Warn("a task did not stop in time; its partition is given up anyway (its next owner fences it)", "task", t.Name, "why", why)
			return
		}
	}
	if len(ts) > 0 {
		in.log.Info("tasks stopped", "why", why, "tasks", len(ts))
	}
}

// taskMetrics collects the metrics of the tasks' current jobs.
type taskMetrics struct {
	mu   sync.Mutex
	cols map[*metrics.Collector]bool
}

func (tm *taskMetrics) add(c *metrics.Collector) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	tm.cols[c] = true
}

func (tm *taskMetrics) remove(c *metrics.Collector) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	delete(tm.cols, c)
}

// Describe sends nothing: the tasks come and go, so the collector is
// unchecked.
func (tm *taskMetrics) Describe(chan<- *prometheus.Desc) {}

func (tm *taskMetrics) Collect(ch chan<- prometheus.Metric) {
	tm.mu.Lock()
	cols := make([]*metrics.Collector, 0, len(tm.cols))
	for c := range tm.cols {
		cols = append(cols, c)
	}
	tm.mu.Unlock()
	for _, c := range cols {
		c.Collect(ch)
	}
}
