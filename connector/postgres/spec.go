package postgres

import (
	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/connector/build"
	"github.com/onceflow/onceflow/internal/sqlsink"
)

func init() { connector.Register(Spec) }

// Spec is what the PostgreSQL sink declares about itself (package
// connector).
var Spec = connector.Spec{
	Name:    "postgres",
	Summary: "Writes rows to a PostgreSQL table: its transaction as the commit point, prepared transactions under another one, or epoch-fenced upserts.",
	Sink: &connector.Side{
		Section: "sink.postgres",
		Fields: connector.TableFields(
			"postgres://user:password@host:5432/db, or key=value pairs",
			"dsn: ${ORDERS_DB} with ORDERS_DB=postgres://user:password@db:5432/orders in the environment",
		),
		Validate: func(c *connector.Config, chk connector.Check) error {
			return sqlsink.TableRules(c, chk, ValidateTable, func() error {
				_, err := NewSink(tableConfig(sqlsink.TableOf[struct{}](c, chk.Role, "", func(struct{}) ([]any, error) { return nil, nil }, nil, nil)))
				return err
			}, "postgres sink: ")
		},
		Explain: func(c *connector.Config) string { return "postgres table " + c.String("table") },
		Describe: func(c *connector.Config, d connector.Describe) string {
			return sqlsink.DescribeTable(c, d, "PostgreSQL "+RedactDSN(c.String("dsn")))
		},
		DeadLetterPlace: sqlsink.DeadLetterPlace,
	},
	Deliveries:  []connector.Delivery{connector.ExactlyOnce, connector.TwoPhase, connector.AtLeastOnce},
	CommitPoint: true,
	CommitRank:  20,
	GoPackage:   "github.com/onceflow/onceflow/connector/postgres",
}

// tableConfig is the sink's Config of a job file's section.
func tableConfig[R any](t sqlsink.Table[R]) Config[R] {
	return Config[R]{DSN: t.DSN, Table: t.Table, Columns: t.Columns, Key: t.Key, Delivery: Delivery(t.Delivery),
		BatchRows: t.BatchRows, Job: t.Job, Row: t.Row, Retracts: t.Retracts, DeadLetters: t.DeadLetters}
}

// BuildSink is the sink of a job file's sink.postgres (package
// connector/build): connector/all registers it for the job file's
// records.
func BuildSink[R any](bc build.Context[R]) (build.Sink[R], error) {
	return sqlsink.BuildTable(bc, func(t sqlsink.Table[R]) (*Sink[R], error) { return NewSink(tableConfig(t)) })
}
