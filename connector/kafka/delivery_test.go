package kafka

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/restart"
)

// perPartition is the number of input records per partition of "in".
const perPartition = 200

// isPoison says whether the function of the test jobs rejects input value
// v ("a000".."c199"): one in seven.
func isPoison(v string) bool {
	n, err := strconv.Atoi(v[1:])
	return err == nil && n%7 == 3
}

// produceWithHeaders writes perPartition records to each of the 3
// partitions of "in", each with the header src=<value>, and returns the
// values sorted.
func produceWithHeaders(t *testing.T, c cluster) []string {
	t.Helper()
	cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var (
		rs  []*kgo.Record
		all []string
	)
	for p := range int32(3) {
		for _, v := range values(perPartition, string(rune('a'+p))) {
			rs = append(rs, &kgo.Record{Topic: "in", Partition: p, Key: []byte("k" + v), Value: []byte(v),
				Headers: []kgo.RecordHeader{{Key: "src", Value: []byte(v)}}})
			all = append(all, v)
		}
	}
	if err := cl.ProduceSync(kafkatest.Context(t), rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	slices.Sort(all)
	return all
}

func split2(all []string, pred func(string) bool) (yes, no []string) {
	for _, v := range all {
		if pred(v) {
			yes = append(yes, v)
		} else {
			no = append(no, v)
		}
	}
	return yes, no
}

// injector runs an action once from inside a map function: after n
// records and only once the job committed a checkpoint, so a restore has
// something to restore. Until then it paces the job by a millisecond per
// record, so that checkpoints commit while the input is being read.
type injector struct {
	n      int64
	action func(j *flow.Job)

	seen  atomic.Int64
	fired atomic.Bool
	job   atomic.Pointer[flow.Job]
	at    atomic.Int64 // last checkpoint when the action ran
}

func (in *injector) hit() {
	if in == nil || in.fired.Load() {
		return
	}
	time.Sleep(time.Millisecond)
	if in.seen.Add(1) < in.n {
		return
	}
	if j := in.job.Load(); j != nil && j.Stats().LastCheckpoint > 0 && in.fired.CompareAndSwap(false, true) {
		in.at.Store(j.Stats().LastCheckpoint)
		in.action(j)
	}
}

func panicAction(*flow.Job) { panic("injected failure") }

// syncBuffer is a bytes.Buffer for a logger writing from many goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// jobSpec describes a test job in -> [TryMap] -> out (+ dlq).
type jobSpec struct {
	sink SinkConfig // Client, Topic and OffsetsOf are filled in
	// interval is the checkpoint interval, default 100ms.
	interval time.Duration
	// policy, when set, puts a TryMap rejecting isPoison values in front of
	// the sink; with DeadLetterOnError its failures go to topic "dlq".
	policy *flow.ErrorPolicy
	inject *injector
	opts   []flow.Option
	log    io.Writer // the job's log, default discarded
}

func policy(p flow.ErrorPolicy) *flow.ErrorPolicy { return &p }

func startJob(t *testing.T, c cluster, spec jobSpec) (*flow.Job, *Sink) {
	t.Helper()
	src := newSource(t, SourceConfig{Client: c.client(), Topics: []string{"in"}, Bounded: true, MaxPollRecords: 10})
	cfg := spec.sink
	cfg.Client, cfg.Topic, cfg.OffsetsOf = c.client(), "out", []*Source{src}
	interval := spec.interval
	if interval == 0 {
		interval = 100 * time.Millisecond
	}
	sink := newSink(t, cfg)
	log := slog.New(slog.DiscardHandler)
	if spec.log != nil {
		log = slog.New(slog.NewTextHandler(spec.log, nil))
	}
	env := flow.New(append([]flow.Option{
		flow.JobName("j"), flow.Checkpointing(interval), flow.StateDir(t.TempDir()),
		flow.Logger(log),
		flow.Restart(restart.Config{Strategy: restart.FixedDelay, Attempts: 3, Delay: 10 * time.Millisecond}),
	}, spec.opts...)...)
	in := flow.From(env, src, flow.UID("kafka-in"))
	if spec.policy == nil {
		flow.To(flow.Map(in, func(r Record) Record { spec.inject.hit(); return r }), sink, flow.UID("kafka-out"))
	} else {
		good, bad := flow.TryMap(in, func(r Record) (Record, error) {
			spec.inject.hit()
			if isPoison(string(r.Value)) {
				return Record{}, fmt.Errorf("poison %s", r.Value)
			}
			return r, nil
		}, *spec.policy, flow.UID("check"))
		flow.To(good, sink, flow.UID("kafka-out"))
		if *spec.policy == flow.DeadLetterOnError {
			flow.To(bad, sink.DeadLetters("dlq"), flow.UID("kafka-dlq"))
		}
	}
	j, err := env.Start(kafkatest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if spec.inject != nil {
		spec.inject.job.Store(j)
	}
	return j, sink
}

// missing returns the values of want absent from got; dups the values got
// holds more than once.
func missing(want, got []string) (miss, dups []string) {
	n := map[string]int{}
	for _, v := range got {
		n[v]++
	}
	for _, v := range want {
		if n[v] == 0 {
			miss = append(miss, v)
		}
	}
	for v, k := range n {
		if k > 1 {
			dups = append(dups, v)
		}
	}
	return miss, dups
}

// checkDeadLetters asserts each dead letter carries its original key, value
// and headers and names where it was read and why it failed.
func checkDeadLetters(t *testing.T, dlq []*kgo.Record) {
	t.Helper()
	for _, r := range dlq {
		v := string(r.Value)
		h := map[string]string{}
		for _, kv := range r.Headers {
			h[kv.Key] = string(kv.Value)
		}
		want := map[string]string{
			"src":           v,
			HeaderTopic:     "in",
			HeaderPartition: strconv.Itoa(int(v[0] - 'a')),
			HeaderOffset:    strconv.Itoa(mustAtoi(t, v[1:])),
			HeaderError:     "poison " + v,
		}
		if string(r.Key) != "k"+v || len(r.Headers) != len(want) {
			t.Errorf("dead letter %s: key %q, %d headers; want key %q and %d headers", v, r.Key, len(r.Headers), "k"+v, len(want))
		}
		for k, wv := range want {
			if h[k] != wv {
				t.Errorf("dead letter %s: header %s = %q, want %q", v, k, h[k], wv)
			}
		}
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func values0(rs []*kgo.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r.Value)
	}
	slices.Sort(out)
	return out
}

// Without transactions the sink is no commit point: the job's manifest is,
// and the source commits its offsets itself. Every input record reaches
// the output or the dead-letter topic at least once, also across a
// failure; with delivery none they arrive when nothing fails.
func TestDeliveryWithoutTransactions(t *testing.T) {
	tests := []struct {
		name     string
		delivery Delivery
		fail     bool
	}{
		{"at-least-once", DeliveryAtLeastOnce, false},
		{"at-least-once with a failure", DeliveryAtLeastOnce, true},
		{"none", DeliveryNone, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := startBroker(t, map[string]int32{"in": 3, "out": 3, "dlq": 1})
			input := produceWithHeaders(t, c)
			poison, good := split2(input, isPoison)
			var inj *injector
			if tt.fail {
				inj = &injector{n: 300, action: panicAction}
			}
			j, sink := startJob(t, c, jobSpec{sink: SinkConfig{Delivery: tt.delivery}, policy: policy(flow.DeadLetterOnError), inject: inj})
			if cp := sink.CommitPoint(); cp != nil {
				t.Errorf("CommitPoint() = %T, want nil without transactions", cp)
			}
			if err := j.Wait(); err != nil {
				t.Fatalf("job: %v", err)
			}
			if tt.fail && (j.Stats().Restarts != 1 || inj.at.Load() == 0) {
				t.Errorf("restarts = %d, failure after checkpoint %d; want 1 restart after a committed checkpoint", j.Stats().Restarts, inj.at.Load())
			}
			// With acks=0 the last records may still be on their way
			// to the broker when the job returns.
			var out []string
			var dlq []*kgo.Record
			deadline := time.Now().Add(10 * time.Second)
			for {
				out, dlq = c.ReadCommitted(t, "out"), c.ReadCommittedRecords(t, "dlq")
				if len(out)+len(dlq) >= len(input) || tt.delivery != DeliveryNone || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			miss, dups := missing(good, out)
			if len(miss) > 0 || slices.ContainsFunc(out, isPoison) {
				t.Errorf("output misses %d of %d good records (%q...) or has poison", len(miss), len(good), miss[:min(len(miss), 5)])
			}
			t.Logf("output: %d records, %d duplicated", len(out), len(dups))
			dl := values0(dlq)
			if miss, _ := missing(poison, dl); len(miss) > 0 || slices.ContainsFunc(dl, func(v string) bool { return !isPoison(v) }) {
				t.Errorf("dead letters %q, want each of the %d poison records", dl, len(poison))
			}
			checkDeadLetters(t, dlq)
			if !tt.fail && len(dups) > 0 {
				t.Errorf("duplicates without a failure: %q", dups)
			}
			// The source committed the final positions to its group.
			offs := c.GroupOffsets(t, "onceflow-j", "in")
			if len(offs) != 3 {
				t.Errorf("group offsets %+v, want 3 partitions", offs)
			}
			for p, o := range offs {
				if o.At != perPartition {
					t.Errorf("group offset of in/%d = %d, want %d", p, o.At, perPartition)
				}
			}
		})
	}
}

// Dead letters are written in the checkpoint's transaction: output and
// dead-letter topic together hold every input record exactly once, also
// when the job fails over and replays.
func TestDeadLettersExactlyOnce(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("failure=%v", fail), func(t *testing.T) {
			c := startBroker(t, map[string]int32{"in": 3, "out": 3, "dlq": 1})
			input := produceWithHeaders(t, c)
			poison, good := split2(input, isPoison)
			var inj *injector
			if fail {
				inj = &injector{n: 300, action: panicAction}
			}
			// KeepPartition must not apply to the one-partition
			// dead-letter topic.
			j, _ := startJob(t, c, jobSpec{sink: SinkConfig{KeepPartition: true}, policy: policy(flow.DeadLetterOnError), inject: inj})
			if err := j.Wait(); err != nil {
				t.Fatalf("job: %v", err)
			}
			s := j.Stats()
			if fail && (s.Restarts != 1 || inj.at.Load() == 0) {
				t.Errorf("restarts = %d, failure after checkpoint %d; want 1 restart after a committed checkpoint", s.Restarts, inj.at.Load())
			}
			// A replay dead-letters some records again, uncommitted.
			if s.RecordsDeadLettered < int64(len(poison)) || !fail && s.RecordsDeadLettered != int64(len(poison)) {
				t.Errorf("RecordsDeadLettered = %d, want %d", s.RecordsDeadLettered, len(poison))
			}
			out := c.ReadCommitted(t, "out")
			slices.Sort(out)
			if !slices.Equal(out, good) {
				miss, dups := missing(good, out)
				t.Errorf("output has %d records, want the %d good ones exactly once; missing %q, duplicated %q", len(out), len(good), miss, dups)
			}
			dlq := c.ReadCommittedRecords(t, "dlq")
			if dl := values0(dlq); !slices.Equal(dl, poison) {
				t.Errorf("dead letters %q, want %q exactly once", dl, poison)
			}
			checkDeadLetters(t, dlq)
		})
	}
}

