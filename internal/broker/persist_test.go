package broker_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

var persistTopics = map[string]int32{"in": 1, "out": 1}

// seedCheckpoints leaves the broker at addr with checkpoint 1 committed
// (records c1 c2, group "job" at in/0 = 10 "ckpt-1") and checkpoint 2 open
// (record open1, in/0 = 20 "ckpt-2" staged) on transactional id "job-0". It
// returns the producer holding checkpoint 2.
func seedCheckpoints(tb testing.TB, ctx context.Context, addr string) *kgo.Client {
	tb.Helper()
	p := txnProducer(tb, addr, "job-0")
	produceInTxn(tb, ctx, p, "out", "c1", "c2")
	if err := commitOffsetsInTxn(ctx, p, "job-0", "job", txnOffset{"in", 0, 10, "ckpt-1"}); err != nil {
		tb.Fatal(err)
	}
	if err := endTxn(ctx, p, true); err != nil {
		tb.Fatalf("commit checkpoint 1: %v", err)
	}
	produceInTxn(tb, ctx, p, "out", "open1")
	if err := commitOffsetsInTxn(ctx, p, "job-0", "job", txnOffset{"in", 0, 20, "ckpt-2"}); err != nil {
		tb.Fatal(err)
	}
	return p
}

// checkCheckpoint fails tb unless read_committed sees exactly records and the
// group offset is at with metadata ckpt.
func checkCheckpoint(tb testing.TB, ctx context.Context, addr string, records []string, at int64, ckpt string) {
	tb.Helper()
	if got := readAll(tb, ctx, addr, "out", kgo.ReadCommitted()); !slices.Equal(got, records) {
		tb.Errorf("read_committed = %q, want %q", got, records)
	}
	o, ok := fetchOffset(tb, ctx, addr, "job", "in")
	if !ok || o.At != at || o.Metadata != ckpt {
		tb.Errorf("group offset %d %q (found %v), want %d %q", o.At, o.Metadata, ok, at, ckpt)
	}
}

// Fact 4, clean restart: Close keeps an open transaction open.
func TestFactPersistenceAcrossClose(t *testing.T) {
	tests := []struct {
		name string
		// afterRestart ends checkpoint 2 one way or another.
		afterRestart func(t *testing.T, ctx context.Context, addr string, open *kgo.Client)
		wantRecords  []string
		wantAt       int64
		wantCkpt     string
	}{{
		name: "old producer commits the open transaction",
		afterRestart: func(t *testing.T, ctx context.Context, _ string, open *kgo.Client) {
			if err := endTxn(ctx, open, true); err != nil {
				t.Fatalf("commit checkpoint 2 after restart: %v", err)
			}
		},
		wantRecords: []string{"c1", "c2", "open1"},
		wantAt:      20,
		wantCkpt:    "ckpt-2",
	}, {
		name: "new producer with the same id aborts it",
		afterRestart: func(t *testing.T, ctx context.Context, addr string, _ *kgo.Client) {
			if _, _, err := txnProducer(t, addr, "job-0").ProducerID(ctx); err != nil {
				t.Fatalf("init new producer: %v", err)
			}
		},
		wantRecords: []string{"c1", "c2"},
		wantAt:      10,
		wantCkpt:    "ckpt-1",
	}}
	for _, tt := range tests {
		for _, sync := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/SyncWrites=%v", tt.name, sync), func(t *testing.T) {
				ctx := kafkatest.Context(t)
				dir := t.TempDir()
				cfg := broker.Config{DataDir: dir, Topics: persistTopics, SyncWrites: sync}
				b := kafkatest.StartBroker(t, cfg)
				addr := b.Addr()
				open := seedCheckpoints(t, ctx, addr)
				if err := b.Close(); err != nil {
					t.Fatal(err)
				}

				cfg.Addr = addr
				b = kafkatest.StartBroker(t, cfg)
				if b.Addr() != addr {
					t.Fatalf("restarted on %s, want %s", b.Addr(), addr)
				}
				// Still open: its first record holds back read_committed.
				if pi := b.Cluster().PartitionInfo("out", 0); pi.LastStableOffset == pi.HighWatermark {
					t.Errorf("after restart: last stable offset = high watermark = %d; want the open transaction to hold it back", pi.HighWatermark)
				}
				tt.afterRestart(t, ctx, addr, open)
				checkCheckpoint(t, ctx, addr, tt.wantRecords, tt.wantAt, tt.wantCkpt)
			})
		}
	}
}

// Environment of TestCrashChildProcess: the data dir (without it the test
// is skipped), and whether to seed the checkpoints first.
const (
	crashDirEnv  = "ONCEFLOW_BROKER_CRASH_DIR"
	crashSeedEnv = "ONCEFLOW_BROKER_CRASH_SEED"
)

