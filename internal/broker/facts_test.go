package broker_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// The tests in this file check the facts listed in the package doc, one
// test per fact, against a running broker with a real franz-go client.

// Fact 1.
func TestFactReadCommittedSeesCommittedOnly(t *testing.T) {
	b := kafkatest.StartBroker(t, broker.Config{Topics: map[string]int32{"out": 1}})
	ctx := kafkatest.Context(t)

	p := txnProducer(t, b.Addr(), "job-0")
	produceInTxn(t, ctx, p, "out", "c1", "c2")
	if err := endTxn(ctx, p, true); err != nil {
		t.Fatalf("commit: %v", err)
	}
	produceInTxn(t, ctx, p, "out", "a1")
	if err := endTxn(ctx, p, false); err != nil {
		t.Fatalf("abort: %v", err)
	}
	produceInTxn(t, ctx, p, "out", "c3")
	if err := endTxn(ctx, p, true); err != nil {
		t.Fatalf("commit: %v", err)
	}

	if got, want := readAll(t, ctx, b.Addr(), "out", kgo.ReadCommitted()), []string{"c1", "c2", "c3"}; !slices.Equal(got, want) {
		t.Errorf("read_committed = %q, want %q", got, want)
	}
	// The aborted record was written: it is hidden, not lost.
	if got, want := readAll(t, ctx, b.Addr(), "out", kgo.ReadUncommitted()), []string{"c1", "c2", "a1", "c3"}; !slices.Equal(got, want) {
		t.Errorf("read_uncommitted = %q, want %q", got, want)
	}
}

// Fact 1, the open case: an open transaction holds back read_committed at
// its first offset (the last stable offset), also for records after it.
func TestFactOpenTxnHoldsBackLastStableOffset(t *testing.T) {
	b := kafkatest.StartBroker(t, broker.Config{Topics: map[string]int32{"out": 1}})
	ctx := kafkatest.Context(t)

	p := txnProducer(t, b.Addr(), "job-0")
	produceInTxn(t, ctx, p, "out", "c1")
	if err := endTxn(ctx, p, true); err != nil {
		t.Fatalf("commit: %v", err)
	}
	produceInTxn(t, ctx, p, "out", "open") // offset 2, after c1 and its marker

	adm := kadm.NewClient(newClient(t, b.Addr()))
	lso, err := adm.ListCommittedOffsets(ctx, "out")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := lso.Lookup("out", 0); o.Offset != 2 {
		t.Errorf("last stable offset with open txn = %d, want 2 (the open txn's first record)", o.Offset)
	}
	if err := endTxn(ctx, p, true); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if got, want := readAll(t, ctx, b.Addr(), "out", kgo.ReadCommitted()), []string{"c1", "open"}; !slices.Equal(got, want) {
		t.Errorf("read_committed = %q, want %q", got, want)
	}
}

// Fact 2.
func TestFactTxnOffsetCommitVisibleOnlyAfterCommit(t *testing.T) {
	b := kafkatest.StartBroker(t, broker.Config{Topics: map[string]int32{"in": 1, "out": 1}})
	ctx := kafkatest.Context(t)
	p := txnProducer(t, b.Addr(), "job-0")

	// Checkpoint 1: staged, invisible until EndTxn commits it.
	produceInTxn(t, ctx, p, "out", "r1")
	if err := commitOffsetsInTxn(ctx, p, "job-0", "job", txnOffset{"in", 0, 10, "ckpt-1"}); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(newClient(t, b.Addr()))
	if _, err := adm.FetchOffsets(ctx, "job"); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Errorf("before the first commit: fetch offsets = %v, want GROUP_ID_NOT_FOUND", err)
	}
	if err := endTxn(ctx, p, true); err != nil {
		t.Fatalf("commit: %v", err)
	}
	o, ok := fetchOffset(t, ctx, b.Addr(), "job", "in")
	if !ok || o.At != 10 || o.Metadata != "ckpt-1" {
		t.Fatalf("after commit: offset %+v (found %v), want 10 with metadata ckpt-1", o, ok)
	}

	// Checkpoint 2: while staged, the previous commit is what a reader
	// gets, and RequireStable readers are told to wait.
	produceInTxn(t, ctx, p, "out", "r2")
	if err := commitOffsetsInTxn(ctx, p, "job-0", "job", txnOffset{"in", 0, 20, "ckpt-2"}); err != nil {
		t.Fatal(err)
	}
	if o, _ := fetchOffset(t, ctx, b.Addr(), "job", "in"); o.At != 10 || o.Metadata != "ckpt-1" {
		t.Errorf("while ckpt-2 is open: offset %d %q, want 10 ckpt-1", o.At, o.Metadata)
	}
	stable, err := adm.FetchOffsets(kadm.RequireStable(ctx), "job")
	if err != nil {
		t.Fatal(err)
	}
	if so, _ := stable.Lookup("in", 0); !errors.Is(so.Err, kerr.UnstableOffsetCommit) {
		t.Errorf("RequireStable fetch while ckpt-2 is open: err %v, want UNSTABLE_OFFSET_COMMIT", so.Err)
	}

	// Aborting drops the staged offsets.
	if err := endTxn(ctx, p, false); err != nil {
		t.Fatalf("abort: %v", err)
	}
	if o, _ := fetchOffset(t, ctx, b.Addr(), "job", "in"); o.At != 10 || o.Metadata != "ckpt-1" {
		t.Errorf("after abort of ckpt-2: offset %d %q, want 10 ckpt-1", o.At, o.Metadata)
	}
}

