package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/dbtest"
	"github.com/onceflow/onceflow/internal/failpoint"
	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/verify"
)

// ChaosReport is what a chaos run found; scripts/chaos prints it and
// docs/guarantees.md quotes the last long run.
type ChaosReport struct {
	Seed     uint64                     `json:"seed"`
	Duration string                     `json:"duration"`
	Jobs     map[string]*ChaosJobReport `json:"jobs"`
	// ScaleOut are the scale-out jobs (chaos_scaleout_test.go).
	ScaleOut       map[string]*ChaosScaleOutReport `json:"scale_out_jobs"`
	BrokerRestarts int                             `json:"broker_restarts"`
	BrokerKills    int                             `json:"broker_kills,omitempty"`
	// PartitionsAdded counts the partitions added to the input topics
	// while the jobs ran (the operator's "add partitions, then take a
	// checkpoint" procedure, done under faults).
	PartitionsAdded int  `json:"partitions_added"`
	OK              bool `json:"ok"`
}

// ChaosJobReport is one job's part of a chaos run.
type ChaosJobReport struct {
	Records        int64          `json:"records"`
	Faults         map[string]int `json:"faults"`
	RecoveryP50    string         `json:"recovery_p50"`
	RecoveryP99    string         `json:"recovery_p99"`
	RecoveryMax    string         `json:"recovery_max"`
	Recoveries     int            `json:"recoveries"`
	LiveReaderDups int            `json:"live_reader_duplicates"`
	LiveReaderSeen int            `json:"live_reader_records"`
	Verify         string         `json:"verify"`
	// Table is what the job's two-phase PostgreSQL table holds, for the job
	// that writes one: rows, distinct values, and the inputs.
	Table string `json:"table,omitempty"`
	OK    bool   `json:"ok"`
}

func chaosDuration() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("ONCEFLOW_CHAOS_DURATION")); err == nil && d > 0 {
		return d
	}
	return 40 * time.Second
}

// chaosJob is one of the jobs a chaos run drives, with its own faults.
type chaosJob struct {
	name, input, output string
	mode                verify.Mode
	file                string
	api                 string // the job's REST API (savepoints at random moments)
	savepointDir        string
	log                 *logWriter
	runner              *jobRunner

	// Owned by the job's fault loop.
	cmd        *exec.Cmd
	done       chan error
	faults     map[string]int
	recoveries []time.Duration

	// The live read_committed reader's view: how often each identity
	// (pass-through: the value; count: key=count; dedupe: the key) was seen.
	liveMu   sync.Mutex
	live     map[string]int
	liveSeen atomic.Int64
}

