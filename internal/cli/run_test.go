package cli

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/jobfile"
	"github.com/onceflow/onceflow/internal/jobfile/jobfiletest"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// consumeAll reads topic read_committed until it holds want records: the
// output of a job that is still running.
func consumeAll(t testing.TB, addr, topic string, want int) map[string][]string {
	t.Helper()
	cl := kafkatest.Cluster{Addr: addr}.Client(t, kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	ctx := kafkatest.ContextTimeout(t, 20*time.Second)
	got := map[string][]string{}
	n := 0
	for n < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records from %s: %v", n, want, topic, got)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got[string(r.Key)] = append(got[string(r.Key)], string(r.Value))
			n++
		})
	}
	return got
}

func TestRunJobFile(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{Topics: map[string]int32{"orders": 2, "order-counts": 2}})
	addr := c.Addr
	c.Produce(t, "orders", "a", "1", "b", "1", "a", "1", "a", "2", "c", "1", "b", "1")
	dir := t.TempDir()
	job := strings.NewReplacer("127.0.0.1:9092", addr, "./onceflow-data", filepath.Join(dir, "state"), "  startup: earliest\n", "  startup: earliest\n  bounded: true\n").Replace(jobfiletest.Orders)
	file := filepath.Join(dir, "orders.yaml")
	if err := os.WriteFile(file, []byte(job), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"run", "--status-interval", "0", file}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, stderr.String())
	}
	// dedupe keeps a, b, c once; count then emits 1 for each.
	got := consumeAll(t, addr, "order-counts", 3)
	want := map[string][]string{"a": {"1"}, "b": {"1"}, "c": {"1"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("output %v, want %v", got, want)
	}
	if !strings.Contains(stderr.String(), "job stopped") {
		t.Errorf("no final log line:\n%s", stderr.String())
	}
}

func TestRunUnreachableBroker(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "orders.yaml")
	job := strings.Replace(jobfiletest.Orders, "127.0.0.1:9092", "127.0.0.1:1", 1)
	if err := os.WriteFile(file, []byte(job), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := Main(context.Background(), []string{"run", "--connect-timeout", "500ms", file}, &stdout, &stderr)
	if code != 1 {
		t.Fatalf("exit code %d, want 1; stderr:\n%s", code, stderr.String())
	}
	// The refused connection is tried again for the whole timeout (a
	// broker restarting refuses for a moment).
	if took := time.Since(start); took < 500*time.Millisecond {
		t.Errorf("gave up after %v, before the 500ms connect timeout", took)
	}
	if want := "onceflow run: cannot reach the Kafka brokers in kafka.brokers (127.0.0.1:1) within 500ms: "; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr does not contain %q:\n%s", want, stderr.String())
	}
}

// A missing output topic fails before the job starts, naming the setting.
func TestRunMissingSinkTopic(t *testing.T) {
	addr := kafkatest.Start(t, broker.Config{Topics: map[string]int32{"orders": 1}}).Addr
	dir := t.TempDir()
	job := strings.NewReplacer("127.0.0.1:9092", addr, "./onceflow-data", filepath.Join(dir, "state")).Replace(jobfiletest.Orders)
	file := filepath.Join(dir, "orders.yaml")
	if err := os.WriteFile(file, []byte(job), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"run", file}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), `sink.topic: topic "order-counts" does not exist; create it first`) {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
}

func TestRunStopsGracefullyOnCancel(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{Topics: map[string]int32{"orders": 1, "order-counts": 1}})
	addr := c.Addr
	dir := t.TempDir()
	job := strings.NewReplacer("127.0.0.1:9092", addr, "./onceflow-data", filepath.Join(dir, "state"), "interval: 1s", "interval: 100ms").Replace(jobfiletest.Orders)
	file := filepath.Join(dir, "orders.yaml")
	if err := os.WriteFile(file, []byte(job), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := newSyncBuffer()
	done := make(chan struct{})
	var code int
	go func() {
		defer close(done)
		code = Main(ctx, []string{"run", "--status-interval", "50ms", file}, &bytes.Buffer{}, stderr)
	}()
	stderr.waitFor(t, regexp.MustCompile(`msg="job started`), done)
	c.Produce(t, "orders", "x", "1", "x", "1", "y", "1")
	// Output is committed by a checkpoint while the job runs.
	got := consumeAll(t, addr, "order-counts", 2)
	if fmt.Sprint(got) != fmt.Sprint(map[string][]string{"x": {"1"}, "y": {"1"}}) {
		t.Errorf("output %v", got)
	}
	// Everything read (lag 0, known once the source fetched) and committed.
	stderr.waitFor(t, regexp.MustCompile(`msg=status process_records_in=3 process_records_written=2 job_records_committed=2 lag=0 last_checkpoint=[1-9]`), done)
	status := regexp.MustCompile(`^time=\S+ level=INFO msg=status process_records_in=\d+ process_records_written=\d+ job_records_committed=\d+ lag=(\d+|\?) last_checkpoint=\d+ last_checkpoint_duration=\S+ last_checkpoint_bytes=\d+ job_failed_checkpoints=0 job_restarts=0 process_skipped=0 process_dead_lettered=0$`)
	cancel()
	<-done
	if code != 0 {
		t.Fatalf("exit code %d after cancel; stderr:\n%s", code, stderr.String())
	}
	// One status line per tick, ours: the engine's own is off.
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, "msg=status") && !status.MatchString(line) {
			t.Errorf("status line in another format: %s", line)
		}
	}
	if !strings.Contains(stderr.String(), "stopping: taking a final checkpoint") {
		t.Errorf("no final checkpoint on cancel:\n%s", stderr.String())
	}
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// poisonJob is a bounded job reading users, keying by the JSON field user
// and counting per user; line 8 is where the tests put the errors section.
const poisonJob = `job: users
kafka:
  brokers: [ADDR]
source:
  topics: [users]
  bounded: true
sink: {topic: user-counts, delivery: DELIVERY}
ERRORS
pipeline:
  - extract-key: { json-field: user }
checkpointing: {interval: 100ms, mode: MODE}
state: {dir: "STATE"}
restart: {strategy: none}
`

