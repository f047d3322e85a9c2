package scaleout

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/restart"
	"github.com/onceflow/onceflow/metrics"
	"github.com/onceflow/onceflow/state"
)

// Task is the run of one partition of one stage on this instance: a
// complete exactly-once job of its own (docs/design.md, "Scale-out").
// Stage.Build gets it for each run of the task's job.
type Task struct {
	// Partition is the partition the task reads.
	Partition kafka.Partition
	// Stage is the index of the task's stage in Config.Stages.
	Stage int
	// Name is the task's job name, <job>-<topic>-<partition>: its
	// checkpoints, transactional id and progress group are named by it.
	Name string
	// StateDir is the instance's local directory (flow.StateDir).
	StateDir string

	in *Instance
	// prev is the task this one replaces (the partition came back before
	// the old run ended): it must end first, it holds the local lock.
	prev    *Task
	stopped atomic.Bool
	mu      sync.Mutex
	job     *flow.Job
	done    chan struct{}
	quit    chan struct{} // closed by stop
	started time.Time
	// runs counts the task's job starts; restarts the failed ones.
	runs, restarts atomic.Int64
	lastCheckpoint atomic.Int64
	// failure is the task's last failure (under mu).
	failure failure
	// savepointed is the request (a stop, a pause) the task stopped with a
	// savepoint for, "" for none; paused says it was a pause (under mu).
	savepointed string
	paused      bool

	// run is the state of the current run's Build.
	run *taskRun
}

// taskRun is what one Build of a task made.
type taskRun struct {
	log     *slog.Logger
	opts    []flow.Option
	src     *kafka.Source
	sink    bool // a Kafka sink was made: one transactional producer per task
	closers []func() error
}

// failure is a task's last failure and what follows it.
type failure struct {
	err error // nil while the task has not failed
	at  time.Time
	// restartAt is when the task restarts, zero unless it waits to.
	restartAt time.Time
	// down says why the task will not restart, "" while it may.
	down string
	// checkpoint is the task's newest checkpoint when it failed: the
	// task has recovered once its job completed a newer one.
	checkpoint int64
	// attempt is the restart's number under the restart strategy, 0
	// when the task does not restart.
	attempt int
}

// problem says what is wrong with a task that failed (TaskStatus.Problem),
// "" once it recovered.
func (f failure) problem(t *Task, st TaskStatus) string {
	switch {
	case f.down != "":
		return fmt.Sprintf("task %s (partition %s) is down: it failed at %s and will not restart (%s): %v", t.Name, t.Partition, f.at.Format(time.RFC3339), f.down, f.err)
	case !f.restartAt.IsZero():
		return fmt.Sprintf("task %s (partition %s) is restarting (restart %d, due at %s): it failed at %s: %v", t.Name, t.Partition, st.Restarts, f.restartAt.Format(time.RFC3339), f.at.Format(time.RFC3339), f.err)
	case st.LastCheckpoint <= f.checkpoint:
		return fmt.Sprintf("task %s (partition %s) restarted (restart %d) and has not completed a checkpoint since it failed at %s: %v", t.Name, t.Partition, st.Restarts, f.at.Format(time.RFC3339), f.err)
	}
	return ""
}

// setFailure records the task's failure, and keeps it in the
// instance's failure history (Instance.Failures).
func (t *Task) setFailure(f failure) {
	t.mu.Lock()
	t.failure = f
	t.mu.Unlock()
	t.in.keepFailure(TaskFailure{Task: t.Name, Partition: t.Partition, Stage: t.Stage, Time: f.at, Err: f.err.Error(),
		Restarts: f.down == "", RestartAt: f.restartAt, Attempt: f.attempt, Down: f.down})
}

// restarting clears the due restart of the task's failure: its job
// starts again.
func (t *Task) restarting() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failure.restartAt = time.Time{}
}

// TaskName names the job of partition p of job.
func TaskName(job string, p kafka.Partition) string {
	return job + "-" + strings.NewReplacer("/", "-").Replace(p.Topic) + "-" + strconv.Itoa(int(p.Partition))
}

// Logger is the task's logger (the instance's, with a "task" attribute).
func (t *Task) Logger() *slog.Logger { return t.run.log }

// Options are the flow options the task's job must be made with
// (flow.New(t.Options()...)): its name, the instance's state directory,
// the shared checkpoints (Checkpoints or CheckpointStorage), fenced checkpoint ids, no restart strategy of
// its own (flow.RestartedBy: the instance restarts the task under
// Config.Restart while it owns the partition), the logger,
// the hooks that count its metrics and purge its repartition topic, and
// then Config.TaskOptions. Add options after them; do not replace these.
func (t *Task) Options() []flow.Option { return t.run.opts }

