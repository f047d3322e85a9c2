package scaleout

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
)

func testInstance(t *testing.T, stages int, opts ...func(*Config)) *Instance {
	t.Helper()
	cfg := Config{Job: "j", Instance: "a", StateDir: t.TempDir(), Checkpoints: t.TempDir()}
	for range stages {
		cfg.Stages = append(cfg.Stages, Stage{Topics: []string{"t" + string(rune('0'+len(cfg.Stages)))}, Build: func(*Task) (*flow.Env, error) { return nil, nil }})
	}
	for _, o := range opts {
		o(&cfg)
	}
	in, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// A job savepoint of a job whose checkpoints are in object storage
// needs a savepoint place: without one, the savepoint and a restore are
// refused, saying what to set. So is a savepoint before the instance
// joined, and a URL where the place is a directory.
func TestJobSavepointRefusals(t *testing.T) {
	s3 := func(c *Config) { c.CheckpointStorage = flow.StopTimeout(time.Second) } // any option stands for S3 here
	_, err := testInstance(t, 1, s3).Savepoint(context.Background(), "", true)
	if err == nil || !strings.Contains(err.Error(), "set Config.SavepointPlace") {
		t.Errorf("savepoint with object-storage checkpoints and no savepoint place: %v; want it refused, naming Config.SavepointPlace", err)
	}
	_, _, err = testInstance(t, 1, s3, func(c *Config) { c.FromSavepoint = "s3://b/sp" }).loadRestore(context.Background())
	if !errors.Is(err, flow.ErrRestoreRefused) || !strings.Contains(err.Error(), "set Config.SavepointPlace") {
		t.Errorf("restore with object-storage checkpoints and no savepoint place: %v; want it refused, naming Config.SavepointPlace", err)
	}
	withPlace := testInstance(t, 1, s3, func(c *Config) { c.SavepointPlace = DirPlace(t.TempDir()) })
	if withPlace.place == nil {
		t.Error("an instance given a savepoint place has none")
	}
	_, err = testInstance(t, 1).Savepoint(context.Background(), "", false)
	if err == nil || !strings.Contains(err.Error(), "not joined") {
		t.Errorf("savepoint before joining: %v", err)
	}
	if _, err := DirPlace(t.TempDir()).Locate("s3://bucket/sp"); err == nil || !strings.Contains(err.Error(), "name a directory") {
		t.Errorf("an s3:// savepoint of a job whose checkpoints are a directory: %v", err)
	}
	_, err = LoadJobSavepoint(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), SavepointManifestName) {
		t.Errorf("a directory without a job savepoint: %v", err)
	}
}

// A task that takes no savepoint within the bound fails the job
// savepoint, naming it and only it.
func TestJobSavepointNamesMissingTasks(t *testing.T) {
	in := testInstance(t, 1)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "tasks"), 0o755); err != nil {
		t.Fatal(err)
	}
	want := []kafka.Partition{{Topic: "t0", Partition: 0}, {Topic: "t0", Partition: 1}, {Topic: "t0", Partition: 2}}
	for _, p := range []int32{0, 2} {
		name := TaskName("j", kafka.Partition{Topic: "t0", Partition: p})
		if err := writeJSONFile(resultPath(dir, name), spResult{Task: name, Topic: "t0", Partition: p}); err != nil {
			t.Fatal(err)
		}
	}
	req := &spRequest{ID: "stop-a-1", Dir: dir}
	m := &JobSavepoint{}
	err := in.awaitResults(context.Background(), req, want, 300*time.Millisecond, m, nil)
	if err == nil || !strings.Contains(err.Error(), "1 of 3 tasks took no savepoint") || !strings.Contains(err.Error(), "j-t0-1") ||
		strings.Contains(err.Error(), "j-t0-0") || strings.Contains(err.Error(), "j-t0-2") {
		t.Fatalf("awaitResults: %v; want it to name j-t0-1 alone", err)
	}
	if err := writeJSONFile(resultPath(dir, "j-t0-1"), spResult{Task: "j-t0-1", Topic: "t0", Partition: 1}); err != nil {
		t.Fatal(err)
	}
	if err := in.awaitResults(context.Background(), req, want, time.Second, m, nil); err != nil || len(m.Tasks) != 3 {
		t.Fatalf("awaitResults with every task: %v, %d tasks", err, len(m.Tasks))
	}
}

