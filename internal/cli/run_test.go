package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/broker"
)

// startBroker starts an in-memory broker with the given topics.
func startBroker(t testing.TB, topics map[string]int32) string {
	t.Helper()
	b, err := broker.Start(broker.Config{Addr: "127.0.0.1:0", Topics: topics})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b.Addr()
}

func produce(t testing.TB, addr, topic string, kv ...string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := 0; i+1 < len(kv); i += 2 {
		recs = append(recs, &kgo.Record{Key: []byte(kv[i]), Value: []byte(kv[i+1])})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// consumeAll reads topic read_committed until it holds want records.
func consumeAll(t testing.TB, addr, topic string, want int) map[string][]string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
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
	addr := startBroker(t, map[string]int32{"orders": 2, "order-counts": 2})
	produce(t, addr, "orders", "a", "1", "b", "1", "a", "1", "a", "2", "c", "1", "b", "1")
	dir := t.TempDir()
	job := strings.NewReplacer("127.0.0.1:9092", addr, "./onceflow-data", filepath.Join(dir, "state"), "  startup: earliest\n", "  startup: earliest\n  bounded: true\n").Replace(ordersYAML)
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
	job := strings.Replace(ordersYAML, "127.0.0.1:9092", "127.0.0.1:1", 1)
	if err := os.WriteFile(file, []byte(job), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"run", "--connect-timeout", "500ms", file}, &stdout, &stderr)
	if code != 1 {
		t.Fatalf("exit code %d, want 1; stderr:\n%s", code, stderr.String())
	}
	if want := "onceflow run: cannot reach the Kafka brokers in kafka.brokers (127.0.0.1:1) within 500ms: "; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr does not contain %q:\n%s", want, stderr.String())
	}
}

func TestRunStopsGracefullyOnCancel(t *testing.T) {
	addr := startBroker(t, map[string]int32{"orders": 1, "order-counts": 1})
	dir := t.TempDir()
	job := strings.NewReplacer("127.0.0.1:9092", addr, "./onceflow-data", filepath.Join(dir, "state"), "interval: 1s", "interval: 100ms").Replace(ordersYAML)
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
	produce(t, addr, "orders", "x", "1", "x", "1", "y", "1")
	// Output is committed by a checkpoint while the job runs.
	got := consumeAll(t, addr, "order-counts", 2)
	if fmt.Sprint(got) != fmt.Sprint(map[string][]string{"x": {"1"}, "y": {"1"}}) {
		t.Errorf("output %v", got)
	}
	stderr.waitFor(t, regexp.MustCompile(`msg=status .*records_out=`), done)
	cancel()
	<-done
	if code != 0 {
		t.Fatalf("exit code %d after cancel; stderr:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "stopping: taking a final checkpoint") {
		t.Errorf("no final checkpoint on cancel:\n%s", stderr.String())
	}
}
