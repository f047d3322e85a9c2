// Package verify checks a job's committed output against its input, the way
// Jepsen's queue checker or Kafka Streams' EOS test driver do: every input
// record must be accounted for exactly once — in the output, in the
// dead-letter topic, or as a counted skip — and nothing may be visible that
// a read_committed reader should not see.
//
// In pass-through mode input records must have unique values (the generator
// writes "seq-<n>" or any unique bytes); a record's identity is its value.
// Dedupe mode identifies records by key instead.
//
// Verify only reads unless asked to write sentinels (Config.Sentinels): it
// finds a transaction left open on an output partition from the partition's
// offsets (see Config.SettleTimeout).
package verify

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Mode is what the job did to its input.
type Mode string

const (
	// PassThrough: the output is the input (key and value kept).
	PassThrough Mode = "pass-through"
	// Count: the output is, per input record, its key and the running
	// count of that key as a decimal string.
	Count Mode = "count"
	// Dedupe: the job drops every record whose key it has seen before
	// (the YAML step dedupe: {key: record.key, ttl: ...}); the output is one
	// record per distinct input key. See Config.DedupeTTL and checkDedupe.
	Dedupe Mode = "dedupe"
)

// Modes lists the modes, for messages and help.
var Modes = []Mode{PassThrough, Count, Dedupe}

// Config says what to check.
type Config struct {
	Brokers    []string
	Input      string // input topic
	Output     string // committed output topic
	DeadLetter string // dead-letter topic, if the job has one
	Mode       Mode   // default PassThrough
	// Skipped is how many input records the job reports it skipped (error
	// policy skip); they are the only records allowed to be missing (in
	// Dedupe mode: each excuses one input key missing from the output).
	Skipped int64
	// Sentinels makes verify write one sentinel record to every output
	// partition and wait until a read_committed reader sees each of them:
	// proof through the read path that no transaction hangs. Off by
	// default, because it writes to the job's real output topic (readers
	// other than verify see the sentinels; their key is
	// "__onceflow_sentinel"). Without sentinels the check only reads: see
	// SettleTimeout.
	Sentinels bool
	// SentinelTimeout bounds the wait for the sentinels. Default 30s.
	SentinelTimeout time.Duration
	// SettleTimeout is, without Sentinels, how long an output partition
	// whose last stable offset (what read_committed reads up to) is below
	// its high watermark may take to settle: the partition is fine once its
	// last stable offset reaches the high watermark seen when the check
	// began (every transaction open then has ended). A partition that does
	// not is reported as held by a hanging transaction. Default 10s.
	SettleTimeout time.Duration
	// DedupeTTL is the dedupe step's ttl (Dedupe mode only; 0: keys are
	// remembered forever). A key may then appear in the output once more
	// for every input record of it that comes at least DedupeTTL after the
	// key's previous input record, by record timestamp; see checkDedupe.
	DedupeTTL time.Duration
}

// Report is the outcome of a check. Anomalies lists every problem in words;
// a report without anomalies means exactly-once held.
type Report struct {
	Inputs          int
	Outputs         int
	DeadLetters     int
	Lost            int
	Duplicated      int
	OutOfOrder      int
	CountGaps       int // count mode: a count skipped
	CountRepeats    int // count mode: a count seen twice
	AbortedInLog    int // records in the output log hidden from read_committed (aborted or open transactions): expected after failures, never visible
	HangingOutputs  []int32
	Hanging         []HangingPartition // HangingOutputs with their offsets
	DuplicateInputs int                // input records whose value repeats an earlier one's: not an anomaly of the job
	// Dedupe mode: InputKeys is the number of distinct input keys;
	// MayReappear the input records that come at least DedupeTTL after
	// their key's previous one (each may add one output record of the key);
	// WrongValues the output records whose value is not the one expected
	// (the key's first input record's, see checkDedupe).
	InputKeys   int
	MayReappear int
	WrongValues int
	Mode        Mode
	Anomalies   []string
}

// OK reports whether no anomaly was found.
func (r *Report) OK() bool { return len(r.Anomalies) == 0 }

func (r *Report) addf(format string, a ...any) {
	if len(r.Anomalies) < 50 {
		r.Anomalies = append(r.Anomalies, fmt.Sprintf(format, a...))
	} else if len(r.Anomalies) == 50 {
		r.Anomalies = append(r.Anomalies, "… (more anomalies not listed)")
	}
}

