package kafkatest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/broker"
)

func TestStartPicksFreePort(t *testing.T) {
	a, b := StartBroker(t, broker.Config{}), StartBroker(t, broker.Config{})
	if a.Addr() == b.Addr() || strings.HasSuffix(a.Addr(), ":9092") {
		t.Errorf("StartBroker addresses %s and %s, want two free ports", a.Addr(), b.Addr())
	}
}

func TestContextHasDeadline(t *testing.T) {
	d, ok := Context(t).Deadline()
	if !ok || time.Until(d) > Timeout || time.Until(d) < Timeout-time.Minute {
		t.Errorf("Context deadline in %v (set %v), want about %v", time.Until(d), ok, Timeout)
	}
}

// ReadCommittedRecords sees committed records in partition and offset
// order and no aborted ones; Produce partitions by key, ProduceRecords by
// the record's partition; GroupOffsets and CaughtUp read a group.
func TestProduceAndRead(t *testing.T) {
	c := Start(t, broker.Config{Topics: map[string]int32{"t": 2}})
	c.ProduceRecords(t, &kgo.Record{Topic: "t", Partition: 1, Value: []byte("p1-0")}, &kgo.Record{Topic: "t", Partition: 0, Value: []byte("p0-0")})
	txn := c.Client(t, kgo.TransactionalID("x"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := Context(t)
	for _, commit := range []kgo.TransactionEndTry{kgo.TryAbort, kgo.TryCommit} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		v := fmt.Sprintf("txn-%v", bool(commit))
		if err := txn.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: 0, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := txn.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	c.Produce(t, "t", "k", "a", "k", "b")
	got := c.ReadCommittedRecords(t, "t")
	var vals []string
	for i, r := range got {
		vals = append(vals, string(r.Value))
		if i > 0 && (r.Partition < got[i-1].Partition || r.Partition == got[i-1].Partition && r.Offset <= got[i-1].Offset) {
			t.Errorf("record %d (%d@%d) out of partition and offset order", i, r.Partition, r.Offset)
		}
	}
	// a and b share a key, hence a partition, in order.
	if !CheckExactlyOnce(t, "read_committed", vals, []string{"p0-0", "p1-0", "txn-true", "a", "b"}) {
		t.Logf("read %q", vals)
	}
	if i, j := slices.Index(vals, "a"), slices.Index(vals, "b"); i < 0 || j != i+1 {
		t.Errorf("records of one key out of order: %q", vals)
	}

	if offs := c.GroupOffsets(t, "g", "t"); len(offs) != 0 {
		t.Errorf("offsets of a group that never committed: %v", offs)
	}
	adm := c.Admin(t)
	if CaughtUp(ctx, adm, "g", "t") {
		t.Error("a group without offsets is caught up")
	}
	ends, err := adm.ListEndOffsets(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	commit := kadm.Offsets{}
	ends.Each(func(o kadm.ListedOffset) { commit.AddOffset("t", o.Partition, o.Offset, -1) })
	if _, err := adm.CommitOffsets(ctx, "g", commit); err != nil {
		t.Fatal(err)
	}
	if offs := c.GroupOffsets(t, "g", "t"); len(offs) != 2 {
		t.Errorf("group offsets %v, want 2 partitions", offs)
	}
	if !CaughtUp(ctx, adm, "g", "t") {
		t.Error("a group at the end offsets is not caught up")
	}
	c.CreateTopic(t, "t", 2) // exists: fine
	c.CreateTopic(t, "new", 3)
	if td, err := adm.ListTopics(context.Background(), "new"); err != nil || len(td["new"].Partitions) != 3 {
		t.Errorf("created topic: %v, %v", td, err)
	}
}

// recorder is a testing.TB that keeps what the checks report.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestCheckExactlyOnce(t *testing.T) {
	want := SeqValues("seq-", 5)
	for _, tc := range []struct {
		name string
		got  []string
		errs []string // substrings, in order
	}{
		{"exact, any order", []string{"seq-4", "seq-0", "seq-2", "seq-1", "seq-3"}, nil},
		{"lost", []string{"seq-0", "seq-1", "seq-3", "seq-4"}, []string{`lost "seq-2" (0 times, want 1)`, "1 lost, 0 duplicated, 0 unexpected"}},
		{"duplicated", []string{"seq-0", "seq-1", "seq-2", "seq-3", "seq-4", "seq-1"}, []string{`duplicated "seq-1" (2 times, want 1)`, "6 records, want the 5 inputs exactly once: 0 lost, 1 duplicated"}},
		{"unexpected", []string{"seq-0", "seq-1", "seq-2", "seq-3", "seq-4", "x"}, []string{`unexpected "x" (1 times, want 0)`, "1 unexpected"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{TB: t}
			ok := CheckExactlyOnce(r, "out", tc.got, want)
			if ok != (len(tc.errs) == 0) {
				t.Errorf("passed %v with errors %q", ok, r.errs)
			}
			if len(r.errs) != len(tc.errs) {
				t.Fatalf("errors %q, want %d", r.errs, len(tc.errs))
			}
			for i, e := range tc.errs {
				if !strings.HasPrefix(r.errs[i], "out: ") || !strings.Contains(r.errs[i], e) {
					t.Errorf("error %d %q, want it to say %q", i, r.errs[i], e)
				}
			}
		})
	}
}

func TestCheckCounts(t *testing.T) {
	counts := func(rs ...Record) []Record { return rs }
	good := counts(Record{"a", "1", 0, 1}, Record{"b", "1", 1, 1}, Record{"a", "2", 0, 5}, Record{"b", "2", 1, 2})
	for _, tc := range []struct {
		name string
		out  []Record
		err  string
	}{
		{"exact", good, ""},
		{"missing key", good[:1], "counts for 1 keys, want 2"},
		{"missing count", counts(good[0], good[1], good[3]), "key a has 1 counts, want 2"},
		{"repeat", counts(good[0], good[1], Record{"a", "1", 0, 5}, good[3]), `key a count #2 is "1", want 2`},
		{"two partitions", counts(good[0], good[1], Record{"a", "2", 1, 5}, good[3]), "key a spread over partitions or out of order"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{TB: t}
			ok := CheckCounts(r, "out", tc.out, 2, 2)
			if ok != (tc.err == "") || (tc.err == "") != (len(r.errs) == 0) || tc.err != "" && !strings.Contains(r.errs[0], tc.err) {
				t.Errorf("passed %v, errors %q; want %q", ok, r.errs, tc.err)
			}
		})
	}
}
