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
	// lookups are the tables lookup joins read (lookup.go).
	lookups  []*table
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
	ignoreParseErrors    ast.Pos
	ignoreParseErrorsOpt string // its option
	// timeTable is the table whose WATERMARK a window runs on, and
	// timeTables every table whose event time the job needs (a window's,
	// an interval join's two): each gets its source's event-time
	// section (docs/design.md, "Named streams").
	timeTable  *table
	timeTables []*table
	// shell is set by CompileQuery: the script's last statement is a
	// query whose rows go to shell.Topic.
	shell         *QueryOptions
	shellQuery    *ast.QueryStmt
	shellCols     []string
	shellUpdating bool
	// versionedScan is set while the versioned table of a temporal join
	// is read (temporal.go): its upsert-kafka source may have event time.
	versionedScan bool
}

// QueryOptions say where CompileQuery's query writes and reads.
type QueryOptions struct {
	// Topic receives the query's rows as JSON objects of its columns,
	// keyed by the group for an updating query.
	Topic string
	// Group replaces the source tables' properties.group.id, so that
	// trying a query commits no offsets to a real job's group.
	Group string
}

// Query is a query compiled by CompileQuery.
type Query struct {
	*Job
	// Columns are the query's columns, in order.
	Columns []string
	// Updating: the rows are upserts keyed by the group (a GROUP BY
	// without a window, a keep-last deduplication); else appended.
	Updating bool
}

