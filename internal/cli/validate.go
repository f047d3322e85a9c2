package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/durfmt"
	"github.com/onceflow/onceflow/internal/jobfile"
	"github.com/onceflow/onceflow/internal/plan"
	"github.com/onceflow/onceflow/pipeline"
	"github.com/onceflow/onceflow/state"
)

func validateFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	showJob := fs.Bool("show-job", false, "for a SQL script (FILE.sql): print the job file it compiles to instead of the summary")
	return func(_ context.Context, e *env, args []string) error {
		path, err := oneFileArg("validate", args)
		if err != nil {
			return err
		}
		jf, err := jobfile.LoadJobFile(path)
		if err != nil {
			return err
		}
		if *showJob {
			if jf.SQL == nil {
				return fmt.Errorf("%w: --show-job prints the job file a SQL script compiles to, and %s is a job file already", errUsage, path)
			}
			_, err := e.stdout.Write(jf.SQL.YAML)
			return err
		}
		describeJob(e.stdout, jf)
		if jf.SQL != nil {
			for _, n := range jf.SQL.Notes {
				fmt.Fprintf(e.stdout, "  note:       %s\n", n)
			}
		}
		return nil
	}
}

func oneFileArg(cmd string, args []string) (string, error) {
	switch len(args) {
	case 0:
		return "", fmt.Errorf("%w: %s needs the job file to %s, such as onceflow %s job.yaml", errUsage, cmd, cmd, cmd)
	case 1:
		return args[0], nil
	}
	return "", fmt.Errorf("%w: %s takes one job file, got %d arguments: %s", errUsage, cmd, len(args), strings.Join(args, " "))
}