// TestChaos runs four jobs at once on one broker — a pass-through, a keyed
// count, a dedupe, and a pass-through into a topic and a PostgreSQL table
// (the table takes part in the Kafka transaction with prepared
// transactions), the first two and the last reading the same topic — while
// generators keep writing and a read_committed reader per job keeps
// reading. Each job gets its own stream of faults: SIGKILL, a failpoint
// crash at a random protocol step, SIGSTOP/SIGCONT at a random moment, and
// a SIGSTOP at the worst moment (after its commit record is written, before
// EndTxn: its transaction stays open on the shared progress topic while the
// other jobs crash and recover), and a savepoint taken through the REST API
// at a random moment (the checkpoints after it must stay restorable). The
// broker is stopped and restarted from time to time, and partitions are
// added to both input topics twice while the generators write (the jobs
// must find them within their discovery interval and read them from the
// start). At the end the verifier checks each job's committed output
// (pass-through: every input once; count: 1..n per key; dedupe: one output
// per distinct key), psql checks the table (every input once, no prepared
// transaction left), and no live reader ever saw more than exactly once.
// Beside them run the scale-out jobs of chaos_scaleout_test.go. The CI run
// is short (40s); `scripts/chaos --duration 20m` runs the long one.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test skipped in -short mode")
	}
	dur := chaosDuration()
	rng, seedVal := seedValue(t)
	dir := t.TempDir()
	bin := binary(t)
	brokerDir := filepath.Join(dir, "broker")
	addr := freeAddr(t)
	brk := runBroker(t, addr, brokerDir) // kept: the chaos loop stops and restarts it
	createTopic(t, addr, "in", 4)
	createTopic(t, addr, "in-dedupe", 4)
	jobs := []*chaosJob{
		{name: "chaos-pass", input: "in", mode: verify.PassThrough},
		{name: "chaos-count", input: "in", mode: verify.Count},
		{name: "chaos-dedupe", input: "in-dedupe", mode: verify.Dedupe},
		{name: "chaos-2pc", input: "in", mode: verify.PassThrough},
	}
	pipelines := map[string]string{
		"chaos-pass":   "",
		"chaos-count":  "pipeline:\n  - count: {key: record.key}\n",
		"chaos-dedupe": "pipeline:\n  - dedupe: {key: record.key, ttl: 24h}\n",
		"chaos-2pc":    "",
	}
	// The two-phase job's table: every input value once at the end.
	dsn, pg := dbtest.Postgres(t, dbtest.PostgresOptions{MaxPreparedTransactions: 64})
	pgdb := dsn[strings.LastIndex(dsn, "/")+1 : strings.Index(dsn, "?")]
	if err := pg.Exec(context.Background(), pgdb, "CREATE TABLE events (value text NOT NULL, part integer, off bigint)"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CHAOS_PG_DSN", dsn)
	extraSinks := map[string]string{
		"chaos-2pc": "  postgres:\n    dsn: ${CHAOS_PG_DSN}\n    table: events\n    columns: { value: record.value, part: record.partition, off: record.offset }\n",
	}
	fleets := chaosScaleOutFleets(t, dir, addr, pg, pgdb, seedVal)
	for _, j := range jobs {
		j.output = "out-" + j.name
		createTopic(t, addr, j.output, 4)
		j.api = freeAddr(t)
		j.savepointDir = filepath.Join(dir, "savepoints-"+j.name)
		j.file = writeChaosJob(t, dir, j.name, addr, j.input, j.output, pipelines[j.name], extraSinks[j.name], j.api)
		j.log = &logWriter{t: t, name: j.name}
		j.runner = &jobRunner{t: t, bin: bin, file: j.file, log: j.log}
		j.faults = map[string]int{}
		j.live = map[string]int{}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup

	// Generators: unique values seq-<n> on "in"; on "in-dedupe" keys u<n>
	// where one record in ten repeats an earlier key (the duplicates the
	// dedupe job drops), a few thousand records a second in all; and the
	// scale-out jobs' inputs, a few hundred a second each (writes are
	// one at a time, so the machine's speed bounds each generator).
	// producedIn counts the writes to "in" tried.
	var producedIn atomic.Int64
	var genWG sync.WaitGroup
	genCtx, stopGen := context.WithCancel(ctx)
	generate := func(topic string, perTick int, next func(n int) *kgo.Record, opts ...kgo.Opt) {
		defer genWG.Done()
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5 * time.Millisecond),
			kgo.RecordRetries(1000), kgo.RequestRetries(1000)}, opts...)...)
		if err != nil {
			t.Error(err)
			return
		}
		defer cl.Close()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		n := 0
		for genCtx.Err() == nil {
			<-tick.C
			for i := 0; i < perTick; i++ {
				rec := next(n)
				n++
				// A record whose write failed (the broker was killed) may
				// still have landed: move on to the next value rather than
				// writing this one again. The verifier reads what the input
				// topic really holds.
				if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
					time.Sleep(50 * time.Millisecond)
				}
				if topic == "in" {
					producedIn.Add(1)
				}
			}
		}
	}
	genWG.Add(2 + len(fleets))
	go generate("in", 30, func(n int) *kgo.Record {
		return &kgo.Record{Key: []byte("k" + strconv.Itoa(n%1000)), Value: []byte("seq-" + strconv.Itoa(n))}
	})
	dupRng := rand.New(rand.NewPCG(seedVal, 7))
	go generate("in-dedupe", 30, func(n int) *kgo.Record {
		k := n
		if n > 100 && dupRng.IntN(10) == 0 {
			k = n - 1 - dupRng.IntN(100) // a key written shortly before
		}
		return &kgo.Record{Key: []byte("u" + strconv.Itoa(k)), Value: []byte("v" + strconv.Itoa(n))}
	})
	for _, c := range fleets {
		var opts []kgo.Opt
		if c.manual {
			opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		}
		go generate(c.input, c.perTick, c.next, opts...)
	}

	// Live read_committed readers: nothing may be visible more often than
	// it is expected, ever (checked against the inputs at the end).
	readCtx, stopRead := context.WithCancel(ctx)
	liveRead := func(topic string, seen func(*kgo.Record)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
				kgo.FetchIsolationLevel(kgo.ReadCommitted()))
			if err != nil {
				t.Error(err)
				return
			}
			defer cl.Close()
			for readCtx.Err() == nil {
				cl.PollFetches(readCtx).EachRecord(seen)
			}
		}()
	}
	for _, j := range jobs {
		liveRead(j.output, func(r *kgo.Record) {
			j.liveSeen.Add(1)
			var id string
			switch j.mode {
			case verify.Count:
				id = string(r.Key) + "=" + string(r.Value)
			case verify.Dedupe:
				id = string(r.Key)
			default:
				id = string(r.Value)
			}
			j.liveMu.Lock()
			j.live[id]++
			j.liveMu.Unlock()
		})
	}
	for _, c := range fleets {
		if c.live != nil {
			liveRead(c.output, c.live)
		}
	}

	adm := kadm.NewClient(client(t, addr))
	var brokerMu sync.RWMutex // a fault loop holds it to read; the broker loop to restart
	fps := []string{failpoint.AfterSnapshotWritten, failpoint.MidManifestWrite, failpoint.AfterSinkPrepare, failpoint.BeforeEndTxn, failpoint.AfterCommitPoint, failpoint.DuringRestore}
	deadline := time.Now().Add(dur)
	only := os.Getenv("ONCEFLOW_CHAOS_ONLY") // reproduce one kind of fault alone

	// Each job's fault loop, with its own random stream.
	var faultWG sync.WaitGroup
	for ji, j := range jobs {
		j.cmd, j.done = j.runner.start()
		faultWG.Add(1)
		go func() {
			defer faultWG.Done()
			rng := rand.New(rand.NewPCG(seedVal, uint64(ji)+1))
			lastCheckpoint := func() int64 { return groupCheckpoint(adm, j.name) }
			// selfStopped is when the job stopped itself at a "stop"
			// failpoint; it is resumed a random moment later.
			var selfStopped time.Time
			var resumeAfter time.Duration
			wait := func(d time.Duration) {
				for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
					select {
					case <-j.done:
						// A failpoint crash ends the child by itself.
						j.cmd, j.done = j.runner.start()
						selfStopped = time.Time{}
					default:
					}
					if selfStopped.IsZero() && processStopped(j.cmd.Process.Pid) {
						selfStopped, resumeAfter = time.Now(), time.Duration(200+rng.IntN(2800))*time.Millisecond
					}
					if !selfStopped.IsZero() && time.Since(selfStopped) > resumeAfter {
						_ = j.cmd.Process.Signal(syscall.SIGCONT)
						selfStopped = time.Time{}
					}
				}
			}
			for time.Now().Before(deadline) && !t.Failed() {
				wait(time.Duration(300+rng.IntN(1200)) * time.Millisecond)
				if !selfStopped.IsZero() {
					continue // frozen between its commit record and EndTxn
				}
				brokerMu.RLock()
				k := rng.IntN(11)
				switch only {
				case "sigkill-job":
					k = 0
				case "failpoint":
					k = 4
				case "sigstop-job":
					k = 6
				case "stop-before-end-txn":
					k = 8
				case "savepoint":
					k = 10
				}
				switch {
				case k < 4: // SIGKILL the job and time the recovery
					before := lastCheckpoint()
					_ = j.cmd.Process.Signal(syscall.SIGKILL)
					<-j.done
					start := time.Now()
					j.cmd, j.done = j.runner.start()
					j.faults["sigkill-job"]++
					brokerMu.RUnlock()
					recovered := false
					for time.Since(start) < 2*time.Minute {
						if lastCheckpoint() > before {
							j.recoveries = append(j.recoveries, time.Since(start))
							recovered = true
							break
						}
						wait(20 * time.Millisecond)
					}
					if !recovered {
						t.Errorf("%s: no checkpoint committed within 2 minutes after a restart\n%s", j.name, j.log)
					}
					continue
				case k < 6: // crash at a random protocol step
					fp := fps[rng.IntN(len(fps))]
					_ = j.cmd.Process.Signal(syscall.SIGKILL)
					<-j.done
					j.cmd, j.done = j.runner.startEnv(failpoint.EnvVar + "=" + fp + "=crash@" + strconv.Itoa(1+rng.IntN(3)))
					j.faults["failpoint-"+fp]++
				case k < 8: // pause the job for a moment
					_ = j.cmd.Process.Signal(syscall.SIGSTOP)
					time.Sleep(time.Duration(100+rng.IntN(900)) * time.Millisecond)
					_ = j.cmd.Process.Signal(syscall.SIGCONT)
					j.faults["sigstop-job"]++
				case k == 10: // a savepoint at a random moment, then go on
					// (the next SIGKILL restores a checkpoint taken after it)
					if chaosSavepoint(j) {
						j.faults["savepoint"]++
					} else {
						j.faults["savepoint-not-taken"]++
					}
				default: // freeze it between its commit record and EndTxn
					_ = j.cmd.Process.Signal(syscall.SIGKILL)
					<-j.done
					j.cmd, j.done = j.runner.startEnv(failpoint.EnvVar + "=" + failpoint.BeforeEndTxn + "=stop@" + strconv.Itoa(1+rng.IntN(5)))
					j.faults["sigstop-before-end-txn"]++
				}
				brokerMu.RUnlock()
			}
			if !selfStopped.IsZero() {
				_ = j.cmd.Process.Signal(syscall.SIGCONT)
			}
		}()
	}

	// Each scale-out job's instance changes, with its own random stream.
	// They take no part in brokerMu: a pause past the session timeout
	// lasts longer than the broker's restarts are apart.
	for ci, c := range fleets {
		c.events = map[string]int{}
		faultWG.Add(1)
		go func() {
			defer faultWG.Done()
			runChaosFleet(t, c, rand.New(rand.NewPCG(seedVal, uint64(len(jobs)+ci)+1)), deadline, only)
		}()
	}

	// The broker's own faults, shared by all jobs, and partitions added to
	// the inputs at a third and two thirds of the run.
	var brokerRestarts, brokerKills, partitionsAdded int
	addAt := []time.Time{deadline.Add(-dur * 2 / 3), deadline.Add(-dur / 3)}
	for time.Now().Before(deadline) && !t.Failed() {
		time.Sleep(time.Duration(2000+rng.IntN(4000)) * time.Millisecond)
		if len(addAt) > 0 && time.Now().After(addAt[0]) && (only == "" || only == "add-partitions") {
			addAt = addAt[1:]
			brokerMu.Lock()
			for _, topic := range []string{"in", "in-dedupe", "in-so"} {
				if _, err := adm.CreatePartitions(ctx, 2, topic); err != nil {
					t.Errorf("adding 2 partitions to %s: %v", topic, err)
				} else {
					partitionsAdded += 2
				}
			}
			brokerMu.Unlock()
			continue
		}
		if time.Now().After(deadline) || (only != "" && only != "restart-broker" && only != "sigkill-broker") {
			continue
		}
		brokerMu.Lock()
		if only == "sigkill-broker" { // see the note on brokerProc.kill
			brk.kill()
			brokerKills++
		} else {
			brk.stop()
			brokerRestarts++
		}
		brk = runBroker(t, addr, brokerDir)
		brokerMu.Unlock()
	}
	faultWG.Wait()

	// Quiesce: stop the generators, let each job (restarted if a failpoint
	// ended it) catch up, stop it gracefully, check everything.
	stopGen()
	genWG.Wait()
	for _, j := range jobs {
		for {
			// The last process may have been started with a stop
			// failpoint it has not reached yet: keep waking it.
			_ = j.cmd.Process.Signal(syscall.SIGCONT)
			select {
			case <-j.done:
				j.cmd, j.done = j.runner.start()
			default:
			}
			if kafkatest.CaughtUp(t.Context(), adm, j.name, j.input) {
				break
			}
			if time.Now().After(deadline.Add(3 * time.Minute)) {
				t.Fatalf("%s did not catch up within 3 minutes after the faults\n%s", j.name, j.log)
			}
			time.Sleep(200 * time.Millisecond)
		}
		_ = j.cmd.Process.Signal(syscall.SIGTERM)
		stopBy := time.After(time.Minute)
	wait:
		for {
			select {
			case <-j.done:
				break wait
			case <-stopBy:
				t.Fatalf("%s: no graceful stop within a minute\n%s", j.name, j.log)
			case <-time.After(200 * time.Millisecond):
				_ = j.cmd.Process.Signal(syscall.SIGCONT) // the final checkpoint may reach the stop failpoint
			}
		}
	}
	report := ChaosReport{Seed: seedVal, Duration: dur.String(), Jobs: map[string]*ChaosJobReport{}, ScaleOut: map[string]*ChaosScaleOutReport{},
		BrokerRestarts: brokerRestarts, BrokerKills: brokerKills, PartitionsAdded: partitionsAdded, OK: true}
	total := brokerRestarts + brokerKills + partitionsAdded
	// The scale-out jobs catch up, are checked and stop (their live
	// readers still reading).
	for _, c := range fleets {
		rep := finishChaosFleet(t, ctx, adm, addr, c)
		report.ScaleOut[c.name] = rep
		report.OK = report.OK && rep.OK
		for _, n := range rep.Events {
			total += n
		}
	}
	time.Sleep(500 * time.Millisecond)
	stopRead()
	wg.Wait()

	for _, j := range jobs {
		rep, err := verify.Run(ctx, verify.Config{Brokers: []string{addr}, Input: j.input, Output: j.output, Mode: j.mode, Sentinels: true})
		if err != nil {
			t.Fatal(err)
		}
		dups := liveDuplicates(t, ctx, addr, j)
		jr := &ChaosJobReport{Records: int64(rep.Inputs), Faults: j.faults, Recoveries: len(j.recoveries),
			LiveReaderDups: dups, LiveReaderSeen: int(j.liveSeen.Load()), Verify: rep.String(), OK: rep.OK() && dups == 0}
		jr.RecoveryP50, jr.RecoveryP99, jr.RecoveryMax = percentiles(j.recoveries)
		report.Jobs[j.name] = jr
		report.OK = report.OK && jr.OK
		for _, n := range j.faults {
			total += n
		}
		if dups > 0 {
			t.Errorf("%s: the live read_committed reader saw %d records more often than exactly once", j.name, dups)
		}
		if !rep.OK() {
			t.Errorf("%s: verifier found anomalies:\n%s", j.name, rep)
		}
		if extraSinks[j.name] != "" {
			// psql, the database's own client: every input value once in
			// the table, and no prepared transaction left behind.
			got, err := pg.Psql(pgdb, "SELECT count(*), count(DISTINCT value) FROM events")
			if err != nil {
				t.Fatal(err)
			}
			jr.Table = got + " rows|distinct of " + strconv.Itoa(rep.Inputs) + " inputs"
			if want := fmt.Sprintf("%d|%d", rep.Inputs, rep.Inputs); got != want {
				t.Errorf("%s: the table holds count, distinct = %s, want %s (every input exactly once)", j.name, got, want)
				jr.OK, report.OK = false, false
			}
			if left, _ := pg.Psql(pgdb, "SELECT count(*) FROM pg_prepared_xacts WHERE database = current_database()"); left != "0" {
				t.Errorf("%s: %s prepared transactions are left behind", j.name, left)
				jr.OK, report.OK = false, false
			}
		}
	}
	// A failure found on the way (t.Errorf in a fault loop) fails the
	// report too, which is what scripts/chaos reads.
	report.OK = report.OK && !t.Failed()
	js, _ := json.MarshalIndent(report, "", "  ")
	t.Logf("chaos report:\n%s", js)
	if path := os.Getenv("ONCEFLOW_CHAOS_REPORT"); path != "" {
		_ = os.WriteFile(path, js, 0o644)
	}
	if total == 0 {
		t.Fatal("no fault was injected")
	}
	inputs, err := verify.ReadTopic(ctx, []string{addr}, "in", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(inputs) < int(producedIn.Load())/2 {
		t.Fatalf("input topic has %d records, its generator tried %d: most writes failed", len(inputs), producedIn.Load())
	}
}

