package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// topic create makes the topics with the partitions asked, and says so
// for one that exists, which it leaves alone.
func TestTopicCreate(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{})
	code, out, errOut := runMain("topic", "--brokers", c.Addr, "--partitions", "3", "--config", "retention.ms=3600000", "create", "orders", "counts")
	if code != 0 || !strings.Contains(out, "created orders (3 partitions)") || !strings.Contains(out, "created counts (3 partitions)") {
		t.Fatalf("topic create: %d\n%s%s", code, out, errOut)
	}
	topics, err := c.Admin(t).ListTopics(kafkatest.Context(t), "orders")
	if err != nil || len(topics["orders"].Partitions) != 3 {
		t.Fatalf("orders: %v, %v", topics, err)
	}
	code, out, errOut = runMain("topic", "--brokers", c.Addr, "--partitions", "5", "create", "orders")
	if code != 0 || !strings.Contains(out, "orders exists already (3 partitions)") {
		t.Errorf("topic create of an existing topic: %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := runMain("topic", "--brokers", c.Addr, "create"); code != 2 || !strings.Contains(errOut, "name the topics") {
		t.Errorf("topic create without topics: %d %s", code, errOut)
	}
}

// lag reads a group's committed offsets and the partitions' ends, and its
// verdict tells a group that commits and keeps up from one that stopped.
func TestLagVerdicts(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{})
	c.CreateTopic(t, "in", 2)
	c.ProduceRecords(t, &kgo.Record{Topic: "in", Partition: 0, Value: []byte("a")}, &kgo.Record{Topic: "in", Partition: 0, Value: []byte("b")},
		&kgo.Record{Topic: "in", Partition: 1, Value: []byte("c")})
	adm := c.Admin(t)
	commit := func(p0, p1 int64, cp int) {
		t.Helper()
		meta := "onceflow:j:" + strconv.Itoa(cp)
		var offs kadm.Offsets
		offs.Add(kadm.Offset{Topic: "in", Partition: 0, At: p0, LeaderEpoch: -1, Metadata: meta})
		offs.Add(kadm.Offset{Topic: "in", Partition: 1, At: p1, LeaderEpoch: -1, Metadata: meta})
		if _, err := adm.CommitOffsets(kafkatest.Context(t), "onceflow-j", offs); err != nil {
			t.Fatal(err)
		}
	}
	if code, _, errOut := runMain("lag", "--brokers", c.Addr, "--group", "onceflow-j", "--window", "0"); code != 1 || !strings.Contains(errOut, "no committed offsets") {
		t.Errorf("lag of a group that never committed: %d %s", code, errOut)
	}
	commit(2, 0, 5)
	code, out, errOut := runMain("lag", "--brokers", c.Addr, "--group", "onceflow-j", "--window", "0")
	if code != 0 || !strings.Contains(out, "in     0          2          2    0    5") || !strings.Contains(out, "in     1          0          1    1    5") {
		t.Fatalf("lag: %d\n%s%s", code, out, errOut)
	}
	// Nothing commits over the window while partition 1 lags: STOP.
	code, out, _ = runMain("lag", "--brokers", c.Addr, "--group", "onceflow-j", "--window", "200ms", "--samples", "2")
	if code != 0 || !strings.Contains(out, "STOP") || !strings.Contains(out, "group onceflow-j: STOP") {
		t.Errorf("lag of a stopped group:\n%s", out)
	}
	// Checkpoints commit, offsets do not move: STALL.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 6; i < 12; i++ {
			time.Sleep(40 * time.Millisecond)
			commit(2, 0, i)
		}
	}()
	code, out, _ = runMain("lag", "--brokers", c.Addr, "--group", "onceflow-j", "--window", "200ms", "--samples", "2")
	<-done
	if code != 0 || !strings.Contains(out, "group onceflow-j: STALL") {
		t.Errorf("lag of a group committing without progress:\n%s", out)
	}
}

func TestLagVerdictRules(t *testing.T) {
	s := func(committed, end, cp int64) lagSample {
		return lagSample{committed: committed, end: end, checkpoint: cp}
	}
	for _, tc := range []struct {
		seq  []lagSample
		want string
	}{
		{[]lagSample{s(5, 9, 1), s(9, 9, 2)}, lagOK},
		{[]lagSample{s(5, 9, 1), s(5, 9, 1)}, lagStop},
		{[]lagSample{s(5, 9, 1), s(5, 12, 4)}, lagStall},
		{[]lagSample{s(5, 9, 1), s(7, 14, 2), s(9, 20, 3)}, lagWarn},
		{[]lagSample{s(5, 9, 1), s(7, 14, 2), s(12, 16, 3)}, lagOK},
		{[]lagSample{s(5, 5, 1), s(5, 5, 1)}, lagOK},
	} {
		if got := lagVerdict(tc.seq); got != tc.want {
			t.Errorf("lagVerdict(%v) = %s, want %s", tc.seq, got, tc.want)
		}
	}
}