func (t *Task) options(col *metrics.Collector, hooks []flow.Hook, from string) []flow.Option {
	cfg := t.in.cfg
	opts := []flow.Option{flow.JobName(t.Name), flow.StateDir(t.StateDir), flow.Logger(t.run.log),
		flow.RestartedBy(restartedBy), flow.FencedCheckpointIDs(), flow.WithHooks(col)}
	if cfg.CheckpointStorage != nil {
		opts = append(opts, cfg.CheckpointStorage)
	} else {
		opts = append(opts, flow.CheckpointsIn(cfg.Checkpoints))
	}
	opts = append(opts, flow.StopTimeout(cfg.StopTimeout))
	if from != "" {
		// The job savepoint's entry: the first start restores it, later
		// ones resume the task's checkpoints that descend from it.
		opts = append(opts, flow.FromSavepoint(from))
	}
	if len(hooks) > 0 {
		opts = append(opts, flow.WithHooks(hooks...))
	}
	return append(opts, cfg.TaskOptions...)
}

// Source makes the task's Kafka source from cfg, bound to the task's
// partition: Topics is the partition's topic alone (TopicRegex is
// cleared), Partitions its partition, Group the instance's group, Client
// the instance's when unset. A stage after the first reads its
// repartition topic from the start when the task has no checkpoint
// (StartupMode is StartEarliest). Make one source per task.
func (t *Task) Source(cfg kafka.SourceConfig) (*kafka.Source, error) {
	if t.run.src != nil {
		return nil, fmt.Errorf("scale-out: Task.Source was called twice: a task reads its one partition with one source: %w", flow.ErrInvalidJob)
	}
	if cfg.Client.Brokers == nil {
		cfg.Client = t.in.cfg.Client
	}
	cfg.Topics, cfg.TopicRegex = []string{t.Partition.Topic}, ""
	cfg.Partitions = map[string][]int32{t.Partition.Topic: {t.Partition.Partition}}
	cfg.Group = t.in.cfg.Group
	if cfg.GroupCommit == nil {
		cfg.GroupCommit = t.CommitGroupOffsets
	}
	if t.Stage > 0 {
		cfg.StartupMode = kafka.StartEarliest
		if cfg.Upstreams == nil {
			cfg.Upstreams = t.Upstreams()
		}
		if cfg.MinOffsets == nil {
			cfg.MinOffsets = t.MinOffsets()
		}
	}
	src, err := kafka.NewSource(cfg)
	if err != nil {
		return nil, err
	}
	t.run.src = src
	return src, nil
}

// CommitGroupOffsets commits offsets to the job's group as the
// instance's group member (kafka.Membership.CommitOffsets): what the
// task's source does after each checkpoint when no Kafka sink commits
// its offsets in a transaction, as when a database is the task's commit
// point (kafka.SourceConfig.GroupCommit, which Source sets). A plain
// commit (generation -1, no member) is refused by a group with members;
// a zombie's member commits nothing. The offsets are for monitoring
// (`onceflow status`, lag) and the repartition purge, which deletes only
// what a committed checkpoint's offsets passed (docs/design.md,
// "Scale-out").
func (t *Task) CommitGroupOffsets(ctx context.Context, offsets map[kafka.Partition]int64, metadata string) error {
	m := t.in.membership()
	if m == nil {
		return fmt.Errorf("scale-out: task %s has no group member to commit offsets with: the instance is not in its group", t.Name)
	}
	return m.CommitOffsets(ctx, offsets, metadata)
}