// liveDuplicates returns how many records j's live reader saw more often
// than the job's contract allows, judged against the input as it is now.
func liveDuplicates(t *testing.T, ctx context.Context, addr string, j *chaosJob) int {
	t.Helper()
	inputs, err := verify.ReadTopic(ctx, []string{addr}, j.input, true)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	switch j.mode {
	case verify.Count:
		n := map[string]int{}
		for _, r := range inputs {
			n[r.Key]++
			want[r.Key+"="+strconv.Itoa(n[r.Key])] = 1
		}
	case verify.Dedupe:
		for _, r := range inputs {
			want[r.Key] = 1
		}
	default:
		for _, r := range inputs {
			want[r.Value]++
		}
	}
	j.liveMu.Lock()
	defer j.liveMu.Unlock()
	dups := 0
	for id, n := range j.live {
		if n > want[id] {
			dups += n - want[id]
		}
	}
	return dups
}

func percentiles(ds []time.Duration) (p50, p99, maxD string) {
	if len(ds) == 0 {
		return "n/a", "n/a", "n/a"
	}
	sort.Slice(ds, func(i, k int) bool { return ds[i] < ds[k] })
	at := func(p float64) string {
		return ds[min(len(ds)-1, int(p*float64(len(ds))))].Round(time.Millisecond).String()
	}
	return at(0.50), at(0.99), ds[len(ds)-1].Round(time.Millisecond).String()
}

