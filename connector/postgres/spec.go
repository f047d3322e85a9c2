package postgres

import "github.com/onceflow/onceflow/connector"

func init() { connector.Register(Spec) }

// Spec is what the PostgreSQL sink declares about itself (package
// connector).
var Spec = connector.Spec{
	Name:    "postgres",
	Summary: "Writes rows to a PostgreSQL table: its transaction as the commit point, prepared transactions under another one, or epoch-fenced upserts.",
	Sink: &connector.Side{Section: "sink.postgres", Fields: connector.TableFields(
		"postgres://user:password@host:5432/db, or key=value pairs",
	)},
	Deliveries:  []connector.Delivery{connector.ExactlyOnce, connector.TwoPhase, connector.AtLeastOnce},
	CommitPoint: true,
	CommitRank:  20,
	GoPackage:   "github.com/onceflow/onceflow/connector/postgres",
}
