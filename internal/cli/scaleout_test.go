package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/verify"
)

// Two instances in one process (so the race detector sees the
// instance's goroutines: member callbacks, tasks, HTTP): one joins, the
// other leaves, input comes in between; the output is counted exactly once.
func TestScaleOutInstancesInProcess(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{Topics: map[string]int32{"in": 4, "out": 4}, GroupSessionTimeout: 6 * time.Second})
	dir := t.TempDir()
	job := fmt.Sprintf(`job: sc
kafka: {brokers: [%s]}
source: {topics: [in], group: sc, startup: earliest}
pipeline:
  - count: { key: record.key }
sink: {topic: out}
checkpointing: {interval: 100ms}
state: {dir: %s, checkpoints: %s, backend: memory}
scale-out: {enabled: true}
`, c.Addr, filepath.Join(dir, "state"), filepath.Join(dir, "shared"))
	file := filepath.Join(dir, "sc.yaml")
	if err := os.WriteFile(file, []byte(job), 0o644); err != nil {
		t.Fatal(err)
	}
	produce := func(from, n int) {
		cl := c.Client(t)
		var rs []*kgo.Record
		for i := from; i < from+n; i++ {
			rs = append(rs, &kgo.Record{Topic: "in", Key: []byte("k" + strconv.Itoa(i%40)), Value: []byte("seq-" + strconv.Itoa(i))})
		}
		if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	type inst struct {
		cancel context.CancelFunc
		done   chan int
		out    *syncBuffer
	}
	start := func(name string, extra ...string) *inst {
		ctx, cancel := context.WithCancel(context.Background())
		in := &inst{cancel: cancel, done: make(chan int, 1), out: newSyncBuffer()}
		go func() {
			in.done <- Main(ctx, append(append([]string{"run", "--instance", name, "--status-interval", "0"}, extra...), file), in.out, in.out)
		}()
		return in
	}
	stop := func(name string, in *inst) {
		in.cancel()
		select {
		case code := <-in.done:
			if code != 0 {
				t.Fatalf("instance %s exited %d:\n%s", name, code, in.out)
			}
		case <-time.After(time.Minute):
			t.Fatalf("instance %s did not stop:\n%s", name, in.out)
		}
	}
	adm := kadm.NewClient(c.Client(t))
	caughtUp := func(what string, ins ...*inst) {
		for deadline := time.Now().Add(time.Minute); !kafkatest.CaughtUp(t.Context(), adm, "sc", "in"); {
			if time.Now().After(deadline) {
				var logs string
				for _, in := range ins {
					logs += in.out.String()
				}
				t.Fatalf("%s: not caught up within a minute:\n%s", what, logs)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	produce(0, 2000)
	a := start("a", "--http", "0")
	caughtUp("a alone", a)
	b := start("b")
	produce(2000, 2000)
	time.Sleep(2 * time.Second) // b takes partitions
	produce(4000, 2000)
	caughtUp("a and b", a, b)
	stop("b", b)
	produce(6000, 2000)
	caughtUp("a again", a)
	stop("a", a)
	rep, err := verify.Run(context.Background(), verify.Config{Brokers: []string{c.Addr}, Input: "in", Output: "out", Mode: verify.Count})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("%s\na:\n%s\nb:\n%s", rep, a.out, b.out)
	}
}
