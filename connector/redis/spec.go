package redis

import "github.com/onceflow/onceflow/connector"

func init() { connector.Register(Spec) }

// Spec is what the Redis sink declares about itself (package connector).
// Redis has no prepared transactions: it can be the commit point but not
// take part in another one.
var Spec = connector.Spec{
	Name:    "redis",
	Summary: "Runs one Redis command per result: a MULTI/EXEC per checkpoint as the commit point, or SET/HSET fenced per attempt.",
	Sink: &connector.Side{Section: "sink.redis", Fields: []connector.Field{
		{Name: "url", Type: "URL", Required: true, Secret: true, Doc: "The server: redis://[user:password@]host:port/db, usually ${VAR}."},
		{Name: "command", Type: "set, hset, incrby or hincrby", Required: true, Doc: "The command each result becomes; incrby and hincrby need delivery exactly-once."},
		{Name: "key", Type: "column source", Required: true, Doc: "Where the Redis key comes from: a column source, as for a table column (key, value.user_id, an expression)."},
		{Name: "key-prefix", Type: "string", Doc: "Put in front of every key."},
		{Name: "field", Type: "column source", Doc: "Where a hash command's field comes from."},
		{Name: "value", Type: "column source", Doc: "Where set's and hset's value comes from."},
		{Name: "by", Type: "whole number or column source", Default: "1", Doc: "What incrby and hincrby add."},
		{Name: "batch-rows", Type: "int", Default: "1000", Doc: "How many commands go to the server at once."},
	}},
	Deliveries:  []connector.Delivery{connector.ExactlyOnce, connector.AtLeastOnce},
	CommitPoint: true,
	CommitRank:  10,
	GoPackage:   "github.com/onceflow/onceflow/connector/redis",
}
