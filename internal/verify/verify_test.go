package verify

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

type fixture struct {
	t    *testing.T
	addr string
	cl   *kgo.Client
}

func newFixture(t *testing.T) *fixture {
	c := kafkatest.Start(t, broker.Config{})
	return &fixture{t: t, addr: c.Addr, cl: c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))}
}

func (f *fixture) create(name string, parts int32) string {
	f.t.Helper()
	if _, err := kadm.NewClient(f.cl).CreateTopic(context.Background(), parts, 1, nil, name); err != nil {
		f.t.Fatal(err)
	}
	return name
}

func (f *fixture) put(topic string, p int32, kvs ...string) {
	f.t.Helper()
	for i := 0; i+1 < len(kvs); i += 2 {
		if err := f.cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Partition: p, Key: []byte(kvs[i]), Value: []byte(kvs[i+1])}).FirstErr(); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fixture) check(cfg Config) *Report {
	f.t.Helper()
	cfg.Brokers = []string{f.addr}
	if cfg.SentinelTimeout == 0 {
		cfg.SentinelTimeout = 3 * time.Second
	}
	if cfg.SettleTimeout == 0 {
		cfg.SettleTimeout = 2 * time.Second
	}
	r, err := Run(context.Background(), cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

func TestPassThroughAnomalies(t *testing.T) {
	f := newFixture(t)
	in := f.create("in", 1)
	f.put(in, 0, "a", "seq-0", "a", "seq-1", "b", "seq-2", "a", "seq-3")

	good := f.create("good", 1)
	f.put(good, 0, "a", "seq-0", "b", "seq-2", "a", "seq-1", "a", "seq-3")
	if r := f.check(Config{Input: in, Output: good}); !r.OK() {
		t.Fatalf("correct output flagged:\n%s", r)
	}

	bad := f.create("bad", 1)
	// seq-3 lost, seq-0 duplicated, seq-1 after... out of order for key a.
	f.put(bad, 0, "a", "seq-1", "a", "seq-0", "a", "seq-0", "b", "seq-2")
	r := f.check(Config{Input: in, Output: bad})
	if r.OK() || r.Lost != 1 || r.Duplicated != 1 || r.OutOfOrder < 1 {
		t.Fatalf("anomalies not caught: %+v", r)
	}
	// A reported skip accounts for the lost record.
	r = f.check(Config{Input: in, Output: bad, Skipped: 1})
	if r.Lost != 0 {
		t.Fatalf("skip not accounted: %+v", r)
	}
}

func TestCountAnomalies(t *testing.T) {
	f := newFixture(t)
	in := f.create("in", 1)
	f.put(in, 0, "a", "1", "a", "2", "a", "3", "b", "4")
	out := f.create("out", 1)
	f.put(out, 0, "a", "1", "a", "2", "a", "2", "b", "1")
	r := f.check(Config{Input: in, Output: out, Mode: Count})
	if r.CountRepeats != 1 || r.Lost != 1 {
		t.Fatalf("want one repeat and one lost count: %+v\n%s", r, r)
	}
	out2 := f.create("out2", 1)
	f.put(out2, 0, "a", "1", "a", "3", "b", "1")
	if r := f.check(Config{Input: in, Output: out2, Mode: Count}); r.CountGaps != 1 {
		t.Fatalf("gap not caught: %+v", r)
	}
}

// txn starts a transaction that writes value to topic/p and returns its
// client; the transaction stays open until the caller ends it.
func (f *fixture) txn(id, topic string, p int32, key, value string) *kgo.Client {
	f.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.addr), kgo.TransactionalID(id), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(cl.Close)
	if err := cl.BeginTransaction(); err != nil {
		f.t.Fatal(err)
	}
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Partition: p, Key: []byte(key), Value: []byte(value)}).FirstErr(); err != nil {
		f.t.Fatal(err)
	}
	return cl
}

// endOffsets returns the high watermark of every partition of topic: how
// many records (transaction markers included) it holds.
func (f *fixture) endOffsets(topic string) []int64 {
	f.t.Helper()
	ends, err := kadm.NewClient(f.cl).ListEndOffsets(context.Background(), topic)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []int64
	for p := int32(0); ; p++ {
		o, ok := ends.Lookup(topic, p)
		if !ok {
			return out
		}
		out = append(out, o.Offset)
	}
}

