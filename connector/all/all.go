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
)

func init() {
	build.Register("postgres", postgres.BuildSink[kafka.Record])
	build.Register("mysql", mysql.BuildSink[kafka.Record])
	build.Register("redis", redis.BuildSink[kafka.Record])
}
