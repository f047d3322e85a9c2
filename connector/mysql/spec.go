package mysql

import "github.com/onceflow/onceflow/connector"

func init() { connector.Register(Spec) }

// Spec is what the MySQL/MariaDB sink declares about itself (package
// connector).
var Spec = connector.Spec{
	Name:    "mysql",
	Summary: "Writes rows to a MySQL or MariaDB (InnoDB) table: its transaction as the commit point, XA transactions under another one, or epoch-fenced upserts.",
	Sink: &connector.Side{Section: "sink.mysql", Fields: connector.TableFields(
		"user:password@tcp(host:3306)/db",
	)},
	Deliveries:  []connector.Delivery{connector.ExactlyOnce, connector.TwoPhase, connector.AtLeastOnce},
	CommitPoint: true,
	CommitRank:  30,
	GoPackage:   "github.com/onceflow/onceflow/connector/mysql",
}
