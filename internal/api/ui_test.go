package api_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/onceflow/onceflow/internal/api"
)

// chromium finds Debian's chromium; scripts/test installs it. Under
// ONCEFLOW_REQUIRE_DBS (CI) a missing one fails the test.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("ONCEFLOW_REQUIRE_DBS") != "" {
		t.Fatal("chromium not found: scripts/test installs it (apt-get install chromium)")
	}
	t.Skip("chromium not found (apt-get install chromium); skipping the browser test")
	return ""
}

// The web UI in a real headless browser: it shows the running job, its
// numbers move, the job graph and the checkpoint history are drawn, and
// its savepoint button takes a savepoint. Set ONCEFLOW_UI_SCREENSHOT=FILE
// to keep a screenshot (docs/ui.png is one).
func TestUIInABrowser(t *testing.T) {
	bin := chromium(t)
	srv, _ := startJob(t, api.Config{Addr: "127.0.0.1:0", SavepointDir: func() string { return filepath.Join(t.TempDir(), "sp") }})

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 60*time.Second)
	defer cancel()

	number := func(sel string) int {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		n, err := strconv.Atoi(strings.ReplaceAll(strings.Fields(s + " x")[0], ",", ""))
		if err != nil {
			return -1
		}
		return n
	}
	// poll evaluates ok until it holds.
	poll := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("the page never showed %s", what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL()+"/"), chromedp.WaitVisible(chromedp.CSS("#savepoint-btn"))); err != nil {
		t.Fatal(err)
	}
	var state string
	poll("the job RUNNING", func() bool {
		state, _ = chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#state")))
		return state == "RUNNING"
	})
	poll("records read", func() bool { return number("#records-read") > 0 })
	first := number("#records-read")
	poll("records read growing", func() bool { return number("#records-read") > first })
	poll("a committed checkpoint", func() bool { return number("#checkpoint-count") > 0 })

	var tasks, bars int
	poll("the job graph and the checkpoint chart", func() bool {
		tasks, _ = chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#vertices .vertex").length`))
		bars, _ = chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#checkpoint-chart rect.cp").length`))
		return tasks >= 1 && bars >= 1
	})
	if taskName, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#vertices .vertex .name"))); err != nil || taskName != "src" {
		t.Errorf("job graph's first task %q (%v), want src", taskName, err)
	}
	// The task's time by chained operator (docs/design.md, "Metrics and
	// the REST API"): the source (with the map that sleeps) and the sink.
	var opRows string
	poll("the time in each chained operator", func() bool {
		opRows, _ = chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll("#vertices .vertex .op")].map(e => e.dataset.operator + "=" + e.lastElementChild.textContent).join(" ")`))
		return strings.Contains(opRows, "src=") && strings.Contains(opRows, "sink=")
	})

	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#savepoint-btn"))); err != nil {
		t.Fatal(err)
	}
	var status string
	poll("the savepoint completed", func() bool {
		status, _ = chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#savepoint-status")))
		return strings.Contains(status, "COMPLETED") || strings.Contains(status, "FAILED")
	})
	loc, ok := strings.CutPrefix(status, "savepoint COMPLETED: ")
	if !ok {
		t.Fatalf("savepoint status %q", status)
	}
	if fi, err := os.Stat(loc); err != nil || !fi.IsDir() {
		t.Fatalf("the savepoint the button took is not at %s: %v", loc, err)
	}
	t.Logf("page: state %s, %d records read, %d tasks (operators %s), %d checkpoint bars; %s", state, number("#records-read"), tasks, opRows, bars, status)

	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(90))
	if err != nil {
		t.Fatal(err)
	}
	if len(png) < 1000 {
		t.Errorf("screenshot of %d bytes", len(png))
	}
	if out := os.Getenv("ONCEFLOW_UI_SCREENSHOT"); out != "" {
		if err := os.WriteFile(out, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