// String renders the report for people.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "inputs %d, outputs %d, dead letters %d\n", r.Inputs, r.Outputs, r.DeadLetters)
	fmt.Fprintf(&b, "lost %d, duplicated %d, out of order %d, count gaps %d, count repeats %d\n", r.Lost, r.Duplicated, r.OutOfOrder, r.CountGaps, r.CountRepeats)
	fmt.Fprintf(&b, "aborted or uncommitted records in the output log (invisible to read_committed): %d\n", r.AbortedInLog)
	if r.Mode == Dedupe {
		fmt.Fprintf(&b, "distinct input keys %d, input records that may pass dedupe again after the TTL %d, output records with an unexpected value %d\n", r.InputKeys, r.MayReappear, r.WrongValues)
	}
	if r.DuplicateInputs > 0 {
		fmt.Fprintf(&b, "input records that repeat an earlier one's value (written twice by their producer; each expected as often as it was written): %d\n", r.DuplicateInputs)
	}
	if len(r.HangingOutputs) > 0 {
		fmt.Fprintf(&b, "hanging transactions on output partitions %v\n", r.HangingOutputs)
	}
	switch {
	case r.OK() && r.Mode == Dedupe:
		b.WriteString("OK: every distinct input key accounted for exactly once\n")
	case r.OK():
		b.WriteString("OK: every input accounted for exactly once\n")
	default:
		b.WriteString("ANOMALIES:\n")
		for _, a := range r.Anomalies {
			b.WriteString("  " + a + "\n")
		}
	}
	return b.String()
}

type rec struct {
	key, value string
	partition  int32
	offset     int64
	ts         int64 // timestamp, unix milliseconds
	headers    map[string]string
}

// Run performs the check.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Mode == "" {
		cfg.Mode = PassThrough
	}
	if cfg.SentinelTimeout == 0 {
		cfg.SentinelTimeout = 30 * time.Second
	}
	if cfg.SettleTimeout == 0 {
		cfg.SettleTimeout = 10 * time.Second
	}
	if len(cfg.Brokers) == 0 || cfg.Input == "" || cfg.Output == "" {
		return nil, errors.New("verify needs brokers, an input topic and an output topic")
	}
	if !slices.Contains(Modes, cfg.Mode) {
		return nil, fmt.Errorf("unknown mode %q: use %s, %s or %s", cfg.Mode, PassThrough, Count, Dedupe)
	}
	if cfg.DedupeTTL < 0 || cfg.SettleTimeout < 0 || cfg.SentinelTimeout < 0 {
		return nil, errors.New("the dedupe TTL and the timeouts must not be negative")
	}
	if cfg.DedupeTTL != 0 && cfg.Mode != Dedupe {
		return nil, fmt.Errorf("a dedupe TTL applies to mode %s only, not %s", Dedupe, cfg.Mode)
	}
	r := &Report{Mode: cfg.Mode}
	hanging, err := checkHanging(ctx, cfg)
	if err != nil {
		return nil, err
	}
	r.Hanging = hanging
	for _, h := range hanging {
		r.HangingOutputs = append(r.HangingOutputs, h.Partition)
		if cfg.Sentinels {
			r.addf("output partition %d: hanging transaction: the sentinel written to it stayed invisible to a read_committed reader for %v (last stable offset %d, high watermark %d)", h.Partition, cfg.SentinelTimeout, h.LastStable, h.HighWatermark)
		} else {
			r.addf("output partition %d: hanging transaction: its last stable offset stayed at %d, below the high watermark %d, for %v (an open transaction holds it; read_committed readers cannot read past offset %d)", h.Partition, h.LastStable, h.HighWatermark, cfg.SettleTimeout, h.LastStable)
		}
	}
	// The four reads are independent: run them at once.
	type result struct {
		recs []rec
		err  error
	}
	read := func(topic string, committed bool) <-chan result {
		ch := make(chan result, 1)
		if topic == "" {
			ch <- result{}
			return ch
		}
		go func() {
			recs, err := readAll(ctx, cfg.Brokers, topic, committed)
			ch <- result{recs, err}
		}()
		return ch
	}
	inC, outC, rawC, deadC := read(cfg.Input, true), read(cfg.Output, true), read(cfg.Output, false), read(cfg.DeadLetter, true)
	in, out, rw, dl := <-inC, <-outC, <-rawC, <-deadC
	for _, x := range []struct {
		what string
		err  error
	}{{"input " + cfg.Input, in.err}, {"output " + cfg.Output, out.err}, {"output (uncommitted) " + cfg.Output, rw.err}, {"dead letters " + cfg.DeadLetter, dl.err}} {
		if x.err != nil {
			return nil, fmt.Errorf("read %s: %w", x.what, x.err)
		}
	}
	input, output, dead := in.recs, dropSentinels(out.recs), dl.recs
	r.AbortedInLog = len(dropSentinels(rw.recs)) - len(output)
	r.Inputs, r.Outputs, r.DeadLetters = len(input), len(output), len(dead)
	switch cfg.Mode {
	case PassThrough:
		checkPassThrough(r, cfg, input, output, dead)
	case Count:
		checkCount(r, input, output, dead)
	case Dedupe:
		checkDedupe(r, cfg, input, output, dead)
	}
	return r, nil
}