// Fact 2, the trap: kgo ends a transaction in which nothing was produced
// without sending EndTxn, so offsets committed alone are never applied.
func TestFactOffsetsOnlyTxnNeverCommits(t *testing.T) {
	b := kafkatest.StartBroker(t, broker.Config{Topics: map[string]int32{"in": 1}})
	ctx := kafkatest.Context(t)
	p := txnProducer(t, b.Addr(), "job-0")
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := commitOffsetsInTxn(ctx, p, "job-0", "job", txnOffset{"in", 0, 10, "ckpt-1"}); err != nil {
		t.Fatal(err)
	}
	if err := endTxn(ctx, p, true); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if o, ok := fetchOffset(t, ctx, b.Addr(), "job", "in"); ok {
		t.Errorf("offsets of a transaction without records were applied: %+v", o)
	}
	// Still open broker side, until the transaction timeout.
	txns, err := kadm.NewClient(newClient(t, b.Addr())).DescribeTransactions(ctx, "job-0")
	if err != nil {
		t.Fatal(err)
	}
	if st := txns["job-0"].State; st != "Ongoing" {
		t.Errorf("transaction state = %q, want Ongoing", st)
	}
}

// Fact 3.
func TestFactFencing(t *testing.T) {
	tests := []struct {
		name string
		// takeOver makes the second producer the owner of the
		// transactional id.
		takeOver func(t *testing.T, ctx context.Context, newer *kgo.Client)
		// newerInTxn is whether takeOver left a transaction open.
		newerInTxn bool
		// wantErr is what the first producer's EndTxn(commit) answers.
		wantErr   *kerr.Error
		wantFence bool
	}{{
		name: "newer producer began a transaction",
		takeOver: func(t *testing.T, ctx context.Context, newer *kgo.Client) {
			produceInTxn(t, ctx, newer, "out", "newer")
		},
		newerInTxn: true,
		wantErr:    kerr.ProducerFenced,
		wantFence:  true,
	}, {
		// kfake (KIP-890, EndTxn v5) takes a commit at exactly one
		// epoch behind with no transaction open for a retry of a
		// finished EndTxn; the finished one was the fencing abort,
		// so the answer is INVALID_TXN_STATE, the same as after a
		// transaction timeout (fact 5). IsFenced cannot tell.
		name: "newer producer only initialized",
		takeOver: func(t *testing.T, ctx context.Context, newer *kgo.Client) {
			if _, _, err := newer.ProducerID(ctx); err != nil {
				t.Fatalf("init newer: %v", err)
			}
		},
		wantErr:   kerr.InvalidTxnState,
		wantFence: false,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := kafkatest.StartBroker(t, broker.Config{Topics: map[string]int32{"out": 1}})
			ctx := kafkatest.Context(t)

			old := txnProducer(t, b.Addr(), "job-0")
			produceInTxn(t, ctx, old, "out", "old")
			newer := txnProducer(t, b.Addr(), "job-0")
			tt.takeOver(t, ctx, newer)

			err := endTxn(ctx, old, true)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("old producer's commit: %v, want %v", err, tt.wantErr)
			}
			if broker.IsFenced(err) != tt.wantFence {
				t.Errorf("IsFenced(%v) = %v, want %v", err, !tt.wantFence, tt.wantFence)
			}
			// kgo treats both as fatal: the old client cannot start
			// another transaction, even after the documented abort.
			if err := old.EndTransaction(ctx, kgo.TryAbort); err != nil {
				t.Errorf("abort after failed commit: %v", err)
			}
			if err := old.BeginTransaction(); !errors.Is(err, tt.wantErr) {
				t.Errorf("old producer's next begin: %v, want %v", err, tt.wantErr)
			}

			// The newer producer is unaffected.
			if !tt.newerInTxn {
				if err := newer.BeginTransaction(); err != nil {
					t.Fatalf("newer producer's begin: %v", err)
				}
			}
			if err := newer.ProduceSync(ctx, &kgo.Record{Topic: "out", Value: []byte("newer-2")}).FirstErr(); err != nil {
				t.Fatalf("newer producer's produce: %v", err)
			}
			if err := endTxn(ctx, newer, true); err != nil {
				t.Fatalf("newer producer's commit: %v", err)
			}
			got := readAll(t, ctx, b.Addr(), "out", kgo.ReadCommitted())
			if slices.Contains(got, "old") || !slices.Contains(got, "newer-2") {
				t.Errorf("read_committed = %q, want the newer producer's records only", got)
			}
		})
	}
}

