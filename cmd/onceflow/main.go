// Command onceflow runs exactly-once stream processing jobs on Apache Kafka.
// Run `onceflow help` for the commands; the logic lives in internal/cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/onceflow/onceflow/internal/cli"
)

func main() {
	// The first SIGINT/SIGTERM cancels ctx, which stops the command
	// gracefully (a job takes its final checkpoint). Then the default
	// signal behaviour is restored, so a second Ctrl-C kills the process at
	// once for a user who does not want to wait.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
