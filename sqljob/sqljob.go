// Package sqljob compiles a script in Flink's SQL dialect into a job and
// runs it: what `onceflow run job.sql` does, from Go. The script is the
// same as a .sql file's (docs/sql.md): tables with CREATE TABLE … WITH
// ('connector' = …), SET by Flink's keys, and INSERT INTO. It compiles
// into the job file the binary would run and is built by the same code,
// so it has every guarantee a job file has (docs/design.md, "SQL").
//
//	job, err := sqljob.Compile("job.sql", script)
//	if err != nil {
//		return err // *sqljob.Error values: file:line:column: message
//	}
//	return job.Run(ctx)
package sqljob

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/compile"
	"github.com/onceflow/onceflow/internal/jobfile"
	"github.com/onceflow/onceflow/internal/sql/planner"
)

// Job is a compiled script, ready to run.
type Job struct {
	jf *jobfile.JobFile
}

// Error is a problem in a script, at a line and column.
type Error struct {
	// File is the name the script was compiled under.
	File string
	// Line and Col are where the problem is, from 1; 0 when it has no
	// single place (a script without INSERT INTO).
	Line, Col int
	// Msg says what is wrong and what to do.
	Msg string
}

func (e *Error) Error() string {
	switch {
	case e.Line > 0 && e.Col > 0:
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
	case e.Line > 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// Compile compiles script as the .sql file name: name names the job
// (unless SET 'pipeline.name' does) and relative paths, such as the
// default state directory ./onceflow-data, are resolved against its
// directory, as for a file. ${VAR} in options is read from the
// environment. The error joins one *Error per problem found, in the
// script's order, so all of them can be fixed in one go.
func Compile(name, script string) (*Job, error) {
	if !jobfile.IsSQL(name) {
		return nil, &Error{File: name, Msg: "a script's name ends in .sql (it names the job and locates relative paths): write job.sql, or a path ending in .sql"}
	}
	jf, err := jobfile.ParseJobFile(name, []byte(script), os.LookupEnv)
	if err != nil {
		return nil, convert(name, err)
	}
	return &Job{jf: jf}, nil
}

// convert turns the planner's and the job-file reader's errors into
// *Error values.
func convert(name string, err error) error {
	var in []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		in = j.Unwrap()
	} else {
		in = []error{err}
	}
	out := make([]error, 0, len(in))
	for _, e := range in {
		var pe *planner.Error
		var fe *jobfile.FileError
		switch {
		case errors.As(e, &pe):
			out = append(out, &Error{File: pe.File, Line: pe.Pos.Line, Col: pe.Pos.Col, Msg: pe.Msg})
		case errors.As(e, &fe):
			out = append(out, &Error{File: fe.File, Line: fe.Line, Col: fe.Col, Msg: fe.Msg})
		default:
			out = append(out, &Error{File: name, Msg: e.Error()})
		}
	}
	if len(out) == 1 {
		return out[0]
	}
	return errors.Join(out...)
}

// Name is the job's name: its transactional ids, consumer group default
// and state directory are derived from it, so keep it stable.
func (j *Job) Name() string { return j.jf.Job }

// JobFile is the job file the script compiled to (YAML), as `onceflow
// validate --show-job` prints it.
func (j *Job) JobFile() []byte { return j.jf.SQL.YAML }

// Notes say what the plan does that a Flink user may not expect (a
// setting that means nothing here, a sink's delivery), one sentence each.
func (j *Job) Notes() []string { return j.jf.SQL.Notes }

// Run runs the job as `onceflow run` does: it restores the job's latest
// checkpoint in its state directory, if any, and runs until its input
// ends (a table with 'scan.bounded.mode' = 'latest-offset'), ctx is
// canceled (then it stops gracefully: a final checkpoint commits what was
// processed), or it fails beyond what its restart strategy allows. opts
// are engine options on top of the script's, such as flow.FromSavepoint,
// flow.WithHooks or flow.Logger. Each call builds the job anew, so a
// second Run after the first returned resumes where it stopped.
func (j *Job) Run(ctx context.Context, opts ...flow.Option) error {
	if j.jf.ScaleOut.Enabled { // a script cannot ask for it today
		return fmt.Errorf("%s: scale-out jobs run with onceflow run", j.jf.Path)
	}
	cc, err := compile.ClientConfig(j.jf.Kafka)
	if err != nil {
		return err
	}
	b, err := compile.Job(j.jf, cc, nil, opts...)
	if err != nil {
		return err
	}
	runErr := b.Env.Run(ctx)
	return errors.Join(runErr, b.CloseSink())
}
