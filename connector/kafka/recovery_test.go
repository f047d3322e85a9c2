package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/checkpoint"
	"github.com/onceflow/onceflow/internal/checkpoint/storage"
	"github.com/onceflow/onceflow/internal/failpoint"
	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/restart"
)

// The tests in this file prove the recovery decisions of docs/design.md
// ("Recovery decisions") against the embedded broker; each scenario failed
// on the code before the commit record moved to the job's own group.

func rec(job string, id int64) flow.CommitRecord {
	return flow.CommitRecord{Job: job, Checkpoint: id, Manifest: fmt.Sprintf("%064x", id), Incarnation: "inc", StateID: "state", Time: time.Now()}
}

// commitEpochs writes one record per checkpoint first..last through w and
// commits each with cp.
func commitEpochs(t *testing.T, cp flow.CommitPoint, w flow.SinkWriter[Record], job string, first, last int64) {
	t.Helper()
	for id := first; id <= last; id++ {
		write(t, w, fmt.Sprintf("%s-%d", job, id))
		prepare(t, w, id)
		if err := cp.Commit(kafkatest.Context(t), rec(job, id)); err != nil {
			t.Fatalf("commit %d of %s: %v", id, job, err)
		}
	}
}

// Scenario 1: another job's transaction left open on the shared progress
// topic, and another job's offset commit left pending in its own group,
// must not hide this job's newer commit records. (The old recovery read
// markers up to the progress topic's last stable offset and found
// checkpoint 3 instead of 6.)
func TestRecoveryIgnoresOtherJobsTransactions(t *testing.T) {
	c := startBroker(t, map[string]int32{"out": 1})
	ctx := kafkatest.Context(t)
	a := newSink(t, SinkConfig{Client: c.client(), Job: "a", Topic: "out"})
	cp := a.CommitPoint()
	if r, err := cp.Recover(ctx); err != nil || r.Checkpoint != 0 {
		t.Fatalf("Recover of a new job = %+v, %v; want no record", r, err)
	}
	w := openWriter(t, a, 0, 1)
	commitEpochs(t, cp, w, "a", 1, 3)

	// Job b pauses between writing to the progress topic and EndTxn (an
	// old onceflow's marker), and job c between its offset commit and
	// EndTxn: both transactions stay open for the whole test.
	b := c.Client(t, kgo.TransactionalID("onceflow-b-0"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := b.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := b.ProduceSync(ctx, &kgo.Record{Topic: DefaultProgressTopic, Partition: 0, Key: []byte("b"), Value: []byte(`{"job":"b","checkpoint":1}`)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	other := newSink(t, SinkConfig{Client: c.client(), Job: "c", Topic: "out"})
	if _, err := other.CommitPoint().Recover(ctx); err != nil {
		t.Fatal(err)
	}
	other.mu.Lock()
	err := txnCommitOffsets(ctx, other.sess.cl, other.sess.txid, other.cfg.ProgressGroup, map[split]offsetAt{{DefaultProgressTopic, 0}: {1, "pending"}}, true)
	other.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}

	commitEpochs(t, cp, w, "a", 4, 6)
	w.Close()

	start := time.Now()
	again := newSink(t, SinkConfig{Client: c.client(), Job: "a"})
	peek, err := again.CommitPoint().Peek(ctx)
	if err != nil || peek.Checkpoint != 6 {
		t.Errorf("Peek after restart = %d, %v; want 6", peek.Checkpoint, err)
	}
	got, err := again.CommitPoint().Recover(ctx)
	if err != nil || got.Checkpoint != 6 {
		t.Fatalf("Recover after restart = %+v, %v; want checkpoint 6", got, err)
	}
	if got != rec("a", 6) && (got.Manifest != rec("a", 6).Manifest || got.Incarnation != "inc" || got.StateID != "state") {
		t.Errorf("Recover = %+v, want the record committed with checkpoint 6", got)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("recovery took %v with other jobs' transactions open: it waited for them", d)
	}
}

// Scenario 5: a commit that fails without fencing aborts its transaction
// at once, so read_committed readers are not blocked until the broker's
// transaction timeout. (Before, the transaction stayed open: LSO 0 < HW 1.)
func TestFailedCommitAbortsTransaction(t *testing.T) {
	kafkatest.RequireFaults(t) // failpoint.Enable
	c := startBroker(t, map[string]int32{"out": 1})
	ctx := kafkatest.Context(t)
	s := newSink(t, SinkConfig{Client: c.client(), Job: "a", Topic: "out"})
	cp := s.CommitPoint()
	if _, err := cp.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	w := openWriter(t, s, 0, 1)
	commitEpochs(t, cp, w, "a", 1, 1)
	write(t, w, "lost")
	prepare(t, w, 2)
	if err := failpoint.Enable(failpoint.BeforeEndTxn + "=error"); err != nil {
		t.Fatal(err)
	}
	err := cp.Commit(ctx, rec("a", 2))
	_ = failpoint.Enable("")
	if err == nil {
		t.Fatal("the commit with an injected failure succeeded")
	}
	lso, hw := c.stableAndHigh(t, "out", 0)
	if lso != hw {
		t.Errorf("after the failed commit: last stable offset %d < high watermark %d: the transaction is still open", lso, hw)
	}
	if got := c.ReadCommitted(t, "out"); !slices.Equal(got, []string{"a-1"}) {
		t.Errorf("read_committed = %q, want only the committed epoch", got)
	}
	if r, err := newSink(t, SinkConfig{Client: c.client(), Job: "a"}).CommitPoint().Recover(ctx); err != nil || r.Checkpoint != 1 {
		t.Errorf("Recover = %d, %v; want 1", r.Checkpoint, err)
	}
}

// stableAndHigh returns the last stable offset and high watermark of a
// partition.
func (c cluster) stableAndHigh(tb testing.TB, topic string, p int32) (int64, int64) {
	tb.Helper()
	adm := c.Admin(tb)
	lso, err := adm.ListCommittedOffsets(kafkatest.Context(tb), topic)
	if err != nil {
		tb.Fatal(err)
	}
	hw, err := adm.ListEndOffsets(kafkatest.Context(tb), topic)
	if err != nil {
		tb.Fatal(err)
	}
	l, _ := lso.Lookup(topic, p)
	h, _ := hw.Lookup(topic, p)
	return l.Offset, h.Offset
}

// Scenario 6: a broker that stops answering in the middle of a commit
// fails the commit within its deadline instead of blocking forever.
func TestCommitHasADeadline(t *testing.T) {
	t.Parallel() // a broker of its own, no failpoint: it mostly waits (discovery, sessions, timeouts)
	c := startBroker(t, map[string]int32{"out": 1})
	ctx := kafkatest.Context(t)
	s := newSink(t, SinkConfig{Client: c.client(), Job: "a", Topic: "out"})
	cp := s.CommitPoint()
	if _, err := cp.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	w := openWriter(t, s, 0, 1)
	write(t, w, "v")
	prepare(t, w, 1)
	wake := make(chan struct{})
	defer close(wake)
	c.Broker.Cluster().ControlKey(int16(kmsg.EndTxn), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.Broker.Cluster().KeepControl() // every EndTxn, the abort's too
		c.Broker.Cluster().SleepControl(func() { <-wake })
		return nil, nil, false
	})
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	start := time.Now()
	err := cp.Commit(cctx, rec("a", 1))
	took := time.Since(start)
	if err == nil {
		t.Fatal("a commit whose EndTxn never got an answer succeeded")
	}
	t.Logf("commit returned after %v: %v", took.Round(time.Millisecond), err)
	if took > 8*time.Second {
		t.Errorf("the commit took %v with a 1s deadline (plus the bounded abort)", took)
	}
}

// Scenario 7: records written while a checkpoint commits are held in
// memory only up to MaxHeldBytes; the writer then blocks (backpressure) and
// nothing is lost or duplicated.
func TestHeldRecordsStayWithinBudget(t *testing.T) {
	const (
		budget  = 4 << 20
		records = 300_000
		size    = 1024
	)
	c := startBroker(t, map[string]int32{"out": 2})
	// 300 MB through the race detector: what is checked is the memory
	// bound, not speed, so a busy machine gets two minutes, not 30 s.
	ctx := kafkatest.ContextTimeout(t, 2*time.Minute)
	s := newSink(t, SinkConfig{Client: c.client(), Job: "a", Topic: "out", MaxHeldBytes: budget})
	cp := s.CommitPoint()
	if _, err := cp.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	fast, slow := openWriter(t, s, 0, 2), openWriter(t, s, 1, 2)
	write(t, fast, "before")
	prepare(t, fast, 1)
	// The other subtask reaches barrier 1 two seconds later (a slow
	// upstream), so checkpoint 1 cannot commit before; meanwhile the
	// fast one gets a 300 MB burst that belongs to the next epoch.
	done := make(chan error, 1)
	go func() {
		time.Sleep(2 * time.Second)
		prepare(t, slow, 1)
		done <- cp.Commit(ctx, rec("a", 1))
	}()
	value := make([]byte, size)
	var peakHeap uint64
	sampled := 0
	for i := range records {
		copy(value, fmt.Sprintf("%09d", i))
		if err := fast.Write(ctx, Record{Value: append([]byte(nil), value...)}); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if i%10000 == 0 {
			peakHeap = max(peakHeap, heapInUse())
			sampled++
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("commit 1: %v", err)
	}
	prepare(t, fast, 2)
	prepare(t, slow, 2)
	if err := cp.Commit(ctx, rec("a", 2)); err != nil {
		t.Fatalf("commit 2: %v", err)
	}
	held := s.MaxHeldBytes()
	t.Logf("max held %d bytes (budget %d), peak heap in use %d MiB over %d samples", held, budget, peakHeap>>20, sampled)
	// A record that would pass the budget waits instead of being held,
	// so the hold ends within one record (its value plus the fixed cost
	// heldRecord.size counts) below the budget, never above it.
	if held <= budget-2*size {
		t.Errorf("held at most %d bytes: the budget of %d was never reached, so the test proved nothing", held, budget)
	}
	if held > budget {
		t.Errorf("held %d bytes, budget %d", held, budget)
	}
	if peakHeap > 200<<20 {
		t.Errorf("heap reached %d MiB for a %d MiB budget: the burst was buffered", peakHeap>>20, budget>>20)
	}
	if n := len(c.ReadCommitted(t, "out")); n != records+1 {
		t.Errorf("read_committed has %d records, want %d", n, records+1)
	}
}

// Scenario 2: the commit record is gone (the job's progress group was
// deleted) while the state directory and the source group show earlier
// progress: the start is refused with what was found and the choices; the
// explicit choice resumes exactly once. (Before, the job started fresh and
// wrote the input a second time.)
func TestLostCommitRecordIsRefused(t *testing.T) {
	c := startBroker(t, map[string]int32{"in": 1, "out": 1})
	dir := t.TempDir()
	c.produceValues(t, "in", 0, time.Time{}, "1", "2", "3")
	if err := runTestJob(t, c, testJob{dir: dir}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admin(t).DeleteGroup(kafkatest.Context(t), DefaultProgressTopic+".a"); err != nil {
		t.Fatal(err)
	}
	c.produceValues(t, "in", 0, time.Time{}, "4")
	err := runTestJob(t, c, testJob{dir: dir})
	if !errors.Is(err, flow.ErrRestoreRefused) {
		t.Fatalf("start without a commit record: %v, want ErrRestoreRefused", err)
	}
	for _, want := range []string{"no record of job", "confirmed checkpoints", `group "onceflow-a" has offsets committed by checkpoint`, "--resume-latest-checkpoint", "--start-fresh"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	if got := c.ReadCommitted(t, "out"); len(got) != 3 {
		t.Fatalf("the refused start wrote output: %q", got)
	}
	if err := runTestJob(t, c, testJob{dir: dir, opts: []flow.Option{flow.ResumeLatestCheckpoint()}}); err != nil {
		t.Fatalf("resume: %v", err)
	}
	wantOutput(t, c, "after resuming", "1", "2", "3", "4")
}

// A job whose first commit fails (a crash before it) restarts from its
// startup modes on its own: the start mark the commit point wrote at its
// start tells the pending first checkpoint from a lost record
// (docs/design.md, "Recovery decisions"). Deleting the progress group
// deletes the mark too: then the pending checkpoint is refused again.
func TestCrashBeforeFirstCommitStartsAgain(t *testing.T) {
	kafkatest.RequireFaults(t) // failpoint.Enable
	c := startBroker(t, map[string]int32{"in": 1, "out": 1})
	dir := t.TempDir()
	c.produceValues(t, "in", 0, time.Time{}, "1", "2", "3")
	if err := failpoint.Enable(failpoint.BeforeEndTxn + "=error@1"); err != nil {
		t.Fatal(err)
	}
	err := runTestJob(t, c, testJob{dir: dir})
	_ = failpoint.Enable("")
	if err == nil {
		t.Fatal("the job with a failing first commit succeeded")
	}
	rec, err := newSink(t, SinkConfig{Client: c.client(), Job: "a"}).CommitPoint().Peek(kafkatest.Context(t))
	if err != nil || rec.Checkpoint != 0 || rec.StateID == "" {
		t.Fatalf("after the failed first commit the record is %+v, %v; want a start mark (checkpoint 0, a state id)", rec, err)
	}
	var log syncBuffer
	if err := runTestJob(t, c, testJob{dir: dir, log: &log, logged: "committed nothing since"}); err != nil {
		t.Fatalf("restart after a failed first commit: %v", err)
	}
	wantOutput(t, c, "after the restart", "1", "2", "3")

	// A lost mark is a lost record: a pending checkpoint is refused.
	if err := failpoint.Enable(failpoint.BeforeEndTxn + "=error@1"); err != nil {
		t.Fatal(err)
	}
	dir2 := t.TempDir()
	err = runTestJob(t, c, testJob{dir: dir2, name: "b"})
	_ = failpoint.Enable("")
	if err == nil {
		t.Fatal("job b with a failing first commit succeeded")
	}
	if _, err := c.Admin(t).DeleteGroup(kafkatest.Context(t), DefaultProgressTopic+".b"); err != nil {
		t.Fatal(err)
	}
	if err := runTestJob(t, c, testJob{dir: dir2, name: "b"}); !errors.Is(err, flow.ErrRestoreRefused) || !strings.Contains(err.Error(), "never confirmed") {
		t.Fatalf("start with a pending checkpoint and its start mark deleted: %v, want ErrRestoreRefused naming the pending checkpoint", err)
	}

	// Another installation's mark (it started and committed nothing) is
	// taken over, with a warning; the fenced installation is then refused
	// on the new one's record.
	if err := failpoint.Enable(failpoint.BeforeEndTxn + "=error@1"); err != nil {
		t.Fatal(err)
	}
	first := t.TempDir()
	err = runTestJob(t, c, testJob{dir: first, name: "c"})
	_ = failpoint.Enable("")
	if err == nil {
		t.Fatal("job c with a failing first commit succeeded")
	}
	var log2 syncBuffer
	if err := runTestJob(t, c, testJob{dir: t.TempDir(), name: "c", log: &log2, logged: "taking over the job from another installation that started it and committed nothing"}); err != nil {
		t.Fatalf("a second installation over another's start mark: %v", err)
	}
	if err := runTestJob(t, c, testJob{dir: first, name: "c"}); !errors.Is(err, flow.ErrRestoreRefused) || !strings.Contains(err.Error(), "another installation") {
		t.Fatalf("the first installation after the takeover: %v, want ErrRestoreRefused", err)
	}
}

// A start mark is fenced like a commit: an instance fenced by a newer one
// cannot write its mark over the newer one's record.
func TestStartMarkIsFenced(t *testing.T) {
	c := startBroker(t, map[string]int32{"out": 1})
	ctx := kafkatest.Context(t)
	old := newSink(t, SinkConfig{Client: c.client(), Job: "a", Topic: "out"}).CommitPoint()
	if _, err := old.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	newer := newSink(t, SinkConfig{Client: c.client(), Job: "a", Topic: "out"}).CommitPoint()
	if _, err := newer.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	mark := flow.CommitRecord{Job: "a", StateID: "old", Incarnation: "old", Time: time.Now()}
	if err := old.(flow.StartMarker).MarkStart(ctx, mark); !errors.Is(err, ErrFenced) {
		t.Fatalf("the fenced instance's start mark: %v, want ErrFenced", err)
	}
	mark.StateID, mark.Incarnation = "new", "new"
	if err := newer.(flow.StartMarker).MarkStart(ctx, mark); err != nil {
		t.Fatal(err)
	}
	if rec, err := newer.Peek(ctx); err != nil || rec.StateID != "new" || rec.Checkpoint != 0 {
		t.Fatalf("Peek = %+v, %v; want the newer instance's mark", rec, err)
	}
}

// Renaming the progress topic or the transactional id in the configuration
// does not lose the commit record: it lives in the job's own group, whose
// name derives from the job name only. Resetting the source group's offsets
// by hand does not move the job either: it restores from its checkpoint.
func TestRecoveryAfterConfigRenamesAndGroupReset(t *testing.T) {
	c := startBroker(t, map[string]int32{"in": 1, "out": 1})
	dir := t.TempDir()
	c.produceValues(t, "in", 0, time.Time{}, "1", "2")
	if err := runTestJob(t, c, testJob{dir: dir}); err != nil {
		t.Fatal(err)
	}
	c.produceValues(t, "in", 0, time.Time{}, "3")
	if err := runTestJob(t, c, testJob{dir: dir, sink: SinkConfig{ProgressTopic: "renamed-progress", TransactionalID: "renamed-txid"}}); err != nil {
		t.Fatalf("after renaming the progress topic and transactional id: %v", err)
	}
	reset := kadm.Offsets{}
	reset.Add(kadm.Offset{Topic: "in", Partition: 0, At: 0, LeaderEpoch: -1})
	if _, err := c.Admin(t).CommitOffsets(kafkatest.Context(t), "onceflow-a", reset); err != nil {
		t.Fatal(err)
	}
	c.produceValues(t, "in", 0, time.Time{}, "4")
	if err := runTestJob(t, c, testJob{dir: dir}); err != nil {
		t.Fatalf("after resetting the source group: %v", err)
	}
	wantOutput(t, c, "after the restarts", "1", "2", "3", "4")
}

// Switching delivery: exactly-once → at-least-once restores the newest
// confirmed checkpoint; at-least-once → exactly-once finds no commit record
// but checkpoints: refused unless the user resumes on purpose.
func TestDeliverySwitches(t *testing.T) {
	c := startBroker(t, map[string]int32{"in": 1, "out": 1})
	dir := t.TempDir()
	c.produceValues(t, "in", 0, time.Time{}, "1", "2")
	if err := runTestJob(t, c, testJob{dir: dir}); err != nil {
		t.Fatal(err)
	}
	c.produceValues(t, "in", 0, time.Time{}, "3")
	if err := runTestJob(t, c, testJob{dir: dir, sink: SinkConfig{Delivery: DeliveryAtLeastOnce}}); err != nil {
		t.Fatalf("exactly-once → at-least-once: %v", err)
	}
	wantOutput(t, c, "after the switch to at-least-once (it restores the last checkpoint)", "1", "2", "3")
	c.produceValues(t, "in", 0, time.Time{}, "4")
	// The commit record names the last exactly-once checkpoint; the
	// at-least-once run's checkpoints are newer: refused, then resumed.
	err := runTestJob(t, c, testJob{dir: dir})
	if !errors.Is(err, flow.ErrRestoreRefused) || !strings.Contains(err.Error(), "ran with another delivery since") {
		t.Fatalf("at-least-once → exactly-once: %v", err)
	}
	if err := runTestJob(t, c, testJob{dir: dir, opts: []flow.Option{flow.ResumeLatestCheckpoint()}}); err != nil {
		t.Fatalf("resume after the switch: %v", err)
	}
	wantOutput(t, c, "after the restarts", "1", "2", "3", "4")
}

// A job that never had exactly-once delivery switches to it: no commit
// record, the state directory has checkpoints: refused, then resumed.
func TestAtLeastOnceToExactlyOnceIsRefused(t *testing.T) {
	c := startBroker(t, map[string]int32{"in": 1, "out": 1})
	dir := t.TempDir()
	c.produceValues(t, "in", 0, time.Time{}, "1", "2")
	if err := runTestJob(t, c, testJob{dir: dir, sink: SinkConfig{Delivery: DeliveryAtLeastOnce}}); err != nil {
		t.Fatal(err)
	}
	c.produceValues(t, "in", 0, time.Time{}, "3")
	err := runTestJob(t, c, testJob{dir: dir})
	if !errors.Is(err, flow.ErrRestoreRefused) || !strings.Contains(err.Error(), "at-least-once has no commit record") {
		t.Fatalf("at-least-once → exactly-once: %v, want a refusal that names the delivery switch", err)
	}
	if err := runTestJob(t, c, testJob{dir: dir, opts: []flow.Option{flow.ResumeLatestCheckpoint()}}); err != nil {
		t.Fatalf("resume: %v", err)
	}
	wantOutput(t, c, "after the restarts", "1", "2", "3")
}

// The state directory was lost (a new one has a new state id) while the
// cluster has the job's commit record: refused, naming the choices; an
// at-least-once job whose state directory was lost is refused too, because
// its source group shows earlier progress.
func TestLostStateDirectoryIsRefused(t *testing.T) {
	c := startBroker(t, map[string]int32{"in": 1, "out": 1})
	c.produceValues(t, "in", 0, time.Time{}, "1", "2")
	if err := runTestJob(t, c, testJob{dir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	err := runTestJob(t, c, testJob{dir: t.TempDir()})
	if !errors.Is(err, flow.ErrRestoreRefused) || !strings.Contains(err.Error(), "another installation") || !strings.Contains(err.Error(), "--from-savepoint") {
		t.Fatalf("start with a new state directory: %v", err)
	}
	if err := runTestJob(t, c, testJob{dir: t.TempDir(), opts: []flow.Option{flow.StartFresh()}}); err != nil {
		t.Fatalf("--start-fresh: %v", err)
	}

	c.produceValues(t, "in", 0, time.Time{}, "3")
	alo := SinkConfig{Delivery: DeliveryAtLeastOnce}
	if err := runTestJob(t, c, testJob{name: "b", dir: t.TempDir(), sink: alo}); err != nil {
		t.Fatal(err)
	}
	err = runTestJob(t, c, testJob{name: "b", dir: t.TempDir(), sink: alo})
	if !errors.Is(err, flow.ErrRestoreRefused) || !strings.Contains(err.Error(), `group "onceflow-b" has offsets committed by checkpoint`) {
		t.Fatalf("at-least-once start with a lost state directory: %v", err)
	}
}

// Scenario 3: a checkpoint whose transaction aborted leaves a manifest that
// no path treats as committed: the job restores the one before, also when
// it is switched to at-least-once (which picks the newest manifest).
// (Before, storage.Latest returned the aborted checkpoint.)
func TestAbortedCheckpointIsNeverRestored(t *testing.T) {
	kafkatest.RequireFaults(t) // failpoint.Enable
	c := startBroker(t, map[string]int32{"in": 3, "out": 3})
	input := produceInput(t, c, perPartition)
	dir := t.TempDir()
	if err := failpoint.Enable(failpoint.BeforeEndTxn + "=error@3"); err != nil {
		t.Fatal(err)
	}
	err := runTestJob(t, c, testJob{dir: dir, pace: true, bounded: true})
	_ = failpoint.Enable("")
	if err == nil || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("run with a failing third commit: %v", err)
	}
	store, err := storage.Open(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	committed, _ := store.List()
	pending, _ := store.Pending()
	t.Logf("confirmed %v, pending %v", committed, pending)
	if len(pending) != 1 || len(committed) == 0 || pending[0] <= committed[len(committed)-1] {
		t.Fatalf("confirmed %v, pending %v: want the failed checkpoint pending above the confirmed ones", committed, pending)
	}
	if m, _, err := store.Latest(storage.LatestOptions{}); err != nil || m.CheckpointID != committed[len(committed)-1] {
		t.Errorf("Latest = %v, %v; want the newest confirmed checkpoint", m, err)
	}
	var log syncBuffer
	if err := runTestJob(t, c, testJob{dir: dir, log: &log, bounded: true}); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if !strings.Contains(log.String(), fmt.Sprintf("checkpoint=%d", committed[len(committed)-1])) {
		t.Errorf("the restart did not restore checkpoint %d; log:\n%s", committed[len(committed)-1], log.String())
	}
	if got := sorted(c.ReadCommitted(t, "out")); !slices.Equal(got, input) {
		t.Errorf("output has %d records, want the %d inputs once", len(got), len(input))
	}
}

// Scenario 4: a second installation of a job with the same name (its own
// state directory) on the same cluster is refused before it fences the
// running one, which goes on committing. (Before, the newcomer fenced the
// running job and read its checkpoint number.)
func TestSameJobNameElsewhereIsRefused(t *testing.T) {
	c := startBroker(t, map[string]int32{"in": 1, "out": 1})
	c.produceValues(t, "in", 0, time.Time{}, values(50, "x")...)
	running := startUnbounded(t, c, t.TempDir(), "a")
	waitCheckpoint(t, running, 2)
	// Bounded, so runTestJob waits for the job's own end: the input is
	// caught up already (by the running job, in the same group), and an
	// unbounded run would be stopped at once, while it recovers.
	var log syncBuffer
	err := runTestJob(t, c, testJob{dir: t.TempDir(), log: &log, bounded: true})
	if !errors.Is(err, flow.ErrRestoreRefused) || !strings.Contains(err.Error(), "another installation of a job with this name") {
		t.Fatalf("second installation: %v; its log:\n%s", err, log.String())
	}
	before := running.Stats().LastCheckpoint
	waitCheckpoint(t, running, before+3)
	if s := running.Stats(); s.Restarts != 0 {
		t.Errorf("the running job restarted %d times: the newcomer fenced it", s.Restarts)
	}
	running.Stop()
	if err := running.Wait(); err != nil {
		t.Fatalf("running job: %v", err)
	}
	if got := sorted(c.ReadCommitted(t, "out")); !slices.Equal(got, values(50, "x")) {
		t.Errorf("output = %d records, want the 50 inputs once", len(got))
	}
}

// A committed checkpoint whose manifest was removed: refused by default;
// with AllowCheckpointFallback the job restores the one before and says
// that the output of the checkpoints after it is written again.
func TestFallbackWithKafkaCommitPoint(t *testing.T) {
	c := startBroker(t, map[string]int32{"in": 1, "out": 1})
	dir := t.TempDir()
	c.produceValues(t, "in", 0, time.Time{}, "1", "2")
	if err := runTestJob(t, c, testJob{dir: dir, retain: 3, pace: true}); err != nil {
		t.Fatal(err)
	}
	store, _ := storage.Open(filepath.Join(dir, "a"))
	ids, _ := store.List()
	if len(ids) < 2 {
		t.Fatalf("checkpoints %v, want at least 2 retained", ids)
	}
	if err := os.Remove(filepath.Join(store.Dir(ids[len(ids)-1]), "_manifest")); err != nil {
		t.Fatal(err)
	}
	err := runTestJob(t, c, testJob{dir: dir})
	if !errors.Is(err, flow.ErrRestoreRefused) || !strings.Contains(err.Error(), "--allow-checkpoint-fallback restores checkpoint") {
		t.Fatalf("start with the committed manifest missing: %v", err)
	}
	var log syncBuffer
	if err := runTestJob(t, c, testJob{dir: dir, log: &log, logged: "written again (duplicates in the output)", opts: []flow.Option{flow.AllowCheckpointFallback()}}); err != nil {
		t.Fatalf("fallback: %v", err)
	}
	if !strings.Contains(log.String(), "written again (duplicates in the output)") {
		t.Errorf("the fallback did not say what it costs; log:\n%s", log.String())
	}
}

// The library rejects what cannot work with an exactly-once Kafka sink,
// before the job runs.
func TestExactlyOnceSinkChecksTheJob(t *testing.T) {
	cl := ClientConfig{Brokers: []string{"127.0.0.1:1"}}
	tests := []struct {
		name string
		sink SinkConfig
		opts []flow.Option
		want string
	}{
		{"at-least-once checkpointing", SinkConfig{}, []flow.Option{flow.CheckpointMode(checkpoint.AtLeastOnce)}, "needs exactly-once checkpointing"},
		{"tolerable failures need a longer timeout", SinkConfig{}, []flow.Option{flow.TolerableCheckpointFailures(1)}, "(1+1) × (interval 1s + min pause 0s + checkpoint timeout 10m0s) = 20m2s"},
		{"min pause counts", SinkConfig{TransactionTimeout: time.Minute}, []flow.Option{flow.CheckpointTimeout(40 * time.Second), flow.MinPauseBetweenCheckpoints(30 * time.Second)}, "min pause 30s"},
		{"any number of failures", SinkConfig{}, []flow.Option{flow.TolerableCheckpointFailures(-1)}, "cannot tolerate any number"},
		{"another job's name", SinkConfig{Job: "other"}, nil, `configured for job "other" but runs in job "a"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.sink
			cfg.Client, cfg.Topic = cl, "out"
			s := newSink(t, cfg)
			env := flow.New(append([]flow.Option{flow.JobName("a"), flow.Checkpointing(time.Second), flow.StateDir(t.TempDir())}, tt.opts...)...)
			flow.To(flow.From(env, newSource(t, SourceConfig{Client: cl, Topics: []string{"in"}}), flow.WithParallelism(1)), s)
			_, err := env.Start(context.Background())
			if !errors.Is(err, flow.ErrInvalidJob) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Start: %v, want ErrInvalidJob containing %q", err, tt.want)
			}
		})
	}
}

// The progress topic exists and the client may not create topics: recovery
// works without trying. Missing and not creatable: an error that says how
// to create it, which a restart cannot fix.
func TestProgressTopicWithoutCreatePermission(t *testing.T) {
	c := startBroker(t, map[string]int32{"out": 1, DefaultProgressTopic: 1})
	deny := c.Broker.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.CreateTopics}, Err: kerr.TopicAuthorizationFailed, Count: -1})
	defer deny.Remove()
	s := newSink(t, SinkConfig{Client: c.client(), Job: "a", Topic: "out"})
	if _, err := s.CommitPoint().Recover(kafkatest.Context(t)); err != nil {
		t.Fatalf("Recover with an existing progress topic: %v", err)
	}
	if n := deny.Hits(); n != 0 {
		t.Errorf("Recover tried to create the existing topic %d times", n)
	}
	s2 := newSink(t, SinkConfig{Client: c.client(), Job: "a", Topic: "out", ProgressTopic: "missing-progress"})
	_, err := s2.CommitPoint().Recover(kafkatest.Context(t))
	if !errors.Is(err, flow.ErrUnrecoverable) || !strings.Contains(err.Error(), "may not create it") || !strings.Contains(err.Error(), "--partitions 1") {
		t.Errorf("Recover with a missing, uncreatable progress topic: %v", err)
	}
}

// Restarting one job does not read the other jobs' commits: recovery is a
// fetch of the job's own group, however many jobs share the cluster.
func BenchmarkRecoverAmong100Jobs(b *testing.B) {
	c := startBroker(b, map[string]int32{"out": 1})
	ctx := context.Background()
	for j := range 100 {
		job := fmt.Sprintf("job%03d", j)
		s := newSink(b, SinkConfig{Client: c.client(), Job: job, Topic: "out"})
		cp := s.CommitPoint()
		if _, err := cp.Recover(ctx); err != nil {
			b.Fatal(err)
		}
		w := openWriter(b, s, 0, 1)
		for id := int64(1); id <= 20; id++ {
			write(b, w, "v")
			prepare(b, w, id)
			if err := cp.Commit(ctx, rec(job, id)); err != nil {
				b.Fatal(err)
			}
		}
		w.Close()
	}
	b.ResetTimer()
	for b.Loop() {
		s, _ := NewSink(SinkConfig{Client: c.client(), Job: "job042", Topic: "out"})
		r, err := s.CommitPoint().Recover(ctx)
		if err != nil || r.Checkpoint != 20 {
			b.Fatalf("Recover = %d, %v", r.Checkpoint, err)
		}
		s.Close()
	}
}

// testJob is a job "a" (or name) in -> out with its state in dir/<name>.
// Unless bounded it reads forever and runTestJob stops it once it caught up
// with the input: a bounded source keeps the end offsets of its first
// start across restores, so input added later needs an unbounded one.
type testJob struct {
	name    string
	dir     string
	sink    SinkConfig
	opts    []flow.Option
	log     *syncBuffer
	retain  int
	bounded bool
	pace    bool // a millisecond per record, so that checkpoints commit mid-input
	// logged, if set, is a line the job must log before it may be
	// stopped: a source group already caught up does not mean the job
	// has finished recovering.
	logged string
}

// runTestJob runs j and returns its error: at once for a refused start.
func runTestJob(t *testing.T, c cluster, j testJob) error {
	t.Helper()
	if j.name == "" {
		j.name = "a"
	}
	src := newSource(t, SourceConfig{Client: c.client(), Topics: []string{"in"}, Bounded: j.bounded, MaxPollRecords: 10})
	cfg := j.sink
	cfg.Client, cfg.Topic, cfg.OffsetsOf = c.client(), "out", []*Source{src}
	sink := newSink(t, cfg)
	log := slog.New(slog.DiscardHandler)
	if j.log != nil {
		log = slog.New(slog.NewTextHandler(j.log, nil))
	}
	opts := []flow.Option{flow.JobName(j.name), flow.Checkpointing(30 * time.Millisecond), flow.StateDir(j.dir), flow.Logger(log),
		flow.Restart(restart.Config{Strategy: restart.None})}
	if j.retain > 0 {
		opts = append(opts, flow.RetainedCheckpoints(j.retain))
	}
	env := flow.New(append(opts, j.opts...)...)
	in := flow.From(env, src, flow.UID("in"))
	if j.pace {
		in = flow.Map(in, func(r Record) Record { time.Sleep(time.Millisecond); return r })
	}
	flow.To(in, sink, flow.UID("out"))
	job, err := env.Start(kafkatest.Context(t))
	if err != nil {
		return err
	}
	if j.bounded {
		return job.Wait()
	}
	adm, ctx := c.Admin(t), kafkatest.Context(t)
	for deadline := time.Now().Add(20 * time.Second); ; {
		select {
		case <-job.Done():
			return job.Wait()
		case <-time.After(20 * time.Millisecond):
		}
		// Only a running job can have caught up: the group may be caught
		// up already (by an earlier run, or another installation), and
		// stopping a job that still recovers hides how recovery ended.
		if job.Stats().Running && kafkatest.CaughtUp(ctx, adm, "onceflow-"+j.name, "in") && (j.logged == "" || strings.Contains(j.log.String(), j.logged)) {
			break
		}
		if time.Now().After(deadline) {
			job.Stop()
			_ = job.Wait()
			t.Fatalf("job %s did not catch up with its input within 20s", j.name)
		}
	}
	job.Stop()
	return job.Wait()
}

func startUnbounded(t *testing.T, c cluster, dir, name string) *flow.Job {
	t.Helper()
	src := newSource(t, SourceConfig{Client: c.client(), Topics: []string{"in"}})
	sink := newSink(t, SinkConfig{Client: c.client(), Topic: "out", OffsetsOf: []*Source{src}})
	env := flow.New(flow.JobName(name), flow.Checkpointing(30*time.Millisecond), flow.StateDir(dir), flow.Logger(slog.New(slog.DiscardHandler)),
		flow.Restart(restart.Config{Strategy: restart.FixedDelay, Attempts: 3, Delay: 10 * time.Millisecond}))
	flow.To(flow.From(env, src, flow.UID("in")), sink, flow.UID("out"))
	j, err := env.Start(kafkatest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Stop(); _ = j.Wait() })
	return j
}

func waitCheckpoint(t *testing.T, j *flow.Job, n int64) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); j.Stats().LastCheckpoint < n; {
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint %d did not commit within 15s (stats %+v)", n, j.Stats())
		}
		select {
		case <-j.Done():
			t.Fatalf("the job ended before checkpoint %d: %v", n, j.Wait())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func sorted(s []string) []string { slices.Sort(s); return s }

func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// A source's parked partition of a deleted topic keeps its position in the
// checkpoint, but its offset cannot be committed to the group: it is left
// out (source offsets are for monitoring) instead of failing every commit.
// The commit record's partition must exist.
func TestTxnOffsetsSkipMissingPartitions(t *testing.T) {
	c := startBroker(t, map[string]int32{"in": 1, "out": 1})
	ctx := kafkatest.Context(t)
	s := newSink(t, SinkConfig{Client: c.client(), Job: "a", Topic: "out"})
	if _, err := s.CommitPoint().Recover(ctx); err != nil {
		t.Fatal(err)
	}
	offs := map[split]offsetAt{{"in", 0}: {5, "m"}, {"gone", 0}: {7, "m"}, {"in", 3}: {1, "m"}}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := txnCommitOffsets(ctx, s.sess.cl, s.sess.txid, "g", offs, false); err != nil {
		t.Errorf("source offsets with a missing topic and partition: %v, want them left out", err)
	}
	if err := txnCommitOffsets(ctx, s.sess.cl, s.sess.txid, "g", offs, true); err == nil || !strings.Contains(err.Error(), "gone") {
		t.Errorf("required offsets with a missing topic: %v, want an error naming it", err)
	}
}

// wantOutput fails the test unless read_committed sees exactly want (in
// any order) in topic "out"; what names the moment.
func wantOutput(t *testing.T, c cluster, what string, want ...string) {
	t.Helper()
	kafkatest.CheckExactlyOnce(t, what+": output", c.ReadCommitted(t, "out"), want)
}
