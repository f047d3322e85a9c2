package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// The same job file finds the same state directory from any working
// directory: relative paths in it are relative to the file.
func TestStateDirFromAnyWorkingDir(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{Topics: map[string]int32{"orders": 1, "order-counts": 1}})
	addr := c.Addr
	c.Produce(t, "orders", "a", "1", "b", "1", "a", "1")
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	jobs := filepath.Join(dir, "jobs")
	for _, d := range []string{jobs, filepath.Join(dir, "elsewhere", "deeper")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeJob(t, filepath.Join(jobs, "orders.yaml"), addr, "pipeline:\n  - count: {}\n") // state.dir: ./onceflow-data
	want := filepath.Join(jobs, "onceflow-data")

	stateLine := regexp.MustCompile(`(?m)^  state:      (.*), checkpoints in `)
	for i, tc := range []struct {
		cwd, file string
	}{
		{jobs, "orders.yaml"},
		{dir, "jobs/orders.yaml"},
		{filepath.Join(dir, "elsewhere", "deeper"), "../../jobs/orders.yaml"},
		{"/", filepath.Join(jobs, "orders.yaml")},
	} {
		t.Run(tc.cwd, func(t *testing.T) {
			t.Chdir(tc.cwd)
			code, stdout, stderr := runMain("validate", tc.file)
			if m := stateLine.FindStringSubmatch(stdout); code != 0 || m == nil || m[1] != want {
				t.Fatalf("validate %s in %s: exit code %d, state dir %q, want %q; output:\n%s%s", tc.file, tc.cwd, code, m, want, stdout, stderr)
			}
			code, _, stderr = runMain("run", "--status-interval", "0", tc.file)
			if code != 0 {
				t.Fatalf("run %s in %s: exit code %d; stderr:\n%s", tc.file, tc.cwd, code, stderr)
			}
			if !strings.Contains(stderr, " state_dir="+want+" ") {
				t.Errorf("run does not log state_dir=%s:\n%s", want, stderr)
			}
			// Every run after the first restores the first one's checkpoint.
			restore := regexp.MustCompile(`msg=restoring job=orders-count checkpoint=\d+ dir=` + regexp.QuoteMeta(want+"/orders-count/"))
			if i > 0 && !restore.MatchString(stderr) {
				t.Errorf("run %d did not restore a checkpoint from %s:\n%s", i, want, stderr)
			}
			if _, err := os.Stat(filepath.Join(tc.cwd, "onceflow-data")); tc.cwd != jobs && err == nil {
				t.Errorf("run created onceflow-data in the working directory %s", tc.cwd)
			}
		})
	}
	// Only the first run counted: the others restored its state and had
	// nothing new to read.
	got := consumeAll(t, addr, "order-counts", 3)
	if len(got["a"]) != 2 || len(got["b"]) != 1 {
		t.Errorf("output %v, want a counted twice and b once, by the first run", got)
	}
}
