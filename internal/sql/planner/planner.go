// Package planner compiles a SQL script in Flink's dialect into a job
// file: the same plan a YAML job file is, read, validated, explained and
// run by the same code (docs/design.md, "SQL"). Tables become the job's
// source and sink sections, a query's projections and filters become
// `select` steps (SQL expressions over typed rows), window table
// functions become `window` steps, GROUP BY without a window becomes an
// `aggregate` step (an updating result), and SET statements become the
// job's checkpointing, restart and state sections.
//
// The job file is kept for people too: `onceflow validate job.sql
// --show-job` prints it. Every line of it remembers the SQL it came from
// (Job.Origin), so a problem the job-file reader finds is reported at the
// script's line and column.
package planner

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/onceflow/onceflow/internal/sql/ast"
	"github.com/onceflow/onceflow/internal/sql/parser"
)

// Job is a compiled script.
type Job struct {
	// YAML is the job file the script compiles to.
	YAML []byte
	// Origin maps a line of YAML to the place in the script it comes from.
	Origin map[int]ast.Pos
	// Notes say what the plan does that a Flink user may not expect (a
	// setting Flink has that means nothing here, a sink's delivery), one
	// sentence each.
	Notes []string
}

// Error is a problem in a script, at a line and column.
type Error struct {
	File string
	Pos  ast.Pos
	Msg  string
}

func (e *Error) Error() string {
	if e.Pos.Line == 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Pos.Line, e.Pos.Col, e.Msg)
}

// Compile compiles the script src, read from the file path (its name
// names the job unless SET 'pipeline.name' does). The error joins one
// *Error per problem found.
func Compile(path, src string) (*Job, error) {
	script, err := parser.Parse(src)
	if err != nil {
		var pe *parser.Error
		if errors.As(err, &pe) {
			return nil, &Error{File: path, Pos: pe.Pos, Msg: pe.Msg}
		}
		return nil, &Error{File: path, Msg: err.Error()}
	}
	p := &planner{file: path, tables: map[string]*table{}, views: map[string]*view{}, settings: map[string]*ast.Option{}}
	p.job = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	for _, st := range script.Stmts {
		p.stmt(st)
	}
	if len(p.errs) == 0 && len(p.inserts) == 0 {
		p.errorf(ast.Pos{}, "the script has no INSERT INTO: a job writes its results to a table, as INSERT INTO sink_table SELECT … FROM source_table")
	}
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	j := p.plan()
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	return j, nil
}

type planner struct {
	file     string
	job      string
	tables   map[string]*table
	order    []*table
	views    map[string]*view
	settings map[string]*ast.Option
	inserts  []*ast.Insert
	errs     []error
	notes    []string
	// uses counts the uids handed out, so two steps of one kind get
	// distinct ones.
	uses map[string]int
	// ignoreParseErrors is where 'json.ignore-parse-errors' = 'true' was
	// set: the job skips (and counts) records it cannot read.
	ignoreParseErrors ast.Pos
	// timeTable is the table whose WATERMARK a window runs on.
	timeTable *table
}

func (p *planner) errorf(at ast.Pos, format string, args ...any) {
	p.errs = append(p.errs, &Error{File: p.file, Pos: at, Msg: fmt.Sprintf(format, args...)})
}

func (p *planner) stmt(st ast.Stmt) {
	switch s := st.(type) {
	case *ast.CreateTable:
		p.createTable(s)
	case *ast.CreateView:
		name := strings.ToLower(s.Name.Last())
		if _, dup := p.views[name]; dup || p.tables[name] != nil {
			if !s.IfNotExists {
				p.errorf(s.Name.At, "%s is created twice", s.Name.Last())
			}
			return
		}
		p.views[name] = &view{name: s.Name.Last(), def: s}
	case *ast.Set:
		if s.Option.Key == "" {
			p.errorf(s.At, "SET without a key lists the settings in Flink's SQL client; in a job it does nothing: remove it")
			return
		}
		p.settings[s.Option.Key] = &s.Option
	case *ast.Reset:
		if s.Key == "" {
			p.settings = map[string]*ast.Option{}
		} else {
			delete(p.settings, s.Key)
		}
	case *ast.Insert:
		p.inserts = append(p.inserts, s)
	case *ast.StatementSet:
		p.inserts = append(p.inserts, s.Inserts...)
	case *ast.CreateFunction:
		p.errorf(s.At, "CREATE FUNCTION %s: onceflow runs no Java, Scala or Python functions; write the logic with the built-in functions, or as a Go operator (docs/design.md, \"SQL\")", s.Name.Last())
	case *ast.Explain:
		p.errorf(s.At, "EXPLAIN in a job script: run `onceflow validate FILE.sql`, which prints the plan of every INSERT")
	case *ast.QueryStmt:
		p.errorf(s.At, "a query without INSERT INTO has nowhere to write its rows: write INSERT INTO sink_table SELECT …")
	default:
		p.errorf(st.Position(), "this statement is not supported in a job script")
	}
}

// plan builds the job file once every statement is read.
func (p *planner) plan() *Job {
	p.uses = map[string]int{}
	if len(p.inserts) > 1 {
		p.errorf(p.inserts[1].At, "a script runs one INSERT INTO for now; this is the second: put it in a script of its own")
		return nil
	}
	ins := p.inserts[0]
	sink := p.tableNamed(ins.Table)
	if sink == nil {
		return nil
	}
	if !connectors[sink.connector].sink {
		p.errorf(ins.Table.At, "table %s uses the %s connector, which cannot be written to", sink.name, sink.connector)
		return nil
	}
	r := p.query(ins.Query)
	if r == nil {
		return nil
	}
	set := p.readSettings()
	w := newYAMLWriter()
	w.linef(ast.Pos{}, 0, "# Compiled from %s by onceflow's SQL planner (docs/design.md, \"SQL\").", filepath.Base(p.file))
	w.linef(p.nameAt(), 0, "job: %s", q(set.job))
	src := r.src
	p.kafkaSection(w, src, sink)
	p.sourceSection(w, src)
	steps := p.sinkSteps(r, ins, sink)
	if steps == nil && len(p.errs) > 0 {
		return nil
	}
	if len(steps) > 0 {
		w.linef(ast.Pos{}, 0, "pipeline:")
		for _, s := range steps {
			s.write(w, 1)
		}
	}
	p.sinkSection(w, sink, set, r)
	p.eventTimeSection(w, set)
	set.write(w, p)
	p.checkOptions(src, kafkaSourceOptions)
	p.checkSinkOptions(sink)
	if len(p.errs) > 0 {
		return nil
	}
	sort.Strings(p.notes)
	return &Job{YAML: []byte(w.b.String()), Origin: w.origin, Notes: p.notes}
}

func (p *planner) nameAt() ast.Pos {
	if o := p.settings["pipeline.name"]; o != nil {
		return o.ValueAt
	}
	return ast.Pos{}
}

// tableNamed finds a table of the catalog, or reports it missing.
func (p *planner) tableNamed(n ast.Name) *table {
	if t := p.tables[strings.ToLower(n.Last())]; t != nil {
		return t
	}
	var names []string
	for _, t := range p.order {
		names = append(names, t.name)
	}
	for _, v := range p.views {
		names = append(names, v.name)
	}
	p.errorf(n.At, "table %s is not created in this script%s: add CREATE TABLE %s (…) WITH ('connector' = …) before it is used", n.Last(), didYouMean(n.Last(), names), n.Last())
	return nil
}
