package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/compile"
	"github.com/onceflow/onceflow/pipeline"
)

// The join runs of Config.Joins (issue 25's throughput proof): two input
// topics, orders and customers, Records/2 records each; order i is
// {"order":i,"customer":"c-i",...} and customer i {"id":"c-i",...}, both
// with record key c-i (so they share a partition, as a job keyed by the
// customer reads them), so every record has exactly one partner and each
// run writes Records/2 pairs. Their timestamps rise evenly over JoinSpan,
// each customer dated JoinLead before its order.

// joinKey is the join key of input pair i.
func joinKey(i int) string { return "c-" + strconv.Itoa(i) }

// joinValues are the values of order i and customer i, each about size
// bytes.
func joinValues(i, size int) (order, customer []byte) {
	pad := func(v []byte) []byte {
		for len(v) < size-2 {
			v = append(v, 'x')
		}
		return append(v, '"', '}')
	}
	order = pad(fmt.Appendf(nil, `{"order":%d,"customer":"%s","amount":%d.%02d,"pad":"`, i, joinKey(i), i%1000, i%100))
	customer = pad(fmt.Appendf(nil, `{"id":"%s","name":"customer %d","country":"DE","pad":"`, joinKey(i), i))
	return order, customer
}

// produceJoinInputs writes the orders and customers topics.
func (b *bench) produceJoinInputs(ctx context.Context, cl *kgo.Client) error {
	n := b.cfg.Records / 2
	b.logf("producing %d orders and %d customers into %s and %s", n, n, b.topic("join-left"), b.topic("join-right"))
	start := time.Now()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	step := JoinSpan / time.Duration(max(n, 1))
	errc := make(chan error, 1)
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			select {
			case errc <- err:
			default:
			}
		}
	}
	for i := range n {
		o, c := joinValues(i, b.cfg.ValueSize)
		ts := base.Add(time.Duration(i) * step)
		key := []byte(joinKey(i))
		cl.Produce(ctx, &kgo.Record{Topic: b.topic("join-left"), Key: key, Value: o, Timestamp: ts}, promise)
		cl.Produce(ctx, &kgo.Record{Topic: b.topic("join-right"), Key: key, Value: c, Timestamp: ts.Add(-JoinLead)}, promise)
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("bench: produce the join inputs: %w", err)
	}
	select {
	case err := <-errc:
		return fmt.Errorf("bench: produce the join inputs: %w", err)
	default:
	}
	b.logf("produced the join inputs in %v", time.Since(start).Round(time.Millisecond))
	return nil
}

// runJoin runs the job orders, customers -> step (a join of the two) ->
// out, with keyed state in backend. The interval join reads event time
// as a job file's default event-time section gives it: the records'
// timestamps, 5 s out of order.
func (b *bench) runJoin(ctx context.Context, name, out string, step pipeline.Step, backend string) error {
	job := b.topic(name)
	cc := kafka.ClientConfig{Brokers: b.brokers, ClientID: "onceflow-bench"}
	var srcs []*kafka.Source
	for _, t := range []string{b.topic("join-left"), b.topic("join-right")} {
		src, err := kafka.NewSource(kafka.SourceConfig{Client: cc, Topics: []string{t}, Bounded: true})
		if err != nil {
			return err
		}
		srcs = append(srcs, src)
	}
	sink, err := kafka.NewSink(kafka.SinkConfig{Client: cc, Job: job, Topic: out, OffsetsOf: srcs})
	if err != nil {
		return err
	}
	defer sink.Close()
	opts := []flow.Option{flow.StateBackend(backend)}
	if b.cfg.StateMemory > 0 {
		opts = append(opts, flow.StateMemory(b.cfg.StateMemory))
	}
	env, cleanup, err := b.jobEnv(job, opts...)
	if err != nil {
		return err
	}
	defer cleanup()
	var srcOpts []flow.OpOption
	if step.Op == "interval-join" {
		ts, err := pipeline.Timestamps(compile.KafkaAccess, "timestamp")
		if err != nil {
			return err
		}
		srcOpts = append(srcOpts, flow.WithWatermarks(flow.Watermarks[kafka.Record]{
			Timestamp: ts, Split: kafka.SplitOf, MaxOutOfOrderness: 5 * time.Second, IdleTimeout: 30 * time.Second,
		}))
	}
	ins := []flow.Stream[kafka.Record]{
		flow.From(env, srcs[0], append(srcOpts, flow.UID("orders"))...),
		flow.From(env, srcs[1], append(srcOpts, flow.UID("customers"))...),
	}
	res, _, err := pipeline.BuildFrom(ins, compile.KafkaAccess, []pipeline.Step{step}, pipeline.Env{})
	if err != nil {
		return err
	}
	flow.To(flow.Map(res, func(r kafka.Record) kafka.Record {
		r.Topic, r.Partition, r.Offset = "", 0, 0
		return r
	}), sink, flow.UID("out"))
	return env.Run(ctx)
}

// joinVerifier checks a join run's output: for every i < pairs exactly
// one record keyed c-i whose value pairs order i with customer c-i.
type joinVerifier struct {
	pairs int
	seen  []bool
	n     int
}

func (v *joinVerifier) record(key, value []byte) error {
	if v.seen == nil {
		v.seen = make([]bool, v.pairs)
	}
	ks, ok := strings.CutPrefix(string(key), "c-")
	i, err := strconv.Atoi(ks)
	if !ok || err != nil || i < 0 || i >= v.pairs {
		return fmt.Errorf("%w: unexpected join key %q", ErrOutputMismatch, key)
	}
	var p struct {
		Left struct {
			Order    int    `json:"order"`
			Customer string `json:"customer"`
		} `json:"left"`
		Right struct {
			ID string `json:"id"`
		} `json:"right"`
	}
	if err := json.Unmarshal(value, &p); err != nil {
		return fmt.Errorf("%w: %q under key %q is not a joined pair: %v", ErrOutputMismatch, value, key, err)
	}
	if p.Left.Order != i || p.Left.Customer != string(key) || p.Right.ID != string(key) {
		return fmt.Errorf("%w: key %q pairs order %d of customer %q with customer %q", ErrOutputMismatch, key, p.Left.Order, p.Left.Customer, p.Right.ID)
	}
	if v.seen[i] {
		return fmt.Errorf("%w: key %q joined twice", ErrOutputMismatch, key)
	}
	v.seen[i] = true
	v.n++
	return nil
}

func (v *joinVerifier) finish() error {
	if v.n != v.pairs {
		return errors.Join(ErrOutputMismatch, fmt.Errorf("%d distinct pairs, want %d", v.n, v.pairs))
	}
	return nil
}