func checkPassThrough(r *Report, cfg Config, input, output, dead []rec) {
	// Identity is the value; per key and input partition, input order is
	// the order to keep. Kafka orders a partition, not a key: once
	// partitions are added to the input, one key's records are in two
	// partitions and no order between those exists to keep. An input
	// written twice by its producer (a retry after a broker crash can do
	// that) is expected twice: each input record once.
	type pos struct {
		key   string
		order string // key and input partition: the sequence order is kept within
		idx   int    // index among the key's inputs in its partition (first occurrence)
	}
	byValue := make(map[string]pos, len(input))
	want := make(map[string]int, len(input))
	perKey := map[string]int{}
	for _, in := range input {
		want[in.value]++
		if want[in.value] > 1 {
			r.DuplicateInputs++
			continue
		}
		order := in.key + "\x00" + strconv.Itoa(int(in.partition))
		byValue[in.value] = pos{key: in.key, order: order, idx: perKey[order]}
		perKey[order]++
	}
	seen := make(map[string]int, len(input))
	lastIdx := map[string]int{}
	for _, o := range output {
		p, ok := byValue[o.value]
		if !ok {
			r.addf("output %s/%d@%d has a value that is in no input record: %.60q", cfg.Output, o.partition, o.offset, o.value)
			continue
		}
		seen[o.value]++
		if seen[o.value] > want[o.value] {
			r.Duplicated++
			r.addf("duplicate: %.60q at %s/%d@%d", o.value, cfg.Output, o.partition, o.offset)
		}
		if o.key != p.key {
			r.addf("output %s/%d@%d: key %q, the input had %q", cfg.Output, o.partition, o.offset, o.key, p.key)
		}
		if last, ok := lastIdx[p.order]; ok && p.idx < last {
			r.OutOfOrder++
			r.addf("out of order: key %q output %.60q after a later input of the same key and partition", p.key, o.value)
		}
		lastIdx[p.order] = max(lastIdx[p.order], p.idx)
	}
	for _, d := range dead {
		if _, ok := byValue[d.value]; !ok {
			r.addf("dead letter %s/%d@%d has a value that is in no input record", cfg.DeadLetter, d.partition, d.offset)
			continue
		}
		seen[d.value]++
		if seen[d.value] > want[d.value] {
			r.Duplicated++
			r.addf("duplicate: %.60q delivered to the output or dead-letter topic once too often", d.value)
		}
		if d.headers["onceflow.error"] == "" || d.headers["onceflow.topic"] == "" {
			r.addf("dead letter %s/%d@%d lacks the onceflow.topic/partition/offset/error headers", cfg.DeadLetter, d.partition, d.offset)
		}
	}
	missing := 0
	for v, n := range want {
		if seen[v] < n {
			missing += n - seen[v]
		}
	}
	if int64(missing) > cfg.Skipped {
		r.Lost = missing - int(cfg.Skipped)
		r.addf("lost: %d input records are neither in the output nor in the dead-letter topic, and only %d were reported skipped", missing, cfg.Skipped)
	} else if int64(missing) < cfg.Skipped {
		r.addf("%d records were reported skipped but only %d inputs are missing", cfg.Skipped, missing)
	}
}

func checkCount(r *Report, input, output, dead []rec) {
	want := map[string]int{}
	for _, in := range input {
		want[in.key]++
	}
	// A dead-lettered record is not counted: its key's total shrinks.
	for _, d := range dead {
		want[d.key]--
	}
	got := map[string][]rec{}
	for _, o := range output {
		got[o.key] = append(got[o.key], o)
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		os := got[k]
		next := int64(1)
		for _, o := range os {
			n, err := strconv.ParseInt(o.value, 10, 64)
			switch {
			case err != nil:
				r.addf("key %q: output %q is not a count", k, o.value)
			case n == next:
				next++
			case n < next:
				r.CountRepeats++
				r.Duplicated++
				r.addf("key %q: count %d seen again after %d (a record was counted twice)", k, n, next-1)
			default:
				r.CountGaps++
				r.addf("key %q: count jumps from %d to %d", k, next-1, n)
				next = n + 1
			}
		}
		if int(next-1) < want[k] {
			r.Lost += want[k] - int(next-1)
			r.addf("key %q: counted to %d, the input has %d records", k, next-1, want[k])
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			r.addf("key %q is in the output but in no input record", k)
		}
	}
}

