package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	s3ckpt "github.com/onceflow/onceflow/checkpoint/s3"
	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/s3test"
	"github.com/onceflow/onceflow/scaleout"
)

// A scale-out job file whose checkpoints are on S3 (state.checkpoints:
// s3://bucket/prefix) stops with a job savepoint asked at one of its two
// instances' API: onceflow stop prints it as s3://bucket/key, under
// <prefix>/<job>.savepoints/ (docs/design.md, "Savepoints of the whole
// job"). The job then starts from it on three instances of a copy of the
// file with other checkpoints and state directories, as on new machines:
// every user's counts come out exactly 1..n, so the savepoint alone
// carried the state and the offsets. A single-process job refuses an
// s3:// savepoint.
func TestScaleOutJobSavepointOnS3(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{Topics: map[string]int32{"in": 3, "out": 3}, GroupSessionTimeout: 6 * time.Second})
	srv := s3test.Start(t, false) // plain HTTP: the job file names the endpoint; every object is small
	dir := t.TempDir()
	jobFile := func(name, prefix, state string) string {
		job := fmt.Sprintf(`job: s3sp
kafka: {brokers: [%s]}
source: {topics: [in], group: s3sp, startup: earliest}
pipeline:
  - aggregate: { key: value.user, fields: { n: "count()" } }
sink: {topic: out}
checkpointing: {interval: 200ms}
state: {dir: %s, checkpoints: "s3://%s/%s", backend: memory, s3: {endpoint: "%s"}}
scale-out: {enabled: true}
`, c.Addr, filepath.Join(dir, state), s3test.Bucket, prefix, srv.URL)
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, []byte(job), 0o644); err != nil {
			t.Fatal(err)
		}
		return file
	}
	first, moved := jobFile("first.yaml", "ck1", "state1"), jobFile("moved.yaml", "ck2", "state2")
	const users = 12
	perUser := map[string]int{}
	next := 0
	produce := func(n int) {
		var rs []*kgo.Record
		for range n {
			u := "u" + strconv.Itoa((next*7)%users)
			perUser[u]++
			rs = append(rs, &kgo.Record{Topic: "in", Key: []byte("o" + strconv.Itoa(next)), Value: []byte(`{"user":"` + u + `"}`)})
			next++
		}
		c.ProduceRecords(t, rs...)
	}
	type inst struct {
		name, api string
		cancel    context.CancelFunc
		done      chan int
		out       *syncBuffer
	}
	var all []*inst
	logs := func() string {
		var b strings.Builder
		for _, in := range all {
			fmt.Fprintf(&b, "--- %s:\n%s\n", in.name, in.out)
		}
		return b.String()
	}
	start := func(name, file string, extra ...string) *inst {
		ctx, cancel := context.WithCancel(context.Background())
		in := &inst{name: name, api: freePort(t), cancel: cancel, done: make(chan int, 1), out: newSyncBuffer()}
		all = append(all, in)
		args := append([]string{"run", "--instance", name, "--status-interval", "0", "--http", in.api}, extra...)
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			in.done <- Main(ctx, append(args, file), in.out, in.out)
		}()
		t.Cleanup(func() {
			cancel()
			select {
			case <-ended:
			case <-time.After(time.Minute):
			}
		})
		return in
	}
	exited := func(in *inst, what string) {
		t.Helper()
		select {
		case code := <-in.done:
			if code != 0 {
				t.Fatalf("%s: instance %s exited %d\n%s", what, in.name, code, logs())
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s: instance %s did not stop within a minute\n%s", what, in.name, logs())
		}
	}
	adm := kadm.NewClient(c.Client(t))
	caughtUp := func(what string) {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Minute); !kafkatest.CaughtUp(t.Context(), adm, "s3sp", "in") || !kafkatest.CaughtUp(t.Context(), adm, "s3sp", "s3sp-repartition-1"); {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not caught up within 2 minutes\n%s", what, logs())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	produce(300)
	a, b := start("a", first), start("b", first)
	caughtUp("two instances")
	produce(100) // in flight while the job stops
	out := newSyncBuffer()
	if code := Main(t.Context(), []string{"stop", "--api", "http://" + a.api}, out, out); code != 0 {
		t.Fatalf("onceflow stop --api: exit %d: %s\n%s", code, out, logs())
	}
	exited(a, "stop")
	exited(b, "stop")
	text := strings.TrimSpace(out.String())
	sp := text[strings.LastIndexByte(text, '\n')+1:]
	if want := "s3://" + s3test.Bucket + "/ck1/s3sp.savepoints/savepoint-"; !strings.HasPrefix(sp, want) {
		t.Fatalf("onceflow stop printed %q; want the job savepoint as %s…", text, want)
	}
	place, err := s3ckpt.SavepointPlace(t.Context(), "s3://"+s3test.Bucket+"/ck1", s3ckpt.Options{Endpoint: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := scaleout.LoadJobSavepointFrom(place, sp); err != nil || m.Kind != "stop" || len(m.Tasks) != 6 {
		t.Fatalf("the job savepoint %s: %v; want a stop of 6 tasks (3 of in, 3 of the repartition topic): %+v", sp, err, m)
	}

	// A job of one process restores local directories only.
	single := filepath.Join(dir, "single.yaml")
	if err := os.WriteFile(single, []byte(fmt.Sprintf("job: one\nkafka: {brokers: [%s]}\nsource: {topics: [in]}\nsink: {topic: out}\ncheckpointing: {interval: 1s}\nstate: {dir: %s}\n", c.Addr, filepath.Join(dir, "one"))), 0o644); err != nil {
		t.Fatal(err)
	}
	so := newSyncBuffer()
	if code := Main(t.Context(), []string{"run", "--from-savepoint", sp, single}, so, so); code == 0 || !strings.Contains(so.String(), "a job of one process restores a local directory") {
		t.Errorf("a single-process job given an s3:// savepoint: exit %d: %s", code, so)
	}

	// Three instances, checkpoints and state elsewhere, from the savepoint.
	var three []*inst
	for _, n := range []string{"c", "d", "e"} {
		three = append(three, start(n, moved, "--from-savepoint", sp))
	}
	produce(200)
	caughtUp("three instances")
	for _, in := range three {
		in.cancel()
	}
	for _, in := range three {
		exited(in, "three instances")
	}
	if !strings.Contains(logs(), "downloaded the task's savepoint") {
		t.Errorf("no instance downloaded a task savepoint\n%s", logs())
	}
	got := map[string][]int{}
	for _, r := range c.ReadCommittedRecords(t, "out") {
		var v struct {
			Key string `json:"key"`
			N   int    `json:"n"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("output %q: %v", r.Value, err)
		}
		got[v.Key] = append(got[v.Key], v.N)
	}
	for u, n := range perUser {
		ns := got[u]
		slices.Sort(ns)
		want := make([]int, n)
		for i := range want {
			want[i] = i + 1
		}
		if !slices.Equal(ns, want) {
			t.Fatalf("user %s: %d counts (first %v, last %v), want exactly 1..%d\n%s", u, len(ns), ns[:min(5, len(ns))], ns[max(0, len(ns)-5):], n, logs())
		}
	}
}
