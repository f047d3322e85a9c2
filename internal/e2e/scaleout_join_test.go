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
// orders) by an interval join on event time, run as scale-out instances:
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
		return &kgo.Record{Topic: "orders", Key: []byte("o" + strconv.Itoa(i)),
			Value: fmt.Appendf(nil, `{"order":%d,"customer":"c%d"}`, i, i%customers), Timestamp: base.Add(time.Duration(i+1) * 20 * time.Millisecond)}
	}
	body := fmt.Sprintf(`job: rj
kafka:
  brokers: [%s]
sources:
  orders:    { topics: [orders], group: rj }
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
	killAt, addAt := 1+rng.IntN(batches/2), batches/2+rng.IntN(batches/2-1)
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