func writePoisonJob(t testing.TB, addr, delivery, errorsSection string) string {
	t.Helper()
	dir := t.TempDir()
	mode := "exactly-once"
	if delivery != jobfile.DeliveryExactlyOnce {
		mode = "at-least-once"
	}
	job := strings.NewReplacer("ADDR", addr, "DELIVERY", delivery, "MODE", mode, "ERRORS", errorsSection, "STATE", filepath.Join(dir, "state")).Replace(poisonJob)
	file := filepath.Join(dir, "users.yaml")
	if err := os.WriteFile(file, []byte(job), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

func TestRunPoisonRecords(t *testing.T) {
	// 60 records, every fourth not JSON and every fifth without the field;
	// each value is unique, so the output and the dead letters account for
	// every input exactly once.
	var kv []string
	good, poison := map[string]string{}, map[string]bool{}
	for i := range 60 {
		var v string
		switch {
		case i%4 == 3:
			v = fmt.Sprintf("garbage %d", i)
			poison[v] = true
		case i%5 == 4:
			v = fmt.Sprintf(`{"id":%d}`, i)
			poison[v] = true
		default:
			user := fmt.Sprintf("user-%d", i%7)
			v = fmt.Sprintf(`{"user":%q,"n":%d}`, user, i)
			good[v] = user
		}
		kv = append(kv, fmt.Sprintf("k%d", i), v)
	}
	for _, tc := range []struct {
		policy, delivery string
	}{
		{"skip", jobfile.DeliveryExactlyOnce},
		{"dead-letter", jobfile.DeliveryExactlyOnce},
		{"dead-letter", jobfile.DeliveryAtLeastOnce},
	} {
		t.Run(tc.policy+"/"+tc.delivery, func(t *testing.T) {
			c := kafkatest.Start(t, broker.Config{Topics: map[string]int32{"users": 3, "user-counts": 2, "users-dlq": 2}})
			addr := c.Addr
			c.Produce(t, "users", kv...)
			section := "errors: {policy: skip}"
			if tc.policy == "dead-letter" {
				section = "errors: {policy: dead-letter, dead-letter-topic: users-dlq}"
			}
			file := writePoisonJob(t, addr, tc.delivery, section)
			code, _, stderr := runMain("run", "--status-interval", "0", file)
			if code != 0 {
				t.Fatalf("exit code %d; stderr:\n%s", code, stderr)
			}

			seen := map[string]int{}
			for _, r := range c.ReadCommittedRecords(t, "user-counts") {
				seen[string(r.Value)]++
				if user, ok := good[string(r.Value)]; !ok || string(r.Key) != user {
					t.Errorf("output record %s=%s: want only records with a user, keyed by it", r.Key, r.Value)
				}
			}
			dead := c.ReadCommittedRecords(t, "users-dlq")
			for _, r := range dead {
				seen[string(r.Value)]++
				if !poison[string(r.Value)] {
					t.Errorf("dead letter %s=%s is not a poison record", r.Key, r.Value)
				}
				pos := fmt.Sprintf("%s/%s@%s", header(r, kafka.HeaderTopic), header(r, kafka.HeaderPartition), header(r, kafka.HeaderOffset))
				if msg := header(r, kafka.HeaderError); !strings.Contains(msg, "record "+pos+": extract-key json-field \"user\": ") {
					t.Errorf("dead letter %s=%s: error header %q does not name its position %s", r.Key, r.Value, msg, pos)
				}
			}
			wantDead := 0
			if tc.policy == "dead-letter" {
				wantDead = len(poison)
			}
			if len(dead) != wantDead {
				t.Errorf("%d dead letters, want %d", len(dead), wantDead)
			}
			for v := range good {
				if seen[v] != 1 {
					t.Errorf("good record %s is in the output %d times, want 1", v, seen[v])
				}
			}
			for v := range poison {
				if want := map[bool]int{true: 1}[tc.policy == "dead-letter"]; seen[v] != want {
					t.Errorf("poison record %q is in the dead letters %d times, want %d", v, seen[v], want)
				}
			}
			skipped, deadLettered := len(poison), 0
			if tc.policy == "dead-letter" {
				skipped, deadLettered = 0, len(poison)
			}
			if want := fmt.Sprintf(" process_skipped=%d process_dead_lettered=%d\n", skipped, deadLettered); !strings.Contains(stderr, `msg="job stopped"`) || !strings.Contains(stderr, want) {
				t.Errorf("final log line does not report%q:\n%s", want, stderr)
			}
		})
	}
}

func TestRunPoisonRecordFails(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{Topics: map[string]int32{"users": 1, "user-counts": 1}})
	addr := c.Addr
	c.Produce(t, "users", "a", `{"user":"x"}`, "b", `{"user":"y"}`, "c", `{"user"`, "d", `{"user":"z"}`)
	for _, section := range []string{"", "errors: {policy: fail}"} {
		t.Run(section, func(t *testing.T) {
			file := writePoisonJob(t, addr, jobfile.DeliveryExactlyOnce, section)
			code, _, stderr := runMain("run", "--status-interval", "0", file)
			if code != 1 {
				t.Fatalf("exit code %d, want 1; stderr:\n%s", code, stderr)
			}
			want := `record users/0@2: extract-key json-field "user": no key in the record value: the value is not JSON (unexpected end of JSON input) (error policy fail; `
			if !strings.Contains(stderr, "onceflow run: ") || !strings.Contains(stderr, want) {
				t.Errorf("stderr does not report %q:\n%s", want, stderr)
			}
			if out := c.ReadCommittedRecords(t, "user-counts"); len(out) != 0 {
				t.Errorf("a failed bounded job committed %d records", len(out))
			}
		})
	}
}

func TestStatusAttrs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	s := flow.Stats{RecordsIn: 120, RecordsOut: 100, RecordsCommitted: 90, CheckpointsCompleted: 9, CheckpointsFailed: 1, LastCheckpoint: 10,
		LastCheckpointDuration: 23456 * time.Microsecond, Restarts: 2, RecordsSkipped: 3, RecordsDeadLettered: 4}
	log.Info("status", statusAttrs(s, 17, 4096)...)
	log.Info("status", statusAttrs(s, -1, 0)...)
	// Every count says its scope: this process's (replays count again) or
	// the job's life (carried by the checkpoints), so that a reader does not
	// compare the two.
	want := `level=INFO msg=status process_records_in=120 process_records_written=100 job_records_committed=90 lag=17 last_checkpoint=10 last_checkpoint_duration=23ms last_checkpoint_bytes=4096 job_failed_checkpoints=1 job_restarts=2 process_skipped=3 process_dead_lettered=4
level=INFO msg=status process_records_in=120 process_records_written=100 job_records_committed=90 lag=? last_checkpoint=10 last_checkpoint_duration=23ms last_checkpoint_bytes=0 job_failed_checkpoints=1 job_restarts=2 process_skipped=3 process_dead_lettered=4
`
	if buf.String() != want {
		t.Errorf("status lines\n%s\nwant\n%s", buf.String(), want)
	}
}

