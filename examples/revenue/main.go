// Command revenue runs the README's worked example from Go: JSON orders
// with duplicates → dedupe by order_id → revenue per user per minute of
// event time → a topic, exactly once. It is the job of revenue.yaml built
// with the public packages, against an in-process Kafka-compatible broker
// (franz-go's kfake), over orders.jsonl as a bounded job, and it checks the
// read_committed output against expected.txt.
//
// Run it with `go run ./revenue` from the examples directory; it exits 1
// if the output differs.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/pipeline"
	"github.com/onceflow/onceflow/pipeline/kafkarec"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "revenue: FAIL:", err)
		os.Exit(1)
	}
	fmt.Println("revenue: OK")
}

// here is this example's directory (orders.jsonl, expected.txt).
func here() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "orders", "revenue-per-minute"))
	if err != nil {
		return err
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	if err := produce(ctx, brokers, filepath.Join(here(), "orders.jsonl")); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "onceflow-revenue-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	client := kafka.ClientConfig{Brokers: brokers}
	src, err := kafka.NewSource(kafka.SourceConfig{Client: client, Topics: []string{"orders"}, StartupMode: kafka.StartEarliest, Bounded: true})
	if err != nil {
		return err
	}
	sink, err := kafka.NewSink(kafka.SinkConfig{Client: client, Topic: "revenue-per-minute", OffsetsOf: []*kafka.Source{src}})
	if err != nil {
		return err
	}
	defer sink.Close()

	env := flow.New(flow.JobName("revenue"), flow.Checkpointing(time.Second), flow.StateDir(dir),
		flow.Logger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	// Event time is the order's ts field; the watermark trails each
	// partition's newest order by 5 s.
	ts, err := pipeline.Timestamps(kafkarec.Access, "value.ts")
	if err != nil {
		return err
	}
	orders := flow.From(env, src, flow.UID("source"), flow.WithWatermarks(flow.Watermarks[kafka.Record]{
		Timestamp: ts, Split: kafka.SplitOf, MaxOutOfOrderness: 5 * time.Second, IdleTimeout: 30 * time.Second,
	}))
	// The job file's pipeline, step by step.
	steps := []pipeline.Step{
		{Op: "dedupe", Params: pipeline.Params{"key": "value.order_id", "ttl": 24 * time.Hour}},
		{Op: "window", Params: pipeline.Params{"key": "value.user_id", "size": time.Minute,
			"fields": map[string]string{"revenue_cents": "sum(value.amount_cents)", "orders": "count()"}}},
	}
	out, _, err := pipeline.Build(orders, kafkarec.Access, steps, pipeline.Env{Time: "value.ts"})
	if err != nil {
		return err
	}
	flow.To(flow.Map(out, kafkarec.ToSink("")), sink, flow.UID("sink"))
	if err := env.Run(ctx); err != nil {
		return err
	}

	got, err := readCommitted(ctx, brokers, "revenue-per-minute")
	if err != nil {
		return err
	}
	want, err := os.ReadFile(filepath.Join(here(), "expected.txt"))
	if err != nil {
		return err
	}
	if g := strings.Join(got, "\n") + "\n"; g != string(want) {
		return fmt.Errorf("the output differs from expected.txt:\n%s\nwant:\n%s", g, want)
	}
	fmt.Printf("revenue: %d results, each minute of each user once\n", len(got))
	return nil
}

// produce writes each line of file as a record, keyed by nothing: a
// producer spreads them over the partitions.
func produce(ctx context.Context, brokers []string, file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	var recs []*kgo.Record
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
			recs = append(recs, &kgo.Record{Value: bytes.Clone(line)})
		}
	}
	return cl.ProduceSync(ctx, recs...).FirstErr()
}

// readCommitted returns "key value" of every committed record of topic,
// sorted.
func readCommitted(ctx context.Context, brokers []string, topic string) ([]string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var out []string
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := fs.Err0(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
		if fs.NumRecords() == 0 {
			break // nothing more within 2 s: the topic is read
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Key)+" "+string(r.Value)) })
	}
	slices.Sort(out)
	return out, nil
}
