package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/verify"
	"github.com/onceflow/onceflow/scaleout"
)

// A job savepoint across instances (docs/design.md, "Scale-out"): a
// count keyed by a field of the value (two stages joined by a
// repartition topic) runs on three instances; a stop with a savepoint
// asked at one instance's API, while a fourth joins (partitions move
// during the stop), stops them all; the job starts again
// from it on one instance, stops with a savepoint again, and starts on
// five. Every user's counts come out exactly 1..n, read committed: no
// record was lost or counted twice across the stops, the repartition
// topic included. A running savepoint taken under input at the start
// (the stages pause one after the other) is restored at the end, after
// the job ran past it: every count ends at its total. Refused: a restore
// after the input gained partitions.
func TestScaleOutJobSavepoint(t *testing.T) {
	perRound := 600
	if os.Getenv("ONCEFLOW_LONG") != "" {
		perRound = 20000
	}
	c := kafkatest.Start(t, broker.Config{Topics: map[string]int32{"in": 4, "out": 4}, GroupSessionTimeout: 6 * time.Second})
	dir := t.TempDir()
	job := fmt.Sprintf(`job: sp
kafka: {brokers: [%s]}
source: {topics: [in], group: sp, startup: earliest}
pipeline:
  - aggregate: { key: value.user, fields: { n: "count()" } }
sink: {topic: out}
checkpointing: {interval: 200ms}
state: {dir: %s, checkpoints: %s, backend: memory}
scale-out: {enabled: true}
`, c.Addr, filepath.Join(dir, "state"), filepath.Join(dir, "shared"))
	file := filepath.Join(dir, "sp.yaml")
	if err := os.WriteFile(file, []byte(job), 0o644); err != nil {
		t.Fatal(err)
	}
	const users = 25
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
	start := func(name string, extra ...string) *inst {
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
	repartitioned := func() bool {
		ends, err := adm.ListEndOffsets(t.Context(), "sp-repartition-1")
		n := 0
		ends.Each(func(o kadm.ListedOffset) {
			if o.Err == nil {
				n++
			}
		})
		return err == nil && n == 4
	}
	caughtUp := func(what string) {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Minute); !repartitioned() || !kafkatest.CaughtUp(t.Context(), adm, "sp", "in") || !kafkatest.CaughtUp(t.Context(), adm, "sp", "sp-repartition-1"); {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not caught up within 2 minutes\n%s", what, logs())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// cmd runs an onceflow command against an instance's API.
	cmd := func(in *inst, args ...string) (int, string) {
		out := newSyncBuffer()
		code := Main(t.Context(), append([]string{args[0], "--api", "http://" + in.api}, args[1:]...), out, out)
		return code, strings.TrimSpace(out.String())
	}
	stopJob := func(in *inst, what string) string {
		t.Helper()
		code, out := cmd(in, "stop")
		if code != 0 {
			t.Fatalf("%s: onceflow stop --api %s exited %d: %s\n%s", what, in.api, code, out, logs())
		}
		lines := strings.Split(out, "\n")
		sp := lines[len(lines)-1]
		m, err := scaleout.LoadJobSavepoint(sp)
		if err != nil {
			t.Fatalf("%s: %v (onceflow stop said %q)", what, err, out)
		}
		if len(m.Tasks) != 8 {
			t.Fatalf("%s: the job savepoint lists %d tasks, want 8 (4 of in, 4 of the repartition topic): %+v", what, len(m.Tasks), m.Tasks)
		}
		return sp
	}

	// Three instances, and a fourth joining at the stop.
	produce(perRound)
	a, b, c3 := start("a"), start("b"), start("c")
	caughtUp("three instances")
	// A running savepoint of the job of two stages, under input: the
	// stages pause one after the other and run on. It is restored at
	// the end, after the job ran far past it.
	feed := make(chan struct{})
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		for {
			select {
			case <-feed:
				return
			case <-time.After(20 * time.Millisecond):
			}
			produce(10)
		}
	}()
	code, out := cmd(b, "savepoint")
	close(feed)
	<-fed
	if code != 0 {
		t.Fatalf("a running savepoint of a two-stage job: exit %d, %q\n%s", code, out, logs())
	}
	sp0 := out[strings.LastIndexByte(out, '\n')+1:]
	if m, err := scaleout.LoadJobSavepoint(sp0); err != nil || m.Kind != "savepoint" || len(m.Tasks) != 8 {
		t.Fatalf("the running savepoint %q: %v; want a savepoint of 8 tasks (%+v)", sp0, err, m)
	}
	caughtUp("after the running savepoint")
	if code, out := cmd(a, "checkpoints"); code != 0 || !strings.Contains(out, "sp-") || !strings.Contains(out, "TASK") {
		t.Fatalf("onceflow checkpoints --api an instance: exit %d\n%s", code, out)
	}
	// onceflow status --api an instance: its tasks, then the job's
	// instances and partitions.
	if code, out := cmd(c3, "status"); code != 0 || !strings.Contains(out, "(scale-out): instance c") || !strings.Contains(out, "TASK") ||
		!strings.Contains(out, "INSTANCE") || !strings.Contains(out, "sp-repartition-1") {
		t.Fatalf("onceflow status --api an instance: exit %d\n%s", code, out)
	}
	produce(perRound) // in flight while the job stops
	// A fourth instance joins as the stop begins: partitions move while
	// the tasks take their savepoints, and x takes part in the stop too.
	x := start("x")
	sp1 := stopJob(a, "stop of three instances and one joining")
	for _, in := range []*inst{a, b, c3, x} {
		exited(in, "stop of three instances and one joining")
	}

	// One instance, from the savepoint.
	produce(perRound)
	d := start("d", "--from-savepoint", sp1)
	caughtUp("one instance")
	produce(perRound)
	sp2 := stopJob(d, "stop of one instance")
	exited(d, "stop of one instance")
	t.Logf("instance d:\n%s", d.out)

	// Five instances, from the second savepoint.
	produce(perRound)
	var five []*inst
	for i := range 5 {
		five = append(five, start("e"+strconv.Itoa(i), "--from-savepoint", sp2))
	}
	produce(perRound)
	caughtUp("five instances")
	for _, in := range five {
		in.cancel()
	}
	for _, in := range five {
		exited(in, "five instances")
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
			t.Fatalf("user %s: %d counts (first %v, last %v), want exactly 1..%d: a record was lost or counted twice across the savepoints\n%s",
				u, len(ns), ns[:min(5, len(ns))], ns[max(0, len(ns)-5):], n, logs())
		}
	}
	if len(got) != len(perUser) {
		t.Fatalf("%d users in the output, want %d", len(got), len(perUser))
	}

	// The running savepoint, restored after the job ran past it (two
	// stops and restores): every user's count ends at its total, the
	// records in flight between the stages at the savepoint neither
	// lost nor counted twice.
	ends, err := adm.ListEndOffsets(t.Context(), "out")
	if err != nil {
		t.Fatal(err)
	}
	g := start("g", "--from-savepoint", sp0)
	restored := func() map[string]int {
		counts := map[string]int{}
		for _, r := range c.ReadCommittedRecords(t, "out") {
			if end, ok := ends.Lookup("out", r.Partition); !ok || r.Offset < end.Offset {
				continue
			}
			var v struct {
				Key string `json:"key"`
				N   int    `json:"n"`
			}
			if err := json.Unmarshal(r.Value, &v); err != nil {
				t.Fatalf("output %q: %v", r.Value, err)
			}
			counts[v.Key] = max(counts[v.Key], v.N)
		}
		return counts
	}
	// The group's offsets are at the ends already: wait for the
	// restored run's counts to reach the totals, then for it to settle.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		got, done := restored(), true
		for u, n := range perUser {
			done = done && got[u] >= n
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the running savepoint restored: counts %v after 2 minutes, want %v\n%s", got, perUser, logs())
			break
		}
	}
	caughtUp("the running savepoint restored")
	time.Sleep(time.Second)
	g.cancel()
	exited(g, "the running savepoint restored")
	final := restored()
	for u, n := range perUser {
		if final[u] != n {
			t.Errorf("user %s: counted %d after the running savepoint was restored, want %d", u, final[u], n)
		}
	}

	// The input gains a partition: the savepoint no longer fits.
	if _, err := adm.CreatePartitions(t.Context(), 1, "in"); err != nil {
		t.Fatal(err)
	}
	f := start("f", "--from-savepoint", sp2)
	select {
	case code := <-f.done:
		if code == 0 || !strings.Contains(f.out.String(), "partition counts changed") || !strings.Contains(f.out.String(), "in had 4, has 5") {
			t.Fatalf("a restore after the input gained a partition: exit %d; want it refused naming the change:\n%s", code, f.out)
		}
	case <-time.After(time.Minute):
		f.cancel()
		t.Fatalf("a restore after the input gained a partition was not refused:\n%s", f.out)
	}
}