// SIGINT or SIGTERM while a job starts (here, while it waits for a broker
// that takes connections and never answers) is a graceful stop: exit 0,
// a line saying nothing ran. It was exit 1 with "context canceled" from
// whichever request the stop interrupted.
func TestRunStoppedWhileStarting(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() }) // held open, never answered
		}
	}()
	for _, tc := range []struct{ name, extra string }{
		{"one process", ""},
		{"scale-out instance", "scale-out:\n  enabled: true\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "orders.yaml")
			state := filepath.Join(dir, "state")
			if tc.extra != "" {
				state += "\n  checkpoints: " + filepath.Join(dir, "shared")
			}
			job := strings.NewReplacer("127.0.0.1:9092", ln.Addr().String(), "./onceflow-data", state).Replace(jobfiletest.Orders) + tc.extra
			if err := os.WriteFile(file, []byte(job), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(500*time.Millisecond, cancel)
			var stdout, stderr bytes.Buffer
			code := Main(ctx, []string{"run", "--status-interval", "0", file}, &stdout, &stderr)
			if code != 0 {
				t.Fatalf("exit code %d after a stop while starting, want 0; stderr:\n%s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), "stopped while the job was starting") {
				t.Errorf("the log does not say the job was stopped while starting:\n%s", stderr.String())
			}
		})
	}
}
