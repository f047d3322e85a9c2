package compile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"

	s3ckpt "github.com/onceflow/onceflow/checkpoint/s3"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/jobfile"
	"github.com/onceflow/onceflow/pipeline"
	"github.com/onceflow/onceflow/pipeline/kafkarec"
	"github.com/onceflow/onceflow/state"
)

// connectorStartup maps the job file's startup modes to the connector's.
var connectorStartup = map[jobfile.StartupMode]kafka.StartupMode{
	jobfile.StartEarliest:        kafka.StartEarliest,
	jobfile.StartLatest:          kafka.StartLatest,
	jobfile.StartTimestamp:       kafka.StartTimestamp,
	jobfile.StartSpecificOffsets: kafka.StartSpecificOffsets,
	jobfile.StartGroupOffsets:    kafka.StartGroupOffsets,
}

var connectorReset = map[string]kafka.ResetFallback{
	"":         kafka.ResetEarliest,
	"earliest": kafka.ResetEarliest,
	"latest":   kafka.ResetLatest,
	"none":     kafka.ResetNone,
}

// connectorRecreated maps source.on-topic-recreated to the connector's.
var connectorRecreated = map[string]kafka.TopicRecreated{
	jobfile.RecreatedEarliest: kafka.RecreatedReadEarliest,
	jobfile.RecreatedFail:     kafka.RecreatedFail,
}

// Built is a job definition made from a job file, with the connectors
// the status line and the cleanup need.
type Built struct {
	Env *flow.Env
	// Checkpoints watches the job through a flow hook: the size of the
	// newest committed checkpoint's state, for the status line.
	Checkpoints *checkpointWatch
	Sources     []*kafka.Source
	// CloseSink releases the sink's connection after the job ended.
	CloseSink func() error
	Metrics   *PipelineMetrics
}