// processStopped reports whether pid is stopped (SIGSTOP), from its
// /proc/<pid>/stat.
func processStopped(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(stat)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && (f[0] == "T" || f[0] == "t")
}

// chaosSavepoint asks j's REST API for a savepoint and waits up to ten
// seconds for it; it reports whether one was completed. A job that is
// restarting, or whose checkpoint fails under the other faults, may not
// take it: that is counted, not an error. What must hold is that the job's
// checkpoints after it restore (the fault loop's recovery check).
func chaosSavepoint(j *chaosJob) bool {
	body := fmt.Sprintf(`{"target-directory": %q}`, filepath.Join(j.savepointDir, strconv.FormatInt(time.Now().UnixNano(), 36)))
	hc := &http.Client{Timeout: 3 * time.Second}
	resp, err := hc.Post("http://"+j.api+"/jobs/"+j.name+"/savepoints", "application/json", strings.NewReader(body))
	if err != nil {
		return false
	}
	var trig struct {
		ID string `json:"request-id"`
	}
	err = json.NewDecoder(resp.Body).Decode(&trig)
	resp.Body.Close()
	if err != nil || trig.ID == "" {
		return false
	}
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		resp, err := hc.Get("http://" + j.api + "/jobs/" + j.name + "/savepoints/" + trig.ID)
		if err != nil {
			return false
		}
		var st struct {
			Status struct {
				ID string `json:"id"`
			} `json:"status"`
		}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil {
			return false
		}
		if st.Status.ID == "COMPLETED" {
			return true
		}
	}
	return false
}

