// Package cli is the onceflow command line: one subcommand per task (run a
// job file, run an embedded broker, a self-contained demo). cmd/onceflow only
// turns signals into a context and calls Main, so everything here can be
// tested in-process.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"strings"

	"github.com/onceflow/onceflow/internal/suggest"
	goredis "github.com/redis/go-redis/v9"
)

// Version is the onceflow version printed by `onceflow version`. Release
// builds set it with -ldflags "-X github.com/onceflow/onceflow/internal/cli.Version=v1.2.3";
// default "dev" (the module version from the build info is used when known).
var Version = "dev"

// errUsage marks errors caused by how the command was called; Main prints
// the subcommand's usage after them and exits with code 2, as flag does.
var errUsage = errors.New("usage error")

// env is what a subcommand gets: its output streams and the logger built
// from its flags.
type env struct {
	stdout, stderr io.Writer
	log            *slog.Logger
}

type command struct {
	name    string
	args    string // synopsis of the positional arguments
	summary string
	// flags registers the subcommand's own flags; the common ones
	// (--log-level) are added by Main.
	flags func(fs *flag.FlagSet) func(ctx context.Context, e *env, args []string) error
}

// commands lists the subcommands in the order help shows them.
func commands() []command {
	return []command{
		{name: "run", args: "FILE.yaml | FILE.sql", summary: "run the job described in a job file or a Flink SQL script", flags: runFlags},
		{name: "validate", args: "FILE.yaml | FILE.sql", summary: "check a job file or SQL script and print the job it describes", flags: validateFlags},
		{name: "sql", summary: "try Flink SQL against topics: CREATE TABLE and views, then SELECT prints its rows as they change", flags: sqlFlags},
		{name: "broker", summary: "run an embedded Kafka-compatible broker for development", flags: brokerFlags},
		{name: "demo", summary: "show exactly-once deduplication end to end with an embedded broker", flags: demoFlags},
		{name: "status", args: "[JOB.yaml]", summary: "show a running job's state, records, lag and per-task load (its --http API); with a scale-out job file, which instance holds which partitions", flags: statusFlags},
		{name: "checkpoints", summary: "list a running job's recent checkpoints (its --http API)", flags: checkpointsFlags},
		{name: "savepoint", summary: "take a savepoint of a running job and print where it is (its --http API)", flags: savepointFlags},
		{name: "stop", summary: "stop a running job with a final savepoint and print where it is (its --http API)", flags: stopFlags},
		{name: "lag", summary: "per-partition lag of a consumer group, with a verdict over a window (works while the job is down)", flags: lagFlags},
		{name: "topic", args: "create [TOPIC...] | add-partitions --partitions N [TOPIC...]", summary: "create topics (with --job FILE: the job's input, output and dead-letter topics), or grow topics to N partitions (with --job FILE: its input topics)", flags: topicFlags},
		{name: "offsets", args: "reset", summary: "move a stopped job to earliest, latest or a timestamp, with its state, so they cannot disagree", flags: offsetsFlags},
		{name: "txn", args: "list | abort ID", summary: "find transactions open too long (they block read_committed readers) and abort one", flags: txnFlags},
		{name: "nexmark", args: "generate | run", summary: "fill a topic with Nexmark benchmark events (JSON, the same for a seed), or measure the Nexmark queries over them", flags: nexmarkFlags},
		{name: "verify", summary: "check that a job's committed output holds every input exactly once", flags: verifyFlags},
		{name: "version", summary: "print the onceflow version", flags: versionFlags},
		{name: "help", args: "[COMMAND]", summary: "show help for onceflow or one command", flags: nil},
	}
}

