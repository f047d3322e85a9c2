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

	"github.com/onceflow/onceflow/internal/verify"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds cmd/onceflow once per test run.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "onceflow-e2e")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "onceflow")
		out, err := exec.Command("go", "build", "-o", binPath, "../../cmd/onceflow").CombinedOutput()
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
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	sc := bufio.NewScanner(bytes.NewReader(p))
	for sc.Scan() {
		w.tail = append(w.tail, sc.Text())
		if len(w.tail) > 40 {
			w.tail = w.tail[1:]
		}
	}
	return len(p), nil
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

func client(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t *testing.T, addr, topic string, partitions int32) {
	t.Helper()
	adm := kadm.NewClient(client(t, addr))
	resp, err := adm.CreateTopics(context.Background(), partitions, 1, nil, topic)
	if err != nil {
		t.Fatal(err)
	}
	if err := resp.Error(); err != nil && !strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") {
		t.Fatal(err)
	}
}

// produceInput writes n records: key k<i%keys>, value "seq-<i>".
func produceInput(t *testing.T, addr, topic string, n, keys int) {
	t.Helper()
	produceRange(t, addr, topic, 0, n, keys)
}

// produceRange writes records from..from+n-1: key k<i%keys>, value "seq-<i>".
func produceRange(t *testing.T, addr, topic string, from, n, keys int) {
	t.Helper()
	cl := client(t, addr, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i := from; i < from+n; i++ {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Key: []byte("k" + strconv.Itoa(i%keys)), Value: []byte("seq-" + strconv.Itoa(i))}, func(_ *kgo.Record, err error) {
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

type outRec struct {
	key, value string
	partition  int32
	offset     int64
}

// readCommitted reads a topic to its last stable offset with read_committed.
func readCommitted(t *testing.T, addr, topic string) []outRec {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rs, err := verify.ReadTopic(ctx, []string{addr}, topic, true)
	if err != nil {
		t.Fatalf("reading %s: %v", topic, err)
	}
	out := make([]outRec, len(rs))
	for i, r := range rs {
		out[i] = outRec{key: r.Key, value: r.Value, partition: r.Partition, offset: r.Offset}
	}
	return out
}

// kcatRead reads the topic with kcat (librdkafka), read_committed.
func kcatRead(t *testing.T, addr, topic string) []outRec {
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
	var recs []outRec
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
		recs = append(recs, outRec{key: f[0], value: f[1], partition: int32(p), offset: o})
	}
	return recs
}

func writeJob(t *testing.T, dir, name, addr, pipeline string) string {
	t.Helper()
	job := fmt.Sprintf(`job: %s
kafka:
  brokers: [%s]
source:
  topics: [in]
  group: %s
  startup: earliest
%s
sink:
  topic: out-%s
  delivery: exactly-once
checkpointing:
  interval: 100ms
  mode: exactly-once
  timeout: 1m
state:
  dir: %s
restart:
  strategy: none
`, name, addr, name, pipeline, name, filepath.Join(dir, "state"))
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
	for i := 0; i < kills; i++ {
		cmd, done := r.start()
		select {
		case err := <-done:
			t.Fatalf("job exited on its own before kill %d: %v\n%s", i+1, err, r.log)
		case <-time.After(time.Duration(150+rng.IntN(500)) * time.Millisecond):
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
		}
	}
	cmd, done := r.start()
	deadline := time.Now().Add(3 * time.Minute)
	adm := kadm.NewClient(client(t, addr))
	for {
		select {
		case err := <-done:
			t.Fatalf("final run exited: %v\n%s", err, r.log)
		case <-time.After(200 * time.Millisecond):
		}
		// Committed offsets of the job's group reach the input's end when
		// everything is processed.
		if caughtUp(t, adm, group, "in") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job did not finish its input within 3 minutes\n%s", r.log)
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("graceful stop: %v\n%s", err, r.log)
		}
	case <-time.After(time.Minute):
		t.Fatalf("the job did not stop within a minute of SIGTERM\n%s", r.log)
	}
}

// caughtUp reports whether the group's committed offsets (committed inside
// the job's transactions) reached the end of the input topic.
func caughtUp(t *testing.T, adm *kadm.Client, group, input string, addr ...string) bool {
	ctx := context.Background()
	if adm == nil {
		adm = kadm.NewClient(client(t, addr[0]))
	}
	ends, err := adm.ListEndOffsets(ctx, input)
	if err != nil {
		return false
	}
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return false
	}
	done := true
	ends.Each(func(e kadm.ListedOffset) {
		o, ok := offs.Lookup(input, e.Partition)
		if !ok || o.At < e.Offset {
			done = false
		}
	})
	return done
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

func e2eSize() (records, kills int) {
	if os.Getenv("ONCEFLOW_LONG") != "" {
		return 1_000_000, 100
	}
	return 200_000, 20
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
	produceInput(t, addr, "in", records, keys)
	t.Logf("produced %d records; %d kills per job", records, kills)

	for _, tc := range []struct{ name, pipeline string }{
		{"pass", ""},
		{"count", "pipeline:\n  - count: { key: record.key }"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lw := &logWriter{t: t, name: tc.name}
			r := &jobRunner{t: t, bin: binary(t), file: writeJob(t, dir, tc.name, addr, tc.pipeline), log: lw}
			start := time.Now()
			r.crashAndFinish(rng, kills, addr, tc.name)
			t.Logf("%s: %d kills and the final run took %v", tc.name, kills, time.Since(start).Round(time.Millisecond))
			out := readCommitted(t, addr, "out-"+tc.name)
			check := func(client string, out []outRec) {
				t.Helper()
				if tc.name == "pass" {
					checkPassThrough(t, client, out, records)
				} else {
					checkCounts(t, client, out, records, keys)
				}
			}
			check("franz-go", out)
			check("kcat", kcatRead(t, addr, "out-"+tc.name))
		})
	}
}

