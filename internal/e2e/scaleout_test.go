package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/verify"
)

// The scale-out tests run several `onceflow run --instance NAME` processes
// of one job file against `onceflow broker`: one consumer group, one task
// per partition, checkpoints in a shared directory, each instance with a
// state directory of its own.

// fleet is the instances of one scale-out job.
type fleet struct {
	t    *testing.T
	file string
	log  *logWriter
	mu   sync.Mutex
	run  map[string]*instanceProc
	// args gives an instance's extra arguments (such as its --http)
	// whenever it starts; nil: none.
	args func(name string) []string
	// The bounds of chaos: remove only with more than minRun instances
	// running (at least 1), add only with fewer than maxRun (0: no bound).
	minRun, maxRun int
	// Owned by chaos: how many instances it added, processes started in
	// all and most running at once.
	added, starts, most int
}

type instanceProc struct {
	cmd  *exec.Cmd
	done chan error
	// logFrom is where this process's lines start in its instance's
	// log file (a restarted instance appends to the same file).
	logFrom int64
}

func (f *fleet) start(name string, extra ...string) {
	f.t.Helper()
	args := append([]string{"run", "--instance", name, "--status-interval", "0"}, extra...)
	if f.args != nil {
		args = append(args, f.args(name)...)
	}
	if os.Getenv("ONCEFLOW_E2E_LOGS") != "" {
		args = append(args, "--log-level", "debug")
	}
	cmd := exec.Command(binary(f.t), append(args, f.file)...)
	// Each instance's whole log goes to a file of its own (kept with
	// ONCEFLOW_E2E_LOGS=DIR), the last lines to the test's messages.
	dir := f.logDir()
	_ = os.MkdirAll(dir, 0o755)
	lf, err := os.OpenFile(filepath.Join(dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { lf.Close() })
	cmd.Stderr = io.MultiWriter(f.log, lf)
	var from int64
	if st, err := lf.Stat(); err == nil {
		from = st.Size()
	}
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	p := &instanceProc{cmd: cmd, done: make(chan error, 1), logFrom: from}
	go func() { p.done <- cmd.Wait() }()
	f.mu.Lock()
	f.run[name] = p
	f.starts++
	f.most = max(f.most, len(f.run))
	f.mu.Unlock()
}

// logDir is where the instances' logs go: a folder per job file (two
// fleets of a test may use the same instance names).
func (f *fleet) logDir() string {
	dir := os.Getenv("ONCEFLOW_E2E_LOGS")
	if dir == "" {
		dir = filepath.Join(filepath.Dir(f.file), "logs")
	}
	return filepath.Join(dir, strings.TrimSuffix(filepath.Base(f.file), ".yaml"))
}

// exited returns the instances that ended on their own since the last
// look, and forgets them.
func (f *fleet) exited() map[string]instanceExit {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]instanceExit{}
	for n, p := range f.run {
		select {
		case err := <-p.done:
			data, _ := os.ReadFile(filepath.Join(f.logDir(), n+".log"))
			data = data[min(p.logFrom, int64(len(data))):]
			out[n] = instanceExit{err: err, started: strings.Contains(string(data), `msg="instance started`),
				tail: string(data[max(0, len(data)-8000):])}
			delete(f.run, n)
		default:
		}
	}
	return out
}

// instanceExit is how an instance's process ended on its own: its error,
// whether it had started (joined the group), its last lines.
type instanceExit struct {
	err     error
	started bool
	tail    string
}

func (e instanceExit) String() string { return fmt.Sprintf("%v\n%s", e.err, e.tail) }

// instancePartitions returns the partitions the group gives instance
// name. A killed instance's old member keeps its client id (and its
// partitions) until its session times out, so while it lingers this
// lists its partitions too; ownPartitions is the live process's view.
func instancePartitions(t *testing.T, adm *kadm.Client, group, name string) []int32 {
	t.Helper()
	gs, err := adm.DescribeConsumerGroups(t.Context(), group)
	if err != nil {
		return nil
	}
	var ps []int32
	for _, m := range gs[group].Members {
		if m.ClientID == name {
			m.Assignment.Each(func(_ string, p int32) { ps = append(ps, p) })
		}
	}
	slices.Sort(ps)
	return ps
}

