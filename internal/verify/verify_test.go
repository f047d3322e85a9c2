package verify

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/broker"
)

type fixture struct {
	t    *testing.T
	addr string
	cl   *kgo.Client
}

func newFixture(t *testing.T) *fixture {
	b := broker.StartForTest(t, broker.Config{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &fixture{t: t, addr: b.Addr(), cl: cl}
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
	cfg.SentinelTimeout = 3 * time.Second
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

// Records of an aborted transaction are in the log but not visible; an open
// transaction hangs its partition for read_committed readers.
func TestAbortedAndHangingTransactions(t *testing.T) {
	f := newFixture(t)
	in := f.create("in", 1)
	f.put(in, 0, "a", "seq-0")
	out := f.create("out", 2)
	f.put(out, 0, "a", "seq-0")
	txn := func(id string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(f.addr), kgo.TransactionalID(id), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: out, Partition: 1, Key: []byte("a"), Value: []byte("seq-0")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		return cl
	}
	aborted := txn("t1")
	if err := aborted.EndTransaction(context.Background(), kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	r := f.check(Config{Input: in, Output: out})
	if !r.OK() || r.AbortedInLog != 1 {
		t.Fatalf("an aborted transaction is not an anomaly, and must be counted: %+v\n%s", r, r)
	}
	txn("t2") // left open
	r = f.check(Config{Input: in, Output: out})
	if len(r.HangingOutputs) != 1 || r.HangingOutputs[0] != 1 || r.OK() {
		t.Fatalf("hanging transaction on partition 1 not caught: %+v", r)
	}
	if !strings.Contains(r.String(), "hanging") {
		t.Fatalf("report does not say hanging:\n%s", r)
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