// Job turns a job file into a job definition: Kafka source, the
// pipeline, the Kafka sink (under exactly-once the commit point) and, with
// errors.policy dead-letter, the dead-letter topic written in the sink's
// transaction. The engine's own status line is off: runJob prints one
// with the connectors' view added. extra are engine options on top of the
// file's (how to restore, from the run flags).
func Job(jf *jobfile.JobFile, cc kafka.ClientConfig, log *slog.Logger, extra ...flow.Option) (*Built, error) {
	delivery := kafka.Delivery(jf.Sink.Delivery)
	if !kafka.Spec.Supports(delivery) { // unreachable: the job file parser checked it
		return nil, fmt.Errorf("%s: sink.delivery %q is not one of %s, %s, %s", jf.Path, jf.Sink.Delivery, jobfile.DeliveryNone, jobfile.DeliveryAtLeastOnce, jobfile.DeliveryExactlyOnce)
	}
	var srcs []*kafka.Source
	if jf.Graph != nil && !jf.Task.ReadsTagged() {
		for _, ns := range jf.Graph.Sources {
			src, err := newSource(jf, ns.Source, cc)
			if err != nil {
				return nil, fmt.Errorf("%s: sources.%s: %w", jf.Path, ns.Name, err)
			}
			srcs = append(srcs, src)
		}
	} else {
		src, err := newSource(jf, jf.Source, cc)
		if err != nil {
			return nil, err
		}
		srcs = append(srcs, src)
	}
	var kafkaSink *kafka.Sink
	var err error
	if jf.Sink.HasTopic() {
		kafkaSink, err = kafka.NewSink(kafka.SinkConfig{
			Client:             cc,
			Delivery:           delivery,
			Job:                jf.Job,
			Topic:              jobfile.SinkTopic(jf),
			KeepPartition:      jf.Task.Repartitions(),
			OffsetsOf:          srcs,
			MaxHeldBytes:       jf.Sink.MaxHeldBytes,
			TransactionTimeout: jf.Sink.TransactionTimeout,
			MarkWatermarks:     markAs(jf.Task),
			MarkPartitions:     markPartitions(jf.Task),
		})
		if err != nil {
			return nil, err
		}
	}
	// The other sinks (sink.<name>, sinks.go); without a Kafka sink the
	// source commits its offsets to its group after each checkpoint, for
	// monitoring.
	var closers []func() error
	if kafkaSink != nil {
		closers = append(closers, kafkaSink.Close)
	}
	closeAll := func() error {
		var errs []error
		for _, c := range closers {
			errs = append(errs, c())
		}
		return errors.Join(errs...)
	}
	exts, err := buildSinks(jf, srcs)
	if err != nil {
		_ = closeAll()
		return nil, err
	}
	for _, x := range exts {
		closers = append(closers, x.built.Close)
	}
	env, watch, m := NewEnv(jf, log, extra...)
	outs, failures, err := buildStreams(env, jf, srcs, m)
	if err != nil {
		_ = closeAll()
		return nil, err
	}
	// outOf is the stream the sink of kind writes: the pipeline's end, or
	// in the named form the stream its from: names.
	outOf := func(kind string) flow.Stream[kafka.Record] {
		if jf.Graph != nil {
			return outs[jf.Graph.SinkFrom(kind)]
		}
		return outs[""]
	}
	s := outOf(jobfile.SinkKafka)
	uidOf := jf.Sink.UID // stable: checkpoints know them (jobfile.SinkConfig.UID)
	if kafkaSink != nil && jf.Task.Repartitions() && len(jf.Task.OutEdges) > 0 {
		out, err := toRepartitionEdges(outs, jf)
		if err != nil {
			_ = closeAll()
			return nil, err
		}
		flow.To(out, kafkaSink, flow.UID(uidOf(jobfile.SinkKafka)), flow.Name("repartition-sink"))
	} else if kafkaSink != nil && jf.Task.Repartitions() {
		out, bad, err := toRepartition(s, jf)
		if err != nil {
			_ = closeAll()
			return nil, err
		}
		flow.To(out, kafkaSink, flow.UID(uidOf(jobfile.SinkKafka)), flow.Name("repartition-sink"))
		if jf.Errors.Policy == flow.DeadLetterOnError {
			failures = append(failures, bad)
		}
	} else if kafkaSink != nil {
		to := ""
		if jf.Routes() {
			to = jf.Sink.Topic // the sink takes each record's topic
		}
		flow.To(flow.Map(s, toSink(to), flow.Name("to-sink")), kafkaSink, flow.UID(uidOf(jobfile.SinkKafka)), flow.Name("kafka-sink"))
	}
	// Records a database sink rejects (a value its column refuses) go
	// through errors.policy; dead letters go to its dead-letter table.
	for _, x := range exts {
		flow.To(outOf(x.kind), x.built.Sink, flow.UID(uidOf(x.kind)), flow.Name(x.kind+"-sink"), flow.OnRejected(jf.Errors.Policy))
	}
	for i, f := range failures {
		uid := "dead-letters"
		if i > 0 {
			uid += "-" + strconv.Itoa(i)
		}
		if kafkaSink != nil {
			flow.To(f, kafkaSink.DeadLetters(jf.Errors.DeadLetterTopic), flow.UID(uid), flow.Name("kafka-dead-letters"))
			continue
		}
		// Without a topic the pipeline's dead letters go to the dead-letter
		// place of the sink with the uid "sink" (the commit point's, else
		// the first), in its transaction.
		keeper := exts[0]
		for _, x := range exts {
			if uidOf(x.kind) == "sink" {
				keeper = x
			}
		}
		if keeper.built.DeadLetters == nil { // unreachable: the job file's reader checked it
			_ = closeAll()
			return nil, fmt.Errorf("%s: sink.%s keeps no dead letters", jf.Path, keeper.kind)
		}
		flow.To(f, keeper.built.DeadLetters, flow.UID(uid), flow.Name(keeper.kind+"-dead-letters"))
	}
	return &Built{Env: env, Sources: srcs, CloseSink: closeAll, Metrics: m, Checkpoints: watch}, nil
}

