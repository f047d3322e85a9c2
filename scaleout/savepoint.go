package scaleout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
)

// Job savepoints (docs/design.md, "Scale-out", "Savepoints of the whole
// job"). The instances share nothing but Kafka and where their
// checkpoints are, so that place (a SavepointPlace: the checkpoint
// directory, or object storage) carries the request: the instance asked
// for a savepoint (the coordinator) writes <Root>/<Job>.savepoints/
// request.json; every instance reads it twice a second and savepoints
// its tasks of the request's stage into <dir>/<task> (in object storage:
// into a local directory, then uploaded), then writes
// <dir>/tasks/<task>.json. The coordinator waits for every task of the
// stage (the partitions of its topics), bounded, and at the end writes
// <dir>/job-savepoint.json, the job savepoint's manifest, which a start
// with Config.FromSavepoint restores at any instance count.

// SavepointManifestName is the file of a job savepoint that lists its
// tasks' savepoints.
const SavepointManifestName = "job-savepoint.json"

// JobSavepoint is a job savepoint's manifest: every task of every stage,
// and the partition counts its tasks' state is split by.
type JobSavepoint struct {
	Version int       `json:"version"`
	Job     string    `json:"job"`
	Kind    string    `json:"kind"` // savepoint, stop
	Created time.Time `json:"created"`
	// Stages are the job's stages: their topics and partition counts.
	Stages []SavepointStage `json:"stages"`
	// Tasks are the tasks' savepoints, by stage, topic and partition.
	Tasks []SavepointTask `json:"tasks"`
	// Dir is the location the manifest was read from (not stored): a
	// directory, or a URL such as s3://bucket/key.
	Dir string `json:"-"`
}

// SavepointStage is a stage of a job savepoint.
type SavepointStage struct {
	Topics     []string       `json:"topics"`
	Partitions map[string]int `json:"partitions"`
}

