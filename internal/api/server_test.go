package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
	"github.com/onceflow/onceflow/internal/api"
)

type rec struct{ N int }

// startJob runs an unbounded job with the server's hooks and returns the
// server, attached to it.
func startJob(t *testing.T, cfg api.Config) (*api.Server, *flow.Job) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Job, cfg.Logger = "web", log
	srv, err := api.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	t.Cleanup(func() { _ = srv.Close() })
	var recs []rec
	for i := range 100_000 {
		recs = append(recs, rec{i})
	}
	src := flowtest.NewSource(flowtest.Split(recs, 2), flowtest.Unbounded(), flowtest.PerPoll(1))
	env := flow.New(flow.JobName("web"), flow.Logger(log), flow.StateDir(t.TempDir()), flow.Checkpointing(20*time.Millisecond), flow.WithHooks(srv.Hooks()...))
	flow.To(flow.Map(flow.From(env, src, flow.UID("src")), func(r rec) rec { time.Sleep(time.Millisecond); return r }), flowtest.NewSink[rec](), flow.UID("sink"))
	ctx, cancel := context.WithCancel(context.Background())
	j, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srv.Attach(j)
	t.Cleanup(func() { cancel(); _ = j.Wait() })
	return srv, j
}

func call(t *testing.T, method, url, token, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, url, err, b)
		}
	} else {
		out = map[string]any{"text": string(b)}
	}
	return resp.StatusCode, out
}

