package cli

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/jobfile/jobfiletest"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// Each restore flag of run turns on the engine option of the same meaning.
func TestRunRestoreFlags(t *testing.T) {
	engine := map[string]func() flow.Option{
		"allow-non-restored-state":  flow.AllowNonRestoredState,
		"allow-checkpoint-fallback": flow.AllowCheckpointFallback,
		"start-fresh":               flow.StartFresh,
		"resume-latest-checkpoint":  flow.ResumeLatestCheckpoint,
	}
	for _, sw := range restoreSwitches {
		if want, ok := engine[sw.flag]; !ok || reflect.ValueOf(sw.option).Pointer() != reflect.ValueOf(want).Pointer() {
			t.Errorf("--%s does not turn on the engine option it names", sw.flag)
		}
	}
	if len(restoreSwitches) != len(engine) {
		t.Errorf("%d restore switches, want %d", len(restoreSwitches), len(engine))
	}

	savepoint := t.TempDir()
	file := filepath.Join(savepoint, "not-a-dir")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args      []string
		savepoint string
		switches  []string
		wantErr   string
	}{
		{args: nil},
		{args: []string{"--from-savepoint", savepoint}, savepoint: savepoint},
		{args: []string{"--allow-non-restored-state"}, switches: []string{"allow-non-restored-state"}},
		{args: []string{"--allow-checkpoint-fallback"}, switches: []string{"allow-checkpoint-fallback"}},
		{args: []string{"--start-fresh"}, switches: []string{"start-fresh"}},
		{args: []string{"--resume-latest-checkpoint"}, switches: []string{"resume-latest-checkpoint"}},
		{args: []string{"--from-savepoint", savepoint, "--allow-non-restored-state"}, savepoint: savepoint, switches: []string{"allow-non-restored-state"}},
		{args: []string{"--start-fresh", "--resume-latest-checkpoint"}, wantErr: "usage error: --start-fresh and --resume-latest-checkpoint exclude each other: choose one"},
		// A missing directory goes on to the job, which resumes a
		// checkpoint descending from it or refuses naming it.
		{args: []string{"--from-savepoint", filepath.Join(savepoint, "missing")}, savepoint: filepath.Join(savepoint, "missing")},
		{args: []string{"--from-savepoint", file}, wantErr: "--from-savepoint " + file + " is not a directory"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			fs := flag.NewFlagSet("run", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			options := runOptionFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			o, err := options()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, sw := range o.switches {
				got = append(got, sw.flag)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.switches) || o.fromSavepoint != tc.savepoint {
				t.Errorf("switches %v, savepoint %q; want %v, %q", got, o.fromSavepoint, tc.switches, tc.savepoint)
			}
			want := len(tc.switches) + 1 // flow.StopTimeout
			if tc.savepoint != "" {
				want++ // flow.FromSavepoint
			}
			if len(o.flowOptions()) != want {
				t.Errorf("%d engine options, want %d", len(o.flowOptions()), want)
			}
		})
	}
}

// A relative --from-savepoint is relative to the working directory, not
// to the job file.
func TestRunFromSavepointRelativeToWorkingDir(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sp"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	options := runOptionFlags(fs)
	if err := fs.Parse([]string{"--from-savepoint", "sp"}); err != nil {
		t.Fatal(err)
	}
	o, err := options()
	if err != nil || o.fromSavepoint != filepath.Join(dir, "sp") {
		t.Errorf("savepoint %q, %v; want %q", o.fromSavepoint, err, filepath.Join(dir, "sp"))
	}
}

// writeJob writes a bounded variant of jobfiletest.Orders against addr to file,
// with pipeline in place of its pipeline section.
func writeJob(t *testing.T, file, addr, pipeline string) {
	t.Helper()
	job := strings.NewReplacer("127.0.0.1:9092", addr, "  startup: earliest\n", "  startup: earliest\n  bounded: true\n").Replace(jobfiletest.Orders)
	job = regexp.MustCompile(`(?s)pipeline:\n.*?\nsink:`).ReplaceAllString(job, pipeline+"sink:")
	if err := os.WriteFile(file, []byte(job), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A job whose checkpoints were taken with the positional ids of earlier
// versions (dedupe-0, count-1) is refused with the uid: lines that keep
// its state; --allow-non-restored-state starts it without that state, and
// the old ids written as uid: restore it.
func TestRunPositionalIDCheckpoints(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{Topics: map[string]int32{"orders": 1, "order-counts": 1}})
	addr := c.Addr
	c.Produce(t, "orders", "a", "1", "b", "1", "a", "1")
	dir := t.TempDir()
	file := filepath.Join(dir, "orders.yaml")
	old := "pipeline:\n  - dedupe: { key: record.key, ttl: 24h, uid: dedupe-0 }\n  - count:  { key: record.key, uid: count-1 }\n"
	writeJob(t, file, addr, old)
	if code, _, stderr := runMain("run", "--status-interval", "0", file); code != 0 {
		t.Fatalf("first run: exit code %d; stderr:\n%s", code, stderr)
	}

	writeJob(t, file, addr, "pipeline:\n  - dedupe: { key: record.key, ttl: 24h }\n  - count:  { key: record.key }\n")
	code, _, stderr := runMain("run", "--status-interval", "0", file)
	if code != 1 {
		t.Fatalf("run with the new default ids: exit code %d, want 1; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{
		"holds state for operators this job does not have: count-1, dedupe-0",
		file + ":10: add uid: dedupe-0 to this dedupe step (its id is now dedupe:record.key)\n",
		file + ":11: add uid: count-1 to this count step (its id is now count:record.key)\n",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not contain %q:\n%s", want, stderr)
		}
	}

	writeJob(t, file, addr, old)
	code, _, stderr = runMain("run", "--status-interval", "0", file)
	if code != 0 || !strings.Contains(stderr, "msg=restoring") {
		t.Errorf("run with the old ids as uid: exit code %d, want 0 and a restore; stderr:\n%s", code, stderr)
	}

	writeJob(t, file, addr, "pipeline:\n  - dedupe: { key: record.key, ttl: 24h }\n  - count:  { key: record.key }\n")
	code, _, stderr = runMain("run", "--status-interval", "0", "--allow-non-restored-state", file)
	if code != 0 || !strings.Contains(stderr, "dropping state of operators the job no longer has") {
		t.Errorf("--allow-non-restored-state: exit code %d; stderr:\n%s", code, stderr)
	}
}

// --from-savepoint reaches the engine: a directory without a savepoint is
// refused by the restore, naming it.
func TestRunFromSavepointIsUsed(t *testing.T) {
	addr := kafkatest.Start(t, broker.Config{Topics: map[string]int32{"orders": 1, "order-counts": 1}}).Addr
	dir := t.TempDir()
	file := filepath.Join(dir, "orders.yaml")
	writeJob(t, file, addr, "pipeline:\n")
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runMain("run", "--status-interval", "0", "--from-savepoint", empty, file)
	if code != 1 || !strings.Contains(stderr, "savepoint "+empty+": ") {
		t.Errorf("exit code %d, want 1 with the savepoint named; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "starting from a savepoint") {
		t.Errorf("the start from a savepoint is not logged:\n%s", stderr)
	}
}