// Records of an aborted transaction are in the log but not visible; an open
// transaction hangs its partition for read_committed readers. Both ways of
// finding it (offsets only, the default; sentinels on request) report the
// partition and its offsets.
func TestAbortedAndHangingTransactions(t *testing.T) {
	for _, tt := range []struct {
		name      string
		sentinels bool
		// High watermarks of the output after each check: the sentinel
		// mode adds one record per partition and check.
		endsAfterAborted, endsAfterHanging []int64
		want                               HangingPartition
		wantText                           string
	}{
		{
			name:             "offsets",
			endsAfterAborted: []int64{1, 2}, // seq-0; the aborted record and its marker
			endsAfterHanging: []int64{1, 3}, // + the open transaction's record
			want:             HangingPartition{Partition: 1, LastStable: 2, HighWatermark: 3},
			wantText:         "output partition 1: hanging transaction: its last stable offset stayed at 2, below the high watermark 3, for 2s",
		},
		{
			name:             "sentinels",
			sentinels:        true,
			endsAfterAborted: []int64{2, 3},
			endsAfterHanging: []int64{3, 5},
			want:             HangingPartition{Partition: 1, LastStable: 3, HighWatermark: 5},
			wantText:         "output partition 1: hanging transaction: the sentinel written to it stayed invisible to a read_committed reader for 3s (last stable offset 3, high watermark 5)",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			in := f.create("in", 1)
			f.put(in, 0, "a", "seq-0")
			out := f.create("out", 2)
			f.put(out, 0, "a", "seq-0")
			aborted := f.txn("t1", out, 1, "a", "seq-0")
			if err := aborted.EndTransaction(context.Background(), kgo.TryAbort); err != nil {
				t.Fatal(err)
			}
			// Sentinels that become visible end the wait at once; the
			// fixture's short 3 s bound is for the hanging case below,
			// and a loaded machine can take longer than that to write one.
			r := f.check(Config{Input: in, Output: out, Sentinels: tt.sentinels, SentinelTimeout: 30 * time.Second})
			if !r.OK() || r.AbortedInLog != 1 || len(r.Hanging) != 0 {
				t.Fatalf("an aborted transaction is not an anomaly, and must be counted: %+v\n%s", r, r)
			}
			if got := f.endOffsets(out); !slices.Equal(got, tt.endsAfterAborted) {
				t.Fatalf("output high watermarks after the check %v, want %v", got, tt.endsAfterAborted)
			}
			f.txn("t2", out, 1, "a", "seq-0") // left open
			r = f.check(Config{Input: in, Output: out, Sentinels: tt.sentinels})
			if r.OK() || !slices.Equal(r.HangingOutputs, []int32{1}) || len(r.Hanging) != 1 || r.Hanging[0] != tt.want {
				t.Fatalf("hanging transaction on partition 1 not caught as %+v: %+v\n%s", tt.want, r, r)
			}
			if r.Lost != 0 || r.Duplicated != 0 || r.AbortedInLog != 2 {
				t.Fatalf("want lost 0, duplicated 0, 2 invisible records (aborted + open): %+v", r)
			}
			if !strings.Contains(r.String(), tt.wantText) || !strings.Contains(r.String(), "hanging transactions on output partitions [1]") {
				t.Fatalf("report does not say %q:\n%s", tt.wantText, r)
			}
			if got := f.endOffsets(out); !slices.Equal(got, tt.endsAfterHanging) {
				t.Fatalf("output high watermarks after the check %v, want %v", got, tt.endsAfterHanging)
			}
		})
	}
}

// By default verify writes nothing: the output topic holds as many records
// after the check as before. Sentinels, on request, add one per partition.
func TestVerifyWritesNothingByDefault(t *testing.T) {
	for _, tt := range []struct {
		name      string
		sentinels bool
		want      []int64 // high watermarks after the check
		records   int     // records in the output after the check
	}{
		{"default", false, []int64{2, 1, 0}, 3},
		{"sentinels", true, []int64{3, 2, 1}, 6},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			in := f.create("in", 1)
			f.put(in, 0, "a", "seq-0", "b", "seq-1", "c", "seq-2")
			out := f.create("out", 3)
			f.put(out, 0, "a", "seq-0", "b", "seq-1")
			f.put(out, 1, "c", "seq-2")
			if got := f.endOffsets(out); !slices.Equal(got, []int64{2, 1, 0}) {
				t.Fatalf("output before the check %v", got)
			}
			before, err := ReadTopic(context.Background(), []string{f.addr}, out, false)
			if err != nil || len(before) != 3 {
				t.Fatalf("read %d records before the check (%v), want 3", len(before), err)
			}
			r := f.check(Config{Input: in, Output: out, Sentinels: tt.sentinels, SentinelTimeout: 30 * time.Second})
			if !r.OK() || r.Outputs != 3 {
				t.Fatalf("correct output flagged: %+v\n%s", r, r)
			}
			if got := f.endOffsets(out); !slices.Equal(got, tt.want) {
				t.Fatalf("output high watermarks after the check %v, want %v", got, tt.want)
			}
			after, err := ReadTopic(context.Background(), []string{f.addr}, out, false)
			if err != nil {
				t.Fatal(err)
			}
			if len(after) != tt.records {
				t.Fatalf("%d records in the output after the check, want %d", len(after), tt.records)
			}
		})
	}
}