// A savepoint of a running job of one stage, asked at one of two
// instances, holds every task's savepoint while the job goes on; the
// output stays exact.
func TestScaleOutJobSavepointRunning(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{Topics: map[string]int32{"in": 4, "out": 4}, GroupSessionTimeout: 6 * time.Second})
	dir := t.TempDir()
	job := fmt.Sprintf(`job: rs
kafka: {brokers: [%s]}
source: {topics: [in], group: rs, startup: earliest}
pipeline:
  - count: { key: record.key }
sink: {topic: out}
checkpointing: {interval: 200ms}
state: {dir: %s, checkpoints: %s, backend: memory}
scale-out: {enabled: true}
`, c.Addr, filepath.Join(dir, "state"), filepath.Join(dir, "shared"))
	file := filepath.Join(dir, "rs.yaml")
	if err := os.WriteFile(file, []byte(job), 0o644); err != nil {
		t.Fatal(err)
	}
	next := 0
	produce := func(n int) {
		var rs []*kgo.Record
		for range n {
			rs = append(rs, &kgo.Record{Topic: "in", Key: []byte("k" + strconv.Itoa(next%30)), Value: []byte("seq-" + strconv.Itoa(next))})
			next++
		}
		c.ProduceRecords(t, rs...)
	}
	type inst struct {
		api  string
		stop context.CancelFunc
		code chan int
		out  *syncBuffer
	}
	start := func(name string) *inst {
		ctx, cancel := context.WithCancel(context.Background())
		in := &inst{api: freePort(t), stop: cancel, code: make(chan int, 1), out: newSyncBuffer()}
		go func() {
			in.code <- Main(ctx, []string{"run", "--instance", name, "--status-interval", "0", "--http", in.api, file}, in.out, in.out)
		}()
		t.Cleanup(cancel)
		return in
	}
	adm := kadm.NewClient(c.Client(t))
	a, b := start("a"), start("b")
	caughtUp := func() {
		for deadline := time.Now().Add(time.Minute); !kafkatest.CaughtUp(t.Context(), adm, "rs", "in"); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("not caught up\na:\n%s\nb:\n%s", a.out, b.out)
			}
		}
	}
	produce(500)
	caughtUp()
	out := newSyncBuffer()
	if code := Main(t.Context(), []string{"savepoint", "--api", "http://" + b.api}, out, out); code != 0 {
		t.Fatalf("onceflow savepoint at instance b: exit %d: %s\na:\n%s\nb:\n%s", code, out, a.out, b.out)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	m, err := scaleout.LoadJobSavepoint(lines[len(lines)-1])
	if err != nil {
		t.Fatal(err)
	}
	if m.Kind != "savepoint" || len(m.Tasks) != 4 {
		t.Fatalf("job savepoint: kind %s, %d tasks (%+v); want a savepoint of 4 tasks", m.Kind, len(m.Tasks), m.Tasks)
	}
	for _, tk := range m.Tasks {
		if _, err := os.Stat(filepath.Join(m.Dir, tk.Dir, "_manifest")); err != nil {
			t.Errorf("task %s: its savepoint has no manifest: %v", tk.Task, err)
		}
	}
	checkInstancePage(t, "http://"+b.api+"/", "rs-in-")
	// The job goes on.
	produce(500)
	caughtUp()
	for _, in := range []*inst{a, b} {
		in.stop()
		if code := <-in.code; code != 0 {
			t.Fatalf("an instance exited %d:\n%s", code, in.out)
		}
	}
	rep, err := verify.Run(context.Background(), verify.Config{Brokers: []string{c.Addr}, Input: "in", Output: "out", Mode: verify.Count})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("%s", rep)
	}
}

