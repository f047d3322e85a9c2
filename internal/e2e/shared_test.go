package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/failpoint"
	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/verify"
)

// Two jobs share a cluster. Job a freezes (SIGSTOP) between writing its
// commit record and EndTxn, so its transaction stays open on the shared
// progress topic. Meanwhile job b commits more checkpoints, is SIGKILLed
// and restarts: its recovery must find its newest commit, not wait for or
// be misled by a's transaction. Both outputs are then checked exactly once.
// (The old recovery read the shared topic up to its last stable offset,
// restored an older checkpoint of b and wrote its newer epochs twice.)
func TestOtherJobFrozenMidCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	dir := t.TempDir()
	bin := binary(t)
	addr := freeAddr(t)
	runBroker(t, addr, filepath.Join(dir, "broker"))
	createTopic(t, addr, "in", 2)
	createTopic(t, addr, "out-a", 2)
	createTopic(t, addr, "out-b", 2)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	genCtx, stopGen := context.WithCancel(ctx)
	wg.Add(1)
	go func() {
		defer wg.Done()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("in"))
		if err != nil {
			t.Error(err)
			return
		}
		defer cl.Close()
		for n := 0; genCtx.Err() == nil; n++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k" + strconv.Itoa(n%100)), Value: []byte("seq-" + strconv.Itoa(n))}).FirstErr(); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()

	a := &jobRunner{t: t, bin: bin, file: writeJob(t, dir, "a", addr, ""), log: &logWriter{t: t, name: "a"}}
	b := &jobRunner{t: t, bin: bin, file: writeJob(t, dir, "b", addr, ""), log: &logWriter{t: t, name: "b"}}
	aCmd, aDone := a.startEnv(failpoint.EnvVar + "=" + failpoint.BeforeEndTxn + "=stop@5")
	bCmd, bDone := b.start()
	defer func() { _ = aCmd.Process.Signal(syscall.SIGCONT) }()

	adm := kadm.NewClient(client(t, addr))
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within a minute\na:\n%s\nb:\n%s", what, a.log, b.log)
			}
		}
	}
	waitFor("job a froze in its fifth commit", func() bool { return processStopped(aCmd.Process.Pid) })
	frozenAt := groupCheckpoint(adm, "b")
	waitFor("job b committed while a was frozen", func() bool { return groupCheckpoint(adm, "b") >= frozenAt+5 })
	beforeKill := groupCheckpoint(adm, "b")
	_ = bCmd.Process.Signal(syscall.SIGKILL)
	<-bDone
	restart := time.Now()
	bCmd, bDone = b.start()
	waitFor("job b committed after its restart", func() bool { return groupCheckpoint(adm, "b") > beforeKill })
	t.Logf("b recovered in %v while a's transaction was open (b was at checkpoint %d)", time.Since(restart).Round(time.Millisecond), beforeKill)

	if err := aCmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	stopGen()
	for _, j := range []struct {
		name string
		cmd  interface{ Signal(os.Signal) error }
		done chan error
	}{{"a", aCmd.Process, aDone}, {"b", bCmd.Process, bDone}} {
		waitFor(j.name+" caught up", func() bool { return kafkatest.CaughtUp(t.Context(), adm, j.name, "in") })
		_ = j.cmd.Signal(syscall.SIGTERM)
		if err := <-j.done; err != nil {
			t.Fatalf("graceful stop of %s: %v", j.name, err)
		}
	}
	wg.Wait()
	for _, out := range []string{"out-a", "out-b"} {
		rep, err := verify.Run(ctx, verify.Config{Brokers: []string{addr}, Input: "in", Output: out})
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK() {
			t.Errorf("%s:\n%s", out, rep)
		}
	}
}
