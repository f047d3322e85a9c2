package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// prometheusBin finds Debian's prometheus and promtool; scripts/test
// installs them. Under ONCEFLOW_REQUIRE_DBS (CI) a missing one fails the
// test instead of skipping it.
func prometheusBin(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("ONCEFLOW_REQUIRE_DBS") != "" {
			t.Fatalf("%s not found: scripts/test installs it (apt-get install prometheus)", name)
		}
		t.Skipf("%s not found (apt-get install prometheus); skipping the test against a real Prometheus server", name)
	}
	return p
}

// A real Prometheus server scrapes `onceflow run --http` and its HTTP API
// answers what the job did: the records read and committed, the duplicates
// the dedupe step dropped, a lag of 0 once caught up, committed
// checkpoints; it loads the shipped alert rules, which promtool checks.
func TestPrometheusScrapesARunningJob(t *testing.T) {
	promBin := prometheusBin(t, "prometheus")
	promtool := prometheusBin(t, "promtool")
	rules, err := filepath.Abs("../../deploy/prometheus/onceflow-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", rules).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}

	const n, keys = 3000, 500
	dir := t.TempDir()
	addr := startBroker(t, filepath.Join(dir, "broker"))
	createTopic(t, addr, "in", 3)
	createTopic(t, addr, "out-prom", 1)
	produceInput(t, addr, "in", n, keys)

	httpAddr := freeAddr(t)
	file := writeJob(t, dir, "prom", addr, "pipeline:\n  - dedupe: {key: record.key, ttl: 1h}")
	log := &logWriter{t: t, name: "job"}
	cmd := exec.Command(binary(t), "run", "--http", httpAddr, file)
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
		}
	})

	promAddr := freeAddr(t)
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: onceflow
    static_configs:
      - targets: [%q]
`, rules, httpAddr)
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	promLog := &logWriter{t: t, name: "prometheus"}
	prom := exec.Command(promBin, "--config.file="+cfgFile, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+promAddr, "--log.level=warn")
	prom.Stderr = promLog
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = prom.Process.Kill(); _ = prom.Wait() })

	// query asks Prometheus for the value of an instant query with one
	// series; ok is false while it has none.
	query := func(q string) (float64, bool) {
		resp, err := http.Get("http://" + promAddr + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			return 0, false
		}
		defer resp.Body.Close()
		var r struct {
			Status string
			Data   struct {
				Result []struct {
					Value [2]any
				}
			}
		}
		if b, _ := io.ReadAll(resp.Body); json.Unmarshal(b, &r) != nil || r.Status != "success" || len(r.Data.Result) != 1 {
			return 0, false
		}
		s, _ := r.Data.Result[0].Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		return v, err == nil
	}
	want := map[string]func(float64) bool{
		`onceflow_records_in_total{job_name="prom"}`:                                 func(v float64) bool { return v == n },
		`onceflow_records_committed_total{job_name="prom"}`:                          func(v float64) bool { return v == keys },
		`onceflow_dedupe_duplicates_dropped_total{job_name="prom"}`:                  func(v float64) bool { return v == n-keys },
		`onceflow_source_pending_records{job_name="prom"}`:                           func(v float64) bool { return v == 0 },
		`sum(onceflow_source_current_offset{job_name="prom"})`:                       func(v float64) bool { return v == n },
		`onceflow_completed_checkpoints_total{job_name="prom"} > 0`:                  func(v float64) bool { return v > 0 },
		`sum(onceflow_kafka_sink_transactions_committed_total{job_name="prom"}) > 0`: func(v float64) bool { return v > 0 },
		`onceflow_job_running{job_name="prom"}`:                                      func(v float64) bool { return v == 1 },
		`up{job="onceflow"}`:                                                         func(v float64) bool { return v == 1 },
		`count(go_goroutines{job="onceflow"})`:                                       func(v float64) bool { return v == 1 },
	}
	deadline := time.Now().Add(60 * time.Second)
	for q, ok := range want {
		for {
			v, have := query(q)
			if have && ok(v) {
				t.Logf("%s = %v", q, v)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Prometheus: %s = %v (have %v), not as expected within 60s\njob log:\n%s\nprometheus log:\n%s", q, v, have, log, promLog)
			}
			select {
			case err := <-done:
				t.Fatalf("the job exited: %v\n%s", err, log)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	// Every onceflow metric the shipped alert rules and dashboard use
	// exists in Prometheus: a renamed metric cannot silently blank a panel
	// or disarm an alert.
	dash, err := os.ReadFile("../../deploy/grafana/onceflow-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	alerts, err := os.ReadFile(rules)
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, m := range regexp.MustCompile(`onceflow_[a-z_]+`).FindAllString(string(dash)+string(alerts), -1) {
		used[m] = true
	}
	for m := range used {
		if v, ok := query("count(" + m + ")"); !ok || v < 1 {
			t.Errorf("deploy/ uses %s, which Prometheus does not have", m)
		}
	}
	t.Logf("deploy/ uses %d onceflow metrics, all present", len(used))

	// The alert rules are loaded and evaluated.
	resp, err := http.Get("http://" + promAddr + "/api/v1/rules")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, alert := range []string{"OnceflowLagGrowing", "OnceflowCheckpointsFailing", "OnceflowNoCheckpoint", "OnceflowRestarting", "OnceflowBackpressured"} {
		if !strings.Contains(string(b), `"name":"`+alert+`"`) {
			t.Errorf("Prometheus did not load alert %s: %s", alert, b)
		}
	}
	if got := readCommitted(t, addr, "out-prom"); len(got) != keys {
		t.Errorf("output holds %d records, want %d (one per key)", len(got), keys)
	}
}