func TestSkipPolicyCounts(t *testing.T) {
	c := startBroker(t, map[string]int32{"in": 3, "out": 3})
	input := produceWithHeaders(t, c)
	poison, good := split2(input, isPoison)
	j, _ := startJob(t, c, jobSpec{policy: policy(flow.SkipOnError)})
	if err := j.Wait(); err != nil {
		t.Fatalf("job: %v", err)
	}
	if s := j.Stats(); s.RecordsSkipped != int64(len(poison)) || s.RecordsDeadLettered != 0 {
		t.Errorf("skipped %d, dead-lettered %d; want %d and 0", s.RecordsSkipped, s.RecordsDeadLettered, len(poison))
	}
	out := c.ReadCommitted(t, "out")
	slices.Sort(out)
	if !slices.Equal(out, good) {
		t.Errorf("output has %d records, want the %d good ones exactly once", len(out), len(good))
	}
}

// The broker refuses a commit once (EndTxn answers an error that kgo does
// not retry): the checkpoint fails, the job restores the one before and
// replays, and read_committed still sees the input exactly once.
func TestBrokerFailsCommit(t *testing.T) {
	c := startBroker(t, map[string]int32{"in": 3, "out": 3})
	input := produceInput(t, c, perPartition)
	var fault atomic.Pointer[kfake.FaultHandle]
	inj := &injector{n: 200, action: func(*flow.Job) {
		fault.Store(c.Broker.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError}))
	}}
	j, _ := startJob(t, c, jobSpec{inject: inj})
	if err := j.Wait(); err != nil {
		t.Fatalf("job: %v", err)
	}
	if f := fault.Load(); f == nil || f.Hits() != 1 {
		t.Fatalf("the EndTxn fault was not hit once (injected: %v)", f != nil)
	}
	if s := j.Stats(); s.Restarts < 1 {
		t.Errorf("restarts = %d, want the failed commit to restart the job", s.Restarts)
	}
	checkExactlyOnce(t, c, j, input, perPartition)
}