// writeChaosJob writes a job file reading input into output (and the
// sections sinks adds to the sink) through pipeline, serving its REST API
// on api, restarting in-process on failures (the SIGKILLs are ours).
func writeChaosJob(t *testing.T, dir, name, addr, input, output, pipeline, sinks, api string) string {
	t.Helper()
	job := fmt.Sprintf(`job: %s
kafka:
  brokers: [%s]
source:
  topics: [%s]
  group: %s
  startup: earliest
  discovery-interval: 1s
%ssink:
  topic: %s
%scheckpointing:
  interval: 100ms
  timeout: 1m
state:
  dir: %s
%srestart:
  strategy: fixed-delay
  attempts: 1000
  delay: 200ms
http:
  listen: %s
`, name, addr, input, name, pipeline, output, sinks, filepath.Join(dir, "state"), backendLine(), api)
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, []byte(job), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func (r *jobRunner) startEnv(env ...string) (*exec.Cmd, chan error) {
	cmd := exec.Command(r.bin, "run", r.file)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = r.log
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return cmd, done
}

type brokerProc struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// stop ends the broker with SIGTERM: kfake finishes the request it is
// handling and saves its state.
func (b *brokerProc) stop() {
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	<-b.exited
}

// kill SIGKILLs the broker. The embedded broker (kfake) writes a commit's
// transaction markers partition by partition with no transaction log to
// finish them after a crash, so a SIGKILL inside an EndTxn can leave one
// transaction committed on some partitions and aborted on others — a
// broker fault real Kafka does not have. Only ONCEFLOW_CHAOS_ONLY=sigkill-broker
// injects it, to reproduce that limit.
func (b *brokerProc) kill() {
	_ = b.cmd.Process.Signal(syscall.SIGKILL)
	<-b.exited
}

// runBroker starts `onceflow broker` on addr and dataDir and waits until it
// accepts connections; after a kill the port may linger, so it retries.
func runBroker(t *testing.T, addr, dataDir string) *brokerProc {
	t.Helper()
	for i := 0; ; i++ {
		// Scale-out tests pause instances past a 6 s group session.
		cmd := exec.Command(binary(t), "broker", "--addr", addr, "--data-dir", dataDir, "--partitions", "4", "--group-session-timeout", "6s")
		lw := &logWriter{t: t, name: "broker"}
		cmd.Stderr = lw
		if dir := os.Getenv("ONCEFLOW_E2E_LOGS"); dir != "" { // kept whole there
			if f, err := os.OpenFile(filepath.Join(dir, "broker.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
				t.Cleanup(func() { f.Close() })
				fmt.Fprintf(f, "== broker started %s\n", time.Now().UTC().Format(time.RFC3339Nano))
				cmd.Stderr = io.MultiWriter(lw, f)
			}
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		b := &brokerProc{cmd: cmd, exited: make(chan struct{})}
		go func() { _ = cmd.Wait(); close(b.exited) }()
		for up := time.Now().Add(30 * time.Second); time.Now().Before(up); {
			select {
			case <-b.exited:
				if i > 50 {
					t.Fatalf("broker would not start:\n%s", lw)
				}
				time.Sleep(100 * time.Millisecond)
				goto retry
			default:
			}
			if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
				c.Close()
				t.Cleanup(func() {
					_ = cmd.Process.Signal(syscall.SIGTERM)
					select {
					case <-b.exited:
					case <-time.After(10 * time.Second):
						_ = cmd.Process.Kill()
					}
				})
				return b
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("broker did not come up on %s:\n%s", addr, lw)
	retry:
	}
}
