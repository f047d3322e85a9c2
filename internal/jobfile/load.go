// Package jobfile is the job-file format: a YAML file that describes a
// whole job (docs/design.md, "Packages and dependencies"). Reading one
// (ParseJobFile, LoadJobFile) takes four steps, in files of their own:
//
//   - yaml.go: the YAML toolkit. It parses the file into a node tree and
//     decodes values (scalars, lists, durations, sizes, choices) into Go
//     values, recording the line of every field and reporting unknown
//     fields with a "did you mean".
//   - one decoder per section: decode.go (the top level, sink, errors,
//     state), kafka.go, source.go, pipeline.go (steps are decoded from
//     their operator's spec in package pipeline), engine.go
//     (checkpointing, restart), db.go and redis.go (the database sinks).
//   - defaults.go fills in what the file leaves out.
//   - validate.go checks what spans fields and sections, with every
//     default known; scaleout.go cuts a scale-out job into sub-topologies.
//
// The schema the steps fill is in schema.go. Every problem is a
// *FileError at a line, many of them at once; testdata/parse-errors holds
// one file per message with its expected output.
package jobfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// FileError is one problem in a job file, at a line when it has one.
type FileError struct {
	File string
	Line int // 0 when the problem has no single place (a missing section)
	// Col is the column, from 1, where the file says one (a SQL script);
	// 0 otherwise.
	Col int
	Msg string
}

func (e *FileError) Error() string {
	if e.Line > 0 && e.Col > 0 {
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
	}
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// LoadJobFile reads and parses the job file at path.
func LoadJobFile(path string) (*JobFile, error) {
	return loadJobFile(path, "")
}

// LoadJobFileForKafka is LoadJobFile for a command that uses only the
// file's kafka section (and names of topics and groups): a ${VAR} secret
// of another section (a database DSN) whose variable is not set is left
// empty instead of an error, so that lag or txn run where only the Kafka
// credentials are in the environment.
func LoadJobFileForKafka(path string) (*JobFile, error) {
	return loadJobFile(path, "kafka.")
}

func loadJobFile(path, secretsOf string) (*JobFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read job file: %w", err)
	}
	if IsSQL(path) {
		return parseSQL(path, data, os.LookupEnv, secretsOf)
	}
	return parseJobFile(path, data, os.LookupEnv, secretsOf)
}

// ParseJobFile parses and validates a job file. name is the file's path:
// messages name it, and relative paths in the file (state.dir, kafka.tls
// files) are resolved against its directory. lookupEnv resolves ${VAR} in
// kafka.sasl credentials (nil: none are defined). The error, if any, joins
// one *FileError per problem found, in file order, so a user fixes them all
// in one go.
func ParseJobFile(name string, data []byte, lookupEnv func(string) (string, bool)) (*JobFile, error) {
	if IsSQL(name) {
		if lookupEnv == nil {
			lookupEnv = func(string) (string, bool) { return "", false }
		}
		return parseSQL(name, data, lookupEnv, "")
	}
	return parseJobFile(name, data, lookupEnv, "")
}

// parseJobFile is ParseJobFile; secretsOf, when not "", is the path prefix
// of the only secrets that must resolve (LoadJobFileForKafka).
func parseJobFile(name string, data []byte, lookupEnv func(string) (string, bool), secretsOf string) (*JobFile, error) {
	if lookupEnv == nil {
		lookupEnv = func(string) (string, bool) { return "", false }
	}
	base, err := filepath.Abs(filepath.Dir(name))
	if err != nil { // no working directory: resolve against what there is
		base = filepath.Dir(name)
	}
	d := &decoder{file: name, base: base, env: lookupEnv, secretsOf: secretsOf, lines: map[string]int{}}
	jf := &JobFile{Path: name}
	root, err := parseYAML(name, data)
	if err != nil {
		return nil, err
	}
	d.decodeRoot(root, jf)
	if len(d.errs) == 0 {
		d.applyDefaults(jf)
		d.validate(jf)
	}
	if len(d.errs) > 0 {
		return nil, errors.Join(d.errs...)
	}
	return jf, nil
}
