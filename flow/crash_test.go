package flow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/flow/flowtest"
	"github.com/onceflow/onceflow/internal/checkpoint"
	"github.com/onceflow/onceflow/internal/restart"
)

// The crash test re-executes this test binary as a child process that runs
// a keyed count job with a durable sink, and SIGKILLs it at random moments.
const childEnv = "ONCEFLOW_CRASH_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		os.Exit(crashChild(dir))
	}
	os.Exit(m.Run())
}

const crashKeys, crashPerKey = 16, 3000

func crashChild(dir string) int {
	mode := checkpoint.ExactlyOnce
	if os.Getenv("ONCEFLOW_CRASH_MODE") == "at-least-once" {
		mode = checkpoint.AtLeastOnce
	}
	src := flowtest.NewSource(flowtest.Split(events(crashKeys, crashPerKey), 3), flowtest.PerPoll(20))
	sink := flowtest.NewFileSink(filepath.Join(dir, "out"), func(c count) []byte {
		b, _ := json.Marshal(c)
		return b
	})
	env := flow.New(flow.JobName("crash"), flow.Checkpointing(15*time.Millisecond), flow.CheckpointMode(mode),
		flow.StateDir(filepath.Join(dir, "state")), flow.RetainedCheckpoints(2),
		flow.Restart(restart.Config{Strategy: restart.None}),
		flow.Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	// Throttle so that an undisturbed run lasts a couple of seconds.
	var n atomic.Int64
	throttled := flow.Map(flow.From(env, src), func(e event) event {
		if n.Add(1)%10 == 0 {
			time.Sleep(time.Millisecond)
		}
		return e
	})
	keyed := flow.KeyBy(throttled, func(e event) string { return e.Key })
	flow.To(flow.Process(keyed, "count", countFn, flow.WithParallelism(2)), sink)
	if err := env.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

func runCrashTest(t *testing.T, mode string, kills int) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("ONCEFLOW_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (replay with ONCEFLOW_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	start := func() *exec.Cmd {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+dir, "ONCEFLOW_CRASH_MODE="+mode)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	killed := 0
	for killed < kills {
		cmd := start()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("child failed on its own: %v", err)
			}
			t.Fatalf("the child finished its input before kill #%d of %d: make the job longer", killed+1, kills)
		case <-time.After(time.Duration(20+rng.IntN(150)) * time.Millisecond):
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
			killed++
		}
	}
	// A final undisturbed run to the end of input.
	cmd := start()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("final run: %v", err)
	}
	lines, err := flowtest.ReadCommitted(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	var got []count
	for _, l := range lines {
		var c count
		if err := json.Unmarshal(l, &c); err != nil {
			t.Fatalf("bad output line %q: %v", l, err)
		}
		got = append(got, c)
	}
	if mode == "exactly-once" {
		checkCounts(t, got, crashKeys, crashPerKey)
		return
	}
	// At-least-once: every count 1..n appears at least once per key.
	seen := map[string]map[int64]bool{}
	for _, c := range got {
		if seen[c.Key] == nil {
			seen[c.Key] = map[int64]bool{}
		}
		seen[c.Key][c.N] = true
	}
	for k := 0; k < crashKeys; k++ {
		key := "k" + strconv.Itoa(k)
		for n := int64(1); n <= crashPerKey; n++ {
			if !seen[key][n] {
				t.Fatalf("at-least-once lost count %d of key %s", n, key)
			}
		}
	}
	t.Logf("at-least-once: %d outputs for %d inputs", len(got), crashKeys*crashPerKey)
}

func crashKills() int {
	if os.Getenv("ONCEFLOW_LONG") != "" {
		return 100
	}
	return 12
}

func TestSIGKILLExactlyOnce(t *testing.T) { runCrashTest(t, "exactly-once", crashKills()) }

func TestSIGKILLAtLeastOnce(t *testing.T) { runCrashTest(t, "at-least-once", crashKills()/2) }
