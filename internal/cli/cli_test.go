package cli

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/jobfile/jobfiletest"
)

// syncBuffer is an output stream tests can read while a command writes
// it, and wait on for a pattern.
type syncBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{changed: make(chan struct{}, 1)} }

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	select {
	case b.changed <- struct{}{}:
	default:
	}
	return n, err
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor blocks until the output matches re and returns the submatches.
func (b *syncBuffer) waitFor(t testing.TB, re *regexp.Regexp, done <-chan struct{}) []string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		if m := re.FindStringSubmatch(b.String()); m != nil {
			return m
		}
		select {
		case <-b.changed:
		case <-done:
			if m := re.FindStringSubmatch(b.String()); m != nil {
				return m
			}
			t.Fatalf("command ended before printing %v; output:\n%s", re, b.String())
		case <-timeout:
			t.Fatalf("no %v after 30s; output:\n%s", re, b.String())
		}
	}
}

func runMain(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = Main(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestMainCommands(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "orders.yaml")
	if err := os.WriteFile(good, []byte(jobfiletest.Orders), 0o600); err != nil {
		t.Fatal(err)
	}
	poison := filepath.Join(dir, "poison.yaml")
	poisonYAML := strings.Replace(jobfiletest.Orders, "pipeline:\n", "errors: {policy: dead-letter, dead-letter-topic: orders-dlq}\npipeline:\n  - extract-key: {json-field: user}\n", 1)
	if err := os.WriteFile(poison, []byte(poisonYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	// A scale-out job into PostgreSQL: each task of the last
	// sub-topology commits its own progress row (docs/design.md,
	// "Scale-out").
	soDB := filepath.Join(dir, "so-db.yaml")
	if err := os.WriteFile(soDB, []byte("job: so\nkafka: {brokers: ['localhost:9092']}\nsource: {topics: [in]}\npipeline:\n  - aggregate: { key: value.user, fields: { n: 'count()' } }\nsink:\n  postgres: {dsn: 'postgres://u@db/orders', table: counts, columns: {u: value.key, n: value.n}, key: [u]}\ncheckpointing: {interval: 1s}\nstate: {checkpoints: /shared}\nscale-out: {enabled: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(strings.Replace(jobfiletest.Orders, "interval:", "intervall:", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string // substring; "" means empty
		stderr string // substring; "" means empty
	}{
		{args: nil, code: 2, stderr: "Usage:\n\n\tonceflow COMMAND"},
		{args: []string{"help"}, code: 0, stdout: "\tbroker    run an embedded Kafka-compatible broker"},
		{args: []string{"--help"}, code: 0, stdout: "Commands:"},
		{args: []string{"help", "broker"}, code: 0, stdout: "Usage: onceflow broker [flags]"},
		{args: []string{"help", "brokr"}, code: 2, stderr: `onceflow help: unknown command "brokr" (did you mean "broker"?)`},
		{args: []string{"version"}, code: 0, stdout: "onceflow dev"},
		{args: []string{"version", "extra"}, code: 2, stderr: `onceflow version: usage error: version takes no arguments (got "extra")`},
		{args: []string{"rn"}, code: 2, stderr: `onceflow: unknown command "rn" (did you mean "run"?)`},
		{args: []string{"broker", "--nope"}, code: 2, stderr: "flag provided but not defined: -nope"},
		{args: []string{"broker", "--log-level", "loud"}, code: 2, stderr: `--log-level "loud" is not a level`},
		{args: []string{"broker", "--partitions", "0"}, code: 2, stderr: "--partitions 0 is below 1"},
		{args: []string{"validate"}, code: 2, stderr: "validate needs the job file"},
		{args: []string{"validate", good}, code: 0, stdout: `job "orders-count" is valid`},
		{args: []string{"validate", poison}, code: 0, stdout: "  pipeline:   extract-key from JSON field \"user\" of the value (uid extract-key:user)\n" +
			"              dedupe by record.key, ttl 24h (uid dedupe:record.key)\n" +
			"              count by record.key (uid count:record.key)\n" +
			"  unbounded:  count:record.key keeps state for every key for as long as the job runs (no ttl)\n" +
			"  sink:       order-counts, delivery exactly-once, holds at most 64MiB while a checkpoint commits, transaction timeout 15m\n" +
			"  errors:     dead-letter to orders-dlq\n"},
		{args: []string{"validate", good}, code: 0, stdout: "  state:      " + filepath.Join(dir, "onceflow-data") + ", checkpoints in " + filepath.Join(dir, "onceflow-data", "orders-count") + ", max parallelism 128 (default)\n"},
		{args: []string{"help", "run"}, code: 0, stdout: "  -allow-non-restored-state\n"},
		{args: []string{"run", "--start-fresh", "--resume-latest-checkpoint", good}, code: 2, stderr: "onceflow run: usage error: --start-fresh and --resume-latest-checkpoint exclude each other: choose one\n"},
		{args: []string{"validate", good}, code: 0, stdout: "  errors:     fail (default)\n"},
		{args: []string{"validate", bad}, code: 1, stderr: `bad.yaml:15: unknown field "intervall" in checkpointing (did you mean "interval"?)`},
		{args: []string{"validate", filepath.Join(dir, "missing.yaml")}, code: 1, stderr: "read job file: open "},
		{args: []string{"validate", soDB}, code: 0, stdout: "              tasks of so-repartition-1: aggregate -> the postgres sink, each task's transaction its commit point (its progress row: job so-TOPIC-PARTITION)\n"},
		{args: []string{"run", "a.yaml", "b.yaml"}, code: 2, stderr: "run takes one job file, got 2 arguments"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := runMain(tc.args...)
			if code != tc.code {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
			}
			check := func(name, got, want string) {
				if want == "" && got != "" {
					t.Errorf("%s is not empty:\n%s", name, got)
				}
				if !strings.Contains(got, want) {
					t.Errorf("%s does not contain %q:\n%s", name, want, got)
				}
			}
			check("stdout", stdout, tc.stdout)
			check("stderr", stderr, tc.stderr)
		})
	}
}

func TestBrokerCommand(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := newSyncBuffer()
	done := make(chan struct{})
	var code int
	go func() {
		defer close(done)
		code = Main(ctx, []string{"broker", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--partitions", "3"}, &bytes.Buffer{}, stderr)
	}()
	m := stderr.waitFor(t, regexp.MustCompile(`(?m)^broker listening on (127\.0\.0\.1:\d+)$`), done)
	conn, err := net.Dial("tcp", m[1])
	if err != nil {
		t.Fatalf("the printed address does not accept connections: %v", err)
	}
	conn.Close()
	cancel()
	<-done
	if code != 0 {
		t.Errorf("exit code %d after cancel, want 0; stderr:\n%s", code, stderr.String())
	}
}

func TestBrokerCommandAddressInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	code, _, stderr := runMain("broker", "--addr", ln.Addr().String())
	if code != 1 || !strings.Contains(stderr, "onceflow broker: start broker: ") {
		t.Errorf("exit code %d, stderr:\n%s", code, stderr)
	}
}