// NewEnv makes the job's environment from the file's engine settings, and
// the counters of its pipeline.
func NewEnv(jf *jobfile.JobFile, log *slog.Logger, extra ...flow.Option) (*flow.Env, *checkpointWatch, *PipelineMetrics) {
	m := &PipelineMetrics{}
	opts := []flow.Option{
		flow.JobName(jf.Job),
		flow.CheckpointConfig(jf.Checkpointing),
		flow.StateDir(jf.State.Dir),
		flow.StateBackend(jf.State.Backend),
		flow.StateMemory(jf.State.Memory),
		flow.Logger(log),
	}
	if jf.State.MaxParallelism > 0 {
		opts = append(opts, flow.MaxParallelism(jf.State.MaxParallelism))
	}
	if c := jf.State.Checkpoints; c != "" && !strings.Contains(c, "://") {
		opts = append(opts, flow.CheckpointsIn(c))
	} else if c != "" {
		s3 := jf.State.S3
		opts = append(opts, s3ckpt.Checkpoints(jf.State.Checkpoints, s3ckpt.Options{Endpoint: s3.Endpoint, Region: s3.Region, PathStyle: s3.PathStyle, Insecure: s3.Insecure}))
	}
	if jf.RestartSet {
		opts = append(opts, flow.Restart(jf.Restart))
	}
	watch := &checkpointWatch{}
	opts = append(opts, flow.WithHooks(watch),
		// Over the job's life, as the engine's counters: the checkpoints
		// carry them (docs/design.md, "Metrics and the REST API").
		flow.JobLifeCounter("late_records", &m.LateRecords),
		flow.JobLifeCounter("dedupe_duplicates_dropped", &m.DuplicatesDropped))
	return flow.New(append(opts, extra...)...), watch, m
}

// newSource makes the Kafka source of a source section.
func newSource(jf *jobfile.JobFile, sc jobfile.SourceConfig, cc kafka.ClientConfig) (*kafka.Source, error) {
	st := sc.Startup
	return kafka.NewSource(kafka.SourceConfig{
		Client:            cc,
		Topics:            sc.Topics,
		TopicRegex:        sc.TopicRegex,
		Group:             sc.Group,
		StartupMode:       connectorStartup[st.Mode],
		ResetFallback:     connectorReset[st.Reset],
		StartTimestamp:    st.Timestamp,
		SpecificOffsets:   st.Offsets,
		DiscoveryInterval: sc.DiscoveryInterval,
		ReadUncommitted:   sc.Isolation == jobfile.IsolationReadUncommitted,
		Bounded:           sc.Bounded,
		OnTopicRecreated:  connectorRecreated[sc.OnTopicRecreated],
		Partitions:        partitionsOf(jf.Task.PartitionsOrNil(), sc.Topics),
		Upstreams:         upstreamsOf(jf.Task),
		GroupCommit:       groupCommitOf(jf.Task),
		MinOffsets:        minOffsetsOf(jf.Task),
	})
}

// minOffsetsOf is where a scale-out task's source reads from at the
// lowest (a restored job savepoint's marker), nil for another job.
func minOffsetsOf(t *jobfile.TaskSpec) map[string]map[int32]int64 {
	if t == nil {
		return nil
	}
	return t.MinOffsets
}

// groupCommitOf is how a scale-out task's sources commit their offsets
// to the group (as the instance's member), nil for another job.
func groupCommitOf(t *jobfile.TaskSpec) func(context.Context, map[kafka.Partition]int64, string) error {
	if t == nil {
		return nil
	}
	return t.GroupCommit
}

// markAs is the name a scale-out task writing a repartition topic marks
// its watermarks with, "" for another job (docs/design.md, "Scale-out").
func markAs(t *jobfile.TaskSpec) string {
	if !t.Repartitions() {
		return ""
	}
	return t.MarkAs
}

// markPartitions is the partition count of the repartition topic a task
// marks, 0 without markers.
func markPartitions(t *jobfile.TaskSpec) int {
	if markAs(t) == "" {
		return 0
	}
	return t.OutPartitions
}

// upstreamsOf names the tasks writing the repartition topic a scale-out
// task reads, nil for another job.
func upstreamsOf(t *jobfile.TaskSpec) []string {
	if t == nil {
		return nil
	}
	return t.Upstreams
}

// partitionsOf is the part of a scale-out task's partitions (nil: not a
// task) in topics: one source's share of a co-partitioned task.
func partitionsOf(all map[string][]int32, topics []string) map[string][]int32 {
	if all == nil {
		return nil
	}
	out := map[string][]int32{}
	for _, t := range topics {
		if ps, ok := all[t]; ok {
			out[t] = ps
		}
	}
	return out
}

