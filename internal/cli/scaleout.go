package cli

import (
	"context"
	"fmt"
	"github.com/twmb/franz-go/pkg/kadm"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	s3ckpt "github.com/onceflow/onceflow/checkpoint/s3"
	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/compile"
	"github.com/onceflow/onceflow/internal/jobfile"
	"github.com/onceflow/onceflow/internal/restart"
	"github.com/onceflow/onceflow/scaleout"
)

// A scale-out instance (docs/design.md, "Scale-out"): a member of the
// job's consumer group runs, for every partition it is assigned, a task —
// the job's segment for that partition's topic, as a job of its own.

// scaleOut is one instance of a job file's job: the scaleout package's
// instance, with a stage per segment of the file's pipeline whose tasks
// are built from the file (taskFile), and the instance's HTTP API.
type scaleOut struct {
	log      *slog.Logger
	jf       *jobfile.JobFile
	cc       kafka.ClientConfig
	instance string
	group    string
	segs     []jobfile.Segment
	in       *scaleout.Instance
	// pipelines are the tasks' pipeline counters, on /metrics.
	pipelines pipelineMetrics
	// hist are the tasks' checkpoint histories, for the REST API.
	hist taskHistories
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
	// --from-savepoint names a job savepoint (onceflow stop or savepoint
	// through an instance's API): each task restores its entry.
	fromSavepoint := o.fromSavepoint
	o.fromSavepoint = ""
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
		return stoppedWhileStarting(ctx, e, jf.Job, err)
	}
	so := &scaleOut{log: e.log, jf: jf, cc: cc, instance: instance, group: jf.Source.Group, segs: segs}
	var storage flow.Option
	var place scaleout.SavepointPlace
	if c := jf.State.Checkpoints; strings.Contains(c, "://") {
		s3 := jf.State.S3
		so3 := s3ckpt.Options{Endpoint: s3.Endpoint, Region: s3.Region, PathStyle: s3.PathStyle, Insecure: s3.Insecure}
		storage = s3ckpt.Checkpoints(c, so3)
		// The job savepoints go next to the checkpoints, under
		// <prefix>/<job>.savepoints/ (docs/design.md, "Savepoints of
		// the whole job").
		pctx, cancel := context.WithTimeout(ctx, time.Minute)
		p, err := s3ckpt.SavepointPlace(pctx, c, so3)
		cancel()
		if err != nil {
			return stoppedWhileStarting(ctx, e, jf.Job, err)
		}
		place = p
	} else if strings.HasPrefix(fromSavepoint, "s3://") {
		return fmt.Errorf("%w: --from-savepoint %s is in object storage, but this job keeps its checkpoints and savepoints in the directory %s (state.checkpoints): name a job savepoint's directory", errUsage, fromSavepoint, jf.State.Checkpoints)
	}
	cfg := scaleout.Config{
		Job: jf.Job, Group: so.group, Client: cc, Instance: instance,
		StateDir: jf.State.Dir, Checkpoints: jf.State.Checkpoints, CheckpointStorage: storage, SavepointPlace: place,
		RepartitionPartitions: jf.ScaleOut.RepartitionPartitions, RepartitionSetting: "scale-out.repartition-partitions",
		SessionTimeout: jf.ScaleOut.SessionTimeout, ClassicProtocol: jf.ScaleOut.GroupProtocol == jobfile.GroupProtocolClassic,
		DiscoveryInterval: jf.Source.DiscoveryInterval, StopTimeout: o.stopTimeout, FromSavepoint: fromSavepoint,
		TaskOptions: o.flowOptions(), Logger: e.log,
	}
	if jf.RestartSet {
		// The instance restarts a failed task under the job's strategy
		// (exponential-delay when the file names none).
		cfg.Restart = jf.Restart
	}
	for i := range segs {
		seg := &segs[i]
		if i > 0 && (len(seg.Topics) != 1 || segs[i-1].Out != seg.Topics[0]) {
			// Unreachable: the planner cuts a chain. The tasks of a
			// segment wait for the watermarks of the segment before.
			return fmt.Errorf("scale-out: sub-topology %d reads %v, not the repartition topic %s the one before it writes: %w", i, seg.Topics, segs[i-1].Out, flow.ErrInvalidJob)
		}
		topics := seg.Topics
		if seg.CoPartitioned {
			// The group assigns the anchor's partitions; the task of its
			// partition p reads p of every topic (taskFile).
			if err := checkCoPartitioned(ctx, cc, seg.Topics); err != nil {
				return stoppedWhileStarting(ctx, e, jf.Job, err)
			}
			topics = []string{seg.Anchor}
		}
		cfg.Stages = append(cfg.Stages, scaleout.Stage{Topics: topics, Build: func(t *scaleout.Task) (*flow.Env, error) {
			opts := append(slices.Clone(t.Options()), flow.WithHooks(so.hist.of(t.Name)))
			b, err := compile.Job(so.taskFile(t, seg), cc, t.Logger(), opts...)
			if err != nil {
				return nil, err
			}
			t.OnClose(b.CloseSink)
			t.OnClose(so.pipelines.add(t.Name, b.Metrics))
			t.UseSource(b.Sources[0])
			return b.Env, nil
		}})
	}
	var closeHTTP func()
	stopStatus := make(chan struct{})
	cfg.Joined = func() error {
		if ho := o.http.merged(jf.HTTP); ho.listen != "" {
			c, err := so.serveInstance(ho)
			if err != nil {
				return err
			}
			closeHTTP = c
		}
		e.log.Info("instance started; stop it with Ctrl-C (its tasks take final checkpoints, then it leaves the group)", "job", jf.Job, "instance", instance)
		if o.status > 0 {
			go func() {
				tk := time.NewTicker(o.status)
				defer tk.Stop()
				for {
					select {
					case <-stopStatus:
						return
					case <-tk.C:
						e.log.Info("status", so.statusAttrs()...)
					}
				}
			}()
		}
		return nil
	}
	if so.in, err = scaleout.New(cfg); err != nil {
		return err
	}
	err = so.in.Run(ctx)
	close(stopStatus)
	if closeHTTP != nil {
		closeHTTP()
	}
	return err
}

