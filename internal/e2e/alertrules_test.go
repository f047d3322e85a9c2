package e2e

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// The shipped alert rules fire when they should: promtool runs the unit
// tests in deploy/prometheus/onceflow-alerts.test.yml (a dead job, no job
// at all, a job that does not run, late records, a restart).
func TestAlertRulesFire(t *testing.T) {
	promtool := prometheusBin(t, "promtool")
	tests, err := filepath.Abs(filepath.Join("..", "..", "deploy", "prometheus", "onceflow-alerts.test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool, "test", "rules", tests)
	cmd.Dir = filepath.Dir(tests)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}
