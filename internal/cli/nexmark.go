package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/internal/nexmark"
)

// `onceflow nexmark generate` fills a topic with Nexmark events, the
// JSON rows of Nexmark's Kafka table (docs/benchmarks.md, "onceflow
// nexmark generate"); `onceflow nexmark run` (nexmark_run.go) fills one
// and measures the queries over it.

func nexmarkFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	brokers := fs.String("brokers", "127.0.0.1:9092", "comma-separated Kafka bootstrap brokers (run: default none, a broker of its own is started)")
	topic := fs.String("topic", "nexmark", "the topic to fill; created when missing")
	events := fs.Int64("events", 0, "how many events to write (required)")
	partitions := fs.Int("partitions", 8, "partitions of the topic when it is created; events go to them in turn")
	rate := fs.Float64("rate", 0, "events per second to write at most; 0: as fast as the broker takes them")
	seed := fs.Int64("seed", 0, "the generator's seed: the same seed writes the same events")
	eventRate := fs.Float64("event-rate", 10_000, "event time's rate: event n is dated n/RATE seconds after the first (Nexmark's first-event.rate; its benchmark suite uses 10000000)")
	baseTime := fs.String("base-time", "", "event time of the first event, RFC 3339 (default "+nexmark.DefaultBaseTime.Time().Format(time.RFC3339)+")")
	start := fs.Int64("start-event", 0, "the number of the first event to write: with --append, N continues a topic filled with N events")
	appendTo := fs.Bool("append", false, "write into a topic that holds records already (without it such a topic is refused)")
	compression := fs.String("compression", "none", "compression of the record batches: none, gzip, snappy, lz4 or zstd")
	progress := fs.Duration("progress", time.Second, "how often to show progress on stderr; 0: never")
	runOpts := nexmarkRunFlags(fs)
	return func(ctx context.Context, e *env, args []string) error {
		args, err := verbFirst(fs, args)
		if err != nil {
			return err
		}
		if len(args) != 1 || (args[0] != "generate" && args[0] != "run") {
			return fmt.Errorf("%w: use nexmark generate --events N [--topic T] [--partitions P] [--rate R] [--seed S], or nexmark run --events N [--query q0,q1] [--backends memory,pebble]", errUsage)
		}
		isRun := args[0] == "run"
		brokersSet := false
		fs.Visit(func(f *flag.Flag) { brokersSet = brokersSet || f.Name == "brokers" })
		if isRun && !brokersSet {
			*brokers = ""
		}
		if isRun {
			fs.Visit(func(f *flag.Flag) {
				if f.Name == "topic" || f.Name == "append" || f.Name == "start-event" {
					err = fmt.Errorf("%w: nexmark run fills a topic of its own: --%s is for nexmark generate", errUsage, f.Name)
				}
			})
			if err != nil {
				return err
			}
			*topic = "nexmark-" + strconv.FormatInt(time.Now().Unix(), 36)
		}
		switch {
		case *events < 1:
			return fmt.Errorf("%w: --events N, how many events to write, is required (at least 1)", errUsage)
		case *partitions < 1:
			return fmt.Errorf("%w: --partitions %d must be at least 1", errUsage, *partitions)
		case *rate < 0:
			return fmt.Errorf("%w: --rate %v must not be negative", errUsage, *rate)
		case *start < 0:
			return fmt.Errorf("%w: --start-event %d must not be negative", errUsage, *start)
		case *topic == "":
			return fmt.Errorf("%w: --topic must name a topic", errUsage)
		}
		codec, err := compressionCodec(*compression)
		if err != nil {
			return err
		}
		cfg := nexmark.Config{Seed: *seed, EventsPerSecond: *eventRate}
		if *baseTime != "" {
			t, err := time.Parse(time.RFC3339Nano, *baseTime)
			if err != nil {
				return fmt.Errorf("%w: --base-time %q is not an RFC 3339 time such as 2026-01-01T00:00:00Z", errUsage, *baseTime)
			}
			cfg.BaseTime = nexmark.TimestampOf(t)
		}
		g, err := nexmark.New(cfg)
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		g.SetPosition(*start)
		var brokerList []string
		if *brokers != "" {
			brokerList = strings.Split(*brokers, ",")
		}
		gen := nexmarkGen{
			g: g, brokers: brokerList, topic: *topic, events: *events, partitions: *partitions,
			rate: *rate, appendTo: *appendTo, codec: codec, progress: *progress,
		}
		if !isRun {
			return gen.run(ctx, e)
		}
		if *rate != 0 || cfg != (nexmark.Config{Seed: *seed, EventsPerSecond: *eventRate}) {
			// The reference counts assume the generator's defaults.
			return fmt.Errorf("%w: nexmark run takes the generator's defaults but --seed: drop --rate, --event-rate and --base-time", errUsage)
		}
		return runOpts.start(ctx, e, &gen)
	}
}