// taskFile is the job file of task t: the user's, for one partition of
// its segment, with the instance's own state directory.
func (so *scaleOut) taskFile(t *scaleout.Task, seg *jobfile.Segment) *jobfile.JobFile {
	tj := *so.jf
	tj.Job = t.Name
	tj.Source.Topics = []string{t.Partition.Topic}
	tj.Source.TopicRegex = ""
	tj.Source.Group = so.group
	tj.Pipeline = seg.Steps
	tj.State.Dir = t.StateDir
	tj.HTTP = jobfile.HTTPConfig{}
	// The task's job does not restart itself: the instance restarts it
	// under the job's strategy (scaleout.Config.Restart) while it owns
	// the partition.
	tj.RestartSet, tj.Restart = true, restart.Config{Strategy: restart.None}
	tj.Task = &jobfile.TaskSpec{Partitions: map[string][]int32{t.Partition.Topic: {t.Partition.Partition}},
		// Without a Kafka sink (a database is the task's commit point)
		// the sources commit their offsets as the instance's member.
		GroupCommit: t.CommitGroupOffsets}
	if seg.Graph != nil {
		// The segment's part of the graph (docs/design.md, "Named
		// streams"): after a cut, its sources are the edges tagged in
		// the repartition topic.
		tj.Graph = seg.Graph
		tj.Task.Tagged = seg.Index > 0
	}
	if seg.CoPartitioned {
		// Partition p of every input topic: a key's records of every
		// topic meet in this task (docs/design.md, "Named streams").
		tj.Source.Topics = seg.Topics
		for _, topic := range seg.Topics {
			tj.Task.Partitions[topic] = []int32{t.Partition.Partition}
		}
	} else if seg.Index > 0 {
		// A repartition topic is read from its start on a fresh task;
		// its event time is what the tasks writing it marked
		// (docs/design.md, "Scale-out").
		tj.Source.Startup = jobfile.Startup{Mode: jobfile.StartEarliest}
		tj.Task.Upstreams = t.Upstreams()
		// A restored job savepoint of several stages: not below the
		// repartition topic's end when the restore began (the restore
		// marker; docs/design.md, "Savepoints of the whole job").
		tj.Task.MinOffsets = t.MinOffsets()
	}
	if seg.Out != "" {
		tj.Task.Out, tj.Task.OutKey, tj.Task.OutPartitions = seg.Out, seg.OutKey, t.RepartitionPartitions(so.stageOf(seg.Out))
		tj.Task.OutEdges = seg.OutEdges
		tj.Task.MarkAs = t.MarkAs()
		tj.Sink = jobfile.SinkConfig{Topic: seg.Out, Delivery: jobfile.DeliveryExactlyOnce, MaxHeldBytes: so.jf.Sink.MaxHeldBytes, TransactionTimeout: so.jf.Sink.TransactionTimeout}
	}
	return &tj
}

// stageOf is the index of the segment reading topic, -1 for none.
func (so *scaleOut) stageOf(topic string) int {
	for i, s := range so.segs {
		if slices.Contains(s.Topics, topic) {
			return i
		}
	}
	return -1
}

// statusAttrs is the instance's status line.
func (so *scaleOut) statusAttrs() []any {
	ts := so.in.Tasks()
	names := make([]string, 0, len(ts))
	var restarts int64
	for _, t := range ts {
		names = append(names, t.Partition.String())
		restarts += t.Restarts
	}
	slices.Sort(names)
	gen, _ := so.in.Generation()
	return []any{"instance", so.instance, "generation", gen, "tasks", len(ts), "partitions", strings.Join(names, ","), "task_restarts", restarts}
}

// checkCoPartitioned checks that the topics a co-partitioned sub-topology
// reads have one partition count: its task of partition p reads p of
// each.
func checkCoPartitioned(ctx context.Context, cc kafka.ClientConfig, topics []string) error {
	cl, err := cc.NewClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	tds, err := kadm.NewClient(cl).ListTopics(ctx, topics...)
	if err == nil {
		err = tds.Error()
	}
	if err != nil {
		return fmt.Errorf("scale-out: reading the partition counts of %s: %w", strings.Join(topics, ", "), err)
	}
	counts := map[string]int{}
	for _, td := range tds {
		counts[td.Topic] = len(td.Partitions)
	}
	var desc []string
	same := true
	for _, t := range topics {
		desc = append(desc, fmt.Sprintf("%s %d", t, counts[t]))
		same = same && counts[t] == counts[topics[0]]
	}
	if !same || counts[topics[0]] == 0 {
		return fmt.Errorf("scale-out of sources: runs a task per partition p that reads partition p of every source topic, so they need the same number of partitions, and they have %s: add partitions to the smaller (onceflow topic add-partitions) or run without scale-out", strings.Join(desc, ", "))
	}
	return nil
}
