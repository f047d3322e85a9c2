package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/onceflow/onceflow/internal/verify"
)

// errAnomalies makes verify exit 1 after printing its report.
var errAnomalies = errors.New("the output is not exactly once")

func verifyFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	brokers := fs.String("brokers", "127.0.0.1:9092", "comma-separated Kafka bootstrap brokers")
	input := fs.String("input", "", "input topic (pass-through mode: its records need unique values)")
	output := fs.String("output", "", "committed output topic of the job")
	dead := fs.String("dead-letter", "", "dead-letter topic of the job, if any")
	mode := fs.String("mode", string(verify.PassThrough), "what the job does:\n"+
		"pass-through: the output is the input (each input record once, in order per key)\n"+
		"count: the output is each key's running count 1..n\n"+
		"dedupe: the job drops records whose key it has seen (dedupe: {key: record.key}); the output is\n"+
		"exactly one record per distinct input key, with the value of the key's first input record\n"+
		"(any of the key's input values if its records are spread over several input partitions);\n"+
		"keys missing from the output are reported lost, keys output more than once duplicated")
	dedupeTTL := fs.Duration("dedupe-ttl", 0, "dedupe mode: the dedupe step's ttl (0: keys are never forgotten). An input record that comes at\n"+
		"least this long after the previous input record of its key (by record timestamp; every record of a\n"+
		"key, passed or dropped, restarts its ttl) may pass dedupe again, so the key may be in the output once\n"+
		"more for it (allowed, not required). The job's ttl runs on processing time, which record timestamps\n"+
		"match only while the job keeps up with its input: a job stopped for longer than the ttl between two\n"+
		"records of a key may pass both, which verify reports as a duplicate")
	skipped := fs.Int64("skipped", 0, "records the job reports it skipped (errors.policy skip)")
	sentinels := fs.Bool("sentinels", false, "write one sentinel record (key __onceflow_sentinel) to every partition of the output topic and wait\n"+
		"until read_committed sees it, to prove no transaction hangs. This WRITES to the output topic: its\n"+
		"other readers see the sentinels. Without it verify only reads and finds an open transaction from the\n"+
		"offsets: a partition whose last stable offset stays below its high watermark (see --settle-timeout)")
	settle := fs.Duration("settle-timeout", 0, "how long an open transaction on an output partition may take to end before verify reports it\n"+
		"hanging (default 10s; with --sentinels, how long to wait for the sentinels, default 30s)")
	noSentinel := fs.Bool("no-sentinel", false, "deprecated, no effect: sentinels are written only with --sentinels")
	return func(ctx context.Context, e *env, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("%w: verify takes no arguments (got %q); use the flags", errUsage, strings.Join(args, " "))
		}
		if *input == "" || *output == "" {
			return fmt.Errorf("%w: --input and --output are required", errUsage)
		}
		if *sentinels && *noSentinel {
			return fmt.Errorf("%w: --sentinels and --no-sentinel contradict each other", errUsage)
		}
		m := verify.Mode(*mode)
		if !slices.Contains(verify.Modes, m) {
			return fmt.Errorf("%w: --mode %q: use pass-through, count or dedupe", errUsage, *mode)
		}
		if *dedupeTTL < 0 || *settle < 0 {
			return fmt.Errorf("%w: --dedupe-ttl and --settle-timeout must not be negative", errUsage)
		}
		if *dedupeTTL != 0 && m != verify.Dedupe {
			return fmt.Errorf("%w: --dedupe-ttl applies to --mode dedupe only", errUsage)
		}
		fmt.Fprintf(e.stderr, "verify: reading %s and %s on %s (read_committed)…\n", *input, *output, *brokers)
		if *sentinels {
			fmt.Fprintf(e.stderr, "verify: writing a sentinel record to every partition of %s (--sentinels)\n", *output)
		}
		rep, err := verify.Run(ctx, verify.Config{
			Brokers: strings.Split(*brokers, ","), Input: *input, Output: *output, DeadLetter: *dead,
			Mode: m, Skipped: *skipped, DedupeTTL: *dedupeTTL,
			Sentinels: *sentinels, SettleTimeout: *settle, SentinelTimeout: *settle,
		})
		if err != nil {
			return fmt.Errorf("verify: %w", err)
		}
		fmt.Fprint(e.stdout, rep.String())
		if !rep.OK() {
			return errAnomalies
		}
		return nil
	}
}
