package scaleout_test

import (
	"context"
	"log"
	"os"
	"os/signal"
	"strconv"
	"time"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/scaleout"
	"github.com/onceflow/onceflow/state"
)

// This example needs a Kafka cluster, so it is compiled but not run.

// Count orders per customer, over an input not partitioned by customer:
// the first stage moves each order to the partition of its customer in a
// repartition topic, the second counts. Every instance runs this same
// program with its own name; each partition of "orders" and of the
// repartition topic is a task on one of them.
func ExampleRun() {
	host, _ := os.Hostname()
	byCustomer := func(r kafka.Record) string { return string(r.Key) }
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err := scaleout.Run(ctx, scaleout.Config{
		Job:         "orders-per-customer",
		Client:      kafka.ClientConfig{Brokers: []string{"localhost:9092"}},
		Instance:    host,
		StateDir:    "/var/lib/onceflow",
		Checkpoints: "/mnt/shared/onceflow",
		TaskOptions: []flow.Option{flow.Checkpointing(5 * time.Second)},
		Stages: []scaleout.Stage{
			{Topics: []string{"orders"}, Build: func(t *scaleout.Task) (*flow.Env, error) {
				env := flow.New(t.Options()...)
				src, err := t.Source(kafka.SourceConfig{StartupMode: kafka.StartEarliest})
				if err != nil {
					return nil, err
				}
				orders := flow.From(env, src, flow.UID("orders"))
				return env, t.Repartition(orders, 1, byCustomer)
			}},
			{Topics: []string{"orders-per-customer-by-customer"}, Build: func(t *scaleout.Task) (*flow.Env, error) {
				env := flow.New(t.Options()...)
				src, err := t.Source(kafka.SourceConfig{})
				if err != nil {
					return nil, err
				}
				sink, err := t.Sink(kafka.SinkConfig{Topic: "orders-per-customer"})
				if err != nil {
					return nil, err
				}
				counts := flow.Process(flow.KeyBy(flow.From(env, src, flow.UID("orders")), byCustomer), "count",
					func(s *state.Store) flow.ProcessFunc[kafka.Record, kafka.Record] {
						n := state.NewValue[int64](s, "n")
						return func(_ flow.Context, r kafka.Record, out flow.Collector[kafka.Record]) error {
							c, _ := n.Get()
							n.Set(c + 1)
							out.Emit(kafka.Record{Key: r.Key, Value: strconv.AppendInt(nil, c+1, 10)})
							return nil
						}
					}, flow.UID("count"))
				flow.To(counts, sink, flow.UID("counts"))
				return env, nil
			}},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
}
