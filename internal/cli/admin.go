package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/internal/jobfile"
)

// The commands that administer what a job uses on the cluster: topic
// create and lag. Both take the cluster from --brokers or from a job
// file's kafka section (--job), TLS and SASL included.

type clusterFlags struct {
	brokers, job *string
}

func addClusterFlags(fs *flag.FlagSet) clusterFlags {
	return clusterFlags{
		brokers: fs.String("brokers", "", "comma-separated Kafka bootstrap brokers (default 127.0.0.1:9092, or the job file's)"),
		job:     fs.String("job", "", "a job `FILE`: its kafka section (TLS and SASL included), topics and group"),
	}
}

// load returns the client configuration and, with --job, the job file.
func (f clusterFlags) load() (kafka.ClientConfig, *jobfile.JobFile, error) {
	var jf *jobfile.JobFile
	cc := kafka.ClientConfig{Brokers: []string{"127.0.0.1:9092"}, ClientID: "onceflow-admin"}
	if *f.job != "" {
		var err error
		if jf, err = jobfile.LoadJobFileForKafka(*f.job); err != nil {
			return cc, nil, err
		}
		if cc, err = clientConfig(jf.Kafka); err != nil {
			return cc, nil, err
		}
	}
	if *f.brokers != "" {
		cc.Brokers = strings.Split(*f.brokers, ",")
	}
	return cc, jf, nil
}

func (f clusterFlags) admin() (*kadm.Client, *jobfile.JobFile, func(), error) {
	cc, jf, err := f.load()
	if err != nil {
		return nil, nil, nil, err
	}
	cl, err := cc.NewClient(kgo.RetryTimeout(15 * time.Second))
	if err != nil {
		return nil, nil, nil, err
	}
	return kadm.NewClient(cl), jf, cl.Close, nil
}

// verbFirst lets a command with a verb (topic create, txn list, offsets
// reset) take its flags after the verb as well: flag parsing stops at the
// first argument, so the rest is parsed again.
func verbFirst(fs *flag.FlagSet, args []string) ([]string, error) {
	if len(args) < 2 {
		return args, nil
	}
	if err := fs.Parse(args[1:]); err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	return append([]string{args[0]}, fs.Args()...), nil
}

func topicFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	cluster := addClusterFlags(fs)
	partitions := fs.Int("partitions", 1, "create: partitions of each new topic (the source's parallelism follows them); add-partitions: the partition count to grow each topic to (required)")
	var named []string
	fs.Func("topic", "a topic `NAME` (repeatable), the same as naming it after the verb", func(s string) error {
		named = append(named, s)
		return nil
	})
	replication := fs.Int("replication-factor", -1, "replicas of each partition (-1: the broker's default)")
	var configs []string
	fs.Func("config", "a topic config `KEY=VALUE` (repeatable), such as retention.ms=604800000", func(s string) error {
		if !strings.Contains(s, "=") {
			return fmt.Errorf("%q is not KEY=VALUE", s)
		}
		configs = append(configs, s)
		return nil
	})
	return func(ctx context.Context, e *env, args []string) error {
		args, err := verbFirst(fs, args)
		if err != nil {
			return err
		}
		if len(args) == 0 || args[0] != "create" && args[0] != "add-partitions" {
			return fmt.Errorf("%w: use topic create [TOPIC...] (with --job FILE, the job's input, output and dead-letter topics) or topic add-partitions --partitions N [TOPIC...] (with --job FILE, the job's input topics)", errUsage)
		}
		topics := append(slices.Clone(named), args[1:]...)
		if args[0] == "add-partitions" {
			set := false
			fs.Visit(func(f *flag.Flag) { set = set || f.Name == "partitions" })
			if !set || *partitions < 1 {
				return fmt.Errorf("%w: topic add-partitions needs --partitions N, the partition count each topic is to have (at least 1)", errUsage)
			}
			adm, jf, closeFn, err := cluster.admin()
			if err != nil {
				return err
			}
			defer closeFn()
			return addPartitions(ctx, e, adm, jf, topics, *partitions, *cluster.brokers)
		}
		adm, jf, closeFn, err := cluster.admin()
		if err != nil {
			return err
		}
		defer closeFn()
		if jf != nil && len(topics) == 0 {
			topics = append(topics, jf.Source.Topics...)
			if jf.Sink.Topic != "" {
				topics = append(topics, jf.Sink.Topic)
			}
			if jf.Errors.DeadLetterTopic != "" {
				topics = append(topics, jf.Errors.DeadLetterTopic)
			}
			topics = append(topics, jf.RouteTopics()...)
			if jf.Source.TopicRegex != "" {
				fmt.Fprintf(e.stderr, "topic: the job reads topics matching %q; name them to create them\n", jf.Source.TopicRegex)
			}
		}
		if len(topics) == 0 {
			return fmt.Errorf("%w: name the topics to create, or give --job FILE", errUsage)
		}
		if *partitions < 1 {
			return fmt.Errorf("%w: --partitions %d must be at least 1", errUsage, *partitions)
		}
		cfg := map[string]*string{}
		for _, c := range configs {
			k, v, _ := strings.Cut(c, "=")
			cfg[k] = &v
		}
		resp, err := adm.CreateTopics(ctx, int32(*partitions), int16(*replication), cfg, topics...)
		if err != nil {
			return fmt.Errorf("create topics: %w (is a broker at %s?)", err, *cluster.brokers)
		}
		var errs []error
		for _, t := range topics {
			r, ok := resp[t]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("%s: no answer", t))
			case errors.Is(r.Err, kerr.TopicAlreadyExists):
				d, derr := adm.ListTopics(ctx, t)
				if n := len(d[t].Partitions); derr == nil && n > 0 {
					fmt.Fprintf(e.stdout, "%s exists already (%d partitions); left as it is\n", t, n)
				} else {
					fmt.Fprintf(e.stdout, "%s exists already; left as it is\n", t)
				}
			case r.Err != nil:
				errs = append(errs, fmt.Errorf("%s: %w", t, r.Err))
			default:
				fmt.Fprintf(e.stdout, "created %s (%d partitions)\n", t, r.NumPartitions)
			}
		}
		return errors.Join(errs...)
	}
}

// addPartitions grows each topic (with a job file and no topics named: the
// job's input topics) to n partitions with CreatePartitions. Kafka cannot
// remove partitions, so a topic with more than n is refused, not shrunk;
// one with exactly n is left alone. A running job reads the new partitions
// once its partition discovery finds them (source.discovery-interval;
// docs/design.md, "Operations commands").
func addPartitions(ctx context.Context, e *env, adm *kadm.Client, jf *jobfile.JobFile, topics []string, n int, brokers string) error {
	if jf != nil && len(topics) == 0 {
		topics = append(topics, jf.Source.Topics...)
		if jf.Source.TopicRegex != "" {
			fmt.Fprintf(e.stderr, "topic: the job reads topics matching %q; name the ones to grow\n", jf.Source.TopicRegex)
		}
	}
	if len(topics) == 0 {
		return fmt.Errorf("%w: name the topics to grow (--topic NAME, or after the verb), or give --job FILE", errUsage)
	}
	slices.Sort(topics)
	topics = slices.Compact(topics)
	details, err := adm.ListTopics(ctx, topics...)
	if err != nil {
		return fmt.Errorf("list topics: %w (is a broker at %s?)", err, brokers)
	}
	var grow []string
	var errs []error
	have := map[string]int{}
	for _, t := range topics {
		d, ok := details[t]
		switch {
		case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			errs = append(errs, fmt.Errorf("%s does not exist: create it with onceflow topic create --partitions %d %s", t, n, t))
		case d.Err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", t, d.Err))
		case len(d.Partitions) > n:
			errs = append(errs, fmt.Errorf("%s has %d partitions and Kafka cannot remove partitions: to read it with fewer, create a new topic with onceflow topic create --partitions %d and move the job to it", t, len(d.Partitions), n))
		case len(d.Partitions) == n:
			fmt.Fprintf(e.stdout, "%s has %d partitions already; left as it is\n", t, n)
		default:
			have[t] = len(d.Partitions)
			grow = append(grow, t)
		}
	}
	if len(grow) > 0 {
		resp, err := adm.UpdatePartitions(ctx, n, grow...)
		if err != nil {
			return fmt.Errorf("create partitions: %w (is a broker at %s?)", err, brokers)
		}
		for _, t := range grow {
			r, ok := resp[t]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("%s: no answer", t))
			case r.Err != nil:
				msg := ""
				if r.ErrMessage != "" {
					msg = " (" + r.ErrMessage + ")"
				}
				errs = append(errs, fmt.Errorf("%s: %w%s", t, r.Err, msg))
			default:
				fmt.Fprintf(e.stdout, "%s: %d -> %d partitions\n", t, have[t], n)
			}
		}
		if len(errs) < len(topics) {
			fmt.Fprintln(e.stdout, "a running job reads the new partitions from their earliest offset once its partition discovery finds them (source.discovery-interval, default 10s); then trigger a checkpoint (onceflow savepoint) to have their positions in one")
		}
	}
	return errors.Join(errs...)
}

