// Package e2e holds end-to-end tests that drive the onceflow binary the way
// an operator would: `onceflow broker` and `onceflow run` as separate
// processes, SIGKILLed at random, with the committed output checked record by
// record with franz-go and with kcat (librdkafka), an independent client.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/failpoint"
	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/verify"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds cmd/onceflow once per test run, with -tags onceflow_faults:
// the tests switch failpoints (ONCEFLOW_FAILPOINTS) and test breaks
// (ONCEFLOW_TEST_BREAK) on in the child processes, which a default build
// ignores. Without either variable the binary behaves as a default build.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "onceflow-e2e")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "onceflow")
		out, err := exec.Command("go", "build", "-tags", failpoint.BuildTag, "-o", binPath, "../../cmd/onceflow").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// logWriter forwards a child's stderr into the test log (only shown on
// failure or with -v), keeping the last lines for error messages.
type logWriter struct {
	t    *testing.T
	name string
	mu   sync.Mutex
	tail []string
	// lines counts every line written.
	lines int
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	sc := bufio.NewScanner(bytes.NewReader(p))
	for sc.Scan() {
		w.tail = append(w.tail, sc.Text())
		w.lines++
		if len(w.tail) > 40 {
			w.tail = w.tail[1:]
		}
	}
	return len(p), nil
}

// count is how many lines were written.
func (w *logWriter) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lines
}

// last is the log's last n lines, for the first line of a failure (a
// CI summary may fold the middle of a long message, the whole log).
func (w *logWriter) last(n int) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.tail[max(0, len(w.tail)-n):], "\n")
}

func (w *logWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.tail, "\n")
}

// startBroker runs `onceflow broker` as its own process on a free port and
// returns its address.
func startBroker(t *testing.T, dataDir string) string {
	t.Helper()
	addr := freeAddr(t)
	runBroker(t, addr, dataDir)
	return addr
}

// client returns a client of the broker at addr (the kit's, closed when
// the test ends).
func client(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return kafkatest.Cluster{Addr: addr}.Client(t, opts...)
}

func createTopic(t *testing.T, addr, topic string, partitions int32) {
	t.Helper()
	kafkatest.Cluster{Addr: addr}.CreateTopic(t, topic, partitions)
}

// produceInput writes n records: key k<i%keys>, value "seq-<i>".
func produceInput(t *testing.T, addr, topic string, n, keys int) {
	t.Helper()
	produceRange(t, addr, topic, 0, n, keys)
}

// produceRange writes records from..from+n-1: key k<i%keys>, value "seq-<i>".
func produceRange(t *testing.T, addr, topic string, from, n, keys int) {
	t.Helper()
	produce(t, addr, topic, n, func(i int) (key, value []byte) {
		i += from
		return []byte("k" + strconv.Itoa(i%keys)), []byte("seq-" + strconv.Itoa(i))
	})
}

// produce writes n records to topic, record i made by rec, and waits
// until every one is acknowledged.
func produce(t *testing.T, addr, topic string, n int, rec func(i int) (key, value []byte)) {
	t.Helper()
	cl := client(t, addr, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i := 0; i < n; i++ {
		k, v := rec(i)
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Key: k, Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
}

// readCommitted reads a topic to its last stable offset with read_committed
// (the verifier's reader).
func readCommitted(t *testing.T, addr, topic string) []kafkatest.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rs, err := verify.ReadTopic(ctx, []string{addr}, topic, true)
	if err != nil {
		t.Fatalf("reading %s: %v", topic, err)
	}
	out := make([]kafkatest.Record, len(rs))
	for i, r := range rs {
		out[i] = kafkatest.Record{Key: r.Key, Value: r.Value, Partition: r.Partition, Offset: r.Offset}
	}
	return out
}

// kcatRead reads the topic with kcat (librdkafka), read_committed.
func kcatRead(t *testing.T, addr, topic string) []kafkatest.Record {
	t.Helper()
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat not installed (./scripts/test installs it): skipping the cross-client check")
	}
	cmd := exec.Command("kcat", "-C", "-b", addr, "-t", topic, "-e", "-q",
		"-X", "isolation.level=read_committed", "-f", "%k\t%s\t%p\t%o\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat: %v\n%s", err, stderr.String())
	}
	var recs []kafkatest.Record
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			t.Fatalf("kcat line %q", line)
		}
		p, _ := strconv.Atoi(f[2])
		o, _ := strconv.ParseInt(f[3], 10, 64)
		recs = append(recs, kafkatest.Record{Key: f[0], Value: f[1], Partition: int32(p), Offset: o})
	}
	return recs
}

