package jobfile

import (
	"errors"
	"fmt"
	"strings"

	"github.com/onceflow/onceflow/internal/sql/planner"
)

// A .sql file is a job too: the SQL planner compiles it into a job file
// (docs/design.md, "SQL"), which is read as any other. A problem the
// job-file reader finds on a line of the compiled file is reported at the
// SQL it came from.

// SQLInfo is what a job compiled from SQL keeps of its compilation.
type SQLInfo struct {
	// YAML is the job file the script compiled to.
	YAML []byte
	// Notes say what the plan does that a Flink user may not expect.
	Notes []string
}

// IsSQL tells whether path names a SQL script rather than a YAML job file.
func IsSQL(path string) bool { return strings.HasSuffix(strings.ToLower(path), ".sql") }

// parseSQL compiles the script and reads the job file it compiles to.
func parseSQL(name string, data []byte, lookupEnv func(string) (string, bool), secretsOf string) (*JobFile, error) {
	job, err := planner.Compile(name, string(data))
	if err != nil {
		return nil, err
	}
	jf, err := parseJobFile(name, job.YAML, lookupEnv, secretsOf)
	if err != nil {
		return nil, remapSQL(err, job)
	}
	jf.SQL = &SQLInfo{YAML: job.YAML, Notes: job.Notes}
	return jf, nil
}

// remapSQL puts the problems the job-file reader found in the compiled
// file at the places of the script they come from.
func remapSQL(err error, job *planner.Job) error {
	var errs []error
	for _, e := range unjoin(err) {
		var fe *FileError
		if errors.As(e, &fe) {
			c := *fe
			if at, ok := job.Origin[fe.Line]; ok {
				c.Line, c.Col = at.Line, at.Col
			} else if fe.Line > 0 {
				c.Msg = fmt.Sprintf("%s (line %d of the compiled job file: see onceflow validate --show-job)", fe.Msg, fe.Line)
				c.Line = 0
			}
			errs = append(errs, &c)
			continue
		}
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
