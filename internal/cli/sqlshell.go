package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/jobfile"
	"github.com/onceflow/onceflow/internal/sql/ast"
	"github.com/onceflow/onceflow/internal/sql/parser"
	"github.com/onceflow/onceflow/internal/sql/planner"
	"github.com/onceflow/onceflow/pipeline"
)

// `onceflow sql`: try queries against topics. CREATE TABLE, CREATE VIEW
// and SET statements build a session; a SELECT runs as a job of its own
// (compiled by planner.CompileQuery, with a group, state directory and
// output topic of its own, all removed afterwards) and its rows are
// printed as they are committed — an updating query's rows as upserts of
// their group. The query runs until its input ends ('scan.bounded.mode'
// = 'latest-offset') or Ctrl-C, which also ends the session.

func sqlFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	file := fs.String("file", "", "read the statements from `FILE` instead of the terminal; the session ends at the file's end")
	return func(ctx context.Context, e *env, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("%w: sql takes no arguments (statements come from the terminal or --file), got %s", errUsage, strings.Join(args, " "))
		}
		in, interactive := io.Reader(os.Stdin), true
		if *file != "" {
			f, err := os.Open(*file)
			if err != nil {
				return err
			}
			defer f.Close()
			in, interactive = f, false
		}
		sh := &sqlShell{e: e, interactive: interactive}
		return sh.loop(ctx, in)
	}
}

type sqlShell struct {
	e           *env
	interactive bool
	// session holds the statements that define the tables, views and
	// settings, as written.
	session []string
	queries int
}

func (sh *sqlShell) prompt(more bool) {
	if !sh.interactive {
		return
	}
	if more {
		fmt.Fprint(sh.e.stdout, "      -> ")
	} else {
		fmt.Fprint(sh.e.stdout, "onceflow> ")
	}
}

