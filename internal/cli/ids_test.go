package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/jobfile"
	"github.com/onceflow/onceflow/internal/jobfile/jobfiletest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// pipelineIDs parses jobfiletest.Minimal with the given pipeline steps (one YAML
// flow mapping per step) and returns the steps' ids in order.
func pipelineIDs(t *testing.T, steps []string) []string {
	t.Helper()
	src := jobfiletest.Minimal + "pipeline:\n"
	for _, s := range steps {
		src += "  - " + s + "\n"
	}
	jf, err := jobfile.ParseJobFile("j.yaml", []byte(src), nil)
	if err != nil {
		t.Fatalf("%v\nfile:\n%s", err, src)
	}
	var ids []string
	for _, st := range jf.Pipeline {
		ids = append(ids, st.UID)
	}
	return ids
}

// The id of a step without uid: comes from what the step is, so editing
// the pipeline around it keeps its checkpointed state reachable.
func TestDefaultIDsSurvivePipelineEdits(t *testing.T) {
	const (
		dedupe  = "dedupe: {key: record.key, ttl: 1h}"
		extract = "extract-key: {json-field: user}"
		count   = "count: {}"
	)
	base := []string{dedupe, extract, count}
	want := map[string]string{} // step -> its id in the base pipeline
	for i, id := range pipelineIDs(t, base) {
		want[base[i]] = id
	}
	if fmt.Sprint(want) != fmt.Sprint(map[string]string{dedupe: "dedupe:record.key", extract: "extract-key:user", count: "count:record.key"}) {
		t.Errorf("ids of the base pipeline = %v", want)
	}
	for _, tc := range []struct {
		name  string
		steps []string
	}{
		{"insert a step first", []string{"extract-key: {json-field: tenant}", dedupe, extract, count}},
		{"insert a step in the middle", []string{dedupe, extract, "dedupe: {key: record.key, ttl: 5m, uid: recent}", count}},
		{"remove the first step", []string{extract, count}},
		{"remove a middle step", []string{dedupe, count}},
		{"reorder", []string{extract, count, dedupe}},
		{"change a parameter that is not part of the id", []string{"dedupe: {ttl: 48h}", extract, count}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := pipelineIDs(t, tc.steps)
			for i, s := range tc.steps {
				if s == "dedupe: {ttl: 48h}" {
					s = dedupe // the same step with another ttl
				}
				if w, ok := want[s]; ok && got[i] != w {
					t.Errorf("step %q has id %q after the edit, want %q as before", tc.steps[i], got[i], w)
				}
			}
		})
	}
}

func TestDefaultIDs(t *testing.T) {
	for _, tc := range []struct {
		steps []string
		want  []string
	}{
		{[]string{"dedupe: {ttl: 1h}", "dedupe: {ttl: 2h}", "dedupe: {ttl: 3h}"}, []string{"dedupe:record.key", "dedupe:record.key#2", "dedupe:record.key#3"}},
		// Explicit uids count as occurrences, so adding one moves nobody.
		{[]string{"count: {uid: c}", "count: {}"}, []string{"c", "count:record.key#2"}},
		// Pinning the first of two identical steps to its id keeps both.
		{[]string{`count: {uid: "count:record.key"}`, "count: {}"}, []string{"count:record.key", "count:record.key#2"}},
		{[]string{"extract-key: {json-field: a}", "extract-key: {json-field: b}", "extract-key: {json-field: a}"}, []string{"extract-key:a", "extract-key:b", "extract-key:a#2"}},
		// The old positional ids stay available as explicit uids.
		{[]string{"dedupe: {ttl: 1h, uid: dedupe-0}", "count: {uid: count-1}"}, []string{"dedupe-0", "count-1"}},
	} {
		t.Run(strings.Join(tc.steps, " "), func(t *testing.T) {
			if got := pipelineIDs(t, tc.steps); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("ids %q, want %q", got, tc.want)
			}
		})
	}
}

