// Package compile turns a parsed job file into a runnable job: the Kafka
// source with its startup mode, the pipeline's operators (BuildPipeline,
// over any record type), the sinks with the commit point and two-phase
// participants chosen as docs/design.md says ("The Kafka commit point",
// "Database sinks"), dead-letter wiring, and for a scale-out task the
// repartition step in front of its sink (docs/design.md, "Scale-out").
//
// The command line calls Job for `onceflow run`, `demo` and every
// scale-out task; it keeps flags, signals and output. The uids Job gives
// ("source", "sink", "sink-<kind>", "dead-letters", step ids) name the
// state in existing checkpoints: changing one is a refused restore.
package compile

// Pebble plugs into the engine by import (docs/design.md, "State backends").
import _ "github.com/onceflow/onceflow/state/pebblestate"
