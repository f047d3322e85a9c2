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

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/jobfile"
	"github.com/onceflow/onceflow/internal/jobfile/jobfiletest"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// source.discovery-interval: absent is the connector's default (seconds),
// 0 turns partition discovery off (Flink: a non-positive interval), a
// duration sets it.
func TestJobFileDiscoveryInterval(t *testing.T) {
	base := "job: j\nkafka: {brokers: [127.0.0.1:1]}\nsink: {topic: out}\ncheckpointing: {interval: 1s}\n"
	for _, tc := range []struct {
		source string
		want   time.Duration
	}{
		{"source: {topics: [in]}\n", 0},
		{"source: {topics: [in], discovery-interval: 0}\n", -1},
		{"source: {topics: [in], discovery-interval: 2s}\n", 2 * time.Second},
	} {
		jf, err := jobfile.ParseJobFile("job.yaml", []byte(base+tc.source), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatalf("%s: %v", tc.source, err)
		}
		if got := jf.Source.DiscoveryInterval; got != tc.want {
			t.Errorf("%s: DiscoveryInterval %v, want %v", strings.TrimSpace(tc.source), got, tc.want)
		}
	}
	if kafka.DefaultDiscoveryInterval > 30*time.Second {
		t.Errorf("the default discovery interval is %v: a job would leave an added partition unread for that long", kafka.DefaultDiscoveryInterval)
	}
}

// The handbook's partition change through the binary: topic
// add-partitions on the input of a running job; with
// source.discovery-interval: 1s the job finds the new partition within
// seconds and every record written to it is counted exactly once.
func TestRunReadsAddedPartitions(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{Topics: map[string]int32{"orders": 1, "order-counts": 1}})
	dir := t.TempDir()
	job := strings.NewReplacer("127.0.0.1:9092", c.Addr, "./onceflow-data", filepath.Join(dir, "state"), "interval: 1s", "interval: 100ms",
		"  startup: earliest\n", "  startup: earliest\n  discovery-interval: 1s\n").Replace(jobfiletest.Orders)
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
		code = Main(ctx, []string{"run", "--status-interval", "0", file}, &bytes.Buffer{}, stderr)
	}()
	stderr.waitFor(t, regexp.MustCompile(`msg="job started`), done)
	c.Produce(t, "orders", "x", "1", "y", "1")
	consumeAll(t, c.Addr, "order-counts", 2)

	if code, out, errOut := runMain("topic", "add-partitions", "--job", file, "--partitions", "2"); code != 0 || !strings.Contains(out, "orders: 1 -> 2 partitions") {
		t.Fatalf("topic add-partitions: %d\n%s%s", code, out, errOut)
	}
	added := time.Now()
	cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, k := range []string{"z", "w", "z"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 1, Key: []byte(k), Value: []byte("1")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	got := consumeAll(t, c.Addr, "order-counts", 4)
	if took := time.Since(added); took > 5*time.Second {
		t.Errorf("the added partition's records were counted %v after it was added, want within seconds of the 1s discovery interval", took)
	}
	stderr.waitFor(t, regexp.MustCompile(`discovered a new partition.* partition=orders/1`), done)
	cancel()
	<-done
	if code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, stderr.String())
	}
	// dedupe then count: each key once, counted 1, the new partition's
	// duplicate z dropped like any other.
	if fmt.Sprint(got) != fmt.Sprint(map[string][]string{"w": {"1"}, "x": {"1"}, "y": {"1"}, "z": {"1"}}) {
		t.Errorf("output %v, want w, x, y and z once each", got)
	}
}
