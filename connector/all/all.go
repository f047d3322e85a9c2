// Package all registers onceflow's connectors: importing it registers
// their specs (package connector) and their sinks' build hooks for the
// job file's records, kafka.Record (package connector/build). Adding a
// sink connector is its own package and one line here (docs/design.md,
// "Where an extension goes").
package all

import (
	"github.com/onceflow/onceflow/connector/build"
	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/connector/mysql"
	"github.com/onceflow/onceflow/connector/postgres"
	"github.com/onceflow/onceflow/connector/redis"
	"github.com/onceflow/onceflow/pipeline"
)

func init() {
	build.Register("postgres", postgres.BuildSink[kafka.Record])
	build.Register("mysql", mysql.BuildSink[kafka.Record])
	build.Register("redis", redis.BuildSink[kafka.Record])
}

// The lookup step's tables (pipeline.LookupTable), by the connector's
// name in a job file.
func init() {
	pipeline.RegisterLookupConnector("postgres", func(s pipeline.LookupSource) (pipeline.LookupTable, error) {
		return postgres.OpenLookup(s.DSN, s.Table, s.Keys, s.Columns)
	})
	pipeline.RegisterLookupConnector("mysql", func(s pipeline.LookupSource) (pipeline.LookupTable, error) {
		return mysql.OpenLookup(s.DSN, s.Table, s.Keys, s.Columns)
	})
	pipeline.RegisterLookupConnector("redis", func(s pipeline.LookupSource) (pipeline.LookupTable, error) {
		return redis.OpenLookup(s.DSN, s.Table, s.Keys, s.Columns)
	})
}