// buildStreams adds the sources and the pipeline to env: the streams the
// sinks write by name ("" in the one-source form: the pipeline's end;
// in the named form every source and stream), and the failure streams of
// dead-letter steps.
func buildStreams(env *flow.Env, jf *jobfile.JobFile, srcs []*kafka.Source, m *PipelineMetrics) (map[string]flow.Stream[kafka.Record], []flow.Stream[flow.Failure[kafka.Record]], error) {
	// watermarks is the strategy of a source whose event time is et.
	watermarks := func(et jobfile.EventTimeConfig, where string) (*flow.Watermarks[kafka.Record], error) {
		ts, err := pipeline.Timestamps(KafkaAccess, et.Timestamp)
		if err != nil {
			return nil, fmt.Errorf("%s: %s.timestamp: %w", jf.Path, where, err)
		}
		return &flow.Watermarks[kafka.Record]{
			Timestamp: ts, Split: kafka.SplitOf,
			MaxOutOfOrderness: et.MaxOutOfOrderness, IdleTimeout: et.IdleTimeout,
		}, nil
	}
	var timeExpr string
	var wm *flow.Watermarks[kafka.Record]
	if et, on := jf.EventTimeSettings(); on {
		var err error
		if wm, err = watermarks(et, "event-time"); err != nil {
			return nil, nil, err
		}
		timeExpr = et.Timestamp
	}
	from := func(src *kafka.Source, sc jobfile.SourceConfig, uid, name string, wm *flow.Watermarks[kafka.Record]) flow.Stream[kafka.Record] {
		var opts []flow.OpOption
		if sc.Parallelism > 0 {
			opts = append(opts, flow.WithParallelism(sc.Parallelism))
		}
		if wm != nil {
			opts = append(opts, flow.WithWatermarks(*wm))
		}
		s := flow.From(env, src, append(opts, flow.UID(uid), flow.Name(name))...)
		return flow.Map(s, func(r kafka.Record) kafka.Record { m.RecordsRead.Add(1); return r }, flow.Name("count-read"))
	}
	if jf.Graph == nil {
		s := from(srcs[0], jf.Source, "source", "kafka-source", wm)
		out, failures, err := BuildPipeline(s, jf.Pipeline, KafkaAccess, jf.Errors.Policy, m, timeExpr)
		return map[string]flow.Stream[kafka.Record]{"": out}, failures, err
	}
	outs := map[string]flow.Stream[kafka.Record]{}
	sources := jf.Graph.Sources
	if jf.Task.ReadsTagged() {
		// After a cut: the graph's sources are the edges in the one
		// repartition topic, told apart by their tag (docs/design.md,
		// "Named streams").
		if err := tagged(outs, jf, srcs[0], from, wm); err != nil {
			return nil, nil, err
		}
		sources = nil
	}
	// Each source's own event time, else the job's (docs/design.md,
	// "Named streams").
	for i, ns := range sources {
		swm := wm
		if ns.EventTime.Set {
			et, _ := jf.SourceEventTime(ns.Name)
			var err error
			if swm, err = watermarks(et, "sources."+ns.Name+".event-time"); err != nil {
				return nil, nil, err
			}
		}
		outs[ns.Name] = from(srcs[i], ns.Source, ns.Name, "kafka-source-"+ns.Name, swm)
	}
	times, inputTimes := jf.StreamTimes()
	perSource := jf.PerSourceEventTime()
	order, err := jf.Graph.StreamOrder()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", jf.Path, err)
	}
	var failures []flow.Stream[flow.Failure[kafka.Record]]
	for _, st := range order {
		ins := make([]flow.Stream[kafka.Record], len(st.From))
		for i, f := range st.From {
			ins[i] = outs[f]
		}
		streamTime, itimes := timeExpr, []string(nil)
		if perSource {
			streamTime, itimes = times[st.Name], inputTimes[st.Name]
		}
		out, bad, err := BuildStream(ins, st.Steps, KafkaAccess, jf.Errors.Policy, m, streamTime, itimes...)
		if err != nil {
			return nil, nil, fmt.Errorf("streams.%s: %w", st.Name, err)
		}
		outs[st.Name] = out
		failures = append(failures, bad...)
	}
	return outs, failures, nil
}