// topic add-partitions grows a topic to the partition count asked (the
// job's input topics with --job), leaves one that has it alone, and
// refuses to shrink one, saying what to do instead.
func TestTopicAddPartitions(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{Topics: map[string]int32{"orders": 2, "other": 4}})
	job := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(job, []byte("job: j\nkafka: {brokers: ["+c.Addr+"]}\nsource: {topics: [orders]}\nsink: {topic: out}\ncheckpointing: {interval: 1s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	partitions := func(topic string) int {
		t.Helper()
		d, err := c.Admin(t).ListTopics(kafkatest.Context(t), topic)
		if err != nil {
			t.Fatal(err)
		}
		return len(d[topic].Partitions)
	}
	code, out, errOut := runMain("topic", "add-partitions", "--job", job, "--partitions", "5")
	if code != 0 || !strings.Contains(out, "orders: 2 -> 5 partitions") || partitions("orders") != 5 {
		t.Fatalf("add-partitions --job: %d, orders has %d partitions\n%s%s", code, partitions("orders"), out, errOut)
	}
	if partitions("other") != 4 {
		t.Errorf("add-partitions --job changed a topic the job does not read")
	}
	code, out, errOut = runMain("topic", "add-partitions", "--brokers", c.Addr, "--topic", "orders", "--partitions", "5")
	if code != 0 || !strings.Contains(out, "orders has 5 partitions already; left as it is") {
		t.Errorf("add-partitions to the count it has: %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runMain("topic", "add-partitions", "--brokers", c.Addr, "--topic", "other", "--partitions", "2")
	if code != 1 || !strings.Contains(errOut, "other has 4 partitions and Kafka cannot remove partitions") || partitions("other") != 4 {
		t.Errorf("add-partitions that would shrink: %d, other has %d partitions\n%s%s", code, partitions("other"), out, errOut)
	}
	if code, _, errOut := runMain("topic", "add-partitions", "--brokers", c.Addr, "orders"); code != 2 || !strings.Contains(errOut, "--partitions") {
		t.Errorf("add-partitions without --partitions: %d %s", code, errOut)
	}
	if code, _, errOut := runMain("topic", "add-partitions", "--brokers", c.Addr, "--partitions", "3", "missing"); code != 1 || !strings.Contains(errOut, "missing") || !strings.Contains(errOut, "does not exist") {
		t.Errorf("add-partitions of a topic that does not exist: %d %s", code, errOut)
	}
}

// lag counts the partitions the group has no offset for (added to the
// topic and not read yet): from their log start, where the job's
// discovery starts them, to their end. Lag is never 0 while records sit
// unread.
func TestLagCountsPartitionsWithoutOffsets(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{Topics: map[string]int32{"in": 1}})
	c.ProduceRecords(t, &kgo.Record{Topic: "in", Partition: 0, Value: []byte("a")}, &kgo.Record{Topic: "in", Partition: 0, Value: []byte("b")})
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "in", Partition: 0, At: 2, LeaderEpoch: -1, Metadata: "onceflow:j:3"})
	if _, err := c.Admin(t).CommitOffsets(kafkatest.Context(t), "onceflow-j", offs); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admin(t).CreatePartitions(kafkatest.Context(t), 2, "in"); err != nil {
		t.Fatal(err)
	}
	c.ProduceRecords(t, &kgo.Record{Topic: "in", Partition: 1, Value: []byte("c")}, &kgo.Record{Topic: "in", Partition: 1, Value: []byte("d")},
		&kgo.Record{Topic: "in", Partition: 1, Value: []byte("e")})
	code, out, errOut := runMain("lag", "--brokers", c.Addr, "--group", "onceflow-j", "--window", "0")
	rows := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 7 && f[0] == "in" {
			rows[f[1]] = strings.Join(f[2:], " ")
		}
	}
	want := map[string]string{"0": "2 2 0 3 -", "1": "- 3 3 - -", "2": "- 0 0 - -"}
	for p, w := range want {
		if rows[p] != w {
			t.Errorf("partition %s: COMMITTED END LAG CHECKPOINT STATUS %q, want %q", p, rows[p], w)
		}
	}
	if code != 0 || t.Failed() {
		t.Fatalf("lag: %d\n%s%s", code, out, errOut)
	}
}