// A transaction open when the check starts and committed while it waits is
// not hanging: the check waits for it (up to SettleTimeout) without writing.
func TestOpenTransactionThatEndsIsNotHanging(t *testing.T) {
	f := newFixture(t)
	in := f.create("in", 1)
	f.put(in, 0, "a", "seq-0")
	out := f.create("out", 2)
	open := f.txn("t1", out, 1, "a", "seq-0")
	const delay = time.Second
	done := make(chan error, 1)
	go func() {
		time.Sleep(delay)
		done <- open.EndTransaction(context.Background(), kgo.TryCommit)
	}()
	start := time.Now()
	r := f.check(Config{Input: in, Output: out, SettleTimeout: 20 * time.Second})
	took := time.Since(start)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !r.OK() || len(r.Hanging) != 0 || r.Outputs != 1 || r.Lost != 0 {
		t.Fatalf("a transaction that commits within the settle timeout is not hanging: %+v\n%s", r, r)
	}
	if took < delay-100*time.Millisecond || took > 15*time.Second {
		t.Fatalf("the check took %v: it should have waited for the commit after %v", took, delay)
	}
	if got := f.endOffsets(out); !slices.Equal(got, []int64{0, 2}) { // the record and its commit marker
		t.Fatalf("output high watermarks %v, want [0 2]", got)
	}
}

// An input its producer wrote twice is expected twice in the output: the
// job must copy each input record once, whatever its value.
func TestDuplicateInputsAreExpectedTwice(t *testing.T) {
	f := newFixture(t)
	in := f.create("in", 1)
	f.put(in, 0, "a", "seq-0", "a", "seq-0", "a", "seq-1")
	once := f.create("once", 1)
	f.put(once, 0, "a", "seq-0", "a", "seq-1")
	if r := f.check(Config{Input: in, Output: once}); r.OK() || r.Lost != 1 {
		t.Fatalf("a twice-written input copied once must count as lost: %+v", r)
	}
	twice := f.create("twice", 1)
	f.put(twice, 0, "a", "seq-0", "a", "seq-0", "a", "seq-1")
	if r := f.check(Config{Input: in, Output: twice}); !r.OK() || r.DuplicateInputs != 1 {
		t.Fatalf("copied as often as written is correct: %+v\n%s", r, r)
	}
	thrice := f.create("thrice", 1)
	f.put(thrice, 0, "a", "seq-0", "a", "seq-0", "a", "seq-0", "a", "seq-1")
	if r := f.check(Config{Input: in, Output: thrice}); r.Duplicated != 1 {
		t.Fatalf("a third copy is a duplicate: %+v", r)
	}
}

// TestPassThroughOrderIsPerInputPartition: Kafka orders a partition, not a
// key. After partitions are added to the input, one key's records sit in
// two partitions and the output may interleave them in any order; within
// one input partition the order is still checked.
func TestPassThroughOrderIsPerInputPartition(t *testing.T) {
	f := newFixture(t)
	in := f.create("in2", 2)
	f.put(in, 0, "a", "seq-0", "a", "seq-1")
	f.put(in, 1, "a", "seq-2", "a", "seq-3")

	interleaved := f.create("interleaved", 1)
	f.put(interleaved, 0, "a", "seq-2", "a", "seq-0", "a", "seq-3", "a", "seq-1")
	if r := f.check(Config{Input: in, Output: interleaved}); !r.OK() {
		t.Fatalf("records of one key from two input partitions, each partition in order, flagged:\n%s", r)
	}

	swapped := f.create("swapped", 1)
	f.put(swapped, 0, "a", "seq-0", "a", "seq-3", "a", "seq-2", "a", "seq-1")
	if r := f.check(Config{Input: in, Output: swapped}); r.OutOfOrder != 1 {
		t.Fatalf("partition 1's seq-3 before seq-2: out of order %d, want 1:\n%s", r.OutOfOrder, r)
	}
}
