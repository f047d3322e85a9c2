// Command sqljob runs a Flink SQL script from Go with package sqljob: the
// statement of the user's seed article (a message id made of md5 over the
// user and the event time), reading user actions from Kafka and writing
// them to an upsert-kafka table keyed by that id.
//
// How it runs: an in-process Kafka broker (franz-go's kfake) gets 2,000
// actions, 400 of them sent twice (the duplicates a producer retry
// makes). The script is compiled once (sqljob.Compile) and run twice
// with Job.Run, each stopped (gracefully: a final checkpoint) once its
// output is committed: the first over half the input, the second, after
// the rest was written, resuming from the first's checkpoint. The
// committed output then holds one record per input record (none written
// twice by the second run) and one message id per distinct action.
//
// Run it with `go run ./sqljob` from the examples directory; it exits 1
// if the output is wrong.
package main

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/sqljob"
)

const (
	actions = 2000
	resent  = 400
)

// The seed's statement, with a Kafka upsert table in place of its jdbc
// one (the same primary key: the message id).
const script = `
SET 'execution.checkpointing.interval' = '200 ms';
CREATE TABLE kafka_events (user_id BIGINT, event_time TIMESTAMP(3), action_type STRING)
WITH ('connector' = 'kafka', 'topic' = 'events', 'properties.bootstrap.servers' = '%[1]s',
      'scan.startup.mode' = 'earliest-offset', 'format' = 'json');
CREATE TABLE user_actions (message_id STRING, user_id BIGINT, action_time TIMESTAMP(3), action_type STRING,
      PRIMARY KEY (message_id) NOT ENFORCED)
WITH ('connector' = 'upsert-kafka', 'topic' = 'user_actions', 'properties.bootstrap.servers' = '%[1]s',
      'key.format' = 'raw', 'value.format' = 'json');
INSERT INTO user_actions
SELECT md5(concat(cast(user_id AS STRING), cast(event_time AS STRING))) AS message_id, user_id, event_time, action_type
FROM kafka_events;
`

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sqljob: FAIL:", err)
		os.Exit(1)
	}
	fmt.Println("sqljob: OK")
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "events", "user_actions"))
	if err != nil {
		return err
	}
	defer cluster.Close()
	addr := cluster.ListenAddrs()[0]
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return err
	}
	defer cl.Close()

	// The input: actions of 50 users a second apart, some sent twice.
	rng := rand.New(rand.NewPCG(7, 7))
	base := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	want := map[string]bool{}
	var recs []*kgo.Record
	for i := range actions {
		user, at := rng.IntN(50), base.Add(time.Duration(i)*time.Second).Format("2006-01-02 15:04:05.000")
		v := fmt.Appendf(nil, `{"user_id": %d, "event_time": %q, "action_type": %q}`, user, at, []string{"click", "view", "buy"}[rng.IntN(3)])
		recs = append(recs, &kgo.Record{Topic: "events", Value: v})
		if i%(actions/resent) == 0 {
			recs = append(recs, &kgo.Record{Topic: "events", Value: v})
		}
		sum := md5.Sum(fmt.Appendf(nil, "%d%s", user, at))
		want[hex.EncodeToString(sum[:])] = true
	}
	// Half now, half after the first run.
	half := len(recs) / 2
	if err := cl.ProduceSync(ctx, recs[:half]...).FirstErr(); err != nil {
		return err
	}

	dir, err := os.MkdirTemp("", "onceflow-sqljob-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// The script's name names the job; its state directory is next to it.
	job, err := sqljob.Compile(filepath.Join(dir, "user_actions.sql"), fmt.Sprintf(script, addr))
	if err != nil {
		return err // each problem at its line and column
	}
	quiet := flow.Logger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))

	// Each run is stopped once its output is committed (a canceled
	// context stops a job gracefully: a final checkpoint commits what it
	// read); the second resumes from the first's checkpoint.
	if err := runUntil(ctx, job, cl, half, quiet); err != nil {
		return fmt.Errorf("first run: %w", err)
	}
	afterFirst := half
	if err := cl.ProduceSync(ctx, recs[half:]...).FirstErr(); err != nil {
		return err
	}
	if err := runUntil(ctx, job, cl, len(recs), quiet); err != nil {
		return fmt.Errorf("second run: %w", err)
	}
	out, err := readAll(ctx, cl)
	if err != nil {
		return err
	}
	ids := map[string]bool{}
	for _, r := range out {
		ids[string(r.Key)] = true
	}
	fmt.Printf("%d input records (%d actions, %d sent twice); the first run committed %d, both together %d output records with %d message ids\n",
		len(recs), actions, len(recs)-actions, afterFirst, len(out), len(ids))
	switch {
	case len(out) != len(recs):
		return fmt.Errorf("%d output records for %d input records: the restart lost or repeated some", len(out), len(recs))
	case len(ids) != len(want):
		return fmt.Errorf("%d message ids, want %d (one per distinct action)", len(ids), len(want))
	}
	for id := range ids {
		if !want[id] {
			return fmt.Errorf("message id %s is no action's md5(user_id || event_time)", id)
		}
	}
	return nil
}

// runUntil runs job until user_actions holds n committed records, then
// stops it.
func runUntil(ctx context.Context, job *sqljob.Job, cl *kgo.Client, n int, opts ...flow.Option) error {
	jctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- job.Run(jctx, opts...) }()
	for {
		select {
		case err := <-done:
			return fmt.Errorf("the job ended before its output was committed: %v", err)
		case <-time.After(300 * time.Millisecond):
		}
		got, err := count(ctx, cl)
		if err != nil {
			return err
		}
		if got >= n {
			stop()
			return <-done
		}
	}
}

// count is how many records user_actions holds, committed.
func count(ctx context.Context, cl *kgo.Client) (int, error) {
	out, err := readAll(ctx, cl)
	return len(out), err
}

// readAll reads user_actions read_committed from the start to its end.
func readAll(ctx context.Context, cl *kgo.Client) ([]*kgo.Record, error) {
	rd, err := kgo.NewClient(kgo.SeedBrokers(cl.OptValue(kgo.SeedBrokers).([]string)...), kgo.ConsumeTopics("user_actions"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	var out []*kgo.Record
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := rd.PollFetches(pctx)
		cancel()
		if errors.Is(pctx.Err(), context.DeadlineExceeded) && fs.NumRecords() == 0 {
			return out, nil // nothing more within 2 s: the end
		}
		if err := fs.Err0(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
		out = append(out, fs.Records()...)
	}
}