// copyJobFile copies testdata/name to dir/jobs/name with a CA file next to
// it, and returns dir with symlinks resolved (as the working directory
// reports it).
func copyJobFile(t *testing.T, name string) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(testdataPath, name))
	if err != nil {
		t.Fatal(err)
	}
	jobs := filepath.Join(dir, "jobs")
	if err := os.MkdirAll(jobs, 0o755); err != nil {
		t.Fatal(err)
	}
	for f, content := range map[string][]byte{name: data, "ca.pem": []byte("not read by validate")} {
		if err := os.WriteFile(filepath.Join(jobs, f), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// `onceflow validate` prints each step's id and every resolved path; the
// golden file is the whole output with the temporary directory as TMP.
func TestValidateGolden(t *testing.T) {
	// clicks: the one-source form; enrich: the named form (sources:,
	// streams: with union and join, sinks:); orders.sql: a Flink SQL
	// script (its plan, and the job file it compiles to); join.sql: a
	// script joining two tables (the named form, the join's ttl); ijoin.sql:
	// an interval join (each table's event time, state freed by watermark);
	// lookup.sql: a lookup join into PostgreSQL (no state, a cache).
	for _, tc := range []struct{ name, file, flag string }{
		{"clicks", "clicks.yaml", ""}, {"enrich", "enrich.yaml", ""},
		{"orders-sql", "orders.sql", ""}, {"orders-sql-job", "orders.sql", "--show-job"},
		{"join-sql", "join.sql", ""}, {"join-sql-job", "join.sql", "--show-job"},
		{"ijoin-sql", "ijoin.sql", ""},
		{"lookup-sql", "lookup.sql", ""},
	} {
		name := tc.name
		t.Run(name, func(t *testing.T) {
			dir := copyJobFile(t, tc.file)
			t.Chdir(dir)
			args := []string{"validate"}
			if tc.flag != "" {
				args = append(args, tc.flag)
			}
			code, stdout, stderr := runMain(append(args, filepath.Join("jobs", tc.file))...)
			if code != 0 {
				t.Fatalf("exit code %d; stderr:\n%s", code, stderr)
			}
			got := strings.ReplaceAll(stdout, dir, "TMP")
			golden := filepath.Join(testdataPath, name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -run TestValidateGolden -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("validate output differs from %s (go test -run TestValidateGolden -update rewrites it):\n%s\nwant:\n%s", golden, got, want)
			}
		})
	}
}

// testdataPath is the package's testdata directory, found before a test
// changes the working directory.
var testdataPath = func() string {
	p, err := filepath.Abs("testdata")
	if err != nil {
		panic(err)
	}
	return p
}()

func TestRestoreHint(t *testing.T) {
	jf, err := jobfile.ParseJobFile("orders.yaml", []byte(jobfiletest.Orders+"  # \n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	refused := func(names string) error {
		return fmt.Errorf("%w: checkpoint 7 in /s/orders-count/chk-7 holds state for operators this job does not have: %s; give the operators their old uids, or allow dropping that state", flow.ErrRestoreRefused, names)
	}
	for _, tc := range []struct {
		name string
		err  error
		want string // the added text; "" means the error is returned as it is
	}{
		{"nil", nil, ""},
		{"not a restore error", errors.New("dedupe-0 count-1"), ""},
		{"both positional ids", refused("count-1, dedupe-0"), "\nthat state was checkpointed when pipeline steps were named by their position; to keep it, give the steps their old ids:\n" +
			"  orders.yaml:9: add uid: dedupe-0 to this dedupe step (its id is now dedupe:record.key)\n" +
			"  orders.yaml:10: add uid: count-1 to this count step (its id is now count:record.key)"},
		{"one of them", refused("count-1"), "\nthat state was checkpointed when pipeline steps were named by their position; to keep it, give the steps their old ids:\n" +
			"  orders.yaml:10: add uid: count-1 to this count step (its id is now count:record.key)"},
		{"a longer id is not the positional one", refused("count-10, xdedupe-0"), ""},
		{"ids of another pipeline", refused("dedupe-1"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := restoreHint(tc.err, jf)
			if tc.err == nil {
				if got != nil {
					t.Fatalf("restoreHint(nil) = %v", got)
				}
				return
			}
			if !errors.Is(got, tc.err) {
				t.Errorf("the hint does not wrap the error")
			}
			if added := strings.TrimPrefix(got.Error(), tc.err.Error()); added != tc.want {
				t.Errorf("added %q, want %q", added, tc.want)
			}
		})
	}
}
