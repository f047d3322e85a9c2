package jobfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSQLScripts reads every script the planner's tests compile as a job
// (ParseJobFile of a .sql name): each must give a valid job file whose
// steps the pipeline builds.
func TestSQLScripts(t *testing.T) {
	files, _ := filepath.Glob("../sql/planner/testdata/ok/*.sql")
	if len(files) == 0 {
		t.Fatal("no scripts in ../sql/planner/testdata/ok")
	}
	env := func(string) (string, bool) { return "postgres://app@localhost:5432/shop", true }
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			jf, err := ParseJobFile(f, src, env)
			if err != nil {
				t.Fatal(err)
			}
			if jf.SQL == nil || len(jf.SQL.YAML) == 0 {
				t.Fatal("a job from SQL keeps no compiled job file")
			}
			if _, err := jf.Plan(); err != nil {
				t.Fatalf("plan: %v", err)
			}
		})
	}
}

// TestSQLErrorsAtScriptLines: a problem the job-file reader finds in the
// compiled file is reported at the script's line and column.
func TestSQLErrorsAtScriptLines(t *testing.T) {
	src := `SET 'execution.checkpointing.interval' = '0 s';
CREATE TABLE a (x STRING) WITH ('connector' = 'kafka', 'topic' = 'a', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
CREATE TABLE b (x STRING) WITH ('connector' = 'kafka', 'topic' = 'b', 'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json');
INSERT INTO b SELECT x FROM a;
`
	_, err := ParseJobFile("job.sql", []byte(src), nil)
	var fe *FileError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v, want a *FileError", err)
	}
	if !strings.HasPrefix(err.Error(), "job.sql:1:42: ") {
		t.Fatalf("error %q, want it at job.sql:1:42 (the SET's value)", err)
	}
}
