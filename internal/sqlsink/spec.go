package sqlsink

import (
	"errors"
	"strconv"
	"strings"

	"github.com/onceflow/onceflow/connector"
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