// TestCrashChildProcess is the broker process the crash tests kill. It
// starts a broker on the data dir, seeds the checkpoints if asked, reports
// its address and waits to die.
func TestCrashChildProcess(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("helper process for the crash tests")
	}
	b, err := broker.Start(broker.Config{DataDir: dir, Addr: os.Getenv("ONCEFLOW_BROKER_CRASH_ADDR"), Topics: persistTopics})
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv(crashSeedEnv) != "" {
		seedCheckpoints(t, kafkatest.Context(t), b.Addr())
	}
	fmt.Printf("READY %s\n", b.Addr())
	select {} // until SIGKILL
}

// runAndKill runs TestCrashChildProcess on dir (on addr; "" for a free
// port), waits until it is ready and kills it with SIGKILL: no Close, no
// flush. It returns the address the child listened on.
func runAndKill(t *testing.T, ctx context.Context, dir, addr string, seed bool) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCrashChildProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, "ONCEFLOW_BROKER_CRASH_ADDR="+addr)
	if seed {
		cmd.Env = append(cmd.Env, crashSeedEnv+"=1")
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for sc := bufio.NewScanner(out); sc.Scan(); {
		if a, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
			addr = a
			break
		}
		lines = append(lines, sc.Text())
	}
	if len(lines) > 0 || addr == "" {
		cmd.Wait()
		t.Fatalf("child broker did not get ready; its output:\n%s", strings.Join(lines, "\n"))
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	var exit *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &exit) {
		t.Fatalf("child exit: %v, want killed", err)
	}
	return addr
}

// checkOpenAborted fails t unless the broker at addr, started after a crash,
// shows checkpoint 1 only, with checkpoint 2's record aborted (written, not
// visible), and transactional id job-0 commits again visibly.
func checkOpenAborted(t *testing.T, ctx context.Context, b *broker.Broker) {
	t.Helper()
	addr := b.Addr()
	// Aborted during start, before any client touched it.
	if pi := b.Cluster().PartitionInfo("out", 0); pi.LastStableOffset != pi.HighWatermark {
		t.Errorf("after crash restart: last stable offset %d, high watermark %d; want the open transaction aborted", pi.LastStableOffset, pi.HighWatermark)
	}
	checkCheckpoint(t, ctx, addr, []string{"c1", "c2"}, 10, "ckpt-1")
	if got := readAll(t, ctx, addr, "out", kgo.ReadUncommitted()); !slices.Contains(got, "open1") {
		t.Errorf("read_uncommitted = %q, want the aborted open1 still in the log", got)
	}

	// The transactional id commits again, and a reader from the start sees
	// it (kfake alone hides it: its crash recovery writes no abort marker,
	// so readers skip the producer's later records too).
	p := txnProducer(t, addr, "job-0")
	produceInTxn(t, ctx, p, "out", "c3")
	if err := commitOffsetsInTxn(ctx, p, "job-0", "job", txnOffset{"in", 0, 30, "ckpt-3"}); err != nil {
		t.Fatal(err)
	}
	if err := endTxn(ctx, p, true); err != nil {
		t.Fatalf("commit after crash restart: %v", err)
	}
	checkCheckpoint(t, ctx, addr, []string{"c1", "c2", "c3"}, 30, "ckpt-3")
}

// Fact 4, crash: SIGKILL loses nothing acknowledged, and the transaction open
// at the crash is aborted on the next start.
func TestFactPersistenceAcrossKill(t *testing.T) {
	ctx := kafkatest.Context(t)
	dir := t.TempDir()
	addr := runAndKill(t, ctx, dir, "127.0.0.1:0", true)
	logs := &logRecorder{}
	b := kafkatest.StartBroker(t, broker.Config{DataDir: dir, Addr: addr, Topics: persistTopics, Logger: slog.New(logs)})
	if !logs.logged("did not stop cleanly") || !logs.logged("wrote the missing abort marker") {
		t.Errorf("the start after the crash did not repair the open transaction; logged %q", logs.messages(slog.LevelWarn))
	}
	checkOpenAborted(t, ctx, b)
}

// Fact 4, both: a transaction kept open by Close is aborted by a crash of the
// broker that restored it, even when nothing else was written in between.
func TestFactPersistenceCloseThenKill(t *testing.T) {
	ctx := kafkatest.Context(t)
	dir := t.TempDir()
	b := kafkatest.StartBroker(t, broker.Config{DataDir: dir, Topics: persistTopics})
	addr := b.Addr()
	seedCheckpoints(t, ctx, addr)
	b.Close()

	runAndKill(t, ctx, dir, addr, false)
	checkOpenAborted(t, ctx, kafkatest.StartBroker(t, broker.Config{DataDir: dir, Addr: addr, Topics: persistTopics}))
}
