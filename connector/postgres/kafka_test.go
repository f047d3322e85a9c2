package postgres_test

import (
	"os"
	"strconv"
	"testing"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/connector/postgres"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/dbtest"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// childKafkaEnv names the broker of a child whose job writes its counts to
// Kafka (the job's commit point) and to PostgreSQL (two-phase).
const childKafkaEnv = "ONCEFLOW_PG_CHILD_KAFKA"

// childSinks returns the sinks of a child: the table of mode, and with
// childKafkaEnv set a Kafka topic too (the job's commit point; the table
// is then written in two-phase).
func childSinks(dsn string, mode crashMode) (func(flow.Stream[count]), error) {
	pg, err := postgres.NewSink(sinkConfig(dsn, mode))
	if err != nil {
		return nil, err
	}
	addr := os.Getenv(childKafkaEnv)
	if addr == "" {
		return dbtest.To[count](pg), nil
	}
	k, err := kafka.NewSink(kafka.SinkConfig{Client: kafka.ClientConfig{Brokers: []string{addr}}, Topic: "counts"})
	if err != nil {
		return nil, err
	}
	return func(s flow.Stream[count]) {
		flow.To(s, pg, flow.UID("pg"))
		flow.To(flow.Map(s, func(c count) kafka.Record {
			return kafka.Record{Key: []byte(c.Key), Value: []byte(strconv.FormatInt(c.N, 10))}
		}), k, flow.UID("kafka"))
	}, nil
}

// A job with two exactly-once sinks, a Kafka topic (the commit point) and
// a PostgreSQL table (two-phase), SIGKILLed 8 times at random (60 with
// ONCEFLOW_LONG=1; dbtest.CrashKills): both hold
// every count once, and no prepared transaction is left behind.
func TestKafkaAndPostgresInOneJob(t *testing.T) {
	cluster := kafkatest.Start(t, broker.Config{})
	cluster.CreateTopic(t, "counts", 4)
	dsn, srv := dbtest.Postgres(t, dbtest.PostgresOptions{MaxPreparedTransactions: 64})
	createTables(t, dsn, srv)
	r := &crashRun{CrashRun: dbtest.NewCrashRun(t, childDSNEnv+"="+dsn, childModeEnv+"="+string(modeTwoPhase), childKafkaEnv+"="+cluster.Addr),
		t: t, dsn: dsn, srv: srv, mode: modeTwoPhase}
	r.Kills(dbtest.Seed(t), kills, r.progress)
	r.Finish()
	r.check()
	out := cluster.ReadCommittedRecords(t, "counts")
	recs := make([]kafkatest.Record, len(out))
	for i, o := range out {
		recs[i] = kafkatest.Record{Key: string(o.Key), Value: string(o.Value), Partition: o.Partition, Offset: o.Offset}
	}
	if !kafkatest.CheckCounts(t, "the Kafka sink", recs, crashSpec.Keys, crashSpec.PerKey) {
		t.FailNow()
	}
}