// A task's log prints checkpoint ids as epoch:sequence.
func TestTaskLogReadableIDs(t *testing.T) {
	var b strings.Builder
	log := withReadableIDs(slog.New(slog.NewTextHandler(&b, nil))).With("first_checkpoint", int64(3<<32))
	log.Info("checkpoint completed", "checkpoint", int64(35<<32|18), "small", int64(35<<32|18), "restored_checkpoint", int64(7))
	got := b.String()
	for _, want := range []string{"first_checkpoint=3:0", "checkpoint=35:18", "small=150323855378", "restored_checkpoint=7"} {
		if !strings.Contains(got, want) {
			t.Errorf("log line %q lacks %q", got, want)
		}
	}
}

// A stage that drains a backlog (its committed offsets grow) is waited
// for past the bound, and the request's deadline moves with it.
func TestJobSavepointWaitsForADrainingStage(t *testing.T) {
	in := testInstance(t, 2)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "tasks"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := kafka.Partition{Topic: "t1", Partition: 0}
	name := TaskName("j", p)
	start := time.Now()
	req := &spRequest{ID: "stop-a-2", Job: "j", Kind: "stop", Dir: dir, Phase: 1, State: "running", Deadline: start.Add(time.Second)}
	var offset int64
	progress := func() int64 {
		offset += 10
		if time.Since(start) > 1500*time.Millisecond {
			_ = writeJSONFile(resultPath(dir, name), spResult{Task: name, Topic: "t1", Stage: 1})
		}
		return offset
	}
	m := &JobSavepoint{}
	if err := in.awaitResults(context.Background(), req, []kafka.Partition{p}, 600*time.Millisecond, m, progress); err != nil {
		t.Fatalf("a draining stage: %v", err)
	}
	if len(m.Tasks) != 1 || time.Since(start) < 1500*time.Millisecond {
		t.Fatalf("%d tasks after %v", len(m.Tasks), time.Since(start))
	}
	stored, err := in.readRequest()
	if err != nil || stored == nil || !stored.Deadline.After(start.Add(time.Second)) {
		t.Fatalf("the request's deadline did not move: %+v, %v", stored, err)
	}
}

// A pause (a running savepoint of several stages) keeps stopped only the
// stage that waits for its reader and the stages still to take theirs:
// at phase p, stages before p-1 run again; once it ended, all do. A
// task of a stopped stage that has its savepoint is not started by an
// assignment; one of a stage that runs again is.
func TestPauseKeepsOnlyTheWaitingStagesStopped(t *testing.T) {
	in := testInstance(t, 3)
	now := time.Now()
	dir := t.TempDir()
	r := &spRequest{ID: "savepoint-a-1", Job: "j", Kind: "savepoint", Pause: true, Dir: dir, State: "running", Deadline: now.Add(time.Minute)}
	for phase, want := range []int{0, 0, 1} {
		r.Phase = phase
		if got := r.pausedFrom(now, 3); got != want {
			t.Errorf("phase %d: stages from %d stay stopped, want from %d", phase, got, want)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "tasks"), 0o755); err != nil {
		t.Fatal(err)
	}
	for stage := range 3 {
		p := kafka.Partition{Topic: "t" + string(rune('0'+stage)), Partition: 0}
		if err := writeJSONFile(resultPath(dir, TaskName("j", p)), spResult{Task: TaskName("j", p), Stage: stage}); err != nil {
			t.Fatal(err)
		}
	}
	r.Phase = 2
	if err := in.writeRequest(r); err != nil {
		t.Fatal(err)
	}
	for stage, blocked := range []bool{false, true, true} {
		name := TaskName("j", kafka.Partition{Topic: "t" + string(rune('0'+stage)), Partition: 0})
		if got := in.blockedBySavepoint(name, stage) != ""; got != blocked {
			t.Errorf("phase 2: a task of stage %d is blocked: %v, want %v", stage, got, blocked)
		}
	}
	r.State = "completed"
	if err := in.writeRequest(r); err != nil {
		t.Fatal(err)
	}
	if r.pausedFrom(now, 3) != 3 {
		t.Errorf("a completed pause keeps stages from %d stopped, want none", r.pausedFrom(now, 3))
	}
	for stage := range 3 {
		name := TaskName("j", kafka.Partition{Topic: "t" + string(rune('0'+stage)), Partition: 0})
		if id := in.blockedBySavepoint(name, stage); id != "" {
			t.Errorf("after the pause completed, a task of stage %d is blocked by %s", stage, id)
		}
	}
}