type checkpointWatch struct{ StateBytes atomic.Int64 }

func (w *checkpointWatch) OnCheckpointCompleted(e flow.CheckpointCompleted) {
	w.StateBytes.Store(e.StateBytes)
}

// statusAttrs is the status line of run, as slog key-value pairs. The keys
// are stable (scripts grep them) and name their scope: process_ counts
// this process (replayed records count again), job_ the job's life (the
// checkpoints carry it), so that no one compares reads of this process
// with the job's commits. lag is "?" while a source does not know it
// (before it fetched the log end of its partitions).
// toRepartition readies the records of a segment before a cut for its
// repartition topic: unchanged, but for the topic and the partition the
// next keyed step's key gives (state.Hash of the key, modulo the topic's
// partitions), so that every record of a key reaches the same task. A
// record whose key cannot be computed is a poison record for
// errors.policy, here as it would be at the keyed step.
func toRepartition(s flow.Stream[kafka.Record], jf *jobfile.JobFile) (flow.Stream[kafka.Record], flow.Stream[flow.Failure[kafka.Record]], error) {
	t := jf.Task
	keyOf, err := pipeline.Keys(KafkaAccess, t.OutKey)
	if err != nil {
		return s, flow.Stream[flow.Failure[kafka.Record]]{}, fmt.Errorf("%s: the repartition key %s: %w", jf.Path, t.OutKey, err)
	}
	if t.OutPartitions <= 0 {
		// The instance reads the count before it runs a task; a task
		// dividing by 0 would fail every record.
		return s, flow.Stream[flow.Failure[kafka.Record]]{}, fmt.Errorf("%s: the repartition topic %s has %d partitions to partition by: %w", jf.Path, t.Out, t.OutPartitions, flow.ErrInvalidJob)
	}
	n := uint32(t.OutPartitions)
	out, bad := flow.TryMap(s, func(r kafka.Record) (kafka.Record, error) {
		k, err := keyOf(r)
		if err != nil {
			return r, fmt.Errorf("record %s: key %s for the repartition topic %s: %w", r, t.OutKey, t.Out, err)
		}
		r.Topic, r.Partition, r.Offset = t.Out, int32(state.Hash(k)%n), 0
		return r, nil
	}, jf.Errors.Policy, flow.UID("repartition"), flow.Name("to-"+t.Out))
	return out, bad, nil
}

// KafkaAccess is how the pipeline operators read and change kafka.Record
// (the job file's record type; the benchmarks use it too).
var KafkaAccess = kafkarec.Access

// toSink readies a record for the sink (kafkarec.ToSink).
func toSink(topic string) func(kafka.Record) kafka.Record { return kafkarec.ToSink(topic) }

// HeaderEdge tags a record in a repartition topic of a cut graph with
// the input it is of (plan.EdgeTag): one topic carries every input of the
// keyed steps after the cut, so their partitions line up (docs/design.md,
// "Named streams").
const HeaderEdge = "onceflow.edge"