// The broker times out the open transaction while the job's process is
// frozen (SIGSTOP, a VM pause; inside a running job the checkpoint settings
// make the job fail over first, see SinkConfig.TransactionTimeout): the
// records of the aborted transaction are gone, the commit fails, and
// recovery finds the checkpoint before it.
func TestBrokerTimesOutTransaction(t *testing.T) {
	c := startBroker(t, map[string]int32{"out": 1})
	ctx := kafkatest.Context(t)
	const txnTimeout = 300 * time.Millisecond
	s := newSink(t, SinkConfig{Client: c.client(), Job: "j", Topic: "out", TransactionTimeout: txnTimeout})
	cp := s.CommitPoint()
	if _, err := cp.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	w := openWriter(t, s, 0, 1)
	commitEpochs(t, cp, w, "j", 1, 1)
	write(t, w, "timed-out")
	prepare(t, w, 2)
	time.Sleep(3 * txnTimeout) // frozen: the broker's clock runs from the first record
	err := cp.Commit(ctx, rec("j", 2))
	if err == nil {
		t.Fatal("a transaction the broker timed out committed")
	}
	// kfake bumps the producer epoch when it times a transaction out: the
	// commit fails INVALID_PRODUCER_EPOCH or INVALID_TXN_STATE (broker
	// package doc, facts 3 and 5).
	if !errors.Is(err, ErrFenced) && !errors.Is(err, kerr.InvalidTxnState) {
		t.Errorf("commit of the timed-out transaction: %v, want fenced or INVALID_TXN_STATE", err)
	}
	t.Logf("commit after the broker's timeout: %v", err)
	if got := c.ReadCommitted(t, "out"); !slices.Equal(got, []string{"j-1"}) {
		t.Errorf("read_committed = %q, want only the committed epoch", got)
	}
	if r, err := newSink(t, SinkConfig{Client: c.client(), Job: "j"}).CommitPoint().Recover(ctx); err != nil || r.Checkpoint != 1 {
		t.Errorf("Recover = %d, %v; want 1", r.Checkpoint, err)
	}
}

