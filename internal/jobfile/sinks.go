package jobfile

// A job file's sink section may name several sinks: a topic (sink.topic)
// and tables or keys (sink.postgres, sink.mysql, sink.redis). Every sink
// gets every result. With delivery exactly-once exactly one of them is the
// job's commit point (docs/design.md, "Database sinks"): Kafka's
// transaction when the job writes to a topic, else Redis' script, else the
// first table's transaction (postgres before mysql); the other tables take
// part through prepared transactions (two-phase delivery). Redis has no
// prepared transactions, so it cannot take part in Kafka's commit.

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/internal/sqlsink"
)

// Sink kinds, in the order they are listed and built.
const (
	SinkKafka    = "kafka"
	sinkPostgres = "postgres"
	SinkMySQL    = "mysql"
	SinkRedis    = "redis"
)

// kinds lists the sinks the section names.
func (s SinkConfig) Kinds() []string {
	var k []string
	if s.Topic != "" {
		k = append(k, SinkKafka)
	}
	for _, db := range s.DBSinks() {
		k = append(k, db.Kind)
	}
	if s.Redis != nil {
		k = append(k, SinkRedis)
	}
	return k
}

// HasTopic reports whether the job writes to a Kafka topic.
func (s SinkConfig) HasTopic() bool { return s.Topic != "" }

// External reports whether the job writes to a database or Redis.
func (s SinkConfig) External() bool { return len(s.DBSinks()) > 0 || s.Redis != nil }

// DBSinks returns the table sections, postgres first.
func (s SinkConfig) DBSinks() []*DBSinkConfig {
	var out []*DBSinkConfig
	if s.Postgres != nil {
		out = append(out, s.Postgres)
	}
	if s.MySQL != nil {
		out = append(out, s.MySQL)
	}
	return out
}

// CommitPoint names the sink whose commit is the job's commit point, ""
// unless delivery is exactly-once: of the sinks the section names, the
// first in the connectors' CommitRank order (package connector).
func (s SinkConfig) CommitPoint() string {
	if s.Delivery != DeliveryExactlyOnce {
		return ""
	}
	return connector.CommitPoint(s.Kinds())
}

// Deliveries of a table sink.
const (
	DBExactlyOnce = "exactly-once"  // its transaction is the commit point
	DBTwoPhase    = "two-phase"     // prepared transactions under another commit point
	dbAtLeastOnce = "at-least-once" // epoch-fenced upserts
)

// DBDelivery is how the table sink of kind delivers.
func (s SinkConfig) DBDelivery(kind string) string {
	switch {
	case s.Delivery != DeliveryExactlyOnce:
		return dbAtLeastOnce
	case s.CommitPoint() == kind:
		return DBExactlyOnce
	}
	return DBTwoPhase
}

// deadLetters is what the database sinks keep of a record they reject
// under errors.policy dead-letter: its ID, key and value.
func deadLetters() *sqlsink.DeadLetters[kafka.Record] {
	return &sqlsink.DeadLetters[kafka.Record]{Of: func(r kafka.Record) (string, []byte, []byte) { return recordID(r), r.Key, r.Value }}
}

// recordID identifies a record in a dead-letter table: its position
// (topic/partition/offset) when it has one, else a hash of its key and
// value (a count's result has no position; equal results are kept once).
func recordID(r kafka.Record) string {
	if r.Topic != "" {
		return r.Topic + "/" + strconv.Itoa(int(r.Partition)) + "/" + strconv.FormatInt(r.Offset, 10)
	}
	h := sha256.New()
	h.Write([]byte(strconv.Itoa(len(r.Key))))
	h.Write(r.Key)
	h.Write(r.Value)
	return "sha256:" + hex.EncodeToString(h.Sum(nil)[:16])
}