// loop reads statements, each ended by a ';' at the end of a line, until
// the input ends or ctx is done.
func (sh *sqlShell) loop(ctx context.Context, in io.Reader) error {
	if sh.interactive {
		fmt.Fprintln(sh.e.stdout, "onceflow SQL: CREATE TABLE, CREATE VIEW and SET build the session; a SELECT runs and prints its rows\n"+
			"as they are committed, until its input ends or Ctrl-C (which ends the session). End statements with ';'.")
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	var stmt strings.Builder
	sh.prompt(false)
	for sc.Scan() {
		line := sc.Text()
		stmt.WriteString(line)
		stmt.WriteByte('\n')
		if !strings.HasSuffix(strings.TrimSpace(line), ";") {
			sh.prompt(stmt.Len() > 1)
			continue
		}
		text := stmt.String()
		stmt.Reset()
		if done, err := sh.statement(ctx, text); done || err != nil {
			return err
		}
		sh.prompt(false)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if rest := strings.TrimSpace(stmt.String()); rest != "" {
		_, err := sh.statement(ctx, rest+";")
		return err
	}
	return nil
}

// statement runs one statement; done ends the session.
func (sh *sqlShell) statement(ctx context.Context, text string) (done bool, err error) {
	switch strings.ToLower(strings.TrimSuffix(strings.TrimSpace(text), ";")) {
	case "quit", "exit":
		return true, nil
	case "":
		return false, nil
	}
	script, err := parser.Parse(text)
	if err != nil {
		fmt.Fprintf(sh.e.stdout, "error: %v\n", err)
		return false, nil
	}
	for _, st := range script.Stmts {
		switch x := st.(type) {
		case *ast.QueryStmt:
			if err := sh.run(ctx, text); err != nil {
				if ctx.Err() != nil {
					return true, nil
				}
				fmt.Fprintf(sh.e.stdout, "error: %v\n", err)
			}
			return ctx.Err() != nil, nil
		case *ast.Explain:
			q, ok := x.Stmt.(*ast.QueryStmt)
			if !ok {
				fmt.Fprintf(sh.e.stdout, "error: the shell explains a SELECT; for a job's INSERT INTO: onceflow validate FILE.sql\n")
				return false, nil
			}
			if err := sh.explain(q.String()); err != nil {
				fmt.Fprintf(sh.e.stdout, "error: %v\n", err)
			}
			return false, nil
		case *ast.CreateTable, *ast.CreateView, *ast.Set, *ast.Reset:
		default:
			fmt.Fprintf(sh.e.stdout, "error: the shell takes CREATE TABLE, CREATE VIEW, SET, SELECT and EXPLAIN SELECT; run INSERT INTO in a job: onceflow run FILE.sql\n")
			return false, nil
		}
	}
	sh.session = append(sh.session, text)
	fmt.Fprintln(sh.e.stdout, "ok")
	return false, nil
}

// compile compiles query with the session's tables, views and settings
// into the job that runs it, named name, its state under dir.
func (sh *sqlShell) compile(name, dir, query string) (*planner.Query, *jobfile.JobFile, error) {
	script := "SET 'execution.checkpointing.interval' = '1 s';\n" + strings.Join(sh.session, "") +
		fmt.Sprintf("SET 'pipeline.name' = '%s';\nSET 'state.checkpoints.dir' = '%s';\n", name, dir) + query
	q, err := planner.CompileQuery("query.sql", script, planner.QueryOptions{Topic: name, Group: name})
	if err != nil {
		return nil, nil, atQuery(err, strings.Count(script[:len(script)-len(query)], "\n"))
	}
	jf, err := jobfile.ParseJobFile(dir+"/query.yaml", q.YAML, os.LookupEnv)
	if err != nil {
		return nil, nil, err
	}
	return q, jf, nil
}

// explain prints the plan of query as onceflow validate prints a job's:
// its operators, the state each keeps and what frees it.
func (sh *sqlShell) explain(query string) error {
	dir, err := os.MkdirTemp("", "onceflow-sql-explain-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	_, jf, err := sh.compile("explain", dir, query)
	if err != nil {
		return err
	}
	describeJob(sh.e.stdout, jf)
	return nil
}

// run runs a query until its input ends or ctx is done, printing its
// rows.
func (sh *sqlShell) run(ctx context.Context, query string) error {
	sh.queries++
	name := fmt.Sprintf("onceflow-sql-%d-%d-%d", os.Getpid(), time.Now().Unix(), sh.queries)
	dir, err := os.MkdirTemp("", name+"-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	q, jf, err := sh.compile(name, dir, query)
	if err != nil {
		return err
	}
	cc, err := clientConfig(jf.Kafka)
	if err != nil {
		return err
	}
	cl, err := cc.NewClient()
	if err != nil {
		return err
	}
	adm := kadm.NewClient(cl)
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, _ = adm.DeleteTopics(dctx, name)
		_, _ = adm.DeleteGroups(dctx, name)
		cl.Close()
	}()
	if _, err := adm.CreateTopic(ctx, 1, -1, nil, name); err != nil {
		return fmt.Errorf("create the query's output topic %s: %w", name, err)
	}
	// The job, with its log quieter than a run's: the rows are the
	// output here.
	jctx, stopJob := context.WithCancel(ctx)
	defer stopJob()
	jobDone := make(chan error, 1)
	quiet := &env{stdout: io.Discard, stderr: sh.e.stderr, log: sh.e.log}
	go func() {
		jobDone <- runJob(jctx, quiet, jf, runOptions{connectTimeout: 15 * time.Second, stopTimeout: 30 * time.Second})
	}()
	rd, err := cc.NewClient(kgo.ConsumeTopics(name), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return err
	}
	defer rd.Close()
	fmt.Fprintln(sh.e.stdout, rowHeader(q.Columns, q.Updating))
	rows := 0
	print := func(fs kgo.Fetches) {
		fs.EachRecord(func(r *kgo.Record) {
			rows++
			fmt.Fprintln(sh.e.stdout, rowLine(q.Columns, q.Updating, r))
		})
	}
	var jobErr error
	ended := false
	for !ended {
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		print(rd.PollFetches(pctx))
		cancel()
		select {
		case jobErr = <-jobDone:
			ended = true
		default:
		}
		if ctx.Err() != nil && !ended {
			jobErr = <-jobDone
			ended = true
		}
	}
	// The job's last transaction is committed: read what is left, until
	// a poll brings nothing.
	for {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 500*time.Millisecond)
		fs := rd.PollFetches(pctx)
		cancel()
		if fs.NumRecords() == 0 {
			break
		}
		print(fs)
	}
	fmt.Fprintf(sh.e.stdout, "(%d rows)\n", rows)
	if jobErr != nil && !errors.Is(jobErr, context.Canceled) {
		return jobErr
	}
	return nil
}

func rowHeader(cols []string, updating bool) string {
	h := strings.Join(cols, " | ")
	if updating {
		return "op | " + h
	}
	return h
}

// rowLine prints a row of the query's output: its columns' values in
// order, an updating query's with +U (the group's new row) or -D (its
// row removed: the key).
func rowLine(cols []string, updating bool, r *kgo.Record) string {
	if updating && r.Value == nil {
		// A retraction, written as a tombstone: the group's row is gone
		// (a HAVING it stopped passing, a group left empty).
		return "-D | key " + string(r.Key)
	}
	var row map[string]json.RawMessage
	if err := json.Unmarshal(r.Value, &row); err != nil {
		return string(r.Value)
	}
	vals := make([]string, len(cols))
	for i, c := range cols {
		v := string(row[c])
		if s := ""; json.Unmarshal(row[c], &s) == nil {
			v = s
		}
		if v == "" && (row[c] == nil || string(row[c]) == "null") {
			v = "NULL"
		}
		vals[i] = v
	}
	line := strings.Join(vals, " | ")
	for _, h := range r.Headers {
		if h.Key == pipeline.RowKindHeader && pipeline.ParseRowKind(h.Value).Retracts() {
			// A retraction without a key, whole: an outer join's padded
			// row taken back when its partner came.
			return "-D | " + line
		}
	}
	if updating {
		return "+U | " + line
	}
	return line
}

// atQuery writes the planner's errors at their places in the query (its
// lines counted from the query's first), or in the session's statements
// before it.
func atQuery(err error, before int) error {
	var msgs []string
	for _, e := range unjoinErrors(err) {
		var pe *planner.Error
		switch {
		case errors.As(e, &pe) && pe.Pos.Line > before:
			msgs = append(msgs, fmt.Sprintf("line %d, column %d: %s", pe.Pos.Line-before, pe.Pos.Col, pe.Msg))
		case errors.As(e, &pe):
			msgs = append(msgs, "in the session's statements: "+pe.Msg)
		default:
			msgs = append(msgs, e.Error())
		}
	}
	return errors.New(strings.Join(msgs, "\n"))
}

func unjoinErrors(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
