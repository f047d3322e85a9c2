package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/checkpoint/storage"
)

// `onceflow savepoint --api` against a running job (dedupe), more
// checkpoints, then SIGKILL: the job's newest checkpoint is intact and
// `onceflow run` resumes it, writing every key once; with each state
// backend. The savepoint used to empty a pebble job's shared/ directory
// while later checkpoints still referenced its files, and the restart was
// refused ("... .sst is missing").
func TestSavepointWhileRunningThenSIGKILL(t *testing.T) {
	for _, backend := range []string{"pebble", "memory"} {
		t.Run(backend, func(t *testing.T) { savepointWhileRunningThenSIGKILL(t, backend) })
	}
}

func savepointWhileRunningThenSIGKILL(t *testing.T, backend string) {
	dir := t.TempDir()
	addr := startBroker(t, filepath.Join(dir, "broker"))
	createTopic(t, addr, "in", 2)
	createTopic(t, addr, "out-spkill", 1)
	produceInput(t, addr, "in", 2000, 100)
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("sp-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := writeJobFile(t, dir, "spkill", addr, "pipeline:\n  - dedupe: {key: record.key, ttl: 1h}", fmt.Sprintf(`sink:
  topic: out-spkill
  delivery: exactly-once
checkpointing:
  interval: 50ms
  mode: exactly-once
  timeout: 1m
state:
  dir: %s
  backend: %s
restart:
  strategy: none
`, filepath.Join(dir, "state"), backend))
	bin := binary(t)
	httpAddr := freeAddr(t)
	api := "http://" + httpAddr
	log := &logWriter{t: t, name: "job"}
	run := func(args ...string) (*exec.Cmd, chan error) {
		cmd := exec.Command(bin, append([]string{"run"}, args...)...)
		cmd.Stderr = log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-done
			done <- nil
		})
		return cmd, done
	}
	cmd, done := run("--http", httpAddr, "--http-token-file", tokenFile, file)

	// ops runs an operations command and returns its standard output
	// (and, when it fails, its standard error too).
	ops := func(args ...string) (string, error) {
		c := exec.Command(bin, args...)
		c.Env = append(os.Environ(), "ONCEFLOW_HTTP_TOKEN=sp-token")
		var out, errb bytes.Buffer
		c.Stdout, c.Stderr = &out, &errb
		if err := c.Run(); err != nil {
			return out.String() + errb.String(), err
		}
		return out.String(), nil
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out, err := ops("status", "--api", api)
		if err == nil && strings.Contains(out, "100 committed") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job never committed 100 records: %v\n%s\njob log:\n%s", err, out, log)
		}
	}
	out, err := ops("savepoint", "--api", api, "--dir", filepath.Join(dir, "sp"))
	if err != nil {
		t.Fatalf("savepoint: %v\n%s", err, out)
	}
	sp, err := storage.LoadManifest(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("the savepoint %q: %v", strings.TrimSpace(out), err)
	}

	// Three checkpoints after the savepoint, each followed by cleanup.
	store, err := storage.Open(filepath.Join(dir, "state", "spkill"))
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if ids, _ := store.List(); len(ids) > 0 && ids[len(ids)-1] >= sp.CheckpointID+3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no three checkpoints after savepoint %d within 30s\n%s", sp.CheckpointID, log)
		}
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
	done <- nil

	ids, err := store.List()
	if err != nil || len(ids) == 0 {
		t.Fatalf("no committed checkpoint after the kill (%v)", err)
	}
	if _, err := store.Load(ids[len(ids)-1]); err != nil {
		t.Fatalf("the newest checkpoint is damaged after a savepoint and a kill: %v", err)
	}

	// 50 new keys; the restarted job writes them, and nothing twice.
	produceRange(t, addr, "in", 2000, 50, 100000)
	_, done = run(file)
	for deadline := time.Now().Add(time.Minute); len(readCommitted(t, addr, "out-spkill")) < 150; time.Sleep(200 * time.Millisecond) {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("the restarted job exited: %v\n%s", err, log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restarted job did not write the 50 new keys within a minute\n%s", log)
		}
	}
	keysOnce(t, addr, "out-spkill", 150)
}

// `onceflow run --from-savepoint DIR` with DIR one of the job's own
// retained checkpoints, left in the service definition: the job's cleanup
// removes DIR once newer checkpoints exist, and the next start with the
// same flag resumes the job's newest checkpoint (the Kafka commit record
// names it) instead of refusing because DIR is gone.
func TestFromSavepointNamingARemovedRetainedCheckpoint(t *testing.T) {
	dir := t.TempDir()
	addr := startBroker(t, filepath.Join(dir, "broker"))
	createTopic(t, addr, "in", 2)
	createTopic(t, addr, "out-spflag", 1)
	produceInput(t, addr, "in", 1000, 100)
	file := writeJob(t, dir, "spflag", addr, "pipeline:\n  - dedupe: {key: record.key, ttl: 1h}")
	bin := binary(t)
	log := &logWriter{t: t, name: "job"}
	store, err := storage.Open(filepath.Join(dir, "state", "spflag"))
	if err != nil {
		t.Fatal(err)
	}
	// runUntil runs the job until the output holds want records and cond
	// holds, then stops it with SIGTERM.
	runUntil := func(want int, cond func() bool, args ...string) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"run"}, args...)...)
		cmd.Stderr = log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		defer func() {
			_ = cmd.Process.Kill()
			<-done
		}()
		for deadline := time.Now().Add(time.Minute); len(readCommitted(t, addr, "out-spflag")) < want || !cond(); time.Sleep(100 * time.Millisecond) {
			select {
			case err := <-done:
				done <- err
				t.Fatalf("onceflow run %v exited: %v\n%s", args, err, log)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("onceflow run %v: no %d records within a minute\n%s", args, want, log)
			}
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			done <- err
			if err != nil {
				t.Fatalf("onceflow run %v: graceful stop: %v\n%s", args, err, log)
			}
		case <-time.After(time.Minute):
			t.Fatalf("onceflow run %v did not stop within a minute of SIGTERM\n%s", args, log)
		}
	}
	always := func() bool { return true }
	runUntil(100, always, file)
	ids, err := store.List()
	if err != nil || len(ids) == 0 {
		t.Fatalf("no retained checkpoint after the first run (%v)", err)
	}
	chk := store.Dir(ids[len(ids)-1])

	// Started from the retained checkpoint; it runs until cleanup has
	// removed that checkpoint.
	produceRange(t, addr, "in", 2000, 50, 100000)
	gone := func() bool {
		_, err := os.Stat(filepath.Join(chk, storage.ManifestName))
		return os.IsNotExist(err)
	}
	runUntil(150, gone, "--from-savepoint", chk, file)

	// The flag is still there: the job resumes its newest checkpoint.
	produceRange(t, addr, "in", 3000, 50, 100000)
	runUntil(200, always, "--from-savepoint", chk, file)
	if !strings.Contains(log.String(), "resumes that checkpoint") {
		t.Errorf("the job did not say it resumes its newest checkpoint instead of the flag's:\n%s", log)
	}
	keysOnce(t, addr, "out-spflag", 200)
}

// keysOnce checks that topic's committed output holds want keys, none
// twice (a dedupe job's output).
func keysOnce(t *testing.T, addr, topic string, want int) {
	t.Helper()
	seen := map[string]bool{}
	for _, r := range readCommitted(t, addr, topic) {
		if seen[r.Key] {
			t.Fatalf("key %s written twice", r.Key)
		}
		seen[r.Key] = true
	}
	if len(seen) != want {
		t.Fatalf("output holds %d keys, want %d", len(seen), want)
	}
}
