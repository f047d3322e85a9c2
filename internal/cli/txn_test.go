package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// A producer that opened a transaction and went silent blocks
// read_committed readers: txn list shows it, txn abort ends it, and the
// readers see past it (the aborted record never).
func TestTxnListAndAbort(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{})
	c.CreateTopic(t, "t", 1)
	c.Produce(t, "t", "k", "before")
	hung := c.Client(t, kgo.TransactionalID("stuck-producer"), kgo.TransactionTimeout(10*time.Minute))
	if err := hung.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := hung.ProduceSync(kafkatest.Context(t), &kgo.Record{Topic: "t", Value: []byte("hanging")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c.Produce(t, "t", "k", "after")
	if got := c.ReadCommitted(t, "t"); len(got) != 1 {
		t.Fatalf("read_committed before the abort sees %v, want only the record before the open transaction", got)
	}

	code, out, errOut := runMain("txn", "--brokers", c.Addr, "--older-than", "0s", "list")
	if code != 0 || !strings.Contains(out, "stuck-producer") || !strings.Contains(out, "Ongoing") || !strings.Contains(out, "t/0") {
		t.Fatalf("txn list: %d\n%s%s", code, out, errOut)
	}
	if code, out, _ := runMain("txn", "--brokers", c.Addr, "list"); code != 0 || strings.Contains(out, "stuck-producer") {
		t.Errorf("txn list with the default --older-than 1m shows a transaction opened just now:\n%s", out)
	}
	code, out, errOut = runMain("txn", "--brokers", c.Addr, "abort", "stuck-producer")
	if code != 0 || !strings.Contains(out, "aborted the open transaction of stuck-producer") {
		t.Fatalf("txn abort: %d\n%s%s", code, out, errOut)
	}
	got := c.ReadCommitted(t, "t")
	if len(got) != 2 || strings.Contains(strings.Join(got, " "), "hanging") {
		t.Errorf("read_committed after the abort: %v, want the records before and after, not the aborted one", got)
	}
	if err := hung.EndTransaction(kafkatest.Context(t), kgo.TryCommit); err == nil {
		t.Error("the fenced producer committed its transaction after the abort")
	}
	code, _, errOut = runMain("txn", "--brokers", c.Addr, "abort", "stuck-producer")
	if code != 1 || !strings.Contains(errOut, "no open transaction") {
		t.Errorf("second abort: %d %s", code, errOut)
	}
}