// SavepointTask is one task's savepoint in a job savepoint.
type SavepointTask struct {
	Task      string `json:"task"`
	Stage     int    `json:"stage"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Dir is the task's savepoint, relative to the job savepoint.
	Dir string `json:"dir"`
	// Checkpoint is the id of the checkpoint the savepoint was taken as
	// (flow.CheckpointText prints it).
	Checkpoint int64 `json:"checkpoint"`
	// Instance took it.
	Instance string `json:"instance"`
}

// spRequest is the job savepoint in progress (request.json).
type spRequest struct {
	ID   string `json:"id"`
	Job  string `json:"job"`
	Kind string `json:"kind"` // savepoint, stop
	Dir  string `json:"dir"`
	// Phase is the stage whose tasks take their savepoints now (stop
	// and pause: one stage after the other); -1: every stage at once.
	Phase int `json:"phase"`
	// Pause says the request is a savepoint of a running job of several
	// stages: the stages stop with their savepoints one after the other,
	// as in a stop, and then run on (pausedStages).
	Pause bool `json:"pause,omitempty"`
	// Drain is, for a stop's phase after the first, the offset each
	// partition of the stage's topic must be read to before the task
	// stops: the end of the repartition topic once the stage before
	// stopped.
	Drain    []spDrain `json:"drain,omitempty"`
	State    string    `json:"state"` // running, completed, failed
	Failure  string    `json:"failure,omitempty"`
	Deadline time.Time `json:"deadline"`
	By       string    `json:"by"`
}

// spDrain is where a stopping stage's task reads to before it stops.
type spDrain struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// drainTo is the offset the task of p reads to before it stops, 0 for
// none.
func (r *spRequest) drainTo(p kafka.Partition) int64 {
	for _, d := range r.Drain {
		if d.Topic == p.Topic && d.Partition == p.Partition {
			return d.Offset
		}
	}
	return 0
}

func (r *spRequest) active(now time.Time) bool {
	return r != nil && r.State == "running" && now.Before(r.Deadline)
}

// staged says the request's stages take their savepoints one after the
// other, each stopping with it: a stop, and a pause.
func (r *spRequest) staged() bool { return r.Kind == "stop" || r.Pause }

// pausedFrom is, for a pause in progress, the first stage whose tasks
// stay stopped: at phase p the stage p-1 waits for stage p to read what
// it wrote, and the stages before it run on (their output lands in a
// repartition topic whose reader has taken its savepoint and is stopped).
// Once the pause ended (completed, failed or past its deadline) every
// stage runs: len(stages).
func (r *spRequest) pausedFrom(now time.Time, stages int) int {
	if !r.active(now) {
		return stages
	}
	return max(r.Phase-1, 0)
}

// spResult is what an instance writes when a task took its savepoint
// (<dir>/tasks/<task>.json).
type spResult = SavepointTask

// controlDir is where the requests are: in the savepoint place, next to
// the tasks' checkpoints (which are named <job>-<topic>-<n>).
func (in *Instance) controlDir() string {
	return in.place.Join(in.place.Root(), in.cfg.Job+".savepoints")
}

// errNoPlace says why a job savepoint cannot be taken or restored: the
// instance has no savepoint place.
func (in *Instance) errNoPlace(what string) error {
	return fmt.Errorf("scale-out: %s needs a place every instance reaches for the savepoint's files, and this job keeps its checkpoints in %s (Config.CheckpointStorage) without one: set Config.SavepointPlace (s3.SavepointPlace of package checkpoint/s3, for the same bucket and prefix; a job file's runner does), or stop the instances instead (each task stops with a final checkpoint, and a later start at any instance count resumes them)", what, in.cfg.Checkpoints)
}

func (in *Instance) readRequest() (*spRequest, error) {
	loc := in.place.Join(in.controlDir(), "request.json")
	b, err := in.place.ReadFile(loc)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r spRequest
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("savepoint request %s: %w", loc, err)
	}
	return &r, nil
}

// writeJSON writes v as loc of the place, atomically.
func (in *Instance) writeJSON(loc string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return in.place.WriteFile(loc, append(b, '\n'))
}

// writeJSONFile writes v to path atomically (a temporary file renamed).
func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.tmp-%d", path, time.Now().UnixNano())
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

func (in *Instance) writeRequest(r *spRequest) error {
	return in.writeJSON(in.place.Join(in.controlDir(), "request.json"), r)
}

// resultPath is a task's result in the job savepoint dir of a directory
// place.
func resultPath(dir, task string) string { return filepath.Join(dir, "tasks", task+".json") }

func (in *Instance) resultLoc(dir, task string) string {
	return in.place.Join(dir, "tasks", task+".json")
}

func (in *Instance) readResult(dir, task string) (*spResult, bool) {
	b, err := in.place.ReadFile(in.resultLoc(dir, task))
	if err != nil {
		return nil, false
	}
	var r spResult
	if json.Unmarshal(b, &r) != nil {
		return nil, false
	}
	return &r, true
}

// Savepoint takes a savepoint of the whole job, every task of every
// stage whichever instance runs it, into dir (default
// <Checkpoints>/<Job>.savepoints/savepoint-<time>; a directory every
// instance reaches, or with checkpoints in object storage a location
// there such as s3://bucket/key), and returns dir once its manifest is
// written. With
// stop, the job stops with it: the stages stop one after the other, each
// after it read its repartition topic to the end the stage before left,
// so nothing sits between them; then every instance's Run returns nil.
// Without stop, a job of one stage takes its tasks' savepoints at once,
// running. A job of several stages pauses instead: its stages stop with
// their savepoints one after the other, as in a stop, so that a record
// in flight in a repartition topic is in exactly one stage's savepoint
// (the writer's input offsets, or the reader's state), and each stage
// runs again from its savepoint (its newest checkpoint) as soon as the
// stage reading its output has taken its own; the last ones when the
// savepoint completes. A task that does not take its savepoint within
// Config.SavepointTimeout (it is moving between instances, or its
// instance is gone) fails the savepoint naming it; a failed stop resumes
// the tasks that had stopped.
func (in *Instance) Savepoint(ctx context.Context, dir string, stop bool) (string, error) {
	cfg := in.cfg
	kind := "savepoint"
	if stop {
		kind = "stop"
	}
	switch {
	case in.place == nil:
		return "", in.errNoPlace("a savepoint of the whole job")
	case in.membership() == nil:
		return "", errors.New("scale-out: the instance has not joined its group yet; try again")
	}
	now := time.Now()
	if cur, err := in.readRequest(); err != nil {
		return "", err
	} else if cur.active(now) {
		return "", fmt.Errorf("scale-out: job savepoint %s (%s, asked at instance %s, into %s) is in progress: wait for it (until %s at the latest)", cur.ID, cur.Kind, cur.By, cur.Dir, cur.Deadline.Format(time.RFC3339))
	}
	if dir == "" {
		dir = in.place.Join(in.controlDir(), "savepoint-"+now.UTC().Format("20060102T150405.000Z"))
	}
	dir, err := in.place.Locate(dir)
	if err != nil {
		return "", fmt.Errorf("scale-out: savepoint: %w", err)
	}
	if ents, err := in.place.List(dir); err != nil {
		return "", fmt.Errorf("scale-out: savepoint location %s: %w", dir, err)
	} else if len(ents) > 0 {
		return "", fmt.Errorf("scale-out: savepoint location %s is not empty: name a new one", dir)
	}
	if err := in.place.MakeDir(in.place.Join(dir, "tasks")); err != nil {
		return "", fmt.Errorf("scale-out: savepoint location: %w", err)
	}
	// The tasks of each stage: every partition of its topics.
	cl, err := cfg.Client.NewClient()
	if err != nil {
		return "", err
	}
	defer cl.Close()
	manifest := &JobSavepoint{Version: 1, Job: cfg.Job, Kind: kind, Created: now.UTC()}
	expect := make([][]kafka.Partition, len(cfg.Stages))
	for i, s := range cfg.Stages {
		st := SavepointStage{Topics: s.Topics, Partitions: map[string]int{}}
		for _, topic := range s.Topics {
			n, err := partitionsOf(ctx, cl, topic)
			if err != nil {
				return "", fmt.Errorf("scale-out: savepoint: the partition count of %s: %w", topic, err)
			}
			st.Partitions[topic] = n
			for p := range n {
				expect[i] = append(expect[i], kafka.Partition{Topic: topic, Partition: int32(p)})
			}
		}
		manifest.Stages = append(manifest.Stages, st)
	}
	bound := cfg.SavepointTimeout
	// A running savepoint of several stages pauses them one after the
	// other (docs/design.md, "Savepoints of the whole job").
	pause := !stop && len(cfg.Stages) > 1
	staged := stop || pause
	phases := 1
	if staged {
		phases = len(cfg.Stages)
	}
	req := &spRequest{ID: fmt.Sprintf("%s-%s-%d", kind, cfg.Instance, now.UnixMilli()), Job: cfg.Job, Kind: kind, Dir: dir, Phase: -1,
		Pause: pause, State: "running", Deadline: now.Add(time.Duration(phases)*bound + 30*time.Second), By: cfg.Instance}
	if staged {
		req.Phase = 0
	}
	if err := in.writeRequest(req); err != nil {
		return "", fmt.Errorf("scale-out: write the savepoint request: %w", err)
	}
	in.log.Info("job savepoint requested", "request", req.ID, "kind", kind, "dir", dir, "stages", len(cfg.Stages))
	fail := func(err error) (string, error) {
		req.State, req.Failure = "failed", err.Error()
		if werr := in.writeRequest(req); werr != nil {
			in.log.Error("could not mark the failed savepoint request; the instances give it up at its deadline", "request", req.ID, "err", werr)
		}
		in.log.Error("job savepoint failed", "request", req.ID, "err", err)
		return "", err
	}
	adm := kadm.NewClient(cl)
	for phase := range phases {
		var want []kafka.Partition
		if staged {
			want = expect[phase]
		} else {
			for _, e := range expect {
				want = append(want, e...)
			}
		}
		var progress func() int64
		if staged && phase > 0 {
			progress = func() int64 { return committedSum(ctx, adm, cfg.Group, req.Drain) }
		}
		if err := in.awaitResults(ctx, req, want, bound, manifest, progress); err != nil {
			return fail(err)
		}
		if staged && phase > 0 {
			// The stage stopped past the end it was to read to: its
			// offsets, committed with its savepoints, say so.
			// A task whose database is its commit point commits its
			// offsets to the group just after (Task.CommitGroupOffsets):
			// they may take a moment.
			err := checkDrained(ctx, adm, cfg.Group, req.Drain)
			for wait := time.Now().Add(10 * time.Second); err != nil && time.Now().Before(wait); {
				time.Sleep(250 * time.Millisecond)
				err = checkDrained(ctx, adm, cfg.Group, req.Drain)
			}
			if err != nil {
				return fail(err)
			}
		}
		if !staged || phase+1 == phases {
			break
		}
		// The stage before stopped: what it wrote is committed, and the
		// next stage reads its repartition topic to that end.
		topic := cfg.Stages[phase+1].Topics[0]
		ends, err := adm.ListCommittedOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			return fail(fmt.Errorf("scale-out: savepoint: the end offsets of the repartition topic %s: %w", topic, err))
		}
		req.Drain = drainsOf(ends)
		req.Phase = phase + 1
		if err := in.writeRequest(req); err != nil {
			return fail(fmt.Errorf("scale-out: write the savepoint request: %w", err))
		}
		if pause {
			in.log.Info("job savepoint: a stage took its savepoint; the next one reads its repartition topic to the end and takes its own, and the stage before the one that just took it runs again", "request", req.ID, "stage", phase+1, "topic", topic, "resumes", phase-1)
		} else {
			in.log.Info("job savepoint: a stage stopped; the next one reads its repartition topic to the end and stops", "request", req.ID, "stage", phase+1, "topic", topic)
		}
	}
	slices.SortFunc(manifest.Tasks, func(a, b SavepointTask) int {
		if a.Stage != b.Stage {
			return a.Stage - b.Stage
		}
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	if err := in.writeJSON(in.place.Join(dir, SavepointManifestName), manifest); err != nil {
		return fail(fmt.Errorf("scale-out: write the job savepoint's manifest: %w", err))
	}
	req.State = "completed"
	if err := in.writeRequest(req); err != nil {
		return fail(fmt.Errorf("scale-out: write the savepoint request: %w", err))
	}
	in.log.Info("job savepoint completed", "request", req.ID, "dir", dir, "tasks", len(manifest.Tasks), "stop", stop, "paused", pause)
	return dir, nil
}

// awaitResults waits until every task of want wrote its result, at most
// bound, and adds them to m. While progress (when not nil: the stage's
// committed offsets, summed) grows, the stage is draining a backlog: the
// bound starts again, and so does the request's deadline.
func (in *Instance) awaitResults(ctx context.Context, req *spRequest, want []kafka.Partition, bound time.Duration, m *JobSavepoint, progress func() int64) error {
	deadline := time.Now().Add(bound)
	var last int64 = -1
	nextLook := time.Now()
	// A task's result, once written, stays: each look reads the missing
	// ones only (a request each, in object storage).
	have := map[string]SavepointTask{}
	for {
		var missing []string
		var got []SavepointTask
		for _, p := range want {
			name := TaskName(in.cfg.Job, p)
			r, ok := have[name]
			if !ok {
				rp, found := in.readResult(req.Dir, name)
				if !found {
					missing = append(missing, name)
					continue
				}
				r, have[name] = *rp, *rp
			}
			got = append(got, r)
		}
		if len(missing) == 0 {
			m.Tasks = append(m.Tasks, got...)
			return nil
		}
		if progress != nil && time.Now().After(nextLook) {
			nextLook = time.Now().Add(min(2*time.Second, bound/3))
			if p := progress(); p > last {
				if last >= 0 {
					deadline = time.Now().Add(bound)
					if d := deadline.Add(30 * time.Second); d.After(req.Deadline) {
						req.Deadline = d
						if err := in.writeRequest(req); err != nil {
							return fmt.Errorf("scale-out: write the savepoint request: %w", err)
						}
					}
				}
				last = p
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("scale-out: savepoint %s: %d of %d tasks took no savepoint within %v: %s. They are moving between instances (a rebalance), restarting, or their instance is gone or runs an older onceflow; check `onceflow status JOB.yaml` and the instances' /healthz, then try again",
				req.ID, len(missing), len(want), bound, strings.Join(missing, ", "))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("scale-out: savepoint %s: %w (tasks still to take theirs: %s)", req.ID, ctx.Err(), strings.Join(missing, ", "))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// committedSum is the sum of the group's committed offsets of the
// partitions of drain, -1 when they cannot be read.
func committedSum(ctx context.Context, adm *kadm.Client, group string, drain []spDrain) int64 {
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return -1
	}
	var sum int64
	for _, d := range drain {
		if o, ok := offs.Lookup(d.Topic, d.Partition); ok && o.At > 0 {
			sum += o.At
		}
	}
	return sum
}

// checkDrained checks that the group's committed offsets (the stopped
// tasks' savepoints committed them) reached what the stage was to read.
func checkDrained(ctx context.Context, adm *kadm.Client, group string, drain []spDrain) error {
	offs, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		return fmt.Errorf("scale-out: savepoint: the committed offsets of group %s: %w", group, err)
	}
	var short []string
	for _, d := range drain {
		got := int64(-1)
		if o, ok := offs.Lookup(d.Topic, d.Partition); ok {
			got = o.At
		}
		if d.Offset > 0 && got < d.Offset {
			short = append(short, fmt.Sprintf("%s at %d of %d", kafka.Partition{Topic: d.Topic, Partition: d.Partition}, got, d.Offset))
		}
	}
	if len(short) > 0 {
		return fmt.Errorf("scale-out: savepoint: tasks stopped before reading their repartition topic to the end the stage before them left (%s): the savepoint would lose those records, so the stop is given up and the stopped tasks run again from their own checkpoints; please report this with the instances' logs", strings.Join(short, ", "))
	}
	return nil
}

// watchSavepoints follows the savepoint requests until quit: it takes
// the savepoints of the instance's tasks a running request asks for,
// resumes the tasks a failed stop had stopped, and ends the instance
// when a stop it took part in completed.
func (in *Instance) watchSavepoints(quit <-chan struct{}) {
	if in.place == nil {
		return
	}
	tk := time.NewTicker(500 * time.Millisecond)
	defer tk.Stop()
	for n := 0; ; n++ {
		in.pollSavepoints()
		if n%int(ReportInterval/(500*time.Millisecond)) == 0 {
			in.writeReport(false) // for onceflow status (report.go)
		}
		select {
		case <-quit:
			return
		case <-tk.C:
		}
	}
}

func (in *Instance) pollSavepoints() {
	if in.place == nil {
		return
	}
	r, err := in.readRequest()
	if err != nil {
		in.log.Warn("cannot read the savepoint request", "err", err)
		return
	}
	if r != nil && r.Job != in.cfg.Job {
		r = nil
	}
	in.resumeEndedPauses(r)
	if r == nil {
		return
	}
	now := time.Now()
	in.mu.Lock()
	seen := in.spSeen[r.ID]
	if r.active(now) {
		in.spSeen[r.ID] = true
		if r.Pause {
			in.spPauses[r.ID] = r
		}
	}
	in.mu.Unlock()
	switch {
	case r.active(now):
		if r.Pause {
			// The stages before the one that waits for its reader run
			// again.
			in.resumeStopped(r, r.pausedFrom(now, len(in.cfg.Stages)))
		}
		for _, t := range in.snapshot() {
			if r.Phase >= 0 && t.Stage != r.Phase {
				continue
			}
			key := r.ID + "/" + t.Name
			in.mu.Lock()
			busy := in.spWorking[key]
			in.spWorking[key] = true
			in.mu.Unlock()
			if busy {
				continue
			}
			if _, done := in.readResult(r.Dir, t.Name); done {
				continue
			}
			go in.taskSavepoint(r, t, key)
		}
	case !seen:
	case r.Pause: // ended: completed, failed, or no word by its deadline
		in.resumeStopped(r, len(in.cfg.Stages))
	case r.Kind != "stop":
	case r.State == "completed":
		in.stopOnce.Do(func() {
			in.mu.Lock()
			in.closing = true // no task starts after the savepoint
			in.mu.Unlock()
			in.log.Info("the job stopped with a savepoint; the instance stops", "request", r.ID, "savepoint", r.Dir)
			close(in.spStopped)
		})
	default: // a stop that failed, or whose coordinator gave no word by its deadline
		in.resumeStopped(r, len(in.cfg.Stages))
	}
}

// blockedBySavepoint says whether the task named name, of stage, must
// not start (in assigned, under mu): a stop in progress, or one this
// instance took part in that completed, has the task's savepoint; the
// task would go on past it. So does a pause in progress whose stage
// stays stopped. The request is read afresh: an instance that left after
// the stop completed hands its partitions to the others.
func (in *Instance) blockedBySavepoint(name string, stage int) (request string) {
	if in.place == nil {
		return ""
	}
	r, err := in.readRequest()
	if err != nil || r == nil || r.Job != in.cfg.Job || !r.staged() {
		return ""
	}
	now := time.Now()
	switch {
	case r.Pause:
		if stage < r.pausedFrom(now, len(in.cfg.Stages)) {
			return ""
		}
	case !r.active(now) && !(r.State == "completed" && in.spSeen[r.ID]):
		return ""
	}
	if _, done := in.readResult(r.Dir, name); !done {
		return ""
	}
	in.spSeen[r.ID] = true // so its failure starts the task (resumeStopped)
	return r.ID
}

// resumeEndedPauses starts again the tasks a pause stopped that another
// request cur has replaced since (nil: none is there): the pause ended,
// and a task whose job was still winding down when this instance last
// saw it may not have been started again yet.
func (in *Instance) resumeEndedPauses(cur *spRequest) {
	in.mu.Lock()
	var ended []*spRequest
	for id, r := range in.spPauses {
		if cur != nil && id == cur.ID {
			continue
		}
		used := false
		for _, t := range in.tasks {
			t.mu.Lock()
			used = used || t.savepointed == id
			t.mu.Unlock()
		}
		for _, sid := range in.spSkipped {
			used = used || sid == id
		}
		if !used {
			delete(in.spPauses, id)
			continue
		}
		e := *r
		e.State = "ended"
		ended = append(ended, &e)
	}
	in.mu.Unlock()
	for _, r := range ended {
		in.resumeStopped(r, len(in.cfg.Stages))
	}
}

// resumeStopped starts again the tasks of the stages before stage that
// request r had stopped: a failed stop's, a pause's.
func (in *Instance) resumeStopped(r *spRequest, stage int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closing {
		return
	}
	for p, t := range in.tasks {
		t.mu.Lock()
		by := t.savepointed
		t.mu.Unlock()
		if by != r.ID || t.Stage >= stage {
			continue
		}
		select {
		case <-t.done:
		default:
			continue
		}
		in.logResume(r, t.Name)
		nt := &Task{Partition: p, Stage: t.Stage, Name: t.Name, StateDir: in.stateDir, in: in,
			prev: t, done: make(chan struct{}), quit: make(chan struct{}), started: time.Now()}
		in.tasks[p] = nt
		in.wg.Add(1)
		go in.runTask(nt)
	}
	// The partitions given to this instance while the stop ran, whose
	// tasks it did not start (the stop had their savepoints).
	for p, id := range in.spSkipped {
		if id != r.ID || in.stageOf(p.Topic) >= stage {
			continue
		}
		delete(in.spSkipped, p)
		if in.tasks[p] != nil || in.m == nil || !in.m.Owns(p) {
			continue
		}
		in.logResume(r, TaskName(in.cfg.Job, p))
		nt := &Task{Partition: p, Stage: in.stageOf(p.Topic), Name: TaskName(in.cfg.Job, p), StateDir: in.stateDir, in: in,
			done: make(chan struct{}), quit: make(chan struct{}), started: time.Now()}
		in.tasks[p] = nt
		in.wg.Add(1)
		go in.runTask(nt)
	}
}

func (in *Instance) logResume(r *spRequest, task string) {
	switch {
	case r.Pause && r.State == "completed":
		in.log.Info("the job's savepoint is taken; the task runs again from it", "task", task, "request", r.ID)
	case r.Pause && r.active(time.Now()):
		in.log.Info("the stage reading this task's output took its savepoint; the task runs again from its own", "task", task, "request", r.ID)
	case r.Pause:
		in.log.Warn("the job's savepoint failed; the task runs again from its own savepoint", "task", task, "request", r.ID, "failure", r.Failure)
	default:
		in.log.Warn("the job's stop with a savepoint failed; the task resumes", "task", task, "request", r.ID, "failure", r.Failure)
	}
}

// taskSavepoint takes task t's savepoint for request r, retrying until
// it has one, the task left the instance, or the request ended.
func (in *Instance) taskSavepoint(r *spRequest, t *Task, key string) {
	defer func() {
		in.mu.Lock()
		delete(in.spWorking, key)
		in.mu.Unlock()
	}()
	// A stop, and a pause, take the savepoint with the task's stop.
	stop := r.staged()
	loc := in.place.Join(r.Dir, t.Name)
	// The flow savepoint is taken into a directory: loc itself, or in
	// object storage a local one that is uploaded to loc.
	local, direct := in.place.LocalPath(loc)
	if !direct {
		local = filepath.Join(in.stateDir, transferDir, "upload-"+r.ID+"-"+t.Name)
		defer os.RemoveAll(local)
	}
	log := in.log.With("task", t.Name, "request", r.ID)
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			time.Sleep(300 * time.Millisecond)
		}
		if _, done := in.readResult(r.Dir, t.Name); done || t.stopped.Load() || !r.active(time.Now()) {
			return
		}
		if cur, err := in.readRequest(); err != nil || cur == nil || cur.ID != r.ID || !cur.active(time.Now()) {
			return
		}
		t.mu.Lock()
		job := t.job
		t.mu.Unlock()
		if job == nil {
			continue // starting or restarting
		}
		if stop && r.Phase > 0 {
			if want := r.drainTo(t.Partition); want > 0 && readTo(job, t.Partition) < want {
				continue
			}
		}
		_ = os.RemoveAll(local) // an earlier attempt's leftovers
		ctx, cancel := context.WithTimeout(context.Background(), min(time.Until(r.Deadline), in.cfg.StopTimeout+10*time.Second))
		var err error
		var path string
		if stop {
			t.mu.Lock()
			t.savepointed, t.paused = r.ID, r.Pause
			t.mu.Unlock()
			path, err = job.StopWithSavepoint(ctx, local)
		} else {
			path, err = job.TriggerSavepoint(ctx, local)
		}
		cancel()
		if err != nil {
			if stop {
				t.mu.Lock()
				if t.job == job { // still running: it did not stop
					t.savepointed = ""
				}
				t.mu.Unlock()
			}
			log.Warn("task savepoint failed; trying again", "err", err, "attempt", attempt+1)
			continue
		}
		res := spResult{Task: t.Name, Stage: t.Stage, Topic: t.Partition.Topic, Partition: t.Partition.Partition,
			Dir: filepath.Base(path), Instance: in.cfg.Instance, Checkpoint: job.Stats().LastCheckpoint}
		if !direct {
			// The savepoint is taken (a stopping task has stopped):
			// only its upload is left, tried until the request ends.
			res.Dir = t.Name
			if !in.upload(r, path, loc, log) {
				return
			}
			path = loc
		} else if rel, err := filepath.Rel(r.Dir, path); err == nil {
			res.Dir = rel
		}
		if err := in.writeJSON(in.resultLoc(r.Dir, t.Name), res); err != nil {
			log.Error("cannot record the task's savepoint", "err", err)
			return
		}
		log.Info("task savepoint taken", "savepoint", path, "stop", r.Kind == "stop", "paused", r.Pause, "checkpoint", flow.CheckpointText(res.Checkpoint))
		return
	}
}

// transferDir is the directory under the instance's state directory
// that holds the task savepoints on their way to and from object
// storage (no task is named so: a task's name ends in -<partition>).
const transferDir = "_savepoints"

// upload uploads the task savepoint in the local directory path to loc,
// trying again until it succeeds or the request r ends; false when it
// gave up.
func (in *Instance) upload(r *spRequest, path, loc string, log *slog.Logger) bool {
	for attempt := 1; ; attempt++ {
		err := in.place.Upload(path, loc)
		if err == nil {
			return true
		}
		if cur, rerr := in.readRequest(); rerr == nil && (cur == nil || cur.ID != r.ID || !cur.active(time.Now())) || !r.active(time.Now()) {
			log.Error("cannot upload the task's savepoint; the job savepoint ended meanwhile", "savepoint", path, "to", loc, "err", err)
			return false
		}
		log.Warn("cannot upload the task's savepoint; trying again", "savepoint", path, "to", loc, "err", err, "attempt", attempt)
		time.Sleep(time.Second)
	}
}

// readTo is the next offset the job's source reads from p, -1 when it
// does not say.
func readTo(job *flow.Job, p kafka.Partition) int64 {
	next := int64(-1)
	part := strconv.Itoa(int(p.Partition))
	job.ReportMetrics(func(_ string, m flow.Metric) {
		if m.Name != "source_current_offset" {
			return
		}
		var topic, partition string
		for _, l := range m.Labels {
			switch l.Name {
			case "topic":
				topic = l.Value
			case "partition":
				partition = l.Value
			}
		}
		if topic == p.Topic && partition == part {
			next = int64(m.Value)
		}
	})
	return next
}

// LoadJobSavepoint reads the manifest of the job savepoint in dir.
func LoadJobSavepoint(dir string) (*JobSavepoint, error) {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return LoadJobSavepointFrom(DirPlace(""), dir)
}

// LoadJobSavepointFrom reads the manifest of the job savepoint at loc of
// place p (such as s3://bucket/key in object storage).
func LoadJobSavepointFrom(p SavepointPlace, loc string) (*JobSavepoint, error) {
	path := p.Join(loc, SavepointManifestName)
	b, err := p.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s holds no job savepoint (no %s): name the location `onceflow savepoint` or `onceflow stop` printed for this scale-out job; a savepoint that failed has no manifest", loc, SavepointManifestName)
	}
	if err != nil {
		return nil, fmt.Errorf("job savepoint %s: %w", path, err)
	}
	var m JobSavepoint
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("job savepoint %s is damaged: %w; name another savepoint", path, err)
	}
	m.Dir = loc
	return &m, nil
}

// loadRestore reads Config.FromSavepoint and checks it fits the job: the
// same job, stages and partition counts (a task's state is its
// partition's: another count would split keys differently). It returns
// each task's entry and, for a job of several stages, where each
// repartition partition is read from (restoreMarker).
func (in *Instance) loadRestore(ctx context.Context) (map[string]string, map[string]map[int32]int64, error) {
	cfg := in.cfg
	if in.place == nil {
		return nil, nil, fmt.Errorf("%w: %w", in.errNoPlace("restoring a job savepoint (--from-savepoint)"), flow.ErrRestoreRefused)
	}
	dir, err := in.place.Locate(cfg.FromSavepoint)
	if err != nil {
		return nil, nil, fmt.Errorf("scale-out: --from-savepoint: %w: %w", err, flow.ErrRestoreRefused)
	}
	m, err := LoadJobSavepointFrom(in.place, dir)
	if err != nil {
		return nil, nil, fmt.Errorf("scale-out: --from-savepoint: %w: %w", err, flow.ErrRestoreRefused)
	}
	if m.Job != cfg.Job {
		return nil, nil, fmt.Errorf("scale-out: --from-savepoint %s is a savepoint of job %s, not of %s: %w", dir, m.Job, cfg.Job, flow.ErrRestoreRefused)
	}
	if len(m.Stages) != len(cfg.Stages) {
		return nil, nil, fmt.Errorf("scale-out: --from-savepoint %s has %d stages (sub-topologies), the job now %d: a job savepoint restores into the same stages; %w", dir, len(m.Stages), len(cfg.Stages), flow.ErrRestoreRefused)
	}
	cl, err := cfg.Client.NewClient()
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	var changed []string
	for i, s := range cfg.Stages {
		if !slices.Equal(m.Stages[i].Topics, s.Topics) {
			return nil, nil, fmt.Errorf("scale-out: --from-savepoint %s: stage %d read %s, it reads %s now: %w", dir, i, strings.Join(m.Stages[i].Topics, ","), strings.Join(s.Topics, ","), flow.ErrRestoreRefused)
		}
		for _, topic := range s.Topics {
			n, ok := in.parts[topic]
			if !ok {
				if n, err = in.inputPartitions(ctx, cl, topic); err != nil {
					return nil, nil, fmt.Errorf("scale-out: --from-savepoint: the partition count of %s: %w", topic, err)
				}
			}
			if was := m.Stages[i].Partitions[topic]; was != n {
				changed = append(changed, fmt.Sprintf("%s had %d, has %d", topic, was, n))
			}
		}
	}
	if len(changed) > 0 {
		return nil, nil, fmt.Errorf("scale-out: --from-savepoint %s is refused: partition counts changed since the savepoint (%s). Each task's state is one partition's keys; restore with the partition counts the savepoint had (a repartition topic: scale-out.repartition-partitions, or delete the topic so it is made again), or start without the savepoint: %w",
			dir, strings.Join(changed, "; "), flow.ErrRestoreRefused)
	}
	out := map[string]string{}
	for _, t := range m.Tasks {
		out[t.Task] = in.place.Join(dir, t.Dir)
	}
	in.restoreID = strconv.FormatInt(m.Created.UnixNano(), 10)
	var skip map[string]map[int32]int64
	if len(cfg.Stages) > 1 {
		if skip, err = in.restoreMarker(ctx, cl, m); err != nil {
			return nil, nil, err
		}
	}
	in.log.Info("restoring a job savepoint: each task starts from its entry, then from its own newer checkpoints", "savepoint", dir, "tasks", len(out), "taken", m.Created.Format(time.RFC3339))
	return out, skip, nil
}

// A restore marker (<Checkpoints>/<Job>.savepoints/restore-NNNNNN.json)
// fixes, once per restore of a job savepoint of several stages, where
// the later stages read their repartition topics from: the ends those
// topics had before any task of the restore ran. A drained stop left
// nothing unread in them at the savepoint, so what lies between the
// savepoint's offsets and those ends was written by a run the restore
// abandons (the job ran on past the savepoint), and the restored first
// stage writes it again from its input: read twice, it would count twice
// (docs/design.md, "Scale-out", "Savepoints of the whole job").
//
// The newest marker is the restore in progress. An instance restoring
// the savepoint it names (another instance of the same restore, or one
// started again) uses its ends; one restoring another savepoint writes
// the next marker, exclusively, so instances that start at once agree on
// one. A task's own checkpoints after a restore are past those ends, so
// resuming them (a restart, a later run that names the savepoint again)
// is unaffected.
type restoreMarker struct {
	Savepoint string    `json:"savepoint"`
	Created   time.Time `json:"savepoint_created"`
	By        string    `json:"by"`
	At        time.Time `json:"at"`
	Ends      []spDrain `json:"ends"`
}

func (in *Instance) restoreMarker(ctx context.Context, cl *kgo.Client, m *JobSavepoint) (map[string]map[int32]int64, error) {
	cfg := in.cfg
	dir := in.controlDir()
	if err := in.place.MakeDir(dir); err != nil {
		return nil, fmt.Errorf("scale-out: --from-savepoint: %w", err)
	}
	var topics []string
	for _, s := range cfg.Stages[1:] {
		topics = append(topics, s.Topics...)
	}
	for range 10 {
		all, err := in.place.List(dir)
		if err != nil {
			return nil, fmt.Errorf("scale-out: --from-savepoint: the restore markers in %s: %w", dir, err)
		}
		var names []string
		for _, n := range all {
			if strings.HasPrefix(n, "restore-") && strings.HasSuffix(n, ".json") {
				names = append(names, n)
			}
		}
		slices.Sort(names)
		seq := 0
		if len(names) > 0 {
			last := in.place.Join(dir, names[len(names)-1])
			var cur restoreMarker
			b, err := in.place.ReadFile(last)
			if err == nil {
				err = json.Unmarshal(b, &cur)
			}
			if err != nil {
				return nil, fmt.Errorf("scale-out: --from-savepoint: the restore marker %s: %w (remove it only if no instance of the job runs)", last, err)
			}
			// The same savepoint, whatever path this instance mounts it
			// at: its manifest's creation time (to the nanosecond).
			if cur.Created.Equal(m.Created) {
				in.log.Info("restoring a job savepoint: the repartition topics are read from where its restore began", "marker", last, "began", cur.At.Format(time.RFC3339), "by", cur.By)
				return endsMap(cur.Ends), nil
			}
			if seq, err = strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(names[len(names)-1], "restore-"), ".json")); err != nil {
				return nil, fmt.Errorf("scale-out: --from-savepoint: a restore marker with a malformed name: %s", last)
			}
		}
		ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topics...)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("scale-out: --from-savepoint: the end offsets of the repartition topics %s: %w", strings.Join(topics, ", "), err)
		}
		mk := restoreMarker{Savepoint: m.Dir, Created: m.Created, By: cfg.Instance, At: time.Now().UTC(), Ends: drainsOf(ends)}
		path := in.place.Join(dir, fmt.Sprintf("restore-%06d.json", seq+1))
		b, err := json.MarshalIndent(mk, "", "  ")
		if err != nil {
			return nil, err
		}
		// An exclusive create (a hard link; a conditional PUT): one
		// instance writes each marker, the others read it on the next
		// round.
		created, err := in.place.CreateFile(path, append(b, '\n'))
		if err != nil {
			return nil, fmt.Errorf("scale-out: --from-savepoint: write the restore marker %s: %w", path, err)
		}
		if created {
			in.log.Info("restoring a job savepoint: the repartition topics are read from their ends now; what a run after the savepoint wrote there is written again by the first stage", "marker", path, "partitions", len(mk.Ends))
			return endsMap(mk.Ends), nil
		}
	}
	return nil, fmt.Errorf("scale-out: --from-savepoint: could not agree on a restore marker in %s with the other instances after 10 tries; try again", dir)
}

// drainsOf lists offs by topic and partition.
func drainsOf(offs kadm.ListedOffsets) []spDrain {
	var out []spDrain
	offs.Each(func(o kadm.ListedOffset) {
		out = append(out, spDrain{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset})
	})
	slices.SortFunc(out, func(a, b spDrain) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	return out
}

func endsMap(ends []spDrain) map[string]map[int32]int64 {
	out := map[string]map[int32]int64{}
	for _, e := range ends {
		if out[e.Topic] == nil {
			out[e.Topic] = map[int32]int64{}
		}
		out[e.Topic][e.Partition] = e.Offset
	}
	return out
}
