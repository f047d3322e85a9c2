package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/kafkatest"
)

// TestScaleOutRekeyedJoin: orders keyed by their id and customers keyed
// by theirs, in two topics, joined on the customer (a re-key of the
// orders) by an interval join on event time (the orders' in their
// value, by their source's own section, the customers' their Kafka
// timestamp, by the job's; the join's task after the cut takes each
// record's by its tag), run as
// scale-out instances:
// the planner cuts the graph before the join, so the first sub-topology
// writes both sides into one repartition topic by the customer, tagged,
// and the second's task of partition p joins partition p with the
// watermark the smallest of every writer's marker (docs/design.md, "Named
// streams"). Orders keep coming while an instance is SIGKILLed and
// started again and a third is added. A late order (one the watermark had
// passed at the join, as a watermark following the fastest writer would
// make them) pairs with nothing, so every order joined exactly once,
// read with read_committed franz-go and kcat, shows that the watermarks
// crossed right; so does the output's key (the customer) and value.
func TestScaleOutRekeyedJoin(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	rng := seed(t)
	orders, batches := 3000, 12
	if os.Getenv("ONCEFLOW_LONG") != "" {
		orders, batches = 20000, 60
	}
	const customers = 150
	dir := t.TempDir()
	addr := startBroker(t, filepath.Join(dir, "broker"))
	createTopic(t, addr, "orders", 4)
	createTopic(t, addr, "customers", 4)
	createTopic(t, addr, "enriched", 4)
	cl := client(t, addr, kgo.ProducerLinger(5*time.Millisecond))
	produce := func(rs []*kgo.Record) {
		t.Helper()
		if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// Customers at base, orders 20 ms apart after it: every order is
	// within the join's hour after its customer, and each partition's
	// event times only go forward.
	base := time.UnixMilli(1_700_000_000_000)
	var rs []*kgo.Record
	for c := range customers {
		rs = append(rs, &kgo.Record{Topic: "customers", Key: []byte("c" + strconv.Itoa(c)), Value: fmt.Appendf(nil, `{"name":"name-%d"}`, c), Timestamp: base})
	}
	produce(rs)
	order := func(i int) *kgo.Record {
		// An order's event time is in its value; its Kafka timestamp is
		// the time it was written, years after its customer's.
		return &kgo.Record{Topic: "orders", Key: []byte("o" + strconv.Itoa(i)),
			Value: fmt.Appendf(nil, `{"order":%d,"customer":"c%d","ts":%d}`, i, i%customers, base.Add(time.Duration(i+1)*20*time.Millisecond).UnixMilli())}
	}
	body := fmt.Sprintf(`job: rj
kafka:
  brokers: [%s]
sources:
  orders:
    topics: [orders]
    group: rj
    event-time: { timestamp: value.ts, max-out-of-orderness: 1s, idle-timeout: 1s }
  customers: { topics: [customers] }
event-time:
  max-out-of-orderness: 1s
  idle-timeout: 1s
streams:
  enriched:
    from: [orders, customers]
    steps:
      - interval-join: { left-key: value.customer, right-key: record.key, lower: 0s, upper: 1h }
sinks:
  out: { from: enriched, topic: enriched }
checkpointing:
  interval: 200ms
  timeout: 1m
state:
  dir: %s
  checkpoints: %s
%sscale-out:
  enabled: true
  session-timeout: 6s
`, addr, filepath.Join(dir, "state"), filepath.Join(dir, "shared"), backendLine())
	file := filepath.Join(dir, "rj.yaml")
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	// validate shows the cut: both sides into one repartition topic, each
	// by its key, the join behind it.
	out, err := exec.Command(binary(t), "validate", file).CombinedOutput()
	for _, want := range []string{
		"sub-topology 0, a task per partition p of orders, reading p of orders, customers:",
		"orders by value.customer, as input 1 of enriched.",
		"customers by record.key, as input 2 of enriched.",
		"sub-topology 1, a task per partition of rj-repartition-1:",
	} {
		if err != nil || !strings.Contains(string(out), want) {
			t.Fatalf("validate (%v) does not say %q:\n%s", err, want, out)
		}
	}

	f := &fleet{t: t, file: file, log: &logWriter{t: t, name: "rj"}, run: map[string]*instanceProc{}}
	defer f.stopAll()
	f.start("a")
	f.start("b")
	killAt, addAt := 1+rng.IntN(batches/2), batches/2+1+rng.IntN(batches/2-2) // killAt < addAt
	for b, i := 0, 0; b < batches; b++ {
		var rs []*kgo.Record
		for ; i < orders*(b+1)/batches; i++ {
			rs = append(rs, order(i))
		}
		produce(rs)
		switch b {
		case killAt:
			f.kill("b")
			f.start("b")
		case addAt:
			f.start("c")
		}
		time.Sleep(300 * time.Millisecond)
		f.checkAlive()
	}
	adm := kadm.NewClient(client(t, addr))
	for _, topic := range []string{"orders", "customers", "rj-repartition-1"} {
		waitCaughtUp(t, adm, "rj", topic, f)
	}
	f.stopAll()

	check := func(client string, recs []kafkatest.Record) {
		t.Helper()
		seen := map[int]int{}
		for _, r := range recs {
			var v struct {
				Left  struct{ Order int }
				Right struct{ Name string }
			}
			if err := json.Unmarshal([]byte(r.Value), &v); err != nil {
				t.Fatalf("%s: output %q: %v", client, r.Value, err)
			}
			want := "c" + strconv.Itoa(v.Left.Order%customers)
			if r.Key != want || v.Right.Name != "name-"+want[1:] {
				t.Fatalf("%s: order %d joined wrongly: key %s, %s", client, v.Left.Order, r.Key, r.Value)
			}
			seen[v.Left.Order]++
		}
		var bad []string
		for i := range orders {
			if seen[i] != 1 {
				bad = append(bad, fmt.Sprintf("%d×%d", i, seen[i]))
			}
		}
		if len(bad) > 0 || len(recs) != orders {
			t.Fatalf("%s: %d records for %d orders; %d orders not exactly once (%s)\n%s", client, len(recs), orders, len(bad), strings.Join(bad[:min(5, len(bad))], ", "), f.log)
		}
	}
	check("franz-go", readCommitted(t, addr, "enriched"))
	check("kcat", kcatRead(t, addr, "enriched"))
	t.Logf("%d orders, each joined once; killed b after batch %d, added c after batch %d of %d", orders, killAt+1, addAt+1, batches)
}

// TestScaleOutSQLJoin: a SQL inner join (compiled to the named form, each
// side re-keyed by its join column) runs in scale-out: validate shows the
// cut before the join, two instances share the tasks, one is SIGKILLed
// and started again, and every order comes out joined with its customer
// exactly once.
func TestScaleOutSQLJoin(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	rng := seed(t)
	const orders, customers = 1500, 50
	dir := t.TempDir()
	addr := startBroker(t, filepath.Join(dir, "broker"))
	createTopic(t, addr, "sorders", 3)
	createTopic(t, addr, "scustomers", 3)
	createTopic(t, addr, "senriched", 3)
	script := fmt.Sprintf(`SET 'pipeline.name' = 'sqlj';
SET 'execution.checkpointing.interval' = '200ms';
SET 'table.exec.state.ttl' = '1 h';
CREATE TABLE orders (id BIGINT, customer BIGINT, amount INT) WITH ('connector' = 'kafka', 'topic' = 'sorders', 'properties.bootstrap.servers' = '%[1]s', 'properties.group.id' = 'sqlj', 'scan.startup.mode' = 'earliest-offset', 'format' = 'json');
CREATE TABLE customers (id BIGINT, name STRING) WITH ('connector' = 'kafka', 'topic' = 'scustomers', 'properties.bootstrap.servers' = '%[1]s', 'properties.group.id' = 'sqlj', 'scan.startup.mode' = 'earliest-offset', 'format' = 'json');
CREATE TABLE enriched (order_id BIGINT, name STRING, amount INT) WITH ('connector' = 'kafka', 'topic' = 'senriched', 'properties.bootstrap.servers' = '%[1]s', 'key.fields' = 'order_id', 'format' = 'json');
INSERT INTO enriched SELECT o.id, c.name, o.amount FROM orders AS o JOIN customers AS c ON o.customer = c.id;
`, addr)
	sqlFile := filepath.Join(dir, "sqlj.sql")
	if err := os.WriteFile(sqlFile, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	compiled, err := exec.Command(binary(t), "validate", "--show-job", sqlFile).Output()
	if err != nil {
		t.Fatalf("validate --show-job: %v", err)
	}
	// The compiled job file, with the state and scale-out sections of an
	// instance.
	job := string(compiled)
	if i := strings.Index(job, "\nstate:"); i >= 0 {
		job = job[:i+1]
	}
	job += fmt.Sprintf("state:\n  dir: %s\n  checkpoints: %s\n%sscale-out:\n  enabled: true\n  session-timeout: 6s\n", filepath.Join(dir, "state"), filepath.Join(dir, "shared"), backendLine())
	file := filepath.Join(dir, "sqlj.yaml")
	if err := os.WriteFile(file, []byte(job), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binary(t), "validate", file).CombinedOutput()
	for _, want := range []string{"→ repartition topic sqlj-repartition-1:", "sub-topology 1, a task per partition of sqlj-repartition-1:", "inner join on record.key = record.key, ttl 1h"} {
		if err != nil || !strings.Contains(string(out), want) {
			t.Fatalf("validate (%v) does not say %q:\n%s", err, want, out)
		}
	}

	cl := client(t, addr, kgo.ProducerLinger(5*time.Millisecond))
	produce := func(from, to int) {
		t.Helper()
		var rs []*kgo.Record
		for i := from; i < to; i++ {
			rs = append(rs, &kgo.Record{Topic: "sorders", Key: []byte("o" + strconv.Itoa(i)), Value: fmt.Appendf(nil, `{"id":%d,"customer":%d,"amount":%d}`, i, i%customers, i%100)})
		}
		if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var rs []*kgo.Record
	for c := range customers {
		rs = append(rs, &kgo.Record{Topic: "scustomers", Key: []byte("c" + strconv.Itoa(c)), Value: fmt.Appendf(nil, `{"id":%d,"name":"n%d"}`, c, c)})
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	produce(0, orders/2)
	f := &fleet{t: t, file: file, log: &logWriter{t: t, name: "sqlj"}, run: map[string]*instanceProc{}}
	defer f.stopAll()
	f.start("a")
	f.start("b")
	time.Sleep(time.Duration(1500+rng.IntN(1500)) * time.Millisecond)
	f.kill("a")
	produce(orders/2, orders)
	f.start("a")
	adm := kadm.NewClient(client(t, addr))
	for _, topic := range []string{"sorders", "scustomers", "sqlj-repartition-1"} {
		waitCaughtUp(t, adm, "sqlj", topic, f)
	}
	f.stopAll()
	check := func(client string, recs []kafkatest.Record) {
		t.Helper()
		seen := map[int]int{}
		for _, r := range recs {
			var v struct {
				OrderID int `json:"order_id"`
				Name    string
				Amount  int
			}
			if err := json.Unmarshal([]byte(r.Value), &v); err != nil {
				t.Fatalf("%s: output %q: %v", client, r.Value, err)
			}
			if v.Name != "n"+strconv.Itoa(v.OrderID%customers) || v.Amount != v.OrderID%100 {
				t.Fatalf("%s: order %d joined wrongly: %s", client, v.OrderID, r.Value)
			}
			seen[v.OrderID]++
		}
		for i := range orders {
			if seen[i] != 1 {
				t.Fatalf("%s: order %d came out %d times (%d records for %d orders)\n%s", client, i, seen[i], len(recs), orders, f.log)
			}
		}
		if len(recs) != orders {
			t.Fatalf("%s: %d records for %d orders", client, len(recs), orders)
		}
	}
	check("franz-go", readCommitted(t, addr, "senriched"))
	check("kcat", kcatRead(t, addr, "senriched"))
}
