package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/onceflow/onceflow/internal/verify"
)

// errAnomalies makes verify exit 1 after printing its report.
var errAnomalies = errors.New("the output is not exactly once")

func verifyFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	brokers := fs.String("brokers", "127.0.0.1:9092", "comma-separated Kafka bootstrap brokers")
	input := fs.String("input", "", "input topic (its records need unique values)")
	output := fs.String("output", "", "committed output topic of the job")
	dead := fs.String("dead-letter", "", "dead-letter topic of the job, if any")
	mode := fs.String("mode", string(verify.PassThrough), "what the job does: pass-through or count")
	skipped := fs.Int64("skipped", 0, "records the job reports it skipped (errors.policy skip)")
	noSentinel := fs.Bool("no-sentinel", false, "do not write sentinel records to the output (skips the hanging-transaction check)")
	return func(ctx context.Context, e *env, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("%w: verify takes no arguments (got %q); use the flags", errUsage, strings.Join(args, " "))
		}
		if *input == "" || *output == "" {
			return fmt.Errorf("%w: --input and --output are required", errUsage)
		}
		fmt.Fprintf(e.stderr, "verify: reading %s and %s on %s (read_committed)…\n", *input, *output, *brokers)
		rep, err := verify.Run(ctx, verify.Config{
			Brokers: strings.Split(*brokers, ","), Input: *input, Output: *output, DeadLetter: *dead,
			Mode: verify.Mode(*mode), Skipped: *skipped, NoSentinel: *noSentinel,
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