// ownPartitions returns the partitions instance name's running process
// holds by its own log: those assigned, less those revoked or lost since.
func (f *fleet) ownPartitions(name string) []int32 {
	f.mu.Lock()
	p := f.run[name]
	f.mu.Unlock()
	if p == nil {
		return nil
	}
	data, _ := os.ReadFile(filepath.Join(f.logDir(), name+".log"))
	held := map[int32]bool{}
	for _, line := range strings.Split(string(data[min(p.logFrom, int64(len(data))):]), "\n") {
		var add bool
		switch {
		case strings.Contains(line, `msg="partitions assigned"`):
			add = true
		case strings.Contains(line, `msg="partitions revoked"`), strings.Contains(line, `msg="partitions lost"`):
		default:
			continue
		}
		// partitions=[in/1] or partitions="[in/3 in/4]"
		_, list, _ := strings.Cut(line, "partitions=")
		if rest, ok := strings.CutPrefix(list, `"`); ok {
			list, _, _ = strings.Cut(rest, `"`)
		} else {
			list, _, _ = strings.Cut(list, " ")
		}
		list = strings.Trim(list, "[]")
		for _, tp := range strings.Split(list, " ") {
			_, part, _ := strings.Cut(tp, "/")
			n, err := strconv.Atoi(part)
			if err != nil {
				continue
			}
			if add {
				held[int32(n)] = true
			} else {
				delete(held, int32(n))
			}
		}
	}
	out := slices.Collect(maps.Keys(held))
	slices.Sort(out)
	return out
}

func (f *fleet) signal(name string, sig syscall.Signal) *instanceProc {
	f.mu.Lock()
	p := f.run[name]
	f.mu.Unlock()
	if p != nil {
		_ = p.cmd.Process.Signal(sig)
	}
	return p
}

// kill ends an instance with SIGKILL.
func (f *fleet) kill(name string) {
	if p := f.signal(name, syscall.SIGKILL); p != nil {
		<-p.done
	}
	f.mu.Lock()
	delete(f.run, name)
	f.mu.Unlock()
}

// stop ends an instance with SIGTERM: its tasks take final checkpoints,
// it leaves the group.
func (f *fleet) stop(name string) {
	f.t.Helper()
	p := f.signal(name, syscall.SIGTERM)
	if p == nil {
		return
	}
	select {
	case err := <-p.done:
		// A process SIGTERMed as it started, before its main installed
		// the handler, ends by the signal having logged nothing.
		data, _ := os.ReadFile(filepath.Join(f.logDir(), name+".log"))
		starting := int64(len(data)) <= p.logFrom
		if err != nil && !(starting && strings.Contains(err.Error(), "signal: terminated")) {
			f.t.Fatalf("instance %s stopped with %v\n%s", name, err, f.log)
		}
	case <-time.After(time.Minute):
		f.t.Fatalf("instance %s did not stop within a minute of SIGTERM\n%s", name, f.log)
	}
	f.mu.Lock()
	delete(f.run, name)
	f.mu.Unlock()
}

// names returns the instances running, sorted.
func (f *fleet) names() []string {
	f.mu.Lock()
	names := make([]string, 0, len(f.run))
	for n := range f.run {
		names = append(names, n)
	}
	f.mu.Unlock()
	slices.Sort(names)
	return names
}

func (f *fleet) stopAll() {
	for _, n := range f.names() {
		f.signal(n, syscall.SIGCONT)
		f.stop(n)
	}
}

// checkAlive fails the test if an instance ended on its own.
func (f *fleet) checkAlive() {
	f.t.Helper()
	for n, out := range f.exited() {
		f.t.Fatalf("instance %s ended on its own: %s", n, out)
	}
}

// writeScaleOutJob writes a scale-out job file reading in into output.
func writeScaleOutJob(t *testing.T, dir, name, addr, output, pipeline string) string {
	t.Helper()
	return writeScaleOutJobFile(t, dir, name, addr, "in", pipeline, "  topic: "+output, "")
}

// writeScaleOutJobFile writes a scale-out job file reading input through
// pipeline into sink (the lines of the sink section), with scaleOut's
// lines added to the scale-out section.
func writeScaleOutJobFile(t *testing.T, dir, name, addr, input, pipeline, sink, scaleOut string) string {
	t.Helper()
	return writeJobFileOn(t, dir, name, addr, input, pipeline, fmt.Sprintf(`sink:
%s
checkpointing:
  interval: 200ms
  timeout: 1m
state:
  dir: %s
  checkpoints: %s
%sscale-out:
  enabled: true
  session-timeout: 6s
%s`, sink, filepath.Join(dir, "state"), filepath.Join(dir, "shared"), backendLine(), scaleOut))
}

