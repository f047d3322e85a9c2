package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/internal/compile"
	"github.com/onceflow/onceflow/internal/jobfile"
)

// clientConfig translates the kafka section (compile.ClientConfig).
func clientConfig(k jobfile.KafkaConfig) (kafka.ClientConfig, error) { return compile.ClientConfig(k) }

// errBrokersUnreachable is wrapped when no broker in kafka.brokers answers.
var errBrokersUnreachable = errors.New("cannot reach the Kafka brokers")

// ping checks that a broker answers before the job starts, so a wrong
// address fails with one clear sentence instead of retries deep in the
// engine.
//
// outputs maps the setting that names each output topic (sink.topic,
// errors.dead-letter-topic) to the topic: they must exist, or the job would
// fail at its first write, after it started.
func ping(ctx context.Context, k jobfile.KafkaConfig, cc kafka.ClientConfig, timeout time.Duration, outputs map[string]string) error {
	opts := []kgo.Opt{kgo.SeedBrokers(cc.Brokers...), kgo.ClientID(cc.ClientID)}
	if cc.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(cc.TLS))
	}
	// Without the credentials a SASL listener closes the connection, which
	// would read as "unreachable".
	switch s := cc.SASL; s.Mechanism {
	case kafka.SASLPlain:
		opts = append(opts, kgo.SASL(plain.Auth{User: s.User, Pass: s.Password}.AsMechanism()))
	case kafka.SASLScramSHA256:
		opts = append(opts, kgo.SASL(scram.Auth{User: s.User, Pass: s.Password}.AsSha256Mechanism()))
	case kafka.SASLScramSHA512:
		opts = append(opts, kgo.SASL(scram.Auth{User: s.User, Pass: s.Password}.AsSha512Mechanism()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafka.brokers: %w", err)
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// A refused connection fails a ping at once: a broker restarting, or
	// one started together with the job, refuses for a moment, so the
	// ping is tried again until the timeout.
	for {
		err := cl.Ping(pctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		select {
		case <-pctx.Done():
			return fmt.Errorf("%w in kafka.brokers (%s) within %v: %w; check the addresses and that the brokers run", errBrokersUnreachable, strings.Join(k.Brokers, ", "), timeout, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
	settings := slices.Sorted(maps.Keys(outputs))
	if len(settings) == 0 {
		return nil
	}
	topics := make([]string, len(settings))
	for i, st := range settings {
		topics[i] = outputs[st]
	}
	tds, err := kadm.NewClient(cl).ListTopics(pctx, topics...)
	if err != nil {
		return fmt.Errorf("list the output topics: %w", err)
	}
	for _, st := range settings {
		td, ok := tds[outputs[st]]
		if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("%s: topic %q does not exist; create it first: onceflow topic create --job JOB.yaml creates the job's topics (or onceflow topic create --brokers %s --partitions N %s)", st, outputs[st], strings.Join(k.Brokers, ","), outputs[st])
		}
		if td.Err != nil {
			return fmt.Errorf("%s: topic %q: %w", st, outputs[st], td.Err)
		}
	}
	return nil
}