func checkPassThrough(t *testing.T, client string, out []outRec, records int) {
	t.Helper()
	seen := make([]int, records)
	for _, r := range out {
		n, err := strconv.Atoi(strings.TrimPrefix(r.value, "seq-"))
		if err != nil || n < 0 || n >= records {
			t.Fatalf("%s: unexpected output value %q", client, r.value)
		}
		seen[n]++
	}
	lost, dup := 0, 0
	for i, c := range seen {
		switch {
		case c == 0:
			lost++
			if lost <= 3 {
				t.Errorf("%s: seq-%d lost", client, i)
			}
		case c > 1:
			dup++
			if dup <= 3 {
				t.Errorf("%s: seq-%d appears %d times", client, i, c)
			}
		}
	}
	if lost > 0 || dup > 0 {
		t.Fatalf("%s: %d records lost, %d duplicated (of %d)", client, lost, dup, records)
	}
}

// checkCounts: each key's output values, in offset order, are 1..n.
func checkCounts(t *testing.T, client string, out []outRec, records, keys int) {
	t.Helper()
	byKey := map[string][]outRec{}
	for _, r := range out {
		byKey[r.key] = append(byKey[r.key], r)
	}
	if len(byKey) != keys {
		t.Fatalf("%s: counts for %d keys, want %d", client, len(byKey), keys)
	}
	for k, rs := range byKey {
		want := records / keys
		if len(rs) != want {
			t.Fatalf("%s: key %s has %d counts, want %d", client, k, len(rs), want)
		}
		for i, r := range rs {
			if i > 0 && (r.partition != rs[i-1].partition || r.offset < rs[i-1].offset) {
				t.Fatalf("%s: key %s spread over partitions or out of order", client, k)
			}
			if r.value != strconv.Itoa(i+1) {
				t.Fatalf("%s: key %s count #%d is %q, want %d (a gap or a repeat)", client, k, i+1, r.value, i+1)
			}
		}
	}
}