// backendLine is the state.backend line of the jobs the tests write: the
// job-file default unless the run asks for a backend (scripts/test runs
// these tests once per backend).
func backendLine() string {
	if b := os.Getenv("ONCEFLOW_TEST_STATE_BACKEND"); b != "" {
		return "  backend: " + b + "\n"
	}
	return ""
}

func writeJob(t *testing.T, dir, name, addr, pipeline string) string {
	t.Helper()
	return writeJobFile(t, dir, name, addr, pipeline, fmt.Sprintf(`sink:
  topic: out-%s
  delivery: exactly-once
checkpointing:
  interval: 100ms
  mode: exactly-once
  timeout: 1m
state:
  dir: %s
%srestart:
  strategy: none
`, name, filepath.Join(dir, "state"), backendLine()))
}

// writeJobFile writes dir/name.yaml: job name reading topic in from the
// earliest offset on the broker at addr in group name, then pipeline (a
// section, or empty), then rest (the other sections).
func writeJobFile(t *testing.T, dir, name, addr, pipeline, rest string) string {
	t.Helper()
	return writeJobFileOn(t, dir, name, addr, "in", pipeline, rest)
}

// writeJobFileOn is writeJobFile reading topic input.
func writeJobFileOn(t *testing.T, dir, name, addr, input, pipeline, rest string) string {
	t.Helper()
	job := fmt.Sprintf(`job: %s
kafka:
  brokers: [%s]
source:
  topics: [%s]
  group: %s
  startup: earliest
%s
%s`, name, addr, input, name, pipeline, rest)
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, []byte(job), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

type jobRunner struct {
	t    *testing.T
	bin  string
	file string
	log  *logWriter
	// inputs are the topics the job reads (crashAndFinish waits until its
	// group committed their ends); default "in".
	inputs []string
}

func (r *jobRunner) start() (*exec.Cmd, chan error) {
	cmd := exec.Command(r.bin, "run", r.file)
	cmd.Stderr = r.log
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return cmd, done
}

// crashAndFinish SIGKILLs the job kills times at seeded random moments, then
// runs it until the output has want records and stops it with SIGTERM.
func (r *jobRunner) crashAndFinish(rng *rand.Rand, kills int, addr, group string) {
	t := r.t
	r.killAtRandom(rng, kills, 150, 500)
	from := r.log.count()
	cmd, done := r.start()
	deadline := time.Now().Add(3 * time.Minute)
	adm := kadm.NewClient(client(t, addr))
	for {
		select {
		case err := <-done:
			t.Fatalf("final run exited: %v; its last lines:\n%s\nthe log:\n%s", err, r.log.last(4), r.log)
		case <-time.After(200 * time.Millisecond):
		}
		// Committed offsets of the job's group reach the input's end when
		// everything is processed.
		inputs, caught := r.inputs, true
		if len(inputs) == 0 {
			inputs = []string{"in"}
		}
		for _, in := range inputs {
			caught = caught && kafkatest.CaughtUp(t.Context(), adm, group, in)
		}
		if caught {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job did not finish its input within 3 minutes\n%s", r.log)
		}
	}
	// The group may have caught up before this run: SIGTERM only once it
	// has logged a line, so its handler is installed (a signal during
	// the Go runtime's start kills it: "signal: terminated").
	for r.log.count() == from && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("graceful stop: %v; its last lines:\n%s\nthe log:\n%s", err, r.log.last(4), r.log)
		}
	case <-time.After(time.Minute):
		t.Fatalf("the job did not stop within a minute of SIGTERM\n%s", r.log)
	}
}

// killAtRandom starts the job kills times and SIGKILLs each run after
// from to from+spread ms (seeded), failing if a run ends on its own.
func (r *jobRunner) killAtRandom(rng *rand.Rand, kills, from, spread int) {
	for i := 0; i < kills; i++ {
		cmd, done := r.start()
		select {
		case err := <-done:
			r.t.Fatalf("job exited on its own before kill %d: %v\n%s", i+1, err, r.log)
		case <-time.After(time.Duration(from+rng.IntN(spread)) * time.Millisecond):
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
		}
	}
}