// waitFor polls url until ok accepts its answer.
func waitFor(t *testing.T, url string, ok func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, out := call(t, "GET", url, "", "")
		if code == 200 && ok(out) {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: not as expected in 15s: %d %v", url, code, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Reading needs no token; triggering a savepoint without the token is
// refused and changes nothing, with it the savepoint is taken and its
// status reports where; stop with a savepoint ends the job.
func TestSavepointAndStopNeedTheToken(t *testing.T) {
	const token = "s3cret-token"
	dir := t.TempDir()
	srv, j := startJob(t, api.Config{Addr: "127.0.0.1:0", Token: token})
	base := srv.URL() + "/jobs/web"

	waitFor(t, srv.URL()+"/jobs/overview", func(m map[string]any) bool {
		jobs, _ := m["jobs"].([]any)
		return len(jobs) == 1 && jobs[0].(map[string]any)["state"] == "RUNNING"
	})
	waitFor(t, base+"/checkpoints", func(m map[string]any) bool {
		c, _ := m["counts"].(map[string]any)
		return c != nil && c["completed"].(float64) >= 1
	})

	for _, tok := range []string{"", "wrong"} {
		code, out := call(t, "POST", base+"/savepoints", tok, fmt.Sprintf(`{"target-directory": %q}`, filepath.Join(dir, "refused")))
		if code != http.StatusUnauthorized {
			t.Fatalf("savepoint with token %q: %d %v, want 401", tok, code, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "refused")); !os.IsNotExist(err) {
		t.Fatalf("a refused request wrote a savepoint: %v", err)
	}

	code, out := call(t, "POST", base+"/savepoints", token, fmt.Sprintf(`{"target-directory": %q}`, filepath.Join(dir, "sp1")))
	if code != http.StatusAccepted {
		t.Fatalf("savepoint: %d %v", code, out)
	}
	id := out["request-id"].(string)
	st := waitFor(t, base+"/savepoints/"+id, func(m map[string]any) bool {
		return m["status"].(map[string]any)["id"] != "IN_PROGRESS"
	})
	op := st["operation"].(map[string]any)
	if st["status"].(map[string]any)["id"] != "COMPLETED" {
		t.Fatalf("savepoint %s: %v", id, st)
	}
	if fi, err := os.Stat(op["location"].(string)); err != nil || !fi.IsDir() {
		t.Fatalf("savepoint location %v: %v", op["location"], err)
	}
	cps := waitFor(t, base+"/checkpoints", func(m map[string]any) bool {
		l := m["latest"].(map[string]any)
		return l["savepoint"] != nil
	})
	hist := cps["history"].([]any)
	first := hist[0].(map[string]any)
	if code, detail := call(t, "GET", fmt.Sprintf("%s/checkpoints/details/%v", base, first["id"]), "", ""); code != 200 || detail["id"] != first["id"] {
		t.Errorf("checkpoint detail of %v: %d %v", first["id"], code, detail)
	}

	detail := waitFor(t, base, func(m map[string]any) bool {
		vs, _ := m["vertices"].([]any)
		return len(vs) >= 1 && vs[0].(map[string]any)["backpressure-level"] != ""
	})
	t.Logf("vertices: %v", detail["vertices"])
	// The task's time by operator (docs/design.md, "Metrics and the REST
	// API"): the map that sleeps per record is chained after the source
	// and unmarked, so its time is the source's; the sink's writes are
	// quick.
	v0 := detail["vertices"].([]any)[0].(map[string]any)
	ops, _ := v0["operators"].([]any)
	pct := map[string]float64{}
	for _, o := range ops {
		om := o.(map[string]any)
		pct[om["id"].(string)], _ = om["time-percent"].(float64)
	}
	if len(ops) != 2 || pct["src"] < 50 || pct["sink"] > 20 {
		t.Errorf("vertex operators %v: want src (with the sleeping map) over 50 %% of the task's time, sink under 20 %%", ops)
	}

	code, body := call(t, "GET", srv.URL()+"/metrics", "", "")
	text, _ := body["text"].(string)
	for _, want := range []string{"onceflow_completed_checkpoints_total{job_name=\"web\"}", "go_goroutines", "onceflow_task_records_in_total"} {
		if code != 200 || !strings.Contains(text, want) {
			t.Errorf("/metrics (%d) lacks %s", code, want)
		}
	}

	code, _ = call(t, "POST", base+"/stop", "", `{}`)
	if code != http.StatusUnauthorized {
		t.Fatalf("stop without the token: %d, want 401", code)
	}
	select {
	case <-j.Done():
		t.Fatal("the job stopped after a refused stop")
	case <-time.After(50 * time.Millisecond):
	}
	code, out = call(t, "POST", base+"/stop", token, fmt.Sprintf(`{"target-directory": %q}`, filepath.Join(dir, "final")))
	if code != http.StatusAccepted {
		t.Fatalf("stop: %d %v", code, out)
	}
	select {
	case <-j.Done():
	case <-time.After(15 * time.Second):
		t.Fatal("the job did not stop")
	}
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	st = waitFor(t, base+"/savepoints/"+out["request-id"].(string), func(m map[string]any) bool {
		return m["status"].(map[string]any)["id"] == "COMPLETED"
	})
	if loc, _ := st["operation"].(map[string]any)["location"].(string); !strings.HasPrefix(loc, filepath.Join(dir, "final")) {
		t.Errorf("stop-with-savepoint location %q, want under %s", loc, filepath.Join(dir, "final"))
	}
	waitFor(t, srv.URL()+"/jobs/overview", func(m map[string]any) bool {
		return m["jobs"].([]any)[0].(map[string]any)["state"] == "FINISHED"
	})

}

// A server reachable from other machines needs a token; on loopback
// without one, mutating endpoints are open to local users.
func TestNonLocalAddressNeedsAToken(t *testing.T) {
	_, err := api.New(api.Config{Addr: "0.0.0.0:0", Job: "x"})
	if err == nil || !strings.Contains(err.Error(), "token") {
		t.Fatalf("New on 0.0.0.0 without a token: %v, want an error naming the token", err)
	}
	for in, want := range map[string]string{"8081": "127.0.0.1:8081", ":8081": "127.0.0.1:8081", "0.0.0.0:9": "0.0.0.0:9", "[::1]:80": "[::1]:80"} {
		if got, err := api.ListenAddr(in); err != nil || got != want {
			t.Errorf("ListenAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	srv, err := api.New(api.Config{Addr: "0.0.0.0:0", Job: "x", Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	_ = srv.Close()
}
