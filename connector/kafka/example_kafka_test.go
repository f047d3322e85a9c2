package kafka_test

import (
	"context"
	"encoding/json"
	"log"
	"os"
	"os/signal"
	"strconv"
	"time"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/state"
)

// These examples need a Kafka cluster, so they are compiled but not run.

// Read a topic, count the records per key and write the running counts to
// another topic, exactly once: each checkpoint commits one Kafka
// transaction holding the counts, the source's offsets and the job's commit
// record. The source has one subtask per partition (its parallelism hint)
// and positions in every checkpoint; it does not join a consumer group.
func ExampleNewSource() {
	client := kafka.ClientConfig{Brokers: []string{"localhost:9092"}}
	src, err := kafka.NewSource(kafka.SourceConfig{
		Client:      client,
		Topics:      []string{"clicks"},
		StartupMode: kafka.StartEarliest, // where a fresh start begins; a restore resumes from the checkpoint
	})
	if err != nil {
		log.Fatal(err)
	}
	sink, err := kafka.NewSink(kafka.SinkConfig{
		Client:    client,
		Topic:     "clicks-per-user",
		OffsetsOf: []*kafka.Source{src}, // commit the source's offsets in the same transaction
	})
	if err != nil {
		log.Fatal(err)
	}
	defer sink.Close()

	env := flow.New(
		flow.JobName("clicks-per-user"), // names the transactional id and the progress group: keep it stable
		flow.Checkpointing(5*time.Second),
		flow.StateDir("/var/lib/onceflow"),
	)
	clicks := flow.From(env, src, flow.UID("clicks"))
	counts := flow.Process(flow.KeyBy(clicks, func(r kafka.Record) string { return string(r.Key) }), "count",
		func(s *state.Store) flow.ProcessFunc[kafka.Record, kafka.Record] {
			n := state.NewValue[int64](s, "n")
			return func(ctx flow.Context, r kafka.Record, out flow.Collector[kafka.Record]) error {
				c, _ := n.Get()
				n.Set(c + 1)
				out.Emit(kafka.Record{Key: r.Key, Value: strconv.AppendInt(nil, c+1, 10)})
				return nil
			}
		})
	flow.To(counts, sink, flow.UID("counts"))

	// Run until interrupted; then a final checkpoint commits what was
	// processed before Run returns.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := env.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

// A sink with exactly-once delivery owns the job's commit point; a job has
// at most one. Records its function rejects go to a dead-letter topic
// through the same producer (Sink.DeadLetters), so each checkpoint's
// transaction holds, for every input record, its output or its dead letter.
// A bounded source reads up to the end offsets the partitions had when the
// job first started, and the job ends there.
func ExampleNewSink() {
	client := kafka.ClientConfig{Brokers: []string{"localhost:9092"}}
	src, err := kafka.NewSource(kafka.SourceConfig{Client: client, Topics: []string{"orders-raw"}, Bounded: true})
	if err != nil {
		log.Fatal(err)
	}
	sink, err := kafka.NewSink(kafka.SinkConfig{
		Client:    client,
		Delivery:  kafka.DeliveryExactlyOnce, // the default
		Topic:     "orders",
		OffsetsOf: []*kafka.Source{src},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer sink.Close()

	env := flow.New(flow.JobName("orders-clean"), flow.Checkpointing(2*time.Second), flow.StateDir("/var/lib/onceflow"))
	raw := flow.From(env, src, flow.UID("orders-raw"))
	clean, rejected := flow.TryMap(raw, func(r kafka.Record) (kafka.Record, error) {
		var order struct {
			ID    string `json:"id"`
			Cents int64  `json:"cents"`
		}
		if err := json.Unmarshal(r.Value, &order); err != nil {
			return kafka.Record{}, err
		}
		return kafka.Record{Key: []byte(order.ID), Value: r.Value}, nil
	}, flow.DeadLetterOnError)
	flow.To(clean, sink, flow.UID("orders"))
	flow.To(rejected, sink.DeadLetters("orders-dlq"), flow.UID("orders-dlq"))

	if err := env.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

// At-least-once delivery writes with an idempotent producer and waits for
// the brokers' acknowledgements at each checkpoint; after a failure the
// records since the last checkpoint are written again. It is not a commit
// point: the job's checkpoint manifest is, and the source commits its
// offsets to its group after each checkpoint. At-least-once checkpoints
// (no barrier alignment) go with it.
func ExampleNewSink_atLeastOnce() {
	client := kafka.ClientConfig{Brokers: []string{"localhost:9092"}}
	src, err := kafka.NewSource(kafka.SourceConfig{Client: client, Topics: []string{"metrics"}, StartupMode: kafka.StartLatest})
	if err != nil {
		log.Fatal(err)
	}
	sink, err := kafka.NewSink(kafka.SinkConfig{Client: client, Delivery: kafka.DeliveryAtLeastOnce, Topic: "metrics-copy"})
	if err != nil {
		log.Fatal(err)
	}
	defer sink.Close()

	env := flow.New(
		flow.JobName("metrics-copy"),
		flow.Checkpointing(time.Second),
		flow.CheckpointMode(flow.AtLeastOnce),
		flow.StateDir("/var/lib/onceflow"),
		flow.Restart(flow.RestartConfig{Strategy: flow.ExponentialDelay}),
	)
	flow.To(flow.From(env, src, flow.UID("metrics")), sink, flow.UID("metrics-copy"))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := env.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