func compressionCodec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("%w: --compression %q: use none, gzip, snappy, lz4 or zstd", errUsage, name)
}

type nexmarkGen struct {
	g          *nexmark.Generator
	brokers    []string
	topic      string
	events     int64
	partitions int
	rate       float64
	appendTo   bool
	codec      kgo.CompressionCodec
	progress   time.Duration
}

func (n *nexmarkGen) run(ctx context.Context, e *env) error {
	cl, err := kafka.ClientConfig{Brokers: n.brokers, ClientID: "onceflow-nexmark"}.NewClient(
		kgo.DefaultProduceTopic(n.topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(n.codec),
		// Idempotent writes (franz-go's default, kept): a retried batch
		// is written once, so the topic holds each event once.
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RetryTimeout(30*time.Second),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	parts, err := n.prepareTopic(ctx, e, kadm.NewClient(cl))
	if err != nil {
		return err
	}
	first := n.g.Position()
	fmt.Fprintf(e.stderr, "nexmark: writing %d events to %s (%d partitions) on %s, seed %d\n",
		n.events, n.topic, parts, strings.Join(n.brokers, ","), n.g.Config().Seed)

	var (
		acked, ackedBytes atomic.Int64
		errOnce           sync.Once
		firstErr          error
	)
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	promise := func(r *kgo.Record, err error) {
		if err != nil {
			errOnce.Do(func() { firstErr = err; stop() })
			return
		}
		acked.Add(1)
		ackedBytes.Add(int64(len(r.Value)))
	}
	began := time.Now()
	progressDone := make(chan struct{})
	var progressWG sync.WaitGroup
	if n.progress > 0 {
		progressWG.Go(func() { n.showProgress(e.stderr, progressDone, began, &acked) })
	}
	var (
		ev    nexmark.Event
		kinds [3]int64
		slab  []byte       // record values are cut from slabs, never reused
		recs  []kgo.Record // records are allocated in slabs too
		last  nexmark.Timestamp
	)
	written := int64(0)
	for ; written < n.events && pctx.Err() == nil; written++ {
		if n.rate > 0 {
			n.pace(pctx, began, written)
		}
		num := n.g.Position()
		n.g.NextInto(&ev)
		kinds[ev.Type]++
		last = ev.DateTime()
		if cap(slab)-len(slab) < 8<<10 {
			slab = make([]byte, 0, 1<<20)
		}
		from := len(slab)
		slab = ev.AppendJSON(slab)
		if len(recs) == cap(recs) {
			recs = make([]kgo.Record, 0, 4096)
		}
		recs = append(recs, kgo.Record{Value: slab[from:len(slab):len(slab)], Partition: int32(num % int64(parts))})
		cl.Produce(pctx, &recs[len(recs)-1], promise)
	}
	// Wait for every record handed to the client: written, or failed
	// (an interrupt fails those not sent yet).
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	flushErr := cl.Flush(fctx)
	took := time.Since(began)
	close(progressDone)
	progressWG.Wait() // it writes to stderr: done before the summary

	errOnce.Do(func() {}) // firstErr is settled: no promise is pending
	if firstErr != nil && !errors.Is(firstErr, context.Canceled) {
		return fmt.Errorf("writing to %s: %w (%d of %d events written)", n.topic, firstErr, acked.Load(), n.events)
	}
	if flushErr != nil {
		return fmt.Errorf("writing to %s: %w (%d of %d events written)", n.topic, flushErr, acked.Load(), n.events)
	}
	if err := ctx.Err(); err != nil {
		// Each partition holds a prefix of its events, of its own
		// length: together not the first k events, so no --start-event
		// continues them.
		return fmt.Errorf("interrupted: %d of %d events written to %s, each partition cut at its own point: fill a new topic rather than continue this one", acked.Load(), n.events, n.topic)
	}
	secs := took.Seconds()
	fmt.Fprintf(e.stdout, "wrote %d Nexmark events to %s (%d partitions) in %s: %s events/s, %.1f MB/s\n",
		written, n.topic, parts, took.Round(time.Millisecond), humanCount(float64(written)/secs), float64(ackedBytes.Load())/secs/1e6)
	fmt.Fprintf(e.stdout, "  %d people, %d auctions, %d bids; %.1f MB of JSON, %d B an event\n",
		kinds[nexmark.PersonEvent], kinds[nexmark.AuctionEvent], kinds[nexmark.BidEvent], float64(ackedBytes.Load())/1e6, ackedBytes.Load()/max(written, 1))
	fmt.Fprintf(e.stdout, "  seed %d, events %d to %d, event time %s to %s\n",
		n.g.Config().Seed, first, first+written-1, n.g.At(first).DateTime(), last)
	return nil
}

// prepareTopic creates the topic when it is missing and returns its
// partition count. A topic holding records already is refused unless
// --append.
func (n *nexmarkGen) prepareTopic(ctx context.Context, e *env, adm *kadm.Client) (int, error) {
	details, err := adm.ListTopics(ctx, n.topic)
	if err != nil {
		return 0, fmt.Errorf("looking up topic %s: %w (is a broker at %s?)", n.topic, err, strings.Join(n.brokers, ","))
	}
	d, ok := details[n.topic]
	if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		_, err := adm.CreateTopic(ctx, int32(n.partitions), -1, nil, n.topic)
		switch {
		case err == nil:
			fmt.Fprintf(e.stderr, "nexmark: created topic %s (%d partitions)\n", n.topic, n.partitions)
			return n.partitions, nil // new, so empty
		case !errors.Is(err, kerr.TopicAlreadyExists):
			return 0, fmt.Errorf("creating topic %s: %w", n.topic, err)
		}
		if details, err = adm.ListTopics(ctx, n.topic); err != nil {
			return 0, fmt.Errorf("looking up topic %s: %w", n.topic, err)
		}
		d = details[n.topic]
	}
	if d.Err != nil {
		return 0, fmt.Errorf("topic %s: %w", n.topic, d.Err)
	}
	parts := len(d.Partitions)
	if parts == 0 {
		return 0, fmt.Errorf("topic %s has no partitions", n.topic)
	}
	starts, err := adm.ListStartOffsets(ctx, n.topic)
	if err != nil {
		return 0, fmt.Errorf("offsets of %s: %w", n.topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, n.topic)
	if err != nil {
		return 0, fmt.Errorf("offsets of %s: %w", n.topic, err)
	}
	var held int64
	ends.Each(func(o kadm.ListedOffset) {
		if s, ok := starts.Lookup(o.Topic, o.Partition); ok {
			held += o.Offset - s.Offset
		}
	})
	if held > 0 && !n.appendTo {
		return 0, fmt.Errorf("topic %s holds %d records already: delete it, name another --topic, or pass --append (with --start-event to continue the events it holds)", n.topic, held)
	}
	return parts, nil
}

// pace waits until event k is due at the --rate, sleeping only when a
// millisecond or more ahead.
func (n *nexmarkGen) pace(ctx context.Context, began time.Time, k int64) {
	due := began.Add(time.Duration(float64(k) / n.rate * float64(time.Second)))
	if d := time.Until(due); d >= time.Millisecond {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
}

// showProgress prints the events written, the rate and the time left
// every --progress until done is closed.
func (n *nexmarkGen) showProgress(w io.Writer, done <-chan struct{}, began time.Time, acked *atomic.Int64) {
	tick := time.NewTicker(n.progress)
	defer tick.Stop()
	prev, prevAt := int64(0), began
	for {
		select {
		case <-done:
			return
		case now := <-tick.C:
			k := acked.Load()
			rate := float64(k-prev) / now.Sub(prevAt).Seconds()
			eta := "?"
			if rate > 0 {
				eta = (time.Duration(float64(n.events-k) / rate * float64(time.Second))).Round(time.Second).String()
			}
			fmt.Fprintf(w, "nexmark: %d/%d events (%.0f%%), %s events/s, ETA %s\n",
				k, n.events, 100*float64(k)/float64(n.events), humanCount(rate), eta)
			prev, prevAt = k, now
		}
	}
}

// humanCount writes 1234567 as "1.23M", 45678 as "45.7k".
func humanCount(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}
