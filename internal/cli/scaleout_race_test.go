package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// The start race of a fresh job (the report: two instances started at
// once, one of them failing every run of its tasks, silently): 2 or 3
// instances of a job whose dedupe needs a repartition (by a field of the
// value, not the record key) start at the same moment on a fresh broker,
// so they race to create the repartition topic. Every round, every
// partition of the input and of the repartition topic is processed, each
// instance's /healthz says ok at the end (no task stays down), and every
// id comes out exactly once, though its duplicates came in on other input
// partitions. 3 rounds (2, 3, 2 instances); 20 of 2 and 20 of 3 with
// ONCEFLOW_LONG=1.
func TestScaleOutStartRace(t *testing.T) {
	sizes := []int{2, 3, 2}
	if os.Getenv("ONCEFLOW_LONG") != "" {
		sizes = nil
		for range 20 {
			sizes = append(sizes, 2, 3)
		}
	}
	start := time.Now()
	var restarts int64
	var lost int
	for round, n := range sizes {
		if !t.Run(fmt.Sprintf("round%02d-%dinstances", round, n), func(t *testing.T) {
			r, l := startRace(t, n)
			restarts, lost = restarts+r, lost+l
		}) {
			break
		}
	}
	if t.Failed() {
		return
	}
	t.Logf("%d rounds (%v instances) in %v: no task stayed down, every id came out exactly once; %d instances lost the race to create the repartition topic; %d task restarts in all",
		len(sizes), sizes, time.Since(start).Round(time.Millisecond), lost, restarts)
}

// startRace runs one round of TestScaleOutStartRace with n instances and
// returns how many task restarts the instances counted and how many of
// them found the repartition topic created by another after their look.
func startRace(t *testing.T, n int) (restarts int64, lost int) {
	const parts, ids, dups = 6, 600, 200
	c := kafkatest.Start(t, broker.Config{Topics: map[string]int32{"in": parts, "out": parts}, GroupSessionTimeout: 6 * time.Second})
	dir := t.TempDir()
	job := fmt.Sprintf(`job: race
kafka: {brokers: [%s]}
source: {topics: [in], group: race, startup: earliest}
pipeline:
  - dedupe: { key: value.id, ttl: 1h }
sink: {topic: out}
checkpointing: {interval: 100ms}
state: {dir: %s, checkpoints: %s, backend: memory}
scale-out: {enabled: true, session-timeout: 6s}
`, c.Addr, filepath.Join(dir, "state"), filepath.Join(dir, "shared"))
	file := filepath.Join(dir, "race.yaml")
	if err := os.WriteFile(file, []byte(job), 0o644); err != nil {
		t.Fatal(err)
	}
	// Each id once, then dups of them again under other record keys:
	// they reach other input partitions, and only the repartition by
	// value.id brings an id's records to one dedupe task.
	var rs []*kgo.Record
	for i := range ids + dups {
		id := i % ids
		rs = append(rs, &kgo.Record{Topic: "in", Key: []byte("r" + strconv.Itoa(i)), Value: fmt.Appendf(nil, `{"id":"id-%d","seq":%d}`, id, i)})
	}
	if err := c.Client(t).ProduceSync(kafkatest.Context(t), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	type inst struct {
		name   string
		http   string
		cancel context.CancelFunc
		done   chan int
		out    *syncBuffer
	}
	ins := make([]*inst, n)
	gate := make(chan struct{})
	var ready sync.WaitGroup
	for i := range ins {
		ctx, cancel := context.WithCancel(context.Background())
		in := &inst{name: string(rune('a' + i)), http: freePort(t), cancel: cancel, done: make(chan int, 1), out: newSyncBuffer()}
		ins[i] = in
		ready.Add(1)
		go func() {
			ready.Done()
			<-gate // all at the same moment
			in.done <- Main(ctx, []string{"run", "--instance", in.name, "--status-interval", "0", "--http", in.http, file}, in.out, in.out)
		}()
	}
	ready.Wait()
	close(gate)
	logs := func() string {
		var b strings.Builder
		for _, in := range ins {
			fmt.Fprintf(&b, "--- instance %s:\n%s", in.name, in.out)
		}
		return b.String()
	}
	stopped := false
	stopAll := func() {
		if stopped {
			return
		}
		stopped = true
		for _, in := range ins {
			in.cancel()
		}
		for _, in := range ins {
			select {
			case code := <-in.done:
				if code != 0 {
					t.Errorf("instance %s exited %d", in.name, code)
				}
			case <-time.After(time.Minute):
				t.Errorf("instance %s did not stop within a minute", in.name)
			}
		}
	}
	defer stopAll()

	adm := kadm.NewClient(c.Client(t))
	for deadline := time.Now().Add(time.Minute); !kafkatest.CaughtUp(t.Context(), adm, "race", "in") || !kafkatest.CaughtUp(t.Context(), adm, "race", "race-repartition-1"); {
		for _, in := range ins {
			select {
			case code := <-in.done:
				in.done <- code // for stopAll
				t.Fatalf("instance %s exited %d before the input was processed:\n%s", in.name, code, logs())
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the input and the repartition topic were not processed within a minute:\n%s", logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// No task stays down: every instance's health says ok (a task that
	// failed is healthy again once its restarted job checkpointed).
	for _, in := range ins {
		if strings.Contains(in.out.String(), "another instance created the repartition topic") {
			lost++
		}
		var code int
		var body string
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			code, body = httpGet(t, "http://"+in.http+"/healthz")
			if code == http.StatusOK || time.Now().After(deadline) {
				break
			}
		}
		if code != http.StatusOK {
			t.Fatalf("instance %s: /healthz %d: %s\n%s", in.name, code, body, logs())
		}
		_, body = httpGet(t, "http://"+in.http+"/instance")
		var st struct {
			Tasks []taskView `json:"tasks"`
		}
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatalf("instance %s: /instance %q: %v", in.name, body, err)
		}
		for _, tk := range st.Tasks {
			restarts += tk.Restarts
		}
	}
	stopAll()

	seen := map[string]int{}
	for _, v := range c.ReadCommitted(t, "out") {
		var r struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal([]byte(v), &r); err != nil {
			t.Fatalf("output %q: %v", v, err)
		}
		seen[r.ID]++
	}
	var wrong []string
	for i := range ids {
		if id := "id-" + strconv.Itoa(i); seen[id] != 1 {
			wrong = append(wrong, fmt.Sprintf("%s %d times", id, seen[id]))
		}
	}
	if len(wrong) > 0 || len(seen) != ids {
		t.Fatalf("%d ids in the output, want %d, each once; wrong: %s\n%s", len(seen), ids, strings.Join(wrong[:min(10, len(wrong))], ", "), logs())
	}
	return restarts, lost
}