// Lag verdicts, after Burrow's (worst last).
const (
	lagOK    = "OK"    // lag zero, or commits advance and the lag does not grow
	lagWarn  = "WARN"  // commits advance but the lag grew at every sample
	lagStall = "STALL" // commits happen (new checkpoints) but offsets do not move while there is lag
	lagStop  = "STOP"  // no commit during the window while there is lag
)

var lagOrder = []string{lagOK, lagWarn, lagStall, lagStop}

// lagSample is one partition's position in a sample. A partition the
// group has no offset for (added to the topic and not read yet) has
// uncommitted set and committed its log start offset, where the job's
// partition discovery starts reading it: its lag counts every record in
// it.
type lagSample struct {
	committed, end, checkpoint int64
	uncommitted                bool
}

func lagFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	cluster := addClusterFlags(fs)
	group := fs.String("group", "", "the consumer `GROUP` (default with --job: the job's source group)")
	window := fs.Duration("window", 15*time.Second, "how long to watch the group before the verdict (0: one sample, no verdict)")
	samples := fs.Int("samples", 4, "samples over the window")
	return func(ctx context.Context, e *env, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("%w: lag takes no arguments", errUsage)
		}
		adm, jf, closeFn, err := cluster.admin()
		if err != nil {
			return err
		}
		defer closeFn()
		g := *group
		if g == "" && jf != nil {
			g = jf.Source.Group
		}
		if g == "" {
			return fmt.Errorf("%w: name the group (--group) or the job file (--job)", errUsage)
		}
		if *samples < 2 {
			*samples = 2
		}
		n := *samples
		if *window == 0 {
			n = 1
		}
		var history []map[string]map[int32]lagSample
		for i := range n {
			if i > 0 {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(*window / time.Duration(n-1)):
				}
			}
			s, err := sampleLag(ctx, adm, g)
			if err != nil {
				return err
			}
			history = append(history, s)
			if n > 1 {
				fmt.Fprintf(e.stderr, "lag: sample %d/%d of group %s\n", i+1, n, g)
			}
		}
		last := history[len(history)-1]
		if len(last) == 0 {
			return fmt.Errorf("group %q has no committed offsets: it never committed, its offsets expired (offsets.retention.minutes), or the name is wrong (a job's source group is onceflow-JOB unless source.group says otherwise)", g)
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tCOMMITTED\tEND\tLAG\tCHECKPOINT\tSTATUS")
		worst := 0
		for _, t := range sortedKeys(last) {
			for _, p := range sortedKeys(last[t]) {
				s := last[t][p]
				verdict := "-"
				if n > 1 {
					var seq []lagSample
					for _, h := range history {
						if x, ok := h[t][p]; ok {
							seq = append(seq, x)
						}
					}
					verdict = lagVerdict(seq)
					worst = max(worst, slices.Index(lagOrder, verdict))
				}
				cp := "-"
				if s.checkpoint > 0 {
					cp = strconv.FormatInt(s.checkpoint, 10)
				}
				committed := strconv.FormatInt(s.committed, 10)
				if s.uncommitted {
					committed = "-"
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%s\t%s\n", t, p, committed, s.end, max(0, s.end-s.committed), cp, verdict)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if n > 1 {
			fmt.Fprintf(e.stdout, "group %s: %s over %v\n", g, lagOrder[worst], *window)
		}
		return nil
	}
}

// sampleLag reads the group's committed offsets (with the onceflow
// checkpoint id of their metadata) and the last stable offsets of their
// partitions.
func sampleLag(ctx context.Context, adm *kadm.Client, group string) (map[string]map[int32]lagSample, error) {
	offs, err := adm.FetchOffsets(ctx, group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return map[string]map[int32]lagSample{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("fetch the offsets of group %s: %w", group, err)
	}
	if err := offs.Error(); err != nil {
		return nil, fmt.Errorf("fetch the offsets of group %s: %w", group, err)
	}
	out := map[string]map[int32]lagSample{}
	var topics []string
	offs.Each(func(o kadm.OffsetResponse) {
		if out[o.Topic] == nil {
			out[o.Topic] = map[int32]lagSample{}
			topics = append(topics, o.Topic)
		}
		s := lagSample{committed: o.At}
		if i := strings.LastIndexByte(o.Metadata, ':'); strings.HasPrefix(o.Metadata, "onceflow:") && i > 0 {
			s.checkpoint, _ = strconv.ParseInt(o.Metadata[i+1:], 10, 64)
		}
		out[o.Topic][o.Partition] = s
	})
	if len(topics) == 0 {
		return out, nil
	}
	// The last stable offsets: what a read_committed reader can reach.
	// The listing covers every partition of the topics, so it also shows
	// partitions the group has no offset for.
	ends, err := adm.ListCommittedOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("list the end offsets of %s: %w", strings.Join(topics, ", "), err)
	}
	var unread []kadm.ListedOffset
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			return
		}
		if s, ok := out[o.Topic][o.Partition]; ok {
			s.end = o.Offset
			out[o.Topic][o.Partition] = s
			return
		}
		unread = append(unread, o)
	})
	if len(unread) == 0 {
		return out, nil
	}
	// Partitions without an offset (docs/design.md, "The Kafka source"):
	// lag from their log start, where discovery starts reading them.
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("list the start offsets of %s: %w", strings.Join(topics, ", "), err)
	}
	for _, o := range unread {
		start := int64(0)
		if so, ok := starts.Lookup(o.Topic, o.Partition); ok && so.Err == nil {
			start = so.Offset
		}
		out[o.Topic][o.Partition] = lagSample{committed: start, end: o.Offset, uncommitted: true}
	}
	return out, nil
}

// lagVerdict judges one partition's samples, oldest first.
func lagVerdict(seq []lagSample) string {
	if len(seq) < 2 {
		return "-"
	}
	first, last := seq[0], seq[len(seq)-1]
	lag := func(s lagSample) int64 { return max(0, s.end-s.committed) }
	if lag(last) == 0 {
		return lagOK
	}
	moved := last.committed != first.committed
	committedAgain := last.checkpoint != first.checkpoint
	switch {
	case !moved && committedAgain:
		return lagStall
	case !moved:
		return lagStop
	}
	growing := true
	for i := 1; i < len(seq); i++ {
		growing = growing && lag(seq[i]) > lag(seq[i-1])
	}
	if growing {
		return lagWarn
	}
	return lagOK
}

func sortedKeys[K string | int32, V any](m map[K]V) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