// Sink makes the task's Kafka sink from cfg: Job is the task's name (so
// its transactional id is the task's), OffsetsOf the task's source, whose
// offsets each of its transactions commits (Delivery must be exactly-once,
// the default), Client the instance's when unset. Call Source first. The
// instance closes the sink after the job ended. A task has one Kafka sink
// (Sink or Repartition): its transactional producer.
func (t *Task) Sink(cfg kafka.SinkConfig) (*kafka.Sink, error) {
	if t.run.src == nil {
		return nil, fmt.Errorf("scale-out: Task.Sink was called before Task.Source: the sink commits the source's offsets; make the source first: %w", flow.ErrInvalidJob)
	}
	if t.run.sink {
		return nil, fmt.Errorf("scale-out: a second Kafka sink (Task.Sink or Task.Repartition): a task has one, its transactional producer; route records to several topics with one sink instead: %w", flow.ErrInvalidJob)
	}
	if cfg.Delivery != "" && cfg.Delivery != kafka.DeliveryExactlyOnce {
		// As a job file's scale-out requires (docs/design.md, "Scale-out").
		return nil, fmt.Errorf("scale-out: the Kafka sink's delivery is %s: scale-out needs exactly-once, each task's transaction is its commit point and fences the instance that had its partition before; leave Delivery unset: %w", cfg.Delivery, flow.ErrInvalidJob)
	}
	if cfg.Client.Brokers == nil {
		cfg.Client = t.in.cfg.Client
	}
	cfg.Job, cfg.OffsetsOf = t.Name, []*kafka.Source{t.run.src}
	sink, err := kafka.NewSink(cfg)
	if err != nil {
		return nil, err
	}
	t.run.sink = true
	t.run.closers = append(t.run.closers, sink.Close)
	return sink, nil
}

// Repartition ends the task's job by writing the records of s, unchanged
// but for their topic and partition, into the repartition topic of stage
// to (the next stage), in partition state.Hash(key(r)) modulo its
// partitions: every record of a key reaches the same task of that stage,
// whose keyed state then holds the key. The sink is the task's
// exactly-once Kafka sink (see Sink), which also writes the task's
// watermark into every partition of the topic at each checkpoint where
// it changed (MarkAs), so the next stage's tasks take event time from all of this
// stage's tasks. Call Source first. It adds the operators with uids
// "repartition" and "repartition-sink" to the job.
func (t *Task) Repartition(s flow.Stream[kafka.Record], to int, key func(kafka.Record) string) error {
	stages := t.in.cfg.Stages
	if to <= t.Stage || to >= len(stages) {
		return fmt.Errorf("scale-out: stage %d repartitions into stage %d: name a later stage (%d to %d): %w", t.Stage, to, t.Stage+1, len(stages)-1, flow.ErrInvalidJob)
	}
	topic := stages[to].Topics[0]
	n := uint32(t.in.parts[topic])
	if n == 0 { // unreachable: Run read the count before it joined
		return fmt.Errorf("scale-out: the repartition topic %s has no partitions to partition by: %w", topic, flow.ErrInvalidJob)
	}
	if to != t.Stage+1 {
		return fmt.Errorf("scale-out: stage %d repartitions into stage %d: a stage's repartition topic is written by the stage just before it, whose tasks' watermarks its tasks wait for; repartition into stage %d, or reorder the stages: %w", t.Stage, to, t.Stage+1, flow.ErrInvalidJob)
	}
	sink, err := t.Sink(kafka.SinkConfig{Topic: topic, KeepPartition: true, Delivery: kafka.DeliveryExactlyOnce,
		MarkWatermarks: t.MarkAs(), MarkPartitions: int(n)})
	if err != nil {
		return err
	}
	out := flow.Map(s, func(r kafka.Record) kafka.Record {
		r.Topic, r.Partition, r.Offset = topic, int32(state.Hash(key(r))%n), 0
		return r
	}, flow.UID("repartition"), flow.Name("to-"+topic))
	flow.To(out, sink, flow.UID("repartition-sink"), flow.Name("repartition-sink"))
	return nil
}

// MinOffsets is, for a task of a later stage when the instance restores
// a job savepoint of several stages, the lowest offset its source reads
// its repartition partition from (kafka.SourceConfig.MinOffsets, which
// Source sets): the end the partition had when the restore began (the
// restore marker), so what a run past the savepoint wrote there is not
// read again; the restored first stage writes it anew. nil otherwise. A
// Build that makes its source itself sets it (docs/design.md, "Savepoints
// of the whole job").
func (t *Task) MinOffsets() map[string]map[int32]int64 {
	if t.Stage == 0 {
		return nil
	}
	o, ok := t.in.skipTo[t.Partition.Topic][t.Partition.Partition]
	if !ok {
		return nil
	}
	return map[string]map[int32]int64{t.Partition.Topic: {t.Partition.Partition: o}}
}

// MarkAs is the name the task gives itself in the watermark markers it
// writes into the next stage's repartition topic
// (kafka.SinkConfig.MarkWatermarks): its partition, as Upstreams of the
// next stage's tasks names it. Repartition sets it; a Build that writes
// that topic with its own sink sets it too, with MarkPartitions the
// topic's partition count (RepartitionPartitions).
func (t *Task) MarkAs() string { return t.Partition.String() }

