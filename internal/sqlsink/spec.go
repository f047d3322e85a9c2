package sqlsink

import (
	"errors"
	"strconv"
	"strings"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/connector/build"
	"github.com/onceflow/onceflow/flow"
)

// The job-file side of the table sinks (sink.postgres, sink.mysql): the
// rules their spec's Validate hook checks (connector.TableFields) and the
// delivery their role maps to.

// TableRules checks a table sink's section c beyond its fields' types:
// the table name (validTable), the columns and their sources, the key, the
// batch size and the job's delivery. trial, called when nothing else is
// wrong, makes the connector's sink without connecting, so that whatever
// else the connector refuses is reported before the job runs; prefix is
// what its messages start with ("postgres sink: ").
func TableRules(c *connector.Config, chk connector.Check, validTable func(string) error, trial func() error, prefix string) error {
	sec := c.Section
	var errs []error
	add := func(at []string, format string, args ...any) {
		errs = append(errs, connector.Errorf(at, format, args...))
	}
	table := c.String("table")
	if table != "" {
		if err := validTable(table); err != nil {
			add(connector.At("table"), "%s.%v", sec, err)
		}
	}
	cols := c.Map("columns")
	seen := map[string]bool{}
	for _, e := range cols {
		at := connector.At("columns." + e.Name)
		if seen[e.Name] {
			add(at, "%s.columns lists %q twice", sec, e.Name)
		}
		seen[e.Name] = true
		if chk.SQLSource != nil {
			if err := chk.SQLSource(e.Value); err != nil {
				add(at, "%s.columns.%s: %v", sec, e.Name, err)
			}
		}
	}
	key := c.List("key")
	for _, k := range key {
		if len(cols) > 0 && !seen[k] {
			add(connector.At("key"), "%s.key %q is not among the columns: add it to %s.columns", sec, k, sec)
		}
	}
	if c.Has("batch-rows") && c.Int("batch-rows") < 1 {
		add(connector.At("batch-rows"), "%s.batch-rows must be at least 1; remove it for the default %d", sec, DefaultBatchRows)
	}
	if chk.Delivery == connector.None {
		add(connector.At(connector.DeliveryField), "sink.delivery none is for Kafka sinks: a database sink is exactly-once (its transaction is the commit point, or a prepared transaction under another sink's) or at-least-once (epoch-fenced upserts)")
	}
	if chk.Delivery == connector.AtLeastOnce && len(key) == 0 {
		add(connector.At(connector.DeliveryField, ""), "sink.delivery at-least-once into a database writes idempotent upserts: name the table's primary key in %s.key", sec)
	}
	if len(errs) == 0 && c.String("dsn") != "" && table != "" && len(cols) > 0 {
		if err := trial(); err != nil {
			for _, line := range strings.Split(strings.TrimPrefix(err.Error(), prefix), "\n") {
				add(connector.At(""), "%s: %s", sec, line)
			}
		}
	}
	return errors.Join(errs...)
}

// TableDelivery is the delivery string of a table sink in role: its
// transaction as the commit point (exactly-once), a prepared transaction
// under another (two-phase), else epoch-fenced upserts (at-least-once).
func TableDelivery(role connector.Delivery) string {
	switch role {
	case connector.ExactlyOnce, connector.TwoPhase:
		return string(role)
	}
	return string(connector.AtLeastOnce)
}

// DescribeTable is a table sink's line in `onceflow validate`: what
// (PostgreSQL and the redacted DSN), then table, columns, key and
// delivery.
func DescribeTable(c *connector.Config, d connector.Describe, what string) string {
	var b strings.Builder
	b.WriteString(what + ", table " + c.String("table"))
	var cols []string
	for _, e := range c.Map("columns") {
		cols = append(cols, e.Name+"="+e.Value)
	}
	b.WriteString(" (" + strings.Join(cols, ", ") + ")")
	if key := c.List("key"); len(key) > 0 {
		b.WriteString(", upsert on key (" + strings.Join(key, ", ") + ")")
	} else {
		b.WriteString(", appended")
	}
	rows := c.Int("batch-rows")
	switch d.Role {
	case connector.ExactlyOnce:
		b.WriteString(", delivery exactly-once (the transaction is the commit point), ")
	case connector.TwoPhase:
		b.WriteString(", delivery exactly-once (prepared transactions under the " + d.CommitPoint + " commit point), ")
	default:
		b.WriteString(", delivery " + string(d.Delivery) + " (epoch-fenced upserts), ")
	}
	b.WriteString(strconv.Itoa(rows) + " rows per batch")
	return b.String()
}

// DeadLetterPlace is where a table sink keeps dead letters.
func DeadLetterPlace(string) string { return "the table " + DefaultDeadLetterTable }

// Table is a table sink's settings from a job file's section (package
// connector/build): what postgres.Config and mysql.Config are made of.
type Table[R any] struct {
	DSN, Table  string
	Columns     []string
	Key         []string
	Delivery    string
	BatchRows   int
	Job         string
	Row         func(R) ([]any, error)
	Retracts    func(R) bool
	DeadLetters *DeadLetters[R]
}

// TableOf is the settings of section c for a sink in role; cols nil: the
// names of c's columns.
func TableOf[R any](c *connector.Config, role connector.Delivery, job string, row func(R) ([]any, error), cols []string, dead *DeadLetters[R]) Table[R] {
	if cols == nil {
		for _, e := range c.Map("columns") {
			cols = append(cols, e.Name)
		}
	}
	return Table[R]{DSN: c.String("dsn"), Table: c.String("table"), Columns: cols, Key: c.List("key"),
		Delivery: TableDelivery(role), BatchRows: c.Int("batch-rows"), Job: job, Row: row, DeadLetters: dead}
}

// TableSink is what a table connector's sink offers its build hook.
type TableSink[R any] interface {
	flow.Sink[R]
	Close() error
	Failures() flow.Sink[flow.Failure[R]]
}

// BuildTable is the build hook of a table sink (sink.postgres,
// sink.mysql): the settings of bc's section, made into the connector's
// sink by newSink, with the dead-letter table under
// flow.DeadLetterOnError.
func BuildTable[R any, S TableSink[R]](bc build.Context[R], newSink func(Table[R]) (S, error)) (build.Sink[R], error) {
	var dead *DeadLetters[R]
	if bc.Policy == flow.DeadLetterOnError {
		dead = &DeadLetters[R]{Of: bc.DeadLetter}
	}
	t := TableOf(bc.Config, bc.Role, bc.Job, bc.Row, bc.Columns, dead)
	t.Retracts = bc.Retracts
	s, err := newSink(t)
	if err != nil {
		return build.Sink[R]{}, err
	}
	out := build.Sink[R]{Sink: s, Close: s.Close}
	if dead != nil {
		out.DeadLetters = s.Failures()
	}
	return out, nil
}