// Fact 3, producing: a zombie's next produce fails fenced, and kgo then
// refuses its commit without asking the broker.
func TestFactFencedProduce(t *testing.T) {
	b := kafkatest.StartBroker(t, broker.Config{Topics: map[string]int32{"out": 1}})
	ctx := kafkatest.Context(t)

	old := txnProducer(t, b.Addr(), "job-0")
	produceInTxn(t, ctx, old, "out", "old")
	if _, _, err := txnProducer(t, b.Addr(), "job-0").ProducerID(ctx); err != nil {
		t.Fatalf("init newer: %v", err)
	}
	err := old.ProduceSync(ctx, &kgo.Record{Topic: "out", Value: []byte("old-2")}).FirstErr()
	if !errors.Is(err, kerr.InvalidProducerEpoch) || !broker.IsFenced(err) {
		t.Errorf("zombie produce: %v, want INVALID_PRODUCER_EPOCH and IsFenced", err)
	}
	if err := endTxn(ctx, old, true); !errors.Is(err, kerr.OperationNotAttempted) {
		t.Errorf("zombie commit after a fenced produce: %v, want OPERATION_NOT_ATTEMPTED", err)
	}
}

func TestIsFenced(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{kerr.ProducerFenced, true},
		{kerr.InvalidProducerEpoch, true},
		{errors.Join(errors.New("commit checkpoint 7"), kerr.ProducerFenced), true},
		{kerr.InvalidTxnState, false},
		{kerr.UnknownServerError, false},
		{context.DeadlineExceeded, false},
	}
	for _, tt := range tests {
		if got := broker.IsFenced(tt.err); got != tt.want {
			t.Errorf("IsFenced(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// logSignal is an slog.Handler that hands warnings to a channel, so a test
// can wait for something the broker does on its own timer.
type logSignal chan string

func (s logSignal) Enabled(context.Context, slog.Level) bool { return true }
func (s logSignal) Handle(_ context.Context, r slog.Record) error {
	select {
	case s <- r.Message:
	default: // never block the broker's loop
	}
	return nil
}
func (s logSignal) WithAttrs([]slog.Attr) slog.Handler { return s }
func (s logSignal) WithGroup(string) slog.Handler      { return s }

// Fact 5.
func TestFactTxnTimeoutAborts(t *testing.T) {
	logs := make(logSignal, 100)
	b := kafkatest.StartBroker(t, broker.Config{Topics: map[string]int32{"out": 1}, Logger: slog.New(logs)})
	ctx := kafkatest.Context(t)

	const timeout = 100 * time.Millisecond
	p := txnProducer(t, b.Addr(), "job-0", kgo.TransactionTimeout(timeout))
	start := time.Now()
	produceInTxn(t, ctx, p, "out", "late")

	// kfake logs each timeout abort at warn level when it happens.
	for aborted := false; !aborted; {
		select {
		case msg := <-logs:
			aborted = strings.Contains(msg, "txn timeout abort") && strings.Contains(msg, "txn_id=job-0")
		case <-ctx.Done():
			t.Fatal("the broker did not abort the transaction after its timeout")
		}
	}
	if elapsed := time.Since(start); elapsed < timeout {
		t.Errorf("aborted after %v, before the %v timeout", elapsed, timeout)
	}
	if pi := b.Cluster().PartitionInfo("out", 0); pi.LastStableOffset != pi.HighWatermark {
		t.Errorf("after abort: last stable offset %d, high watermark %d; want equal", pi.LastStableOffset, pi.HighWatermark)
	}
	if err := endTxn(ctx, p, true); !errors.Is(err, kerr.InvalidTxnState) {
		t.Errorf("commit after timeout: %v, want INVALID_TXN_STATE", err)
	}
	if got := readAll(t, ctx, b.Addr(), "out", kgo.ReadCommitted()); len(got) != 0 {
		t.Errorf("read_committed = %q, want nothing", got)
	}
}

// Fact 5, the limit.
func TestFactTxnMaxTimeout(t *testing.T) {
	tests := []struct {
		max, producer time.Duration
		wantErr       error
	}{
		{0, broker.DefaultTxnMaxTimeout, nil},
		{0, broker.DefaultTxnMaxTimeout + time.Millisecond, kerr.InvalidTransactionTimeout},
		{time.Second, time.Second, nil},
		{time.Second, 2 * time.Second, kerr.InvalidTransactionTimeout},
	}
	for _, tt := range tests {
		b := kafkatest.StartBroker(t, broker.Config{TxnMaxTimeout: tt.max})
		p := txnProducer(t, b.Addr(), "job-0", kgo.TransactionTimeout(tt.producer))
		// kgo initializes the producer id in BeginTransaction.
		err := p.BeginTransaction()
		if !errors.Is(err, tt.wantErr) && !(err == nil && tt.wantErr == nil) {
			t.Errorf("max %v, producer timeout %v: begin = %v, want %v", tt.max, tt.producer, err, tt.wantErr)
		}
	}
}

// Fact 6.
func TestFactFaultInjection(t *testing.T) {
	tests := []struct {
		name       string
		err        *kerr.Error
		wantCommit bool // whether kgo retried past the fault on its own
	}{
		{"retriable", kerr.ConcurrentTransactions, true},
		{"not retriable", kerr.UnknownServerError, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := kafkatest.StartBroker(t, broker.Config{Topics: map[string]int32{"out": 1}})
			ctx := kafkatest.Context(t)
			p := txnProducer(t, b.Addr(), "job-0")
			produceInTxn(t, ctx, p, "out", "r1")

			// Count 0 means one request; the broker answers it with
			// err before doing the work.
			h := b.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: tt.err})
			err := endTxn(ctx, p, true)
			if h.Hits() != 1 {
				t.Errorf("fault hits = %d, want 1", h.Hits())
			}
			if committed := err == nil; committed != tt.wantCommit {
				t.Fatalf("commit error %v, want committed=%v", err, tt.wantCommit)
			}
			if !tt.wantCommit {
				if !errors.Is(err, tt.err) {
					t.Fatalf("commit error %v, want %v", err, tt.err)
				}
				// An unconfirmed commit: kgo's abort re-initializes
				// the producer id, which aborts the transaction
				// broker side, and the client is usable again.
				if err := p.EndTransaction(ctx, kgo.TryAbort); err != nil {
					t.Fatalf("abort after failed commit: %v", err)
				}
			}
			produceInTxn(t, ctx, p, "out", "r2")
			if err := endTxn(ctx, p, true); err != nil {
				t.Fatalf("next commit: %v", err)
			}
			want := []string{"r1", "r2"}
			if !tt.wantCommit {
				want = []string{"r2"}
			}
			if got := readAll(t, ctx, b.Addr(), "out", kgo.ReadCommitted()); !slices.Equal(got, want) {
				t.Errorf("read_committed = %q, want %q", got, want)
			}
		})
	}
}

