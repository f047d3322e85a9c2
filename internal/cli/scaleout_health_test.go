package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// A scale-out task that fails restarts under the job's restart strategy
// (the file's fixed-delay, not "restarts are turned off"), and while it
// waits to restart the instance's /healthz is not ok and names the task
// and its error; it is ok again once the task's restarted job
// checkpointed.
func TestScaleOutHealthNamesFailedTask(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{Topics: map[string]int32{"in": 1, "out": 1}})
	dir := t.TempDir()
	job := fmt.Sprintf(`job: hl
kafka: {brokers: [%s]}
source: {topics: [in], group: hl, startup: earliest}
pipeline:
  - count: { key: record.key }
sink: {topic: out}
checkpointing: {interval: 100ms}
restart: {strategy: fixed-delay, attempts: 10, delay: 2s}
state: {dir: %s, checkpoints: %s, backend: memory}
scale-out: {enabled: true}
`, c.Addr, filepath.Join(dir, "state"), filepath.Join(dir, "shared"))
	file := filepath.Join(dir, "hl.yaml")
	if err := os.WriteFile(file, []byte(job), 0o644); err != nil {
		t.Fatal(err)
	}
	produce := func(from int) {
		var kv []string
		for i := from; i < from+100; i++ {
			kv = append(kv, "k"+strconv.Itoa(i%10), "v"+strconv.Itoa(i))
		}
		c.Produce(t, "in", kv...)
	}
	produce(0)
	addr := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	out := newSyncBuffer()
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"run", "--instance", "a", "--status-interval", "0", "--http", addr, file}, out, out)
	}()
	defer func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("the instance exited %d:\n%s", code, out)
			}
		case <-time.After(time.Minute):
			t.Errorf("the instance did not stop within a minute:\n%s", out)
		}
	}()
	health := func(want int, what string) string {
		t.Helper()
		var code int
		var body string
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if code, body = httpGet(t, "http://"+addr+"/healthz"); code == want {
				return body
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: /healthz stayed %d (%q) for 30s, want %d:\n%s", what, code, body, want, out)
			}
		}
	}
	adm := kadm.NewClient(c.Client(t))
	for deadline := time.Now().Add(30 * time.Second); !kafkatest.CaughtUp(t.Context(), adm, "hl", "in"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the input was not processed within 30s:\n%s", out)
		}
	}
	health(http.StatusOK, "before the failure")

	// The next transaction cannot commit the source's offsets: the task's
	// job fails, and restarts 2 s later.
	fault := c.Broker.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.AddOffsetsToTxn}, Err: kerr.UnknownServerError})
	produce(100)
	body := health(http.StatusServiceUnavailable, "while the task restarts")
	for _, want := range []string{"hl-in-0", "in/0", "restarting", "UNKNOWN_SERVER_ERROR"} {
		if !strings.Contains(body, want) {
			t.Errorf("/healthz while the task restarts says %q: no %q", body, want)
		}
	}
	if fault.Hits() != 1 {
		t.Errorf("the fault answered %d requests, want 1", fault.Hits())
	}
	health(http.StatusOK, "after the restarted task checkpointed")
	for deadline := time.Now().Add(30 * time.Second); !kafkatest.CaughtUp(t.Context(), adm, "hl", "in"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the input was not processed within 30s of the restart:\n%s", out)
		}
	}
	logs := out.String()
	if !strings.Contains(logs, `restart="fixed-delay (up to 10 attempts, delay 2s)`) || strings.Contains(logs, "restarts are turned off") {
		t.Errorf("the log does not say the task restarts under the job's fixed-delay strategy (or says restarts are off):\n%s", logs)
	}
}

// freePort returns a loopback address with a port free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// httpGet returns the status and body of GET url, 0 and the error when
// there is no answer.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
