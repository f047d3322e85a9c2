package compile

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/connector/build"
	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/jobfile"
	"github.com/onceflow/onceflow/pipeline/kafkarec"
)

// The sinks a job file configures in sections of their own (sink.<name>),
// each built by the hook its connector registered (package
// connector/build) from its decoded section: the same code for
// onceflow's connectors and anyone else's (docs/design.md, "Where an
// extension goes").

// extSink is a built sink of kind.
type extSink struct {
	kind  string
	built build.Sink[kafka.Record]
}

// buildSinks builds every sink.<name> section of jf, in jf.Sink.Kinds'
// order, for records read by srcs. On an error it closes what it built.
func buildSinks(jf *jobfile.JobFile, srcs []*kafka.Source) ([]extSink, error) {
	var out []extSink
	sources := make([]any, len(srcs))
	for i, s := range srcs {
		sources[i] = s
	}
	for _, kind := range jf.Sink.Kinds() {
		c := jf.Sink.Connectors[kind]
		if c == nil {
			continue // the Kafka sink, built by Job
		}
		s, err := buildSink(jf, kind, c, sources)
		if err != nil {
			closeSinks(out)
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func buildSink(jf *jobfile.JobFile, kind string, c *connector.Config, sources []any) (extSink, error) {
	spec, ok := connector.Lookup(kind)
	hook, hasHook := build.Lookup[kafka.Record](kind)
	if !ok || !hasHook {
		return extSink{}, fmt.Errorf("%s: sink.%s: connector %q registers no sink for job files: register its build hook (build.Register[kafka.Record]) next to its spec", jf.Path, kind, kind)
	}
	bc := build.Context[kafka.Record]{
		Job:        jf.Job,
		Config:     c,
		Role:       jf.Sink.Role(kind),
		Policy:     jf.Errors.Policy,
		Sources:    sources,
		Value:      jobfile.ColumnValue,
		DeadLetter: deadLetter,
		Retracts:   func(r kafka.Record) bool { return kafkarec.RowKind(r).Retracts() },
	}
	for _, f := range spec.Sink.Fields {
		if f.Kind == connector.ColumnsValue {
			cols, row, err := rowOf(c.Map(f.Name))
			if err != nil {
				return extSink{}, fmt.Errorf("%s: %s.%s: %w", jf.Path, c.Section, f.Name, err)
			}
			bc.Columns, bc.Row = cols, row
			break
		}
	}
	s, err := hook(bc)
	if err != nil {
		return extSink{}, err
	}
	if s.Sink == nil {
		return extSink{}, fmt.Errorf("%s: sink.%s: its build hook returned no sink", jf.Path, kind)
	}
	if s.Close == nil {
		s.Close = func() error { return nil }
	}
	return extSink{kind, s}, nil
}

func closeSinks(sinks []extSink) {
	for _, s := range sinks {
		_ = s.built.Close()
	}
}

// rowOf returns the columns of a columns field and the function that
// makes a record's row, in the pipeline's expression language
// (jobfile.SQLColumnValue).
func rowOf(entries []connector.Entry) ([]string, func(kafka.Record) ([]any, error), error) {
	cols := make([]string, len(entries))
	values := make([]func(kafka.Record) (any, error), len(entries))
	for i, e := range entries {
		cols[i] = e.Name
		v, err := jobfile.SQLColumnValue(e.Value)
		if err != nil { // unreachable: the job file's reader checked it
			return nil, nil, err
		}
		values[i] = v
	}
	return cols, func(r kafka.Record) ([]any, error) {
		row := make([]any, len(values))
		for i, v := range values {
			x, err := v(r)
			if err != nil {
				// The record fails the same way after every restart.
				return nil, flow.Unrecoverable(fmt.Errorf("record %s, column %s: %w", r, cols[i], err))
			}
			row[i] = x
		}
		return row, nil
	}, nil
}

// deadLetter is what a sink keeps of a record it rejects under
// errors.policy dead-letter: its id, key and value.
func deadLetter(r kafka.Record) (string, []byte, []byte) { return recordID(r), r.Key, r.Value }

// recordID identifies a record in a dead-letter table: its position
// (topic/partition/offset) when it has one, else a hash of its key and
// value (a count's result has no position; equal results are kept once).
func recordID(r kafka.Record) string {
	if r.Topic != "" {
		return r.Topic + "/" + strconv.Itoa(int(r.Partition)) + "/" + strconv.FormatInt(r.Offset, 10)
	}
	h := sha256.New()
	h.Write([]byte(strconv.Itoa(len(r.Key))))
	h.Write(r.Key)
	h.Write(r.Value)
	return "sha256:" + hex.EncodeToString(h.Sum(nil)[:16])
}
