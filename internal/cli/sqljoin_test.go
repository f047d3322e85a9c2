package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidateSQLJoinNeedsABound: `onceflow validate` refuses a join
// without a ttl, at the join's line and column, saying what it would
// keep and how to bound it; with SET 'table.exec.state.ttl' the same
// script is valid and its plan shows the bound.
func TestValidateSQLJoinNeedsABound(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(testdataPath, "join.sql"))
	if err != nil {
		t.Fatal(err)
	}
	unbounded := strings.Replace(string(src), "/*+ STATE_TTL('o' = '2 h', 'c' = '2 h') */ ", "", 1)
	if unbounded == string(src) {
		t.Fatal("testdata/join.sql has no STATE_TTL hint to take out")
	}
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.WriteFile("join.sql", []byte(unbounded), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runMain("validate", "join.sql")
	want := "join.sql:16:20: the join of o and c keeps every row of both sides to meet the other side's later rows: its state grows without bound (Flink keeps the rows for ever; onceflow refuses, to be safe). Bound it with SET 'table.exec.state.ttl' = '1 h'"
	if code == 0 || !strings.Contains(stderr, want) {
		t.Fatalf("validate of a join without a ttl: exit code %d, stderr:\n%s\nwant it to say %q", code, stderr, want)
	}
	if err := os.WriteFile("join.sql", []byte("SET 'table.exec.state.ttl' = '30 min';\n"+unbounded), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runMain("validate", "join.sql")
	if code != 0 || !strings.Contains(stdout, "inner join on record.key = record.key, ttl 30m") || !strings.Contains(stdout, "freed by ttl 30m") {
		t.Fatalf("validate with table.exec.state.ttl: exit code %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}