// describeJob prints the job as the engine will run it, defaults included,
// so a user sees what the file means.
func describeJob(w io.Writer, jf *jobfile.JobFile) {
	fmt.Fprintf(w, "%s: job %q is valid\n", jf.Path, jf.Job)
	fmt.Fprintf(w, "  kafka:      %s (client id %s", strings.Join(jf.Kafka.Brokers, ", "), jf.Kafka.ClientID)
	if t := jf.Kafka.TLS; t.Enabled {
		fmt.Fprint(w, ", TLS")
		var files []string
		for _, f := range []struct{ key, path string }{{"ca-file", t.CAFile}, {"cert-file", t.CertFile}, {"key-file", t.KeyFile}} {
			if f.path != "" {
				files = append(files, f.key+" "+f.path)
			}
		}
		if len(files) > 0 {
			fmt.Fprintf(w, " with %s", strings.Join(files, ", "))
		}
	}
	if jf.Kafka.SASL.Mechanism != "" {
		fmt.Fprintf(w, ", SASL %s as %s", jf.Kafka.SASL.Mechanism, jf.Kafka.SASL.Username)
	}
	fmt.Fprintln(w, ")")
	if jf.Graph == nil {
		describeSource(w, "source:", "", jf.Source)
	} else {
		for i, ns := range jf.Graph.Sources {
			label := ""
			if i == 0 {
				label = "sources:"
			}
			describeSource(w, label, ns.Name+": ", ns.Source)
			if ns.EventTime.Set {
				et, _ := jf.SourceEventTime(ns.Name)
				describeEventTime(w, "", ns.Name+"'s event time: ", et)
			}
		}
	}
	if et, on := jf.EventTimeSettings(); on {
		what := ""
		if jf.PerSourceEventTime() {
			what = "the other sources': " // those without a section of their own
			all := true
			for _, ns := range jf.Graph.Sources {
				all = all && ns.EventTime.Set
			}
			if all {
				on = false
			}
		}
		if on {
			describeEventTime(w, "event time:", what, et)
		}
	}
	if jf.Graph != nil || jf.SQL != nil {
		// The operator graph, with the keyed state each operator keeps
		// and what bounds it: a SQL script's EXPLAIN.
		if p, err := jf.Plan(); err == nil {
			var b strings.Builder
			_ = plan.Explain(&b, p, "            ")
			fmt.Fprintf(w, "  %-11s the operators, each with [its uid] and ← what it reads when that is not the line above:\n%s", "graph:", b.String())
		}
	}
	if len(jf.Pipeline) == 0 && jf.Graph == nil && jf.SQL == nil {
		fmt.Fprintln(w, "  pipeline:   pass-through")
	}
	for i, st := range jf.Pipeline {
		if jf.Graph != nil || jf.SQL != nil {
			break // the graph above lists the steps
		}
		label := ""
		if i == 0 {
			label = "pipeline:"
		}
		uid := "uid " + st.UID
		if strings.ContainsFunc(st.UID, func(r rune) bool { return !strings.ContainsRune(uidPlain, r) }) {
			uid = fmt.Sprintf("uid %q", st.UID) // as it must be written in YAML
		}
		if st.UIDSet {
			uid += ", from the file"
		}
		fmt.Fprintf(w, "  %-11s %s (%s)\n", label, describeStep(st, jf), uid)
	}
	if p, err := jf.Plan(); err == nil {
		// State nothing frees grows with the keys for as long as the job
		// runs: say so before it fills a disk (docs/design.md, "Pipeline
		// operators and expressions").
		if ub := p.Unbounded(); len(ub) > 0 {
			var uids []string
			for _, n := range ub {
				uids = append(uids, n.UID)
			}
			fmt.Fprintf(w, "  %-11s %s keep%s state for every key for as long as the job runs (no ttl)\n", "unbounded:", strings.Join(uids, ", "), map[bool]string{true: "s", false: ""}[len(uids) == 1])
		}
		if len(p.Subs) > 1 {
			var b strings.Builder
			_ = plan.Explain(&b, p, "              ")
			fmt.Fprintf(w, "  %-11s %d sub-topologies:\n%s", "scale-out:", len(p.Subs), b.String())
		}
	}
	label := "sink:"
	if len(jf.Sink.Kinds()) > 1 {
		label = "sinks:"
	}
	owner := jf.Sink.CommitPoint()
	if jf.Sink.HasTopic() {
		fmt.Fprintf(w, "  %-11s %s, delivery %s", label, jf.Sink.Topic, jf.Sink.Delivery)
		if jf.Sink.Delivery == jobfile.DeliveryExactlyOnce && jf.Sink.External() {
			fmt.Fprint(w, " (the Kafka transaction is the commit point)")
		}
		if jf.Sink.Delivery == jobfile.DeliveryExactlyOnce {
			fmt.Fprintf(w, ", holds at most %s while a checkpoint commits, transaction timeout %s", jobfile.FormatSize(jf.Sink.MaxHeldBytes), durfmt.Short(jf.Sink.TransactionTimeout))
		}
		fmt.Fprintln(w)
		label = ""
	}
	// Every other sink by its connector's Describe hook (package
	// connector).
	for _, kind := range jf.Sink.Kinds() {
		c := jf.Sink.Connectors[kind]
		if c == nil {
			continue
		}
		d := connector.Describe{Role: jf.Sink.Role(kind), Delivery: connector.Delivery(jf.Sink.Delivery), CommitPoint: owner}
		line := fmt.Sprintf("%s, delivery %s", c.Section, d.Role)
		if s, ok := connector.Lookup(kind); ok && s.Sink.Describe != nil {
			line = s.Sink.Describe(c, d)
		}
		fmt.Fprintf(w, "  %-11s %s\n", label, line)
		label = ""
	}
	switch jf.Errors.Policy {
	case flow.DeadLetterOnError:
		var places []string
		if jf.Sink.HasTopic() {
			places = append(places, jf.Errors.DeadLetterTopic)
		}
		for _, k := range jf.Sink.Kinds() {
			if k != jobfile.SinkKafka {
				places = append(places, jobfile.DeadLetterPlace(k, jf.Job)+" (sink."+k+")")
			}
		}
		fmt.Fprintf(w, "  errors:     dead-letter to %s\n", strings.Join(places, ", "))
	case flow.SkipOnError:
		fmt.Fprintln(w, "  errors:     skip (drop, count and log poison records)")
	default:
		fmt.Fprintln(w, "  errors:     fail (default)")
	}
	cp := jf.Checkpointing.WithDefaults()
	if cp.Enabled() {
		fmt.Fprintf(w, "  checkpoint: every %s, %s, timeout %s, keep %d\n", durfmt.Short(cp.Interval), cp.Mode, durfmt.Short(cp.Timeout), cp.NumRetained)
	} else {
		fmt.Fprintln(w, "  checkpoint: off")
	}
	maxPar := fmt.Sprintf("%d (default)", state.DefaultMaxParallelism)
	if jf.State.MaxParallelism > 0 {
		maxPar = strconv.Itoa(jf.State.MaxParallelism)
	}
	backend := "in memory"
	if jf.State.Backend == jobfile.BackendPebble {
		backend = "pebble (incremental checkpoints), memory budget " + jobfile.FormatSize(jf.State.Memory)
	}
	fmt.Fprintf(w, "  state:      %s, checkpoints in %s, max parallelism %s\n", jf.State.Dir, checkpointsAt(jf), maxPar)
	fmt.Fprintf(w, "              keyed state %s\n", backend)
	if jf.ScaleOut.Enabled {
		describeScaleOut(w, jf)
		return
	}
	if jf.RestartSet {
		fmt.Fprintf(w, "  restart:    %s\n", jf.Restart.Describe())
	} else if cp.Enabled() {
		fmt.Fprintln(w, "  restart:    exponential-delay (default)")
	}
}