// waitCaughtUp waits until the group committed every input offset.
func waitCaughtUp(t *testing.T, adm *kadm.Client, group, topic string, f *fleet) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Minute); !kafkatest.CaughtUp(t.Context(), adm, group, topic); {
		f.checkAlive()
		if time.Now().After(deadline) {
			t.Fatalf("the instances did not process %s within 3 minutes; %s\n%s", topic, groupState(t, adm, group, topic), f.log)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// groupState says who holds which partitions of topic in group, and
// each partition's committed offset and end.
func groupState(t *testing.T, adm *kadm.Client, group, topic string) string {
	var b strings.Builder
	if gs, err := adm.DescribeConsumerGroups(t.Context(), group); err != nil {
		fmt.Fprintf(&b, "describing group %s: %v", group, err)
	} else {
		fmt.Fprintf(&b, "group %s (%s):", group, gs[group].State)
		for _, m := range gs[group].Members {
			var ps []string
			m.Assignment.Each(func(tp string, p int32) { ps = append(ps, fmt.Sprint(tp, "/", p)) })
			fmt.Fprintf(&b, " member %s (%s) holds %v;", m.ClientID, m.MemberID, ps)
		}
	}
	ends, err1 := adm.ListEndOffsets(t.Context(), topic)
	offs, err2 := adm.FetchOffsets(t.Context(), group)
	if err1 != nil || err2 != nil {
		return b.String() + fmt.Sprintf(" offsets: %v, %v", err1, err2)
	}
	b.WriteString(" committed/end:")
	ends.Each(func(e kadm.ListedOffset) {
		o, _ := offs.Lookup(topic, e.Partition)
		fmt.Fprintf(&b, " %s/%d %d/%d", topic, e.Partition, o.At, e.Offset)
	})
	return b.String()
}

// scaleOutEvents is how many instance changes a run goes through.
func scaleOutEvents() int {
	if os.Getenv("ONCEFLOW_LONG") != "" {
		return 30
	}
	return 6
}

// TestScaleOutExactlyOnce: three instances of a keyed count share six
// partitions while input keeps coming; seeded random events kill an
// instance (SIGKILL) and start it again, add one, remove one (SIGTERM),
// and freeze one (SIGSTOP) past the session timeout so its partitions
// move, then let it go on as a zombie. The verifier finds every input
// exactly once in the output, each key's counts exactly 1..n, and no
// transaction left open.
func TestScaleOutExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	rng := seed(t)
	dir := t.TempDir()
	addr := startBroker(t, filepath.Join(dir, "broker"))
	createTopic(t, addr, "in", 6)
	createTopic(t, addr, "out-so", 6)
	const keys = 120
	produceInput(t, addr, "in", 6000, keys)
	f := &fleet{t: t, file: writeScaleOutJob(t, dir, "so", addr, "out-so", "pipeline:\n  - count: { key: record.key }"),
		log: &logWriter{t: t, name: "so"}, run: map[string]*instanceProc{}}
	defer f.stopAll()
	for _, n := range []string{"a", "b", "c"} {
		f.start(n)
	}
	// Input keeps coming through every event.
	genCtx, stopGen := context.WithCancel(context.Background())
	genDone := make(chan int)
	go func() {
		cl := client(t, addr, kgo.DefaultProduceTopic("in"))
		n := 6000
		for ; genCtx.Err() == nil; n++ {
			if err := cl.ProduceSync(genCtx, &kgo.Record{Key: []byte("k" + strconv.Itoa(n%keys)), Value: []byte("seq-" + strconv.Itoa(n))}).FirstErr(); err != nil {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		genDone <- n
	}()
	adm := kadm.NewClient(client(t, addr))
	// Every partition has a task committing (the input keeps growing, so
	// the group is never quite caught up while it runs).
	for deadline := time.Now().Add(time.Minute); ; {
		offs, err := adm.FetchOffsets(t.Context(), "so")
		var seen []string
		if err == nil {
			offs.Each(func(o kadm.OffsetResponse) {
				if o.Topic == "in" && o.At > 0 {
					seen = append(seen, fmt.Sprint(o.Partition, "@", o.At))
				}
			})
		}
		if len(seen) == 6 {
			break
		}
		f.checkAlive()
		if time.Now().After(deadline) {
			t.Fatalf("the instances did not commit on every partition within a minute (committed: %v, err %v)\n%s", seen, err, f.log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	events := f.chaos(rng, scaleOutEvents())
	stopGen()
	produced := <-genDone
	waitCaughtUp(t, adm, "so", "in", f)
	f.stopAll()
	t.Logf("%d records, events: %s", produced, strings.Join(events, ", "))
	rep, err := verify.Run(context.Background(), verify.Config{Brokers: []string{addr}, Input: "in", Output: "out-so", Mode: verify.Count, Sentinels: true, SentinelTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("scale-out broke exactly-once:\n%s\ninstances' log:\n%s", rep, f.log)
	}
	t.Logf("\n%s", rep)
}

// TestScaleOutRepartition: an aggregate keyed by a field of the value,
// not by the record key, goes through a repartition topic; two instances,
// one killed and started again. Every user's count comes out exactly
// 1..n, so each user's records met in one task, once.
func TestScaleOutRepartition(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	rng := seed(t)
	dir := t.TempDir()
	addr := startBroker(t, filepath.Join(dir, "broker"))
	createTopic(t, addr, "in", 4)
	createTopic(t, addr, "out-rp", 4)
	const users = 30
	perUser := map[string]int{}
	cl := client(t, addr, kgo.DefaultProduceTopic("in"))
	var recs []*kgo.Record
	for i := 0; i < 4000; i++ {
		u := "u" + strconv.Itoa(rng.IntN(users))
		perUser[u]++
		recs = append(recs, &kgo.Record{Key: []byte("order-" + strconv.Itoa(i)), Value: []byte(`{"user":"` + u + `","amount":` + strconv.Itoa(i%7) + `}`)})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	f := &fleet{t: t, file: writeScaleOutJob(t, dir, "rp", addr, "out-rp",
		"pipeline:\n  - aggregate: { key: value.user, fields: { n: \"count()\" } }"), log: &logWriter{t: t, name: "rp"}, run: map[string]*instanceProc{}}
	defer f.stopAll()
	httpAddr := freeAddr(t)
	f.start("a", "--http", httpAddr)
	f.start("b")
	time.Sleep(time.Duration(1500+rng.IntN(1500)) * time.Millisecond)
	f.kill("b")
	f.start("b")
	adm := kadm.NewClient(client(t, addr))
	waitCaughtUp(t, adm, "rp", "in", f)
	waitCaughtUp(t, adm, "rp", "rp-repartition-1", f)
	// What the repartition topic's tasks committed past is deleted.
	for deadline := time.Now().Add(30 * time.Second); ; {
		starts, err1 := adm.ListStartOffsets(t.Context(), "rp-repartition-1")
		ends, err2 := adm.ListEndOffsets(t.Context(), "rp-repartition-1")
		purged := err1 == nil && err2 == nil
		starts.Each(func(o kadm.ListedOffset) {
			// All but the last record (scaleout.purgeOffset: a partition
			// purged to its end lost its offsets in the embedded broker).
			if e, ok := ends.Lookup(o.Topic, o.Partition); !ok || o.Offset < e.Offset-1 {
				purged = false
			}
		})
		if purged {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the repartition topic's committed records were not deleted within 30s (start offsets %v, end offsets %v)", starts, ends)
		}
		time.Sleep(200 * time.Millisecond)
	}
	checkInstanceHTTP(t, "http://"+httpAddr, f)
	// onceflow status reads who holds what from the group. The input can
	// be caught up while the killed b is still a member (until its
	// session times out) and its partitions are not yet handed on, so
	// the command is asked again until the group has settled.
	wants := []string{"group rp", "instances", "\na ", "\nb ", "in/0", "rp-repartition-1/3", "TOPIC"}
	var out []byte
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		var err error
		out, err = exec.Command(binary(t), "status", f.file).CombinedOutput()
		if err != nil {
			t.Fatalf("onceflow status: %v\n%s", err, out)
		}
		missing := slices.ContainsFunc(wants, func(w string) bool { return !strings.Contains(string(out), w) })
		if !missing || time.Now().After(deadline) {
			break
		}
	}
	for _, want := range wants {
		if !strings.Contains(string(out), want) {
			t.Errorf("onceflow status %s does not show %q:\n%s", f.file, want, out)
		}
	}
	t.Logf("onceflow status:\n%s", out)
	f.stopAll()
	got := map[string][]int{}
	for _, r := range readCommitted(t, addr, "out-rp") {
		var v struct {
			Key string `json:"key"`
			N   int    `json:"n"`
		}
		if err := json.Unmarshal([]byte(r.Value), &v); err != nil {
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
			t.Fatalf("user %s: %d counts (first %v), want exactly 1..%d: records of one key were counted in two places, twice, or not at all\n%s", u, len(ns), ns[:min(5, len(ns))], n, f.log)
		}
	}
	if len(got) != len(perUser) {
		t.Fatalf("%d users in the output, want %d", len(got), len(perUser))
	}
}

// chaos goes through n seeded random instance changes (chaosEvent) with
// a pause of 1 to 3 s after each. It returns what it did.
func (f *fleet) chaos(rng *rand.Rand, n int) []string {
	var events []string
	for i := 0; i < n; i++ {
		if _, ev := f.chaosEvent(rng, i); ev != "" {
			events = append(events, ev)
		}
		time.Sleep(time.Duration(1000+rng.IntN(2000)) * time.Millisecond)
		f.checkAlive()
	}
	return events
}

// The kinds of chaosEvent, in the order it goes through them.
var fleetEvents = []string{"sigkill-instance", "add-instance", "sigterm-instance", "sigstop-past-session-timeout"}

// chaosEvent makes the i-th seeded random instance change, by i mod 4:
// SIGKILL an instance and start it again, add one, remove one (SIGTERM),
// or freeze one (SIGSTOP) past the session timeout so its partitions move,
// then let it go on as a zombie (it must see its partitions lost). It
// returns the kind of change (fleetEvents) and what it did, or "" for a
// change the bounds (minRun, maxRun) left out.
func (f *fleet) chaosEvent(rng *rand.Rand, i int) (kind, did string) {
	t := f.t
	alive := f.names()
	victim := alive[rng.IntN(len(alive))]
	switch kind = fleetEvents[i%len(fleetEvents)]; kind {
	case "sigkill-instance":
		f.kill(victim)
		time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
		f.start(victim)
		return kind, "SIGKILL " + victim
	case "add-instance":
		if f.maxRun > 0 && len(alive) >= f.maxRun {
			return "", ""
		}
		name := "n" + strconv.Itoa(f.added)
		f.added++
		f.start(name)
		return kind, "add " + name
	case "sigterm-instance":
		if len(alive) <= max(1, f.minRun) {
			return "", ""
		}
		f.stop(victim)
		return kind, "remove " + victim
	default:
		// What the process holds by its own view: the group may
		// still list a killed predecessor's partitions under the
		// same client id.
		held := f.ownPartitions(victim)
		logFile := filepath.Join(f.logDir(), victim+".log")
		before, _ := os.ReadFile(logFile)
		p := f.signal(victim, syscall.SIGSTOP)
		time.Sleep(9 * time.Second) // past the 6 s session timeout: its partitions move
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		// A zombie: back after its partitions moved, it must see they
		// are lost (and its late commits are fenced).
		for deadline := time.Now().Add(20 * time.Second); len(held) > 0; {
			after, _ := os.ReadFile(logFile)
			if strings.Contains(string(after[min(len(before), len(after)):]), `msg="partitions lost"`) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("instance %s, paused past the session timeout while holding %v, never saw its partitions lost\n%s", victim, held, f.log)
			}
			time.Sleep(100 * time.Millisecond)
		}
		return kind, fmt.Sprintf("SIGSTOP/SIGCONT %s (holding %v)", victim, held)
	}
}

// checkInstanceHTTP checks what an instance serves with --http.
func checkInstanceHTTP(t *testing.T, base string, f *fleet) {
	t.Helper()
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz: %d", code)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		code, body := get("/readyz")
		if code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz stayed %d (%s)\n%s", code, body, f.log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var inst struct {
		Instance string `json:"instance"`
		Tasks    []struct {
			Task    string `json:"task"`
			Running bool   `json:"running"`
		} `json:"tasks"`
	}
	_, body := get("/instance")
	if err := json.Unmarshal([]byte(body), &inst); err != nil || inst.Instance != "a" || len(inst.Tasks) == 0 {
		t.Errorf("/instance: %v, %s", err, body)
	}
	var grp struct {
		Instances []struct {
			Name string `json:"name"`
		} `json:"instances"`
		Partitions []struct {
			Topic    string `json:"topic"`
			Instance string `json:"instance"`
		} `json:"partitions"`
	}
	_, body = get("/group")
	if err := json.Unmarshal([]byte(body), &grp); err != nil || len(grp.Instances) < 2 || len(grp.Partitions) != 8 {
		t.Errorf("/group: %v, %s", err, body)
	}
	if _, body = get("/metrics"); !strings.Contains(body, `onceflow_records_in_total{job_name="`+inst.Tasks[0].Task+`"}`) || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics has no records of task %s or no Go metrics:\n%.2000s", inst.Tasks[0].Task, body)
	}
	if code, body := get("/"); code != 200 || !strings.Contains(body, "Tasks of this instance") {
		t.Errorf("/: %d %.300s", code, body)
	}
}