// CompileQuery compiles a script whose last statement is a query (the
// other statements create its tables and views and SET its settings)
// into a job writing the query's rows to o.Topic: what `onceflow sql`
// runs to show a query's results as they change.
func CompileQuery(path, src string, o QueryOptions) (*Query, error) {
	script, err := parser.Parse(src)
	if err != nil {
		var pe *parser.Error
		if errors.As(err, &pe) {
			return nil, &Error{File: path, Pos: pe.Pos, Msg: pe.Msg}
		}
		return nil, &Error{File: path, Msg: err.Error()}
	}
	p := &planner{file: path, tables: map[string]*table{}, views: map[string]*view{}, settings: map[string]*ast.Option{}, shell: &o}
	p.job = "sql-shell"
	for i, st := range script.Stmts {
		if q, ok := st.(*ast.QueryStmt); ok && i == len(script.Stmts)-1 {
			p.shellQuery = q
			continue
		}
		p.stmt(st)
	}
	if p.shellQuery == nil {
		p.errorf(ast.Pos{}, "no query to run: end with SELECT …")
	}
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	j := p.plan()
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	return &Query{Job: j, Columns: p.shellCols, Updating: p.shellUpdating}, nil
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

// An INSERT INTO planned: the query's relation and the table it writes.
type output struct {
	ins  *ast.Insert
	sink *table
	r    *rel
	// stream names the stream of the named form that holds its steps.
	stream string
}

// plan builds the job file once every statement is read: the one-source
// form for one INSERT reading one table, the named form (sources:,
// streams:, sinks:: docs/design.md, "Named streams") for several INSERTs
// (a statement set) or a UNION ALL of tables.
func (p *planner) plan() *Job {
	p.uses = map[string]int{}
	var outs []*output
	if q := p.shellQuery; q != nil {
		if o := p.shellOutput(q); o != nil {
			outs = append(outs, o)
		}
	}
	for _, ins := range p.inserts {
		sink := p.tableNamed(ins.Table)
		if sink == nil {
			continue
		}
		if !connectors[sink.connector].sink {
			p.errorf(ins.Table.At, "table %s uses the %s connector, which cannot be written to", sink.name, sink.connector)
			continue
		}
		r := p.query(ins.Query)
		if r == nil {
			continue
		}
		if p.sinkSteps(r, ins, sink) == nil && len(p.errs) > 0 {
			continue
		}
		outs = append(outs, &output{ins: ins, sink: sink, r: r})
	}
	if len(p.errs) > 0 {
		return nil
	}
	set := p.readSettings()
	w := newYAMLWriter()
	w.linef(ast.Pos{}, 0, "# Compiled from %s by onceflow's SQL planner (docs/design.md, \"SQL\").", filepath.Base(p.file))
	w.linef(p.nameAt(), 0, "job: %s", q(set.job))
	var sources []*table
	seen := map[*table]bool{}
	var tables []*table
	for _, o := range outs {
		for _, t := range o.r.sources() {
			if !seen[t] {
				seen[t] = true
				sources = append(sources, t)
			}
		}
	}
	tables = append(tables, sources...)
	for _, o := range outs {
		tables = append(tables, o.sink)
	}
	p.kafkaSection(w, tables)
	if len(outs) == 1 && outs[0].r.src != nil {
		o := outs[0]
		p.sourceSection(w, o.r.src, "source:", 0)
		if len(o.r.steps) > 0 {
			w.linef(ast.Pos{}, 0, "pipeline:")
			for _, s := range o.r.steps {
				s.write(w, 1)
			}
		}
		p.sinkSection(w, o.sink, set, "sink:", "", 0)
		p.eventTimeSection(w, set)
	} else {
		p.named(w, set, sources, outs)
		if len(p.timeTables) == 0 {
			p.eventTimeSection(w, set) // its note on an unused SET
		}
	}
	set.write(w, p)
	for _, t := range sources {
		if t.connector == "upsert-kafka" {
			p.checkOptions(t, upsertSourceOptions)
			continue
		}
		p.checkOptions(t, kafkaSourceOptions)
	}
	for _, o := range outs {
		if !o.sink.shell {
			p.checkSinkOptions(o.sink)
		}
	}
	p.checkLookupOptions()
	if len(p.errs) > 0 {
		return nil
	}
	sort.Strings(p.notes)
	return &Job{YAML: []byte(w.b.String()), Origin: w.origin, Notes: p.notes}
}

// named writes the sources:, streams: and sinks: of the named form.
func (p *planner) named(w *yamlWriter, set *settings, sources []*table, outs []*output) {
	w.linef(ast.Pos{}, 0, "sources:")
	for _, t := range sources {
		p.sourceSection(w, t, streamName(t.name)+":", 1)
		if p.usesTime(t) {
			p.writeEventTime(w, t, set, 2)
		}
	}
	w.linef(ast.Pos{}, 0, "streams:")
	used := map[string]int{}
	name := func(base string) string {
		base = streamName(base)
		used[base]++
		if used[base] > 1 {
			return fmt.Sprintf("%s_%d", base, used[base])
		}
		return base
	}
	for _, t := range sources {
		used[streamName(t.name)]++ // a stream may not take a source's name
	}
	var streams []*namedStream
	var stream func(r *rel, base string, at ast.Pos) *namedStream
	stream = func(r *rel, base string, at ast.Pos) *namedStream {
		var from []streamInput
		if r.src != nil {
			from = []streamInput{{source: streamName(r.src.name)}}
		} else {
			for i, b := range r.branches {
				part := fmt.Sprintf("%s_part%d", base, i+1)
				if r.join {
					part = base + []string{"_left", "_right"}[i]
				}
				from = append(from, streamInput{stream: stream(b, part, at)})
			}
		}
		ns := &namedStream{name: name(base), from: from, at: at}
		for _, s := range r.steps {
			ns.steps = append(ns.steps, renderStep(s))
		}
		streams = append(streams, ns)
		return ns
	}
	ends := make([]*namedStream, len(outs))
	for i, o := range outs {
		ends[i] = stream(o.r, "into_"+o.sink.name, o.ins.At)
	}
	sinkNames := make([]string, len(ends)) // before shareSteps renames any
	for i, e := range ends {
		sinkNames[i] = streamName(e.name + "_sink")
	}
	if p.reuseSubPlans() {
		streams = shareSteps(streams, name)
	}
	for _, ns := range streams {
		ns.write(w)
	}
	w.linef(ast.Pos{}, 0, "sinks:")
	for i, o := range outs {
		o.stream = ends[i].resolve().name
		p.sinkSection(w, o.sink, set, sinkNames[i]+":", o.stream, 1)
	}
}

// streamName makes a table's name a name of the named form.
func streamName(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
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

// shellOutput plans CompileQuery's query into a table of its own
// columns on the shell's topic.
func (p *planner) shellOutput(q *ast.QueryStmt) *output {
	r := p.query(q.Query)
	if r == nil {
		return nil
	}
	t := &table{name: "query_rows", at: q.At, connector: "kafka", opts: map[string]*ast.Option{}, used: map[string]bool{}, shell: true}
	t.opts["topic"] = &ast.Option{Key: "topic", Value: p.shell.Topic}
	for _, c := range r.cols {
		t.cols = append(t.cols, &ast.ColumnDef{Name: ast.Ident{Name: c.name}})
		p.shellCols = append(p.shellCols, c.name)
	}
	p.shellUpdating = r.updating
	ins := &ast.Insert{At: q.At, Table: ast.Name{At: q.At, Parts: []ast.Ident{{Name: t.name}}}, Query: q.Query}
	if p.sinkSteps(r, ins, t) == nil && len(p.errs) > 0 {
		return nil
	}
	return &output{ins: ins, sink: t, r: r}
}
