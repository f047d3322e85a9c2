package cli

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// demoCrashJobFile is the job file of the crashing demo's child
// pipelines; uiAddr, when not "", is where each serves the web UI and the
// REST API (the same address for all: a kill frees it for the next).
func demoCrashJobFile(brokers, stateDir, uiAddr string) string {
	job := fmt.Sprintf(`job: %s
kafka:
  brokers: [%s]
source:
  topics: [%s]
  group: %s
  startup: earliest
pipeline:
  - dedupe: {key: record.key, ttl: 1h, uid: dedupe}
sink:
  topic: %s
  delivery: exactly-once
checkpointing:
  interval: 1s
state:
  dir: %s
`, demoJob, brokers, demoInput, demoGroup, demoOutput, filepath.Join(stateDir, "state"))
	if uiAddr != "" {
		job += "http:\n  listen: " + uiAddr + "\n"
	}
	return job
}

// demoUIAddr is the address the crashing demo's pipelines serve the UI on:
// want ("" or "off": none) or, when it is taken, a free port chosen once,
// so that the address stays the same across the kills.
func demoUIAddr(want string) (string, error) {
	if want == "" || want == "off" {
		return "", nil
	}
	l, err := net.Listen("tcp", want)
	if err != nil {
		if l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return "", fmt.Errorf("find a port for the web UI: %w", err)
		}
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// runDemoCrashing is the demo with --crash-every: the pipeline runs as
// `onceflow run` child processes on a job file equivalent to the in-process
// pipeline, and each is killed with SIGKILL (no final checkpoint, an open
// transaction left behind) after about crashEvery, then started again. The
// output is checked as in the plain demo: every distinct event once.
func runDemoCrashing(ctx context.Context, e *env, o demoOptions, addr, stateDir string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("--crash-every runs this binary as the pipeline: %w", err)
	}
	jobFile := filepath.Join(stateDir, "demo.yaml")
	uiAddr, err := demoUIAddr(o.http)
	if err != nil {
		return err
	}
	job := demoCrashJobFile(addr, stateDir, uiAddr)
	if err := os.WriteFile(jobFile, []byte(job), 0o644); err != nil {
		return err
	}
	logPath := filepath.Join(stateDir, "pipeline.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	fmt.Fprintf(e.stderr, "demo: the pipeline runs as `%s run %s` and is killed with SIGKILL about every %v\n", filepath.Base(self), jobFile, o.crashEvery)
	if uiAddr != "" {
		fmt.Fprintf(e.stderr, "demo: web UI at http://%s/ (metrics at /metrics), served by each pipeline process in turn: keep the page open, it reconnects after each kill\n", uiAddr)
	}

	var kills atomic.Int64
	type child struct {
		cmd  *exec.Cmd
		done chan struct{}
		err  error
	}
	start := func() (*child, error) {
		cmd := exec.Command(self, "run", "--status-interval", "0", jobFile)
		cmd.Stdout, cmd.Stderr = logFile, logFile
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("start the pipeline: %w", err)
		}
		c := &child{cmd: cmd, done: make(chan struct{})}
		go func() { c.err = cmd.Wait(); close(c.done) }()
		return c, nil
	}
	cur, err := start()
	if err != nil {
		return err
	}
	defer func() {
		_ = cur.cmd.Process.Kill()
		<-cur.done
	}()

	gen, prod, genDone, stopGen, err := startGenerator(ctx, addr, o)
	if err != nil {
		return err
	}
	defer prod.Close()
	defer stopGen()

	rng := rand.New(rand.NewPCG(o.seed, 7))
	nextKill := func() <-chan time.Time {
		// Anywhere from half to one and a half intervals, so kills land
		// at every point of a checkpoint's life.
		return time.After(o.crashEvery/2 + time.Duration(rng.Int64N(int64(o.crashEvery))))
	}
	began := time.Now()
	tick := time.NewTicker(o.statusInterval)
	defer tick.Stop()
	kill := nextKill()
	var genErr error
wait:
	for {
		select {
		case <-tick.C:
			fmt.Fprintf(e.stderr, "demo: %5.1fs  generated %d (%d resent)  pipeline killed %d times\n",
				time.Since(began).Seconds(), gen.generated.Load(), gen.resent.Load(), kills.Load())
		case <-kill:
			_ = cur.cmd.Process.Signal(syscall.SIGKILL)
			<-cur.done
			kills.Add(1)
			if cur, err = start(); err != nil {
				stopGen()
				<-genDone
				return err
			}
			kill = nextKill()
		case <-cur.done:
			stopGen()
			<-genDone
			return fmt.Errorf("the pipeline exited on its own (%v); its log is %s", cur.err, logPath)
		case genErr = <-genDone:
			break wait
		}
	}
	if genErr != nil {
		return fmt.Errorf("event generator: %w", genErr)
	}
	fmt.Fprintf(e.stderr, "demo: generator stopped after %d kills; letting the last pipeline catch up\n", kills.Load())
	adm := kadm.NewClient(prod)
	if err := waitCaughtUp(ctx, adm, cur.done, func() error { return cur.err }, 60*time.Second); err != nil {
		return fmt.Errorf("%w (its log is %s)", err, logPath)
	}
	_ = cur.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-cur.done:
	case <-time.After(30 * time.Second):
		return errors.New("the pipeline did not stop within 30s of SIGTERM; its log is " + logPath)
	}
	if cur.err != nil {
		return fmt.Errorf("the last pipeline failed: %v; its log is %s", cur.err, logPath)
	}
	out, distinct, err := readOutput(context.WithoutCancel(ctx), addr, 30*time.Second)
	if err != nil {
		return fmt.Errorf("read back %s: %w", demoOutput, err)
	}
	r := demoResult{generated: gen.generated.Load(), resent: gen.resent.Load(), distinctIn: gen.distinct(), output: out, distinctOut: distinct}
	w := e.stdout
	fmt.Fprintln(w, "demo summary (--crash-every):")
	fmt.Fprintf(w, "  generated    %d events: %d distinct, %d resent duplicates\n", r.generated, r.distinctIn, r.resent)
	fmt.Fprintf(w, "  crashes      the pipeline was killed with SIGKILL %d times and restarted\n", kills.Load())
	fmt.Fprintf(w, "  output       %d records committed to %s (read read_committed), %d distinct\n", r.output, demoOutput, r.distinctOut)
	fmt.Fprintf(w, "  duplicates   %d in the output\n", r.output-r.distinctOut)
	fmt.Fprintf(w, "  missing      %d events\n", r.distinctIn-r.distinctOut)
	if dups := r.output - r.distinctOut; dups != 0 {
		return fmt.Errorf("%d duplicates reached %s: exactly-once is broken", dups, demoOutput)
	}
	if r.distinctOut != r.distinctIn {
		return fmt.Errorf("%s holds %d distinct events, %d were generated", demoOutput, r.distinctOut, r.distinctIn)
	}
	return nil
}
