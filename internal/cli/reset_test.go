package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// offsets reset checks its arguments before it touches anything, and a
// checkpoint or savepoint target is the run flag that restores it.
func TestOffsetsResetArguments(t *testing.T) {
	dir := t.TempDir()
	job := filepath.Join(dir, "j.yaml")
	if err := os.WriteFile(job, []byte("job: j\nkafka: {brokers: [127.0.0.1:1]}\nsource: {topics: [in]}\nsink: {topic: out}\ncheckpointing: {interval: 1s}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"offsets", "reset", "--job", job}, 2, "--job and --to are required"},
		{[]string{"offsets", "reset", "--job", job, "--to", "timestamp", "--timestamp", "yesterday"}, 2, "write RFC 3339"},
		{[]string{"offsets", "reset", "--job", job, "--to", "earliest", "--timestamp", "2026-01-01T00:00:00Z"}, 2, "--timestamp goes with --to timestamp"},
		{[]string{"offsets", "reset", "--job", job, "--to", "somewhere"}, 2, "use earliest, latest, timestamp"},
		{[]string{"offsets", "reset", "--job", job, "--to", dir}, 0, "onceflow run --from-savepoint " + dir},
	} {
		code, out, errOut := runMain(tc.args...)
		if code != tc.code || !strings.Contains(out+errOut, tc.want) {
			t.Errorf("%v: %d, want %d and %q\n%s%s", tc.args[2:], code, tc.code, tc.want, out, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "onceflow-data", "j.reset.json")); !os.IsNotExist(err) {
		t.Errorf("a refused reset wrote an intent: %v", err)
	}
}