// describeScaleOut says how the instances share the job: the group, and
// the tasks of each sub-topology.
func describeScaleOut(w io.Writer, jf *jobfile.JobFile) {
	fmt.Fprintf(w, "  scale-out:  instances share the partitions of group %s, one task per partition (a job named %s-TOPIC-PARTITION);\n", jf.Source.Group, jf.Job)
	fmt.Fprintf(w, "              each instance keeps its own files under %s, and restarts a failed task itself\n", filepath.Join(jf.State.Dir, jf.Job+".instances", "INSTANCE"))
	segs, err := jobfile.PlanSegments(jf)
	if err != nil {
		return
	}
	for _, sg := range segs {
		var ops []string
		for _, st := range sg.Steps {
			ops = append(ops, st.Op)
		}
		steps := strings.Join(ops, ", ")
		if steps == "" {
			steps = "pass-through"
		}
		to := "the sink"
		if jf.Sink.External() {
			// docs/design.md, "Scale-out": each task of the last
			// sub-topology has its own progress row, fenced when the
			// task moves.
			to = fmt.Sprintf("the %s sink, each task's transaction its commit point (its progress row: job %s-TOPIC-PARTITION)", jf.Sink.CommitPoint(), jf.Job)
		}
		if sg.Out != "" {
			to = fmt.Sprintf("repartition topic %s, partitioned by %s", sg.Out, sg.OutKey)
		}
		fmt.Fprintf(w, "              tasks of %s: %s -> %s\n", strings.Join(sg.Topics, ", "), steps, to)
	}
}

// describeEventTime writes the line of an event-time section.
func describeEventTime(w io.Writer, label, what string, et jobfile.EventTimeConfig) {
	idle := "idle partitions after " + durfmt.Short(et.IdleTimeout)
	if et.IdleTimeout == 0 {
		idle = "partitions never count as idle (an empty partition holds event time back)"
	}
	fmt.Fprintf(w, "  %-11s %s%s, watermarks %s behind each partition's newest, %s\n", label, what, et.Timestamp, durfmt.Short(et.MaxOutOfOrderness), idle)
}

// describeStep says what a pipeline step does, as its operator's spec
// puts it (pipeline.Spec.ExplainIn), in jf's job (its event time).
func describeStep(st jobfile.Step, jf *jobfile.JobFile) string {
	if spec, ok := pipeline.Lookup(st.Op); ok {
		var env pipeline.Env
		if et, on := jf.EventTimeSettings(); on {
			env.Time = et.Timestamp
		}
		return spec.ExplainIn(st.AllParams(), env)
	}
	return st.Op
}

// uidPlain are the characters a uid can be written with, unquoted, in a
// job file and read as it is.
const uidPlain = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:#-"

func describeStartup(s jobfile.Startup) string {
	switch s.Mode {
	case jobfile.StartTimestamp:
		return "at " + s.Timestamp.Format(time.RFC3339)
	case jobfile.StartGroupOffsets:
		return "from group offsets (else " + s.Reset + ")"
	case jobfile.StartSpecificOffsets:
		return fmt.Sprintf("from offsets of %d topics (else %s)", len(s.Offsets), s.Reset)
	}
	return string(s.Mode)
}

// checkpointsAt says where the job's checkpoints are.
func checkpointsAt(jf *jobfile.JobFile) string {
	if jf.State.Checkpoints != "" {
		return strings.TrimRight(jf.State.Checkpoints, "/") + "/" + jf.Job
	}
	return filepath.Join(jf.State.Dir, jf.Job)
}

// describeSource writes a source section's line for validate.
func describeSource(w io.Writer, label, name string, src jobfile.SourceConfig) {
	topics := strings.Join(src.Topics, ", ")
	if src.TopicRegex != "" {
		topics = "topics matching " + src.TopicRegex
	}
	fmt.Fprintf(w, "  %-11s %s%s, group %s, startup %s, %s", label, name, topics, src.Group, describeStartup(src.Startup), src.Isolation)
	switch {
	case src.Bounded:
		fmt.Fprint(w, ", bounded")
	case src.DiscoveryInterval < 0:
		fmt.Fprint(w, ", partition discovery off")
	default:
		every := src.DiscoveryInterval
		if every == 0 {
			every = kafka.DefaultDiscoveryInterval
		}
		fmt.Fprintf(w, ", new partitions found within %s", durfmt.Short(every))
	}
	fmt.Fprintf(w, ", recreated topic: %s\n", map[string]string{jobfile.RecreatedEarliest: "read from earliest", jobfile.RecreatedFail: "fail"}[src.OnTopicRecreated])
}