// Upstreams names the tasks writing the repartition topic a task of a
// stage after the first reads: every task of the stage before it, nil
// for the first stage (kafka.SourceConfig.Upstreams, which Source sets).
// With event time the task's watermark is the smallest of theirs, and
// waits for each one's first marker (docs/design.md, "Scale-out").
func (t *Task) Upstreams() []string {
	if t.Stage == 0 {
		return nil
	}
	return t.in.upstreams[t.Stage]
}

// RepartitionPartitions is the partition count of the repartition topic
// of stage to (a stage after the first), 0 for another stage: what a
// Build that writes that topic with its own sink partitions by.
func (t *Task) RepartitionPartitions(to int) int {
	if to <= 0 || to >= len(t.in.cfg.Stages) {
		return 0
	}
	return t.in.parts[t.in.cfg.Stages[to].Topics[0]]
}

// OnClose runs f after the task's job ended: for a Build that makes its
// sink itself. UseSource is for one that makes its source itself.
func (t *Task) OnClose(f func() error) { t.run.closers = append(t.run.closers, f) }

// UseSource tells the task which source reads its partition when Build
// made it without Source: a later stage's task deletes the records of
// its repartition topic that source committed past.
func (t *Task) UseSource(src *kafka.Source) { t.run.src = src }

func (t *Task) stop() {
	if !t.stopped.Swap(true) {
		close(t.quit)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.job != nil {
		t.job.Stop()
	}
}

// checkpoint is the newest checkpoint the task's job committed.
func (t *Task) checkpoint() int64 {
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

// restoreFrom is the directory of t's entry in the job savepoint the
// instance restores, "" for none. A savepoint in object storage is
// downloaded into the instance's state directory first, once: every
// start of the task names it (the engine resumes the task's own
// checkpoints once they descend from it, which it tells by the
// savepoint's manifest).
func (in *Instance) restoreFrom(t *Task, log *slog.Logger) (string, error) {
	loc, ok := in.restore[t.Name]
	if !ok {
		return "", nil
	}
	if p, ok := in.place.LocalPath(loc); ok {
		return p, nil
	}
	dir := filepath.Join(in.stateDir, transferDir, "restore-"+in.restoreID, t.Name)
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	tmp := fmt.Sprintf("%s.part-%d", dir, time.Now().UnixNano())
	defer os.RemoveAll(tmp)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	start := time.Now()
	if err := in.place.Download(loc, tmp); err != nil {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return "", fmt.Errorf("scale-out: --from-savepoint: task %s's savepoint %s is missing (%w): the job savepoint is incomplete; restore another one, or start without --from-savepoint: %w", t.Name, loc, err, flow.ErrRestoreRefused)
		case errors.Is(err, fs.ErrInvalid):
			return "", fmt.Errorf("scale-out: --from-savepoint: task %s's savepoint %s is damaged (%w); restore another job savepoint, or start without --from-savepoint: %w", t.Name, loc, err, flow.ErrRestoreRefused)
		}
		return "", fmt.Errorf("scale-out: --from-savepoint: download task %s's savepoint %s: %w", t.Name, loc, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	log.Info("downloaded the task's savepoint to restore it", "savepoint", loc, "into", dir, "took", time.Since(start).Round(time.Millisecond))
	return dir, nil
}

// fatal tells the errors a restart of the task cannot mend.
func fatal(err error) bool {
	return errors.Is(err, flow.ErrUnrecoverable) || errors.Is(err, flow.ErrRestoreRefused) || errors.Is(err, flow.ErrInvalidJob)
}

// restartedBy is who restarts a task's job (flow.RestartedBy).
const restartedBy = "the scale-out instance, under the job's restart strategy,"

// runTask runs a task's job until it is stopped, restarting it after
// failures under the job's restart strategy (Config.Restart) while the
// instance still holds the partition: a zombie whose partition moved
// learns it from its member and does not recover (which would fence the
// new owner). A failure no restart mends, or one the strategy does not
// restart, stops the instance.
func (in *Instance) runTask(t *Task) {
	defer in.wg.Done()
	defer close(t.done)
	defer func() {
		in.mu.Lock()
		if in.stopping[t.Partition] == t {
			delete(in.stopping, t.Partition)
		}
		in.mu.Unlock()
	}()
	if t.prev != nil {
		<-t.prev.done
	}
	<-in.joined
	log := withReadableIDs(in.log.With("task", t.Name))
	strategy, err := restart.New(in.cfg.Restart, nil)
	if err != nil { // unreachable: New validated it
		in.stop(fmt.Errorf("task %s (partition %s): %w", t.Name, t.Partition, err))
		return
	}
	for m := in.membership(); !t.stopped.Load() && m != nil && m.Owns(t.Partition); {
		err := in.runTaskOnce(t, log)
		if err == nil || t.stopped.Load() {
			return
		}
		f := failure{err: err, at: time.Now(), checkpoint: t.checkpoint()}
		if errors.Is(err, flow.ErrRestoreRefused) && in.lostMeanwhile(t) {
			// A zombie (paused past the session timeout) whose task's
			// partition moved: the new owner's checkpoints replaced the
			// one it was restoring (its files collected), which reads
			// as a damaged checkpoint. Not the instance's failure.
			log.Warn("task failed after its partition moved to another instance; it stops here", "err", err)
			return
		}
		if fatal(err) {
			f.down = "restarting cannot fix this error"
			t.setFailure(f)
			in.stop(fmt.Errorf("task %s (partition %s): %w", t.Name, t.Partition, err))
			return
		}
		d := strategy.OnFailure(f.at)
		if !d.Restart {
			f.down = d.Reason
			t.setFailure(f)
			log.Error("task failed and will not restart; the instance stops", "err", err, "restart", d.Reason)
			in.stop(fmt.Errorf("task %s (partition %s) failed and will not restart (%s): %w", t.Name, t.Partition, d.Reason, err))
			return
		}
		t.restarts.Add(1)
		f.restartAt, f.attempt = f.at.Add(d.Delay), d.Attempt
		t.setFailure(f)
		log.Error("task failed; it restarts from its last committed checkpoint", "err", err, "attempt", d.Attempt, "delay", d.Delay, "restart", strategy.String())
		select {
		case <-time.After(d.Delay):
		case <-t.quit:
		}
		t.restarting()
	}
}

// lostMeanwhile says whether the instance has lost t's partition: before
// a refused restore stops the instance, the member is given up to
// lostWait to learn that the group moved the partition, as it does at
// its next heartbeat after a pause (docs/design.md, "Scale-out",
// Zombies).
func (in *Instance) lostMeanwhile(t *Task) bool {
	for deadline := time.Now().Add(in.lostWait); ; time.Sleep(100 * time.Millisecond) {
		if t.stopped.Load() || !in.owns(t.Partition) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// owns says whether the instance's member holds p.
func (in *Instance) owns(p kafka.Partition) bool {
	if in.testOwns != nil {
		return in.testOwns(p)
	}
	m := in.membership()
	return m != nil && m.Owns(p)
}

// stop stops the instance with err (the first such error is Run's).
func (in *Instance) stop(err error) {
	in.mu.Lock()
	if in.failed == nil {
		in.failed = err
	}
	in.mu.Unlock()
	select {
	case in.fatal <- err:
	default:
	}
}

func (in *Instance) runTaskOnce(t *Task, log *slog.Logger) error {
	col := metrics.New()
	in.metrics.add(col)
	defer in.metrics.remove(col)
	var hooks []flow.Hook
	var pg *purger
	if t.Stage > 0 {
		// The task reads a repartition topic: what it committed past is
		// deleted (docs/design.md, "Scale-out").
		pg = &purger{cc: in.cfg.Client, p: t.Partition, log: log}
		hooks = append(hooks, pg)
	}
	from, err := in.restoreFrom(t, log)
	if err != nil {
		return err
	}
	run := &taskRun{log: log}
	t.run = run
	run.opts = t.options(col, hooks, from)
	defer func() {
		for _, c := range run.closers {
			_ = c() // the job's outcome is what counts; a restart reconnects
		}
	}()
	env, err := in.cfg.Stages[t.Stage].Build(t)
	if err != nil {
		return err
	}
	if env == nil {
		return fmt.Errorf("scale-out: stage %d's Build returned no flow.Env and no error: %w", t.Stage, flow.ErrInvalidJob)
	}
	if t.stopped.Load() {
		return nil
	}
	if pg != nil {
		if run.src == nil {
			return fmt.Errorf("scale-out: stage %d made its source without Task.Source or Task.UseSource: its repartition topic could not be purged: %w", t.Stage, flow.ErrInvalidJob)
		}
		pg.setSource(run.src)
	}
	job, err := env.Start(context.Background())
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
	t.lastCheckpoint.Store(st.LastCheckpoint)
	t.mu.Lock()
	t.job = nil
	t.mu.Unlock()
	return err
}