// Fact 6, the lower-level hook: ControlKey sees requests before the broker
// and can answer, drop or just observe them.
func TestFactControlKeyDropsConnection(t *testing.T) {
	b := kafkatest.StartBroker(t, broker.Config{Topics: map[string]int32{"out": 1}})
	ctx := kafkatest.Context(t)
	p := txnProducer(t, b.Addr(), "job-0")
	produceInTxn(t, ctx, p, "out", "r1")

	var seen atomic.Int32 // written on the broker's goroutine
	// Returning an error with handled=true closes the client's
	// connection; the control function is then dropped, so the retry
	// reaches the broker.
	b.Cluster().ControlKey(int16(kmsg.EndTxn), func(kmsg.Request) (kmsg.Response, error, bool) {
		seen.Add(1)
		return nil, errors.New("injected connection drop"), true
	})
	if err := endTxn(ctx, p, true); err != nil {
		t.Fatalf("commit across a dropped connection: %v", err)
	}
	if n := seen.Load(); n != 1 {
		t.Errorf("control saw %d EndTxn requests, want 1", n)
	}
	if got := readAll(t, ctx, b.Addr(), "out", kgo.ReadCommitted()); !slices.Equal(got, []string{"r1"}) {
		t.Errorf("read_committed = %q, want [r1]", got)
	}
}
