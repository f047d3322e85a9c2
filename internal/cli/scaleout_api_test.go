package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/scaleout"
)

// A scale-out instance answers the single-process API's /config,
// /exceptions and checkpoint history with details by id
// (docs/design.md, "Scale-out", Operations): on a job of two stages,
// /config names both stages' topics and the repartition topic's
// partition count; a failure injected into a task's transaction shows in
// /exceptions with the task's name, its error and that it restarts; the
// history keeps several checkpoints of one task, and details answers
// each of them by id (number or epoch:sequence, ?task= choosing).
func TestScaleOutInstanceAPI(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{Topics: map[string]int32{"in": 1, "out": 1}})
	dir := t.TempDir()
	job := fmt.Sprintf(`job: ia
kafka: {brokers: [%s]}
source: {topics: [in], group: ia, startup: earliest}
pipeline:
  - aggregate: { key: value.user, fields: { n: "count()" } }
sink: {topic: out}
checkpointing: {interval: 100ms}
restart: {strategy: fixed-delay, attempts: 10, delay: 500ms}
state: {dir: %s, checkpoints: %s, backend: memory}
scale-out: {enabled: true}
`, c.Addr, filepath.Join(dir, "state"), filepath.Join(dir, "shared"))
	file := filepath.Join(dir, "ia.yaml")
	if err := os.WriteFile(file, []byte(job), 0o644); err != nil {
		t.Fatal(err)
	}
	next := 0
	produce := func(n int) {
		var rs []*kgo.Record
		for range n {
			rs = append(rs, &kgo.Record{Topic: "in", Key: []byte("o" + strconv.Itoa(next)), Value: []byte(`{"user":"u` + strconv.Itoa(next%7) + `"}`)})
			next++
		}
		c.ProduceRecords(t, rs...)
	}
	produce(50)
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
	base := "http://" + addr + "/jobs/ia"
	get := func(path string, v any) int {
		t.Helper()
		code, body := httpGet(t, base+path)
		if code == http.StatusOK && v != nil {
			if err := json.Unmarshal([]byte(body), v); err != nil {
				t.Fatalf("GET %s: %v: %s", path, err, body)
			}
		}
		return code
	}
	wait := func(what string, ok func() bool) bool {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("%s: not within 30s:\n%s", what, out)
				return false
			}
		}
		return true
	}
	wantTasks := []string{scaleout.TaskName("ia", kafka.Partition{Topic: "ia-repartition-1", Partition: 0}), scaleout.TaskName("ia", kafka.Partition{Topic: "in", Partition: 0})}

	// Checkpoint history: several of one task, each answered by id.
	type entry struct {
		ID     int64    `json:"id"`
		IDText string   `json:"id-text"`
		Task   string   `json:"task"`
		Status string   `json:"status"`
		Also   []string `json:"also-in-tasks"`
	}
	var hist struct {
		History []entry `json:"history"`
	}
	var mine []entry
	histOK := wait("three completed checkpoints of the first stage's task in /checkpoints", func() bool {
		if get("/checkpoints", &hist) != http.StatusOK {
			return false
		}
		mine = nil
		for _, e := range hist.History {
			if e.Task == wantTasks[1] && e.Status == "COMPLETED" {
				mine = append(mine, e)
			}
		}
		return len(mine) >= 3
	})
	for _, e := range mine[:min(2, len(mine))] {
		for _, q := range []string{strconv.FormatInt(e.ID, 10), flow.CheckpointText(e.ID)} {
			var d entry
			if code := get("/checkpoints/details/"+q+"?task="+e.Task, &d); code != http.StatusOK || d.ID != e.ID || d.Task != e.Task || d.Status != "COMPLETED" {
				t.Errorf("details of checkpoint %s of %s: %d %+v", q, e.Task, code, d)
			}
			if code := get("/checkpoints/details/"+q, &d); code != http.StatusOK || d.ID != e.ID || (d.Task != e.Task && !slices.Contains(d.Also, e.Task)) {
				t.Errorf("details of checkpoint %s without a task: %d %+v, want it or %s among also-in-tasks", q, code, d, e.Task)
			}
		}
	}
	if code := get("/checkpoints/details/"+strconv.FormatInt(1<<50, 10), nil); histOK && code != http.StatusNotFound {
		t.Errorf("details of a checkpoint no task has: %d, want 404", code)
	}

	// /config: the job file, checkpointing, the stages.
	var cfg struct {
		JobConfig     []string       `json:"job-config"`
		Checkpointing map[string]any `json:"checkpointing"`
		ScaleOut      struct {
			Instance, Group, Restart string
			Stages                   []struct {
				Stage  int      `json:"stage"`
				Topics []string `json:"topics"`
				Parts  int      `json:"repartition-partitions"`
				Writes string   `json:"writes"`
			}
		} `json:"scale-out"`
	}
	if code := get("/config", &cfg); code != http.StatusOK {
		t.Errorf("/config: %d", code)
	}
	so := cfg.ScaleOut
	if so.Instance != "a" || so.Group != "ia" || len(so.Stages) != 2 || !slices.Equal(so.Stages[0].Topics, []string{"in"}) || so.Stages[0].Writes != "ia-repartition-1" ||
		!slices.Equal(so.Stages[1].Topics, []string{"ia-repartition-1"}) || so.Stages[1].Parts != 1 {
		t.Errorf("/config's scale-out: %+v", so)
	}
	if cfg.Checkpointing["interval"] != "100ms" || !strings.Contains(strings.Join(cfg.JobConfig, "\n"), "aggregate by value.user") ||
		!strings.HasPrefix(so.Restart, "fixed-delay") {
		t.Errorf("/config: checkpointing %v, restart %q, job config %q", cfg.Checkpointing, so.Restart, cfg.JobConfig)
	}

	// A failure of a task's transaction: in /exceptions with its task.
	var exc struct {
		Restarts []struct {
			Task      string `json:"task"`
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Timestamp int64  `json:"timestamp"`
			Message   string `json:"exception"`
			Restarts  bool   `json:"restarts"`
			Attempt   int    `json:"attempt"`
		} `json:"restarts"`
	}
	if code := get("/exceptions", &exc); code != http.StatusOK || len(exc.Restarts) != 0 {
		t.Errorf("/exceptions before any failure: %d %+v", code, exc)
	}
	before := time.Now().UnixMilli()
	fault := c.Broker.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.AddOffsetsToTxn}, Err: kerr.UnknownServerError})
	produce(50)
	if !wait("the failure in /exceptions", func() bool { return get("/exceptions", &exc) == http.StatusOK && len(exc.Restarts) > 0 }) {
		return
	}
	x := exc.Restarts[0]
	if !slices.Contains(wantTasks, x.Task) || x.Task != scaleout.TaskName("ia", kafka.Partition{Topic: x.Topic, Partition: x.Partition}) ||
		!strings.Contains(x.Message, "UNKNOWN_SERVER_ERROR") || !x.Restarts || x.Attempt != 1 || x.Timestamp < before {
		t.Errorf("/exceptions: %+v, want a restarting failure of one of %v with UNKNOWN_SERVER_ERROR", exc.Restarts, wantTasks)
	}
	if fault.Hits() != 1 {
		t.Errorf("the fault answered %d requests, want 1", fault.Hits())
	}
	checkFailuresPage(t, "http://"+addr+"/", x.Task, "UNKNOWN_SERVER_ERROR")
}

// checkFailuresPage opens an instance's page in headless Chromium and
// waits until its table of recent failures names task and its error.
func checkFailuresPage(t *testing.T, url, task, errText string) {
	t.Helper()
	var bin string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		if os.Getenv("ONCEFLOW_REQUIRE_DBS") != "" {
			t.Fatal("chromium not found: scripts/test installs it (apt-get install chromium)")
		}
		t.Log("chromium not found; the instance page is not checked in a browser")
		return
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("#failures"))); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	var rows string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		rows, _ = chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll("#failures tbody tr")].map(r => [...r.cells].map(c => c.textContent).join("|")).join("\n")`))
		if strings.Contains(rows, "|"+task+"|") && strings.Contains(rows, errText) && strings.Contains(rows, "restarted (attempt 1)") {
			return
		}
	}
	t.Errorf("the instance page at %s does not show %s's failure (%s) among its recent failures:\n%s", url, task, errText, rows)
}
