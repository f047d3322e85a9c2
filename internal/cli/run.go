package cli

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
)

func runFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	status := fs.Duration("status-interval", 5*time.Second, "how often to log a status line: records in and out, lag, last checkpoint, failures, skipped and dead-lettered records (0: never)")
	connect := fs.Duration("connect-timeout", 15*time.Second, "how long to wait for a Kafka broker to answer before giving up")
	return func(ctx context.Context, e *env, args []string) error {
		path, err := oneFileArg("run", args)
		if err != nil {
			return err
		}
		jf, err := LoadJobFile(path)
		if err != nil {
			return err
		}
		return runJob(ctx, e, jf, runOptions{status: *status, connectTimeout: *connect})
	}
}

type runOptions struct {
	status         time.Duration
	connectTimeout time.Duration
}

// connectorStartup maps the job file's startup modes to the connector's.
var connectorStartup = map[StartupMode]kafka.StartupMode{
	StartEarliest:        kafka.StartEarliest,
	StartLatest:          kafka.StartLatest,
	StartTimestamp:       kafka.StartTimestamp,
	StartSpecificOffsets: kafka.StartSpecificOffsets,
	StartGroupOffsets:    kafka.StartGroupOffsets,
}

var connectorReset = map[string]kafka.ResetFallback{
	"":         kafka.ResetEarliest,
	"earliest": kafka.ResetEarliest,
	"latest":   kafka.ResetLatest,
	"none":     kafka.ResetNone,
}

// connectorDelivery maps sink.delivery to the connector's.
var connectorDelivery = map[string]kafka.Delivery{
	DeliveryExactlyOnce: kafka.DeliveryExactlyOnce,
	DeliveryAtLeastOnce: kafka.DeliveryAtLeastOnce,
	DeliveryNone:        kafka.DeliveryNone,
}

// builtJob is a job definition made from a job file, with the connectors
// the status line and the cleanup need.
type builtJob struct {
	env     *flow.Env
	sources []*kafka.Source
	// sink must be closed after the job ended.
	sink    *kafka.Sink
	metrics *PipelineMetrics
}

// lag is the sum of the sources' lags, or -1 when one of them does not know
// its own: a partial sum would look like progress that is not there.
func (b *builtJob) lag() int64 {
	var sum int64
	for _, s := range b.sources {
		l := s.Lag()
		if l < 0 {
			return -1
		}
		sum += l
	}
	return sum
}