func TestDeliveryConfig(t *testing.T) {
	cl := ClientConfig{Brokers: []string{"localhost:9092"}}
	if _, err := NewSink(SinkConfig{Client: cl, Job: "j", Delivery: "twice"}); err == nil || !strings.Contains(err.Error(), `delivery "twice" is not supported`) {
		t.Errorf("unknown delivery: %v", err)
	}
	// The transaction timeout does not matter without transactions.
	for _, d := range []Delivery{DeliveryAtLeastOnce, DeliveryNone} {
		src := newSource(t, SourceConfig{Client: cl, Topics: []string{"in"}})
		s, err := NewSink(SinkConfig{Client: cl, Job: "j", Delivery: d, OffsetsOf: []*Source{src}})
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		if s.CommitPoint() != nil || src.transactional {
			t.Errorf("%s: the sink is a commit point or took over the source's offsets", d)
		}
		if _, ok := s.DeadLetters("dlq").(flow.CommitPointProvider); ok {
			t.Errorf("%s: the dead-letter sink provides a commit point", d)
		}
	}
	s, err := NewSink(SinkConfig{Client: cl, Job: "j"})
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg.Delivery != DeliveryExactlyOnce || s.CommitPoint() == nil {
		t.Errorf("default delivery %q, commit point %v; want exactly-once with a commit point", s.cfg.Delivery, s.CommitPoint())
	}
	if _, ok := s.DeadLetters("dlq").(flow.CommitPointProvider); ok {
		t.Error("the dead-letter sink of an exactly-once sink is a second commit point provider")
	}
}
