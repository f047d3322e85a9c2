package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/scaleout"
)

// onceflow status of a scale-out job on two instances shows every
// instance's tasks, not only one's (docs/design.md, "Scale-out",
// "Operations"): from the job file and through either instance's API,
// each of the 8 partitions (4 input, 4 repartition) has its task, the
// instance the group gave it to, its state on that instance, its newest
// checkpoint (as epoch:sequence) and its lag; both instances are listed
// with the count of tasks they run. Once one stops, the other runs all 8
// and the stopped one is no longer listed.
func TestScaleOutStatusAcrossInstances(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{Topics: map[string]int32{"in": 4, "out": 4}, GroupSessionTimeout: 6 * time.Second})
	dir := t.TempDir()
	job := fmt.Sprintf(`job: st
kafka: {brokers: [%s]}
source: {topics: [in], group: st, startup: earliest}
pipeline:
  - aggregate: { key: value.user, fields: { n: "count()" } }
sink: {topic: out}
checkpointing: {interval: 200ms}
state: {dir: %s, checkpoints: %s, backend: memory}
scale-out: {enabled: true}
`, c.Addr, filepath.Join(dir, "state"), filepath.Join(dir, "shared"))
	file := filepath.Join(dir, "st.yaml")
	if err := os.WriteFile(file, []byte(job), 0o644); err != nil {
		t.Fatal(err)
	}
	var rs []*kgo.Record
	for i := range 400 {
		rs = append(rs, &kgo.Record{Topic: "in", Key: []byte("o" + strconv.Itoa(i)), Value: []byte(`{"user":"u` + strconv.Itoa(i%20) + `"}`)})
	}
	c.ProduceRecords(t, rs...)
	type inst struct {
		name, api string
		cancel    context.CancelFunc
		done      chan int
		out       *syncBuffer
	}
	start := func(name string) *inst {
		ctx, cancel := context.WithCancel(context.Background())
		in := &inst{name: name, api: freePort(t), cancel: cancel, done: make(chan int, 1), out: newSyncBuffer()}
		go func() {
			in.done <- Main(ctx, []string{"run", "--instance", name, "--status-interval", "0", "--http", in.api, file}, in.out, in.out)
		}()
		t.Cleanup(func() {
			cancel()
			select {
			case <-in.done:
			case <-time.After(time.Minute):
			}
		})
		return in
	}
	a, b := start("a"), start("b")
	logs := func() string { return "--- a:\n" + a.out.String() + "\n--- b:\n" + b.out.String() }
	adm := kadm.NewClient(c.Client(t))
	status := func(args ...string) (int, string) {
		out := newSyncBuffer()
		code := Main(t.Context(), append([]string{"status"}, args...), out, out)
		return code, out.String()
	}
	row := regexp.MustCompile(`^(in|st-repartition-1)\s+(\d)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+)`)
	// check says what is not yet as it should be in a status output, ""
	// when all is.
	check := func(out string) string {
		rows := map[string]bool{}
		holders := map[string]int{}
		for _, l := range strings.Split(out, "\n") {
			m := row.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			topic, part, task, who, state, cp, lag := m[1], m[2], m[3], m[4], m[5], m[6], m[9]
			n, _ := strconv.Atoi(part)
			if want := scaleout.TaskName("st", kafka.Partition{Topic: topic, Partition: int32(n)}); task != want {
				return fmt.Sprintf("partition %s/%s: task %s, want %s", topic, part, task, want)
			}
			if who != "a" && who != "b" {
				return fmt.Sprintf("partition %s/%s: instance %q", topic, part, who)
			}
			if state != "running" {
				return fmt.Sprintf("partition %s/%s: state %q", topic, part, state)
			}
			// epoch:sequence, or the id alone below 2^32 (epoch 0:
			// flow.CheckpointText).
			if !regexp.MustCompile(`^[1-9]\d*(:\d+)?$`).MatchString(cp) {
				return fmt.Sprintf("partition %s/%s: checkpoint %q, want epoch:sequence", topic, part, cp)
			}
			if lag != "0" {
				return fmt.Sprintf("partition %s/%s: lag %s", topic, part, lag)
			}
			rows[topic+"/"+part] = true
			holders[who]++
		}
		if len(rows) != 8 {
			return fmt.Sprintf("%d partitions listed, want 8", len(rows))
		}
		if holders["a"] == 0 || holders["b"] == 0 {
			return fmt.Sprintf("partitions by instance %v: want both to hold some", holders)
		}
		// The instances, each with its tasks from its report.
		for _, name := range []string{"a", "b"} {
			re := regexp.MustCompile(`(?m)^` + name + `\s+\S+\s+(\d+) running of (\d+)\s`)
			m := re.FindStringSubmatch(out)
			if m == nil || m[1] != m[2] || m[1] != strconv.Itoa(holders[name]) {
				return fmt.Sprintf("instance %s: %v, want all its %d tasks running", name, m, holders[name])
			}
		}
		return ""
	}
	var last string
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		if !kafkatest.CaughtUp(t.Context(), adm, "st", "in") {
			last = "not caught up"
		} else if code, out := status(file); code != 0 {
			last = fmt.Sprintf("exit %d: %s", code, out)
		} else if why := check(out); why != "" {
			last = why + "\n" + out
		} else {
			t.Logf("onceflow status st.yaml:\n%s", out)
			last = ""
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("onceflow status of two instances: %s\n%s", last, logs())
		}
	}
	// Through b's API: the same view, b's tasks and a's.
	code, out := status("--api", "http://"+b.api)
	if code != 0 {
		t.Fatalf("onceflow status --api b: exit %d\n%s", code, out)
	}
	if why := check(out); why != "" {
		t.Fatalf("onceflow status --api b: %s\n%s", why, out)
	}
	// a's page shows b's tasks too.
	want := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if m := row.FindStringSubmatch(l); m != nil {
			want[m[3]] = m[4]
		}
	}
	checkPartitionsPage(t, "http://"+a.api+"/", want)
	// b stops: its last report says so, and a takes its partitions.
	b.cancel()
	if code := <-b.done; code != 0 {
		t.Fatalf("b exited %d\n%s", code, logs())
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		_, out = status(file)
		if !regexp.MustCompile(`(?m)^b\s`).MatchString(out) && regexp.MustCompile(`(?m)^a\s+\S+\s+8 running of 8\s`).MatchString(out) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after b stopped, status does not show a running all 8 tasks, b gone:\n%s\n%s", out, logs())
		}
	}
}
