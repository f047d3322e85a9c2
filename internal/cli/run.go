package cli

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
)

func runFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	status := fs.Duration("status-interval", 5*time.Second, "how often to log a status line (0: never)")
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

// buildJob turns a job file into a job definition: Kafka source, the
// pipeline, and the transactional Kafka sink that owns the commit point.
// The returned sink must be closed after the job ended.
func buildJob(jf *JobFile, cc kafka.ClientConfig, e *env, o runOptions) (*flow.Env, *kafka.Sink, *PipelineMetrics, error) {
	if jf.Sink.Delivery != DeliveryExactlyOnce {
		return nil, nil, nil, fmt.Errorf("%s: sink.delivery %s is not supported by the Kafka sink yet; use exactly-once (it also covers at-least-once needs, with output visible at each checkpoint)", jf.Path, jf.Sink.Delivery)
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
		return nil, nil, nil, err
	}
	sink, err := kafka.NewSink(kafka.SinkConfig{
		Client:             cc,
		Job:                jf.Job,
		Topic:              jf.Sink.Topic,
		OffsetsOf:          []*kafka.Source{src},
		CheckpointInterval: jf.Checkpointing.Interval,
		CheckpointTimeout:  jf.Checkpointing.Timeout,
	})
	if err != nil {
		return nil, nil, nil, err
	}
	opts := []flow.Option{
		flow.JobName(jf.Job),
		flow.CheckpointConfig(jf.Checkpointing),
		flow.StateDir(jf.State.Dir),
		flow.Logger(e.log),
		flow.StatusInterval(o.status),
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
	s, err = BuildPipeline(s, jf.Pipeline, kafkaAccess, m)
	if err != nil {
		return nil, nil, nil, err
	}
	flow.To(flow.Map(s, toSink, flow.Name("to-sink")), sink, flow.UID("sink"), flow.Name("kafka-sink"))
	return env, sink, m, nil
}

func runJob(ctx context.Context, e *env, jf *JobFile, o runOptions) error {
	cc, err := clientConfig(jf.Kafka)
	if err != nil {
		return err
	}
	if err := ping(ctx, jf.Kafka, cc, o.connectTimeout); err != nil {
		return err
	}
	env, sink, _, err := buildJob(jf, cc, e, o)
	if err != nil {
		return err
	}
	defer sink.Close()
	job, err := env.Start(ctx)
	if err != nil {
		return err
	}
	e.log.Info("job started; stop it with Ctrl-C (it takes a final checkpoint)", "job", jf.Job, "file", jf.Path)
	if err := job.Wait(); err != nil {
		return err
	}
	s := job.Stats()
	e.log.Info("job stopped", "job", jf.Job, "records_in", s.RecordsIn, "records_out", s.RecordsOut, "checkpoints", s.CheckpointsCompleted, "last_checkpoint", s.LastCheckpoint)
	return nil
}