// runToEnd runs the job until it ends on its own, as a job with a
// bounded source does once it read to the end offsets it started with.
func (r *jobRunner) runToEnd() {
	_, done := r.start()
	select {
	case err := <-done:
		if err != nil {
			r.t.Fatalf("bounded final run: %v\n%s", err, r.log)
		}
	case <-time.After(3 * time.Minute):
		r.t.Fatalf("the bounded final run did not end within 3 minutes\n%s", r.log)
	}
}

func seed(t *testing.T) *rand.Rand {
	r, _ := seedValue(t)
	return r
}

// seedValue returns a seeded generator and its seed, printed so a failure
// replays with ONCEFLOW_SEED.
func seedValue(t *testing.T) (*rand.Rand, uint64) {
	s := uint64(time.Now().UnixNano())
	if v := os.Getenv("ONCEFLOW_SEED"); v != "" {
		s, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d (replay with ONCEFLOW_SEED=%d)", s, s)
	return rand.New(rand.NewPCG(s, 0)), s
}

// e2eSize is the input and the SIGKILLs of each job of the end-to-end
// crash tests: 100k records and 8 kills in the default run, what CI runs
// (200k and 20 before CI had to fit in 15 minutes: the package took 9
// minutes under -race), 1M records and 100 kills with ONCEFLOW_LONG=1.
// Every record is still counted after the final run.
func e2eSize() (records, kills int) {
	if os.Getenv("ONCEFLOW_LONG") != "" {
		return 1_000_000, 100
	}
	return 100_000, 8
}

// TestCrashKafkaToKafka: `onceflow run` SIGKILLed at random moments against
// `onceflow broker` in another process. The read_committed output of the
// pass-through job holds every input exactly once; the count job's counts
// per key are exactly 1..n. franz-go and kcat must both see exactly that.
func TestCrashKafkaToKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end crash test skipped in -short mode")
	}
	records, kills := e2eSize()
	const keys = 500
	rng := seed(t)
	dir := t.TempDir()
	addr := startBroker(t, filepath.Join(dir, "broker"))
	createTopic(t, addr, "in", 4)
	createTopic(t, addr, "out-pass", 4)
	createTopic(t, addr, "out-count", 4)
	createTopic(t, addr, "out-aggregate", 4)
	produceInput(t, addr, "in", records, keys)
	t.Logf("produced %d records; %d kills per job", records, kills)

	for _, tc := range []struct{ name, pipeline string }{
		{"pass", ""},
		{"count", "pipeline:\n  - count: { key: record.key }"},
		// The expression operators: the value "seq-N" becomes JSON, the
		// aggregate keys by a field of it (an expression, not the record
		// key), and its count is written as plain text.
		{"aggregate", "pipeline:\n" +
			"  - map: { value: '{\"seq\": int(raw[4:]), \"user\": key}' }\n" +
			"  - filter: { if: 'value.seq >= 0' }\n" +
			"  - aggregate: { key: value.user, fields: { n: \"count()\", total: \"sum(value.seq)\" } }\n" +
			"  - map: { value: 'string(value.n)', format: raw }"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lw := &logWriter{t: t, name: tc.name}
			r := &jobRunner{t: t, bin: binary(t), file: writeJob(t, dir, tc.name, addr, tc.pipeline), log: lw}
			start := time.Now()
			r.crashAndFinish(rng, kills, addr, tc.name)
			t.Logf("%s: %d kills and the final run took %v", tc.name, kills, time.Since(start).Round(time.Millisecond))
			out := readCommitted(t, addr, "out-"+tc.name)
			check := func(client string, out []kafkatest.Record) {
				t.Helper()
				ok := false
				if tc.name == "pass" {
					values := make([]string, len(out))
					for i, r := range out {
						values[i] = r.Value
					}
					ok = kafkatest.CheckExactlyOnce(t, client, values, kafkatest.SeqValues("seq-", records))
				} else {
					ok = kafkatest.CheckCounts(t, client, out, keys, records/keys)
				}
				if !ok {
					t.FailNow()
				}
			}
			check("franz-go", out)
			check("kcat", kcatRead(t, addr, "out-"+tc.name))
		})
	}
}
