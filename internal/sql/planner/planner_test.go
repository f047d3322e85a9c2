package planner

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestCompile compiles every script of testdata/ok and compares the job
// file with the golden .yaml next to it (go test -update rewrites them);
// the compiled files are read by the job-file reader in
// internal/jobfile's TestSQLScripts.
func TestCompile(t *testing.T) {
	files, _ := filepath.Glob("testdata/ok/*.sql")
	if len(files) == 0 {
		t.Fatal("no scripts in testdata/ok")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			j, err := Compile(filepath.Base(f), string(src))
			if err != nil {
				t.Fatal(err)
			}
			got := string(j.YAML)
			for _, n := range j.Notes {
				got += "# note: " + n + "\n"
			}
			golden := strings.TrimSuffix(f, ".sql") + ".yaml"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if got != string(want) {
				t.Errorf("compiled job file differs from %s (go test -update rewrites it):\n%s", golden, got)
			}
		})
	}
}

// TestCompileErrors: each script of testdata/errors starts with a
// comment line "-- want: <message>"; compiling it must fail with exactly
// that message (all problems, joined by newlines, after the first
// line's "-- want: " prefixes).
func TestCompileErrors(t *testing.T) {
	files, _ := filepath.Glob("testdata/errors/*.sql")
	if len(files) == 0 {
		t.Fatal("no scripts in testdata/errors")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, l := range strings.Split(string(src), "\n") {
				if w, ok := strings.CutPrefix(l, "-- want: "); ok {
					want = append(want, w)
				}
			}
			if len(want) == 0 {
				t.Fatal("the script has no -- want: line")
			}
			_, err = Compile(filepath.Base(f), string(src))
			if err == nil {
				t.Fatalf("compiled; want %q", want)
			}
			if got := err.Error(); got != strings.Join(want, "\n") {
				t.Errorf("error:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
			}
		})
	}
}

// TestCompileQuery: the shell's query becomes a job writing its rows,
// keyed by the group when updating, to the topic asked for, reading
// with the group asked for instead of the table's.
func TestCompileQuery(t *testing.T) {
	ddl := `CREATE TABLE clicks (user_id STRING, url STRING) WITH ('connector' = 'kafka', 'topic' = 'clicks',
  'properties.bootstrap.servers' = 'localhost:9092', 'properties.group.id' = 'production-job', 'format' = 'json');
`
	for _, tc := range []struct {
		query    string
		cols     string
		updating bool
		has      []string
	}{
		{"SELECT user_id, upper(url) AS u FROM clicks WHERE url IS NOT NULL", "user_id,u", false, []string{`topic: "shell-out"`, `group: "shell-group"`, `"u": "upper(url)"`}},
		{"SELECT user_id, COUNT(*) AS n FROM clicks GROUP BY user_id", "user_id,n", true, []string{"- aggregate:", `key: ["user_id"]`}},
		// A Top-N prints as upserts of its partition and rank.
		{"SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY url) AS rn FROM clicks) WHERE rn <= 2", "user_id,url,rn", true,
			[]string{"- top-n:", "n: 2", `order: ["value.url"]`, `key: ["user_id", "rn"]`}},
	} {
		q, err := CompileQuery("shell.sql", ddl+tc.query+";", QueryOptions{Topic: "shell-out", Group: "shell-group"})
		if err != nil {
			t.Fatalf("%s: %v", tc.query, err)
		}
		if got := strings.Join(q.Columns, ","); got != tc.cols || q.Updating != tc.updating {
			t.Errorf("%s: columns %s updating %v, want %s %v", tc.query, got, q.Updating, tc.cols, tc.updating)
		}
		y := string(q.YAML)
		if strings.Contains(y, "production-job") {
			t.Errorf("%s: the job commits to the table's group:\n%s", tc.query, y)
		}
		for _, h := range tc.has {
			if !strings.Contains(y, h) {
				t.Errorf("%s: the job file has no %q:\n%s", tc.query, h, y)
			}
		}
	}
	if _, err := CompileQuery("shell.sql", ddl, QueryOptions{Topic: "t"}); err == nil || !strings.Contains(err.Error(), "no query to run") {
		t.Errorf("a script without a query: %v", err)
	}
}