// checkInstancePage opens an instance's page in headless Chromium and
// waits until it shows its tasks (a row naming a task with prefix
// taskPrefix, running, with a checkpoint) and no problem.
func checkInstancePage(t *testing.T, url, taskPrefix string) {
	t.Helper()
	var bin string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		if os.Getenv("ONCEFLOW_REQUIRE_DBS") != "" {
			t.Fatal("chromium not found: scripts/test installs it (apt-get install chromium)")
		}
		t.Log("chromium not found; the instance page is not checked in a browser")
		return
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("#tasks"))); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	var rows, problems string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		rows, _ = chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll("#tasks tbody tr")].map(r => [...r.cells].map(c => c.textContent).join("|")).join("\n")`))
		problems, _ = chromedp.Run(ctx, chromedp.Evaluate[string](`getComputedStyle(document.getElementById("problems")).display + " " + document.getElementById("problem-list").textContent`))
		if strings.Contains(rows, taskPrefix) && strings.Contains(rows, "|running|") && strings.HasPrefix(problems, "none") {
			t.Logf("the instance page's tasks:\n%s", rows)
			return
		}
	}
	t.Fatalf("the instance page at %s does not show its running tasks without problems:\ntasks:\n%s\nproblems: %s", url, rows, problems)
}

// checkPartitionsPage opens an instance's page in headless Chromium and
// waits until its partitions table has a row for each task of want,
// running on the instance want names.
func checkPartitionsPage(t *testing.T, url string, want map[string]string) {
	t.Helper()
	var bin string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		t.Log("chromium not found; the instance page is not checked in a browser")
		return
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("#partitions"))); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	var rows string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		rows, _ = chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll("#partitions tbody tr")].map(r => [...r.cells].map(c => c.textContent).join("|")).join("\n")`))
		all := true
		for task, who := range want {
			all = all && strings.Contains(rows, "|"+task+"|"+who+"|running|")
		}
		if all {
			return
		}
	}
	t.Fatalf("the instance page at %s does not show every task running on its instance (%v):\n%s", url, want, rows)
}