// tagged makes the sources of a task after a graph's cut: one Kafka
// source, the repartition topic, whose records go to the source named by
// their HeaderEdge, without it. Its watermark is the writers' (the
// markers'); each edge's records have the timestamps of the edge's event
// time.
func tagged(outs map[string]flow.Stream[kafka.Record], jf *jobfile.JobFile, src *kafka.Source, from func(*kafka.Source, jobfile.SourceConfig, string, string, *flow.Watermarks[kafka.Record]) flow.Stream[kafka.Record], wm *flow.Watermarks[kafka.Record]) error {
	stamps := map[string]func(kafka.Record) int64{}
	for _, ns := range jf.Graph.Sources {
		if !ns.EventTime.Set {
			continue
		}
		ts, err := pipeline.Timestamps(KafkaAccess, ns.EventTime.Timestamp)
		if err != nil {
			return fmt.Errorf("%s: sources.%s.event-time.timestamp: %w", jf.Path, ns.Name, err)
		}
		stamps[ns.Name] = ts
		if wm == nil {
			et := ns.EventTime
			wm = &flow.Watermarks[kafka.Record]{Split: kafka.SplitOf, MaxOutOfOrderness: et.MaxOutOfOrderness, IdleTimeout: et.IdleTimeout}
		}
	}
	if wm != nil && len(stamps) > 0 {
		w := *wm
		deflt := w.Timestamp
		w.Timestamp = func(r kafka.Record) int64 {
			if ts, ok := stamps[edgeOf(r)]; ok {
				return ts(r)
			}
			if deflt == nil {
				return flow.NoTimestamp
			}
			return deflt(r)
		}
		wm = &w
	}
	all := from(src, jf.Source, "source", "kafka-source", wm)
	for _, ns := range jf.Graph.Sources {
		tag := ns.Name
		outs[tag] = flow.Map(flow.Filter(all, func(r kafka.Record) bool { return edgeOf(r) == tag }, flow.Name("edge-"+tag)), untag, flow.Name("untag-"+tag))
	}
	return nil
}

// edgeOf is the tag of a record of a cut graph's repartition topic.
func edgeOf(r kafka.Record) string {
	for _, h := range r.Headers {
		if h.Key == HeaderEdge {
			return string(h.Value)
		}
	}
	return ""
}

// untag takes the record's tag off.
func untag(r kafka.Record) kafka.Record {
	hs := make([]kafka.Header, 0, len(r.Headers))
	for _, h := range r.Headers {
		if h.Key != HeaderEdge {
			hs = append(hs, h)
		}
	}
	if len(hs) == 0 {
		hs = nil
	}
	r.Headers = hs
	return r
}

// toRepartitionEdges readies the streams a segment of a cut graph writes
// for its repartition topic (jobfile.TaskSpec.OutEdges): each record
// unchanged but for the topic, the partition its edge's key gives
// (state.Hash of the key, modulo the topic's partitions, as toRepartition)
// and the tag of its edge; all edges into one stream, the sink's. A key
// error is not poison here: the keyed step after the cut decides.
func toRepartitionEdges(outs map[string]flow.Stream[kafka.Record], jf *jobfile.JobFile) (flow.Stream[kafka.Record], error) {
	t := jf.Task
	if t.OutPartitions <= 0 {
		return flow.Stream[kafka.Record]{}, fmt.Errorf("%s: the repartition topic %s has %d partitions to partition by: %w", jf.Path, t.Out, t.OutPartitions, flow.ErrInvalidJob)
	}
	n := uint32(t.OutPartitions)
	var parts []flow.Stream[kafka.Record]
	for _, e := range t.OutEdges {
		s, ok := outs[e.From]
		if !ok { // unreachable: the planner built the segment's graph
			return flow.Stream[kafka.Record]{}, fmt.Errorf("%s: the repartition of %s reads %s, which the segment does not compute: %w", jf.Path, e.Tag, e.From, flow.ErrInvalidJob)
		}
		keyOf, err := pipeline.Keys(KafkaAccess, e.Key)
		if err != nil {
			return flow.Stream[kafka.Record]{}, fmt.Errorf("%s: the repartition key %s of %s: %w", jf.Path, e.Key, e.Tag, err)
		}
		tag := []byte(e.Tag)
		out := flow.Map(s, func(r kafka.Record) kafka.Record {
			// A record without a key (null, a missing field, not a string
			// or number) goes to partition 0: the keyed step evaluates
			// the same expression there and decides as on one instance
			// (a join pairs it with nothing; a count takes it as poison).
			p := uint32(0)
			if k, err := keyOf(r); err == nil {
				p = state.Hash(k) % n
			}
			r = untag(r)
			r.Headers = append(r.Headers, kafka.Header{Key: HeaderEdge, Value: tag})
			r.Topic, r.Partition, r.Offset = t.Out, int32(p), 0
			return r
		}, flow.UID("repartition-"+e.Tag), flow.Name("to-"+t.Out+"-"+e.Tag))
		parts = append(parts, out)
	}
	if len(parts) == 1 {
		return parts[0], nil
	}
	return flow.Union(parts[0], parts[1:]...), nil
}