// buildJob turns a job file into a job definition: Kafka source, the
// pipeline, the Kafka sink (under exactly-once the commit point) and, with
// errors.policy dead-letter, the dead-letter topic written in the sink's
// transaction. The engine's own status line is off: runJob prints one
// with the connectors' view added.
func buildJob(jf *JobFile, cc kafka.ClientConfig, e *env) (*builtJob, error) {
	delivery, ok := connectorDelivery[jf.Sink.Delivery]
	if !ok { // unreachable: the job file parser checked it
		return nil, fmt.Errorf("%s: sink.delivery %q is not one of %s, %s, %s", jf.Path, jf.Sink.Delivery, DeliveryNone, DeliveryAtLeastOnce, DeliveryExactlyOnce)
	}
	st := jf.Source.Startup
	discovery := jf.Source.DiscoveryInterval
	src, err := kafka.NewSource(kafka.SourceConfig{
		Client:            cc,
		Topics:            jf.Source.Topics,
		TopicRegex:        jf.Source.TopicRegex,
		Group:             jf.Source.Group,
		StartupMode:       connectorStartup[st.Mode],
		ResetFallback:     connectorReset[st.Reset],
		StartTimestamp:    st.Timestamp,
		SpecificOffsets:   st.Offsets,
		DiscoveryInterval: discovery,
		ReadUncommitted:   jf.Source.Isolation == IsolationReadUncommitted,
		Bounded:           jf.Source.Bounded,
	})
	if err != nil {
		return nil, err
	}
	sink, err := kafka.NewSink(kafka.SinkConfig{
		Client:             cc,
		Delivery:           delivery,
		Job:                jf.Job,
		Topic:              jf.Sink.Topic,
		OffsetsOf:          []*kafka.Source{src},
		CheckpointInterval: jf.Checkpointing.Interval,
		CheckpointTimeout:  jf.Checkpointing.Timeout,
	})
	if err != nil {
		return nil, err
	}
	opts := []flow.Option{
		flow.JobName(jf.Job),
		flow.CheckpointConfig(jf.Checkpointing),
		flow.StateDir(jf.State.Dir),
		flow.Logger(e.log),
	}
	if jf.State.MaxParallelism > 0 {
		opts = append(opts, flow.MaxParallelism(jf.State.MaxParallelism))
	}
	if jf.RestartSet {
		opts = append(opts, flow.Restart(jf.Restart))
	}
	env := flow.New(opts...)
	var srcOpts []flow.OpOption
	if jf.Source.Parallelism > 0 {
		srcOpts = append(srcOpts, flow.WithParallelism(jf.Source.Parallelism))
	}
	s := flow.From(env, src, append(srcOpts, flow.UID("source"), flow.Name("kafka-source"))...)
	m := &PipelineMetrics{}
	s = flow.Map(s, func(r kafka.Record) kafka.Record { m.RecordsRead.Add(1); return r }, flow.Name("count-read"))
	s, failures, err := BuildPipeline(s, jf.Pipeline, kafkaAccess, jf.Errors.Policy, m)
	if err != nil {
		sink.Close()
		return nil, err
	}
	flow.To(flow.Map(s, toSink, flow.Name("to-sink")), sink, flow.UID("sink"), flow.Name("kafka-sink"))
	for i, f := range failures {
		uid := "dead-letters"
		if i > 0 {
			uid += "-" + strconv.Itoa(i)
		}
		flow.To(f, sink.DeadLetters(jf.Errors.DeadLetterTopic), flow.UID(uid), flow.Name("kafka-dead-letters"))
	}
	return &builtJob{env: env, sources: []*kafka.Source{src}, sink: sink, metrics: m}, nil
}

func runJob(ctx context.Context, e *env, jf *JobFile, o runOptions) error {
	cc, err := clientConfig(jf.Kafka)
	if err != nil {
		return err
	}
	outputs := map[string]string{"sink.topic": jf.Sink.Topic}
	if jf.Errors.DeadLetterTopic != "" {
		outputs["errors.dead-letter-topic"] = jf.Errors.DeadLetterTopic
	}
	if err := ping(ctx, jf.Kafka, cc, o.connectTimeout, outputs); err != nil {
		return err
	}
	b, err := buildJob(jf, cc, e)
	if err != nil {
		return err
	}
	defer b.sink.Close()
	job, err := b.env.Start(ctx)
	if err != nil {
		return err
	}
	e.log.Info("job started; stop it with Ctrl-C (it takes a final checkpoint)", "job", jf.Job, "file", jf.Path)
	if o.status > 0 {
		t := time.NewTicker(o.status)
		defer t.Stop()
	loop:
		for {
			select {
			case <-t.C:
				e.log.Info("status", statusAttrs(job.Stats(), b.lag())...)
			case <-job.Done():
				break loop
			}
		}
	}
	if err := job.Wait(); err != nil {
		return err
	}
	// No lag: the readers are closed, so it is unknown by now.
	final := statusAttrs(job.Stats(), -1)
	for i := 0; i+1 < len(final); i += 2 {
		if final[i] == "lag" {
			final = append(final[:i:i], final[i+2:]...)
			break
		}
	}
	e.log.Info("job stopped", append([]any{"job", jf.Job}, final...)...)
	return nil
}

// statusAttrs is the status line of run, as slog key-value pairs. The keys
// are stable (scripts grep them); lag is "?" while a source does not know
// it (before it fetched the log end of its partitions).
func statusAttrs(s flow.Stats, lag int64) []any {
	var lagV any = lag
	if lag < 0 {
		lagV = "?"
	}
	return []any{
		"records_in", s.RecordsIn,
		"records_out", s.RecordsOut,
		"lag", lagV,
		"last_checkpoint", s.LastCheckpoint,
		"last_checkpoint_duration", s.LastCheckpointDuration.Round(time.Millisecond),
		"failed_checkpoints", s.CheckpointsFailed,
		"restarts", s.Restarts,
		"skipped", s.RecordsSkipped,
		"dead_lettered", s.RecordsDeadLettered,
	}
}
