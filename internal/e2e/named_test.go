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

// TestCrashNamedStreams: a job in the named form (docs/design.md, "Named
// streams") reads three topics, unions two of them, filters, and joins
// the result with the third by a field of the value, under SIGKILLs at
// random moments. Every even order must come out exactly once, joined
// with its customer, whichever side of the join came first; franz-go and
// kcat must both read exactly that.
func TestCrashNamedStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end crash test skipped in -short mode")
	}
	orders, kills := 20_000, 8
	if os.Getenv("ONCEFLOW_LONG") != "" {
		orders, kills = 200_000, 60
	}
	const customers = 300
	rng := seed(t)
	dir := t.TempDir()
	addr := startBroker(t, filepath.Join(dir, "broker"))
	for topic, parts := range map[string]int32{"orders-web": 4, "orders-shop": 2, "customers": 3, "enriched": 4} {
		createTopic(t, addr, topic, parts)
	}
	cl := client(t, addr, kgo.ProducerLinger(5*time.Millisecond))
	produce := func(topic, key, value string) {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(value)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// Half the customers before the orders, half after: the join must
	// pair an order with a customer that comes later too.
	for c := 0; c < customers/2; c++ {
		produce("customers", "c"+strconv.Itoa(c), fmt.Sprintf(`{"id":"c%d","name":"name-%d"}`, c, c))
	}
	var rs []*kgo.Record
	for i := range orders {
		topic := "orders-web"
		if i%3 == 0 {
			topic = "orders-shop"
		}
		rs = append(rs, &kgo.Record{Topic: topic, Key: []byte("o" + strconv.Itoa(i)), Value: fmt.Appendf(nil, `{"order":%d,"customer":"c%d"}`, i, i%customers)})
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for c := customers / 2; c < customers; c++ {
		produce("customers", "c"+strconv.Itoa(c), fmt.Sprintf(`{"id":"c%d","name":"name-%d"}`, c, c))
	}

	job := fmt.Sprintf(`job: named
kafka:
  brokers: [%s]
sources:
  web:       { topics: [orders-web], group: named }
  shop:      { topics: [orders-shop] }
  customers: { topics: [customers] }
streams:
  orders:
    from: [web, shop]
    steps:
      - union: {}
      - filter: { if: 'value.order %% 2 == 0' }
  enriched:
    from: [orders, customers]
    steps:
      - join: { left-key: value.customer, right-key: value.id, ttl: 24h }
sinks:
  out: { from: enriched, topic: enriched, delivery: exactly-once }
checkpointing:
  interval: 100ms
  mode: exactly-once
  timeout: 1m
state:
  dir: %s
%srestart:
  strategy: none
`, addr, filepath.Join(dir, "state"), backendLine())
	file := filepath.Join(dir, "named.yaml")
	if err := os.WriteFile(file, []byte(job), 0o644); err != nil {
		t.Fatal(err)
	}
	lw := &logWriter{t: t, name: "named"}
	r := &jobRunner{t: t, bin: binary(t), file: file, log: lw, inputs: []string{"orders-web", "orders-shop", "customers"}}
	start := time.Now()
	r.crashAndFinish(rng, kills, addr, "named")
	t.Logf("%d orders, %d kills and the final run took %v", orders, kills, time.Since(start).Round(time.Millisecond))

	check := func(client string, out []kafkatest.Record) {
		t.Helper()
		seen := map[int]int{}
		for _, rec := range out {
			var v struct {
				Left struct {
					Order    int
					Customer string
				}
				Right struct{ ID, Name string }
			}
			if err := json.Unmarshal([]byte(rec.Value), &v); err != nil {
				t.Fatalf("%s: output %q is not a joined record: %v", client, rec.Value, err)
			}
			want := "c" + strconv.Itoa(v.Left.Order%customers)
			if v.Left.Customer != want || v.Right.ID != want || rec.Key != want || v.Right.Name != "name-"+want[1:] {
				t.Fatalf("%s: order %d joined wrongly: key %s, %s", client, v.Left.Order, rec.Key, rec.Value)
			}
			seen[v.Left.Order]++
		}
		missing, dups := 0, 0
		for i := 0; i < orders; i += 2 {
			switch seen[i] {
			case 0:
				missing++
			case 1:
			default:
				dups++
			}
		}
		if missing > 0 || dups > 0 || len(out) != orders/2 {
			t.Fatalf("%s: %d records for %d even orders: %d missing, %d more than once", client, len(out), orders/2, missing, dups)
		}
	}
	check("franz-go", readCommitted(t, addr, "enriched"))
	check("kcat", kcatRead(t, addr, "enriched"))
}

// TestScaleOutNamedJoin: a job of named streams joining two topics by
// record key runs as two scale-out instances, co-partitioned (the task of
// partition p reads p of both topics), one of them SIGKILLed mid-run and
// started again: every order comes out exactly once, joined with its
// customer. A third topic of another partition count is refused when an
// instance starts, naming the counts.
func TestScaleOutNamedJoin(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	rng := seed(t)
	dir := t.TempDir()
	addr := startBroker(t, filepath.Join(dir, "broker"))
	createTopic(t, addr, "orders", 4)
	createTopic(t, addr, "customers", 4)
	createTopic(t, addr, "enriched", 4)
	const orders, customers = 6000, 200
	cl := client(t, addr, kgo.ProducerLinger(5*time.Millisecond))
	var rs []*kgo.Record
	for c := 0; c < customers; c += 2 {
		rs = append(rs, &kgo.Record{Topic: "customers", Key: []byte("c" + strconv.Itoa(c)), Value: fmt.Appendf(nil, `{"name":"name-%d"}`, c)})
	}
	// Orders are keyed by their customer, so Kafka's default partitioner
	// puts them in the partition of their customer's record.
	for i := range orders {
		c := i % customers
		rs = append(rs, &kgo.Record{Topic: "orders", Key: []byte("c" + strconv.Itoa(c)), Value: fmt.Appendf(nil, `{"order":%d}`, i)})
	}
	for c := 1; c < customers; c += 2 {
		rs = append(rs, &kgo.Record{Topic: "customers", Key: []byte("c" + strconv.Itoa(c)), Value: fmt.Appendf(nil, `{"name":"name-%d"}`, c)})
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	job := func(name, extraSource string) string {
		body := fmt.Sprintf(`job: %s
kafka:
  brokers: [%s]
sources:
  orders:    { topics: [orders], group: %s }
  customers: { topics: [customers%s] }
streams:
  enriched:
    from: [orders, customers]
    steps:
      - join: { ttl: 24h }
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
`, name, addr, name, extraSource, filepath.Join(dir, "state"), filepath.Join(dir, "shared"), backendLine())
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}

	// Unequal partition counts are refused at start.
	createTopic(t, addr, "customers-eu", 2)
	out, err := exec.Command(binary(t), "run", "--instance", "x", job("bad", ", customers-eu")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "customers 4, customers-eu 2") {
		t.Fatalf("a co-partitioned job over topics of 4 and 2 partitions: err %v, want a refusal naming the counts:\n%s", err, out)
	}

	f := &fleet{t: t, file: job("nj", ""), log: &logWriter{t: t, name: "nj"}, run: map[string]*instanceProc{}}
	defer f.stopAll()
	f.start("a")
	f.start("b")
	time.Sleep(time.Duration(1500+rng.IntN(1500)) * time.Millisecond)
	f.kill("b")
	f.start("b")
	adm := kadm.NewClient(client(t, addr))
	waitCaughtUp(t, adm, "nj", "orders", f)
	waitCaughtUp(t, adm, "nj", "customers", f)
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
		bad := 0
		for i := range orders {
			if seen[i] != 1 {
				bad++
			}
		}
		if bad > 0 || len(recs) != orders {
			t.Fatalf("%s: %d records for %d orders; %d orders not exactly once\n%s", client, len(recs), orders, bad, f.log)
		}
	}
	check("franz-go", readCommitted(t, addr, "enriched"))
	check("kcat", kcatRead(t, addr, "enriched"))
}
