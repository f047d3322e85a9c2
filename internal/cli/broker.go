package cli

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/onceflow/onceflow/internal/broker"
)

func brokerFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	addr := fs.String("addr", broker.DefaultAddr, "host:port to listen on; port 0 picks a free port")
	dataDir := fs.String("data-dir", "", "directory that keeps topics, offsets and transactions across restarts (default: in memory, lost on exit)")
	partitions := fs.Int("partitions", broker.DefaultPartitions, "partition count of topics created on first use")
	session := fs.Duration("group-session-timeout", 45*time.Second, "how long a member of a consumer group (KIP-848 protocol: scale-out instances)\n"+
		"may stay silent before its partitions move")
	return func(ctx context.Context, e *env, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("%w: broker takes no arguments (got %q); use the flags", errUsage, strings.Join(args, " "))
		}
		if *partitions < 1 {
			return fmt.Errorf("%w: --partitions %d is below 1", errUsage, *partitions)
		}
		if *session < time.Second {
			return fmt.Errorf("%w: --group-session-timeout %v is below 1s", errUsage, *session)
		}
		b, err := broker.Start(broker.Config{Addr: *addr, DataDir: *dataDir, Partitions: *partitions, Logger: e.log, GroupSessionTimeout: *session})
		if err != nil {
			return fmt.Errorf("start broker: %w", err)
		}
		// Scripts wait for this exact line and read the address from it.
		fmt.Fprintf(e.stderr, "broker listening on %s\n", b.Addr())
		if *dataDir == "" {
			e.log.Info("broker keeps its data in memory: everything is lost on exit; pass --data-dir to keep it")
		}
		<-ctx.Done()
		e.log.Info("stopping broker")
		if err := b.Close(); err != nil {
			return fmt.Errorf("close broker: %w", err)
		}
		return nil
	}
}