const sentinelKey = "__onceflow_sentinel"

func dropSentinels(rs []rec) []rec {
	out := rs[:0:0]
	for _, r := range rs {
		if r.key != sentinelKey {
			out = append(out, r)
		}
	}
	return out
}

// sentinels writes one record to every output partition and waits until a
// read_committed reader sees all of them. A partition whose sentinel stays
// invisible has a transaction left open in front of it.
func sentinels(ctx context.Context, cfg Config) ([]int32, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	md, err := adm.ListEndOffsets(ctx, cfg.Output)
	if err == nil {
		err = md.Error() // a missing topic is a partition -1 with an error
	}
	if err != nil {
		return nil, fmt.Errorf("list output partitions: %w", err)
	}
	var parts []int32
	md.Each(func(o kadm.ListedOffset) { parts = append(parts, o.Partition) })
	if len(parts) == 0 {
		return nil, fmt.Errorf("output topic %s has no partitions (does it exist?)", cfg.Output)
	}
	stamp := strconv.FormatInt(time.Now().UnixNano(), 10)
	for _, p := range parts {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: cfg.Output, Partition: p, Key: []byte(sentinelKey), Value: []byte(stamp)}).FirstErr(); err != nil {
			return nil, fmt.Errorf("write sentinel to %s/%d: %w", cfg.Output, p, err)
		}
	}
	rd, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.ConsumeTopics(cfg.Output),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	missing := map[int32]bool{}
	for _, p := range parts {
		missing[p] = true
	}
	wctx, cancel := context.WithTimeout(ctx, cfg.SentinelTimeout)
	defer cancel()
	for len(missing) > 0 && wctx.Err() == nil {
		fs := rd.PollFetches(wctx)
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Key) == sentinelKey && string(r.Value) == stamp {
				delete(missing, r.Partition)
			}
		})
	}
	var hanging []int32
	for p := range missing {
		hanging = append(hanging, p)
	}
	sort.Slice(hanging, func(i, j int) bool { return hanging[i] < hanging[j] })
	return hanging, nil
}

// readAll reads a topic from its start to the end offsets seen when it
// starts: the last stable offset for read_committed, the high watermark
// otherwise. Control records (transaction markers) are kept while reading
// so the reader knows when it reached an end that is a marker; they are not
// returned.
func readAll(ctx context.Context, brokers []string, topic string, committed bool) ([]rec, error) {
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(iso),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.KeepControlRecords())
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	list := adm.ListEndOffsets
	if committed {
		list = adm.ListCommittedOffsets
	}
	ends, err := list(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("list end offsets: %w", err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("list start offsets: %w", err)
	}
	left := map[int32]int64{} // partition -> end offset still to reach
	var lerr error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			lerr = o.Err
			return
		}
		if st, ok := starts.Lookup(topic, o.Partition); ok && o.Offset > st.Offset {
			left[o.Partition] = o.Offset
		}
	})
	if lerr != nil {
		return nil, fmt.Errorf("list end offsets: %w", lerr)
	}
	var out []rec
	for len(left) > 0 {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				ferr = err
			}
		})
		if ferr != nil {
			return nil, ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, want := left[r.Partition]
			if !want || r.Offset >= end {
				return // past the end this read is for
			}
			if r.Offset == end-1 {
				delete(left, r.Partition)
			}
			if r.Attrs.IsControl() {
				return
			}
			x := rec{key: string(r.Key), value: string(r.Value), partition: r.Partition, offset: r.Offset, ts: r.Timestamp.UnixMilli()}
			if len(r.Headers) > 0 {
				x.headers = map[string]string{}
				for _, h := range r.Headers {
					x.headers[h.Key] = string(h.Value)
				}
			}
			out = append(out, x)
		})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].partition != out[j].partition {
			return out[i].partition < out[j].partition
		}
		return out[i].offset < out[j].offset
	})
	return out, nil
}

// Record is a record as read back by ReadTopic.
type Record struct {
	Key, Value string
	Partition  int32
	Offset     int64
	Headers    map[string]string
}

// ReadTopic reads topic from its start to its current end (the last stable
// offset when committed is true) and returns its records in partition and
// offset order, without transaction markers.
func ReadTopic(ctx context.Context, brokers []string, topic string, committed bool) ([]Record, error) {
	rs, err := readAll(ctx, brokers, topic, committed)
	if err != nil {
		return nil, err
	}
	out := make([]Record, len(rs))
	for i, r := range rs {
		out[i] = Record{Key: r.key, Value: r.value, Partition: r.partition, Offset: r.offset, Headers: r.headers}
	}
	return out, nil
}