// Main runs the onceflow command line with args (without the program name)
// and returns the process exit code: 0 on success, 1 when the command
// failed, 2 when it was called wrongly. Cancelling ctx (SIGINT/SIGTERM in
// main) asks long-running commands to stop gracefully.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printHelp(stderr)
		return 2
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		return helpCommand(rest, stdout, stderr)
	case "-version", "--version":
		name = "version"
	}
	cmd, ok := lookup(name)
	if !ok {
		fmt.Fprintf(stderr, "onceflow: unknown command %q%s\nRun 'onceflow help' for the list of commands.\n", name, suggest.Suggest(name, commandNames()))
		return 2
	}
	fs, level, run := cmd.flagSet(stderr)
	fs.Usage = func() { printCommandUsage(fs.Output(), cmd, fs) }
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		// flag already printed the error and the usage.
		return 2
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintf(stderr, "onceflow %s: --log-level %q is not a level: use debug, info, warn or error\n", cmd.name, *level)
		return 2
	}
	e := &env{
		stdout: stdout,
		stderr: stderr,
		log:    slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl})),
	}
	// go-redis prints its connection retries itself; they are details
	// the sink's own errors sum up.
	goredis.SetLogger(redisLog{e.log})
	if err := run(ctx, e, fs.Args()); err != nil {
		fmt.Fprintf(stderr, "onceflow %s: %v\n", cmd.name, err)
		if errors.Is(err, errUsage) {
			fs.Usage()
			return 2
		}
		return 1
	}
	return 0
}

// flagSet makes the flag set of the command as Main parses it: the common
// flags (--log-level, whose value it returns) and the command's own, with
// the function that runs the command once they are parsed.
func (c command) flagSet(out io.Writer) (*flag.FlagSet, *string, func(context.Context, *env, []string) error) {
	fs := flag.NewFlagSet("onceflow "+c.name, flag.ContinueOnError)
	fs.SetOutput(out)
	level := fs.String("log-level", "info", "log level: debug, info, warn or error")
	return fs, level, c.flags(fs)
}

func lookup(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name && c.flags != nil {
			return c, true
		}
	}
	return command{}, false
}

func commandNames() []string {
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	return names
}

func helpCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printHelp(stdout)
		return 0
	}
	cmd, ok := lookup(args[0])
	if !ok {
		if args[0] == "help" {
			printHelp(stdout)
			return 0
		}
		fmt.Fprintf(stderr, "onceflow help: unknown command %q%s\n", args[0], suggest.Suggest(args[0], commandNames()))
		return 2
	}
	fs, _, _ := cmd.flagSet(stdout)
	printCommandUsage(stdout, cmd, fs)
	return 0
}

func printHelp(w io.Writer) {
	fmt.Fprint(w, "onceflow is an exactly-once stream processor for Apache Kafka.\n\nUsage:\n\n\tonceflow COMMAND [flags] [arguments]\n\nCommands:\n\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "\t%-9s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, "\nRun 'onceflow help COMMAND' for a command's flags.\n")
}

func printCommandUsage(w io.Writer, cmd command, fs *flag.FlagSet) {
	synopsis := "onceflow " + cmd.name + " [flags]"
	if cmd.args != "" {
		synopsis += " " + cmd.args
	}
	fmt.Fprintf(w, "Usage: %s\n\n%s.\n\nFlags:\n", synopsis, capitalize(cmd.summary))
	fs.SetOutput(w)
	fs.PrintDefaults()
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func versionFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	return func(_ context.Context, e *env, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("%w: version takes no arguments (got %q)", errUsage, strings.Join(args, " "))
		}
		fmt.Fprintln(e.stdout, "onceflow "+versionString())
		return nil
	}
}

// versionString is Version, completed from the build info: `go install
// ...@v1.2.3` records the module version, a build from a checkout records the
// VCS revision.
func versionString() string {
	v := Version
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if settings["vcs.modified"] == "true" {
			rev += "-dirty"
		}
		v += " (" + rev + ")"
	}
	return v + " " + bi.GoVersion
}

// redisLog sends go-redis' messages to the log at debug level.
type redisLog struct{ log *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "redis client: "+fmt.Sprintf(format, v...))
}
