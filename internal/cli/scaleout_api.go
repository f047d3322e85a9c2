package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/api"
)

// The REST API of a scale-out instance (docs/design.md, "Scale-out"):
// the endpoints of one job's API that onceflow status, checkpoints,
// savepoint and stop use, over the instance's tasks; a savepoint or stop
// asked at any instance covers the whole job (scaleout.Instance.Savepoint).
//
//	GET  /jobs/overview                 the job, its state on this instance
//	GET  /jobs/{job}                    state, records, restarts, the tasks
//	GET  /jobs/{job}/config             the job file as validate shows it, checkpointing, the stages
//	GET  /jobs/{job}/checkpoints        counts summed over the tasks, the last checkpoints of each task
//	GET  /jobs/{job}/checkpoints/details/{id}  a checkpoint of a task (?task=NAME when ids repeat)
//	GET  /jobs/{job}/exceptions         the tasks' failures, newest first
//	POST /jobs/{job}/savepoints         a savepoint of the whole job, running (several stages pause in turn)
//	POST /jobs/{job}/stop               the whole job stops with a savepoint
//	GET  /jobs/{job}/savepoints/{id}    the request's outcome

// soOp is a savepoint or stop asked through the instance's API.
type soOp struct {
	ID       string `json:"request-id"`
	Kind     string `json:"kind"`
	Status   string `json:"status"` // IN_PROGRESS, COMPLETED, FAILED
	Location string `json:"location,omitempty"`
	Failure  string `json:"failure-cause,omitempty"`
	Dir      string `json:"target-directory"`
	reported bool
}

// soAPI is the instance's REST API.
type soAPI struct {
	so      *scaleOut
	token   string
	local   bool // listening on loopback only
	started time.Time
	mu      sync.Mutex
	ops     map[string]*soOp
	next    int
}

// instanceToken is the API token of the instance (--http-token-file,
// ONCEFLOW_HTTP_TOKEN), "" for none.
func instanceToken(o httpOptions) (string, error) {
	token := os.Getenv(TokenEnv)
	if token == "" && o.tokenFile != "" {
		b, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return "", fmt.Errorf("http token: %w", err)
		}
		if token = strings.TrimSpace(string(b)); token == "" {
			return "", fmt.Errorf("http token file %s is empty", o.tokenFile)
		}
	}
	return token, nil
}

func (a *soAPI) routes(mux *http.ServeMux) {
	jobs := "/jobs/" + a.so.jf.Job
	mux.HandleFunc("GET /jobs/overview", a.overview)
	mux.HandleFunc("GET "+jobs, a.detail)
	mux.HandleFunc("GET "+jobs+"/config", a.config)
	mux.HandleFunc("GET "+jobs+"/checkpoints", a.checkpoints)
	mux.HandleFunc("GET "+jobs+"/checkpoints/details/{id}", a.checkpointDetail)
	mux.HandleFunc("GET "+jobs+"/exceptions", a.exceptions)
	mux.HandleFunc("POST "+jobs+"/savepoints", a.mutating(func(w http.ResponseWriter, r *http.Request) { a.startOp(w, r, false) }))
	mux.HandleFunc("POST "+jobs+"/stop", a.mutating(func(w http.ResponseWriter, r *http.Request) { a.startOp(w, r, true) }))
	mux.HandleFunc("GET "+jobs+"/savepoints/{id}", a.opStatus)
}

// mutating guards an endpoint that changes the job: with a token, the
// request must carry it; without one, only a loopback server answers.
func (a *soAPI) mutating(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if a.token == "" {
			if !a.local {
				api.WriteError(w, http.StatusForbidden, "this instance listens beyond loopback without a token: set one with --http-token-file or "+TokenEnv+" to take savepoints and stop the job through it")
				return
			}
			h(w, r)
			return
		}
		if !api.HasToken(w, r, a.token) {
			return
		}
		h(w, r)
	}
}

// state is the job's state on this instance in Flink's words: FAILED
// once a task failure stops it, RESTARTING while a task has a problem,
// else RUNNING.
func (a *soAPI) state() string {
	if a.so.in.Failed() != nil {
		return "FAILED"
	}
	for _, t := range a.so.in.Tasks() {
		if t.Problem != "" {
			return "RESTARTING"
		}
	}
	return "RUNNING"
}

func (a *soAPI) overview(w http.ResponseWriter, _ *http.Request) {
	api.WriteJSON(w, http.StatusOK, map[string]any{"jobs": []map[string]any{{
		"name": a.so.jf.Job, "state": a.state(), "start-time": a.started.UnixMilli(), "duration": time.Since(a.started).Milliseconds(),
		"tasks": len(a.so.in.Tasks()), "scale-out": true, "instance": a.so.instance,
	}}})
}

// soTask is a task in the API's answers.
type soTask struct {
	taskView
	Stage       int    `json:"stage"`
	RecordsIn   int64  `json:"read-records"`
	RecordsOut  int64  `json:"write-records"`
	Completed   int64  `json:"checkpoints-completed"`
	Failed      int64  `json:"checkpoints-failed"`
	Savepointed string `json:"stopped-with-savepoint,omitempty"`
	// Paused says the savepoint is a running one's: the task runs again
	// when the stage reading its output has taken its own.
	Paused bool `json:"paused,omitempty"`
}

func (a *soAPI) tasks() []soTask {
	var out []soTask
	for _, t := range a.so.in.Tasks() {
		out = append(out, soTask{
			taskView: taskView{Task: t.Name, Topic: t.Partition.Topic, Partition: t.Partition.Partition, Running: t.Running, Runs: t.Runs,
				Restarts: t.Restarts, LastCheckpoint: t.LastCheckpoint, LastCheckpointText: flow.CheckpointText(t.LastCheckpoint), Since: t.Since.UnixMilli(), LastError: t.LastError, Problem: t.Problem},
			Stage: t.Stage, RecordsIn: t.Stats.RecordsIn, RecordsOut: t.Stats.RecordsOut,
			Completed: t.Stats.CheckpointsCompleted, Failed: t.Stats.CheckpointsFailed, Savepointed: t.Savepointed, Paused: t.Paused,
		})
	}
	return out
}

func (a *soAPI) detail(w http.ResponseWriter, _ *http.Request) {
	ts := a.tasks()
	var in, out, committed, restarts int64
	for _, t := range a.so.in.Tasks() {
		in, out, committed = in+t.Stats.RecordsIn, out+t.Stats.RecordsOut, committed+t.Stats.RecordsCommitted
		restarts += t.Restarts
	}
	gen, member := a.so.in.Generation()
	api.WriteJSON(w, http.StatusOK, map[string]any{
		"name": a.so.jf.Job, "state": a.state(), "start-time": a.started.UnixMilli(), "duration": time.Since(a.started).Milliseconds(),
		"records":  map[string]int64{"read": in, "written": out, "committed": committed},
		"restarts": restarts, "vertices": []any{},
		"scale-out": map[string]any{"instance": a.so.instance, "group": a.so.group, "generation": gen, "member": member, "tasks": ts},
	})
}

// soCheckpoint is a checkpoint of a task in the history: the
// single-process API's fields, with the task and the id as
// epoch:sequence.
type soCheckpoint struct {
	api.Checkpoint
	IDText string `json:"id-text"`
	Task   string `json:"task"`
}

// soHistoryPerTask is how many checkpoints the instance keeps of each
// of its tasks.
const soHistoryPerTask = 20

// taskHistories are the checkpoint histories of the tasks the instance
// ran, by task name: a hook of every run of the task's job (api.History),
// kept across its restarts. Its zero value is ready.
type taskHistories struct {
	mu    sync.Mutex
	tasks map[string]*taskHistory
	// settings are the checkpoint settings of the newest task job that
	// started (every task's job has the file's).
	settings *flow.CheckpointSettings
}

// taskHistory is a task's checkpoint history; as a job hook it also
// learns the job's checkpoint settings.
type taskHistory struct {
	*api.History
	all *taskHistories
}

func (th taskHistory) OnJobStarted(j *flow.Job) {
	c := j.Checkpointing()
	th.all.mu.Lock()
	defer th.all.mu.Unlock()
	th.all.settings = &c
}

// of is the hook that keeps task's history.
func (hs *taskHistories) of(task string) flow.Hook {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.tasks == nil {
		hs.tasks = map[string]*taskHistory{}
	}
	h := hs.tasks[task]
	if h == nil {
		h = &taskHistory{History: api.NewHistory(soHistoryPerTask), all: hs}
		hs.tasks[task] = h
	}
	return *h
}

// each calls f with every task's history, by task name.
func (hs *taskHistories) each(f func(task string, h *api.History)) {
	hs.mu.Lock()
	names := slices.Sorted(maps.Keys(hs.tasks))
	hists := make([]*api.History, len(names))
	for i, n := range names {
		hists[i] = hs.tasks[n].History
	}
	hs.mu.Unlock()
	for i, n := range names {
		f(n, hists[i])
	}
}

func (hs *taskHistories) checkpointing() *flow.CheckpointSettings {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.settings
}

// checkpoints lists the kept checkpoints of the tasks the instance ran
// (each task's last soHistoryPerTask), newest first, as the
// single-process API does, each naming its task.
func (a *soAPI) checkpoints(w http.ResponseWriter, _ *http.Request) {
	var completed, failed, inProgress int64
	for _, t := range a.so.in.Tasks() {
		st := t.Stats
		completed, failed, inProgress = completed+st.CheckpointsCompleted, failed+st.CheckpointsFailed, inProgress+st.CheckpointsInProgress
	}
	hist := []soCheckpoint{}
	restored := map[string]*api.Restore{}
	a.so.hist.each(func(task string, h *api.History) {
		for _, c := range h.Checkpoints() {
			hist = append(hist, soCheckpoint{Checkpoint: c, IDText: flow.CheckpointText(c.ID), Task: task})
		}
		if r := h.Restored(); r != nil {
			restored[task] = r
		}
	})
	slices.SortStableFunc(hist, func(x, y soCheckpoint) int { return cmp.Compare(y.TriggerTimestamp, x.TriggerTimestamp) })
	latest := map[string]any{}
	api.AddLatest(latest, hist, func(c soCheckpoint) api.Checkpoint { return c.Checkpoint })
	api.WriteJSON(w, http.StatusOK, map[string]any{
		"counts":  map[string]int64{"completed": completed, "failed": failed, "in_progress": inProgress},
		"latest":  latest,
		"history": hist,
		"scale-out": map[string]any{"instance": a.so.instance, "restored": restored,
			"note": fmt.Sprintf("the last %d checkpoints of each task this instance ran, newest first; counts are of the tasks' current runs", soHistoryPerTask)},
	})
}

// checkpointDetail is a checkpoint of a task by id (a number, or
// epoch:sequence). Tasks number their checkpoints each on its own, so
// several may have one id: ?task=NAME chooses; without it the newest is
// answered, and also-in-tasks names the others.
func (a *soAPI) checkpointDetail(w http.ResponseWriter, r *http.Request) {
	id, err := flow.ParseCheckpointText(r.PathValue("id"))
	if err != nil {
		api.WriteError(w, http.StatusBadRequest, fmt.Sprintf("checkpoint id %q is neither a number nor epoch:sequence", r.PathValue("id")))
		return
	}
	want := r.URL.Query().Get("task")
	var found []soCheckpoint
	a.so.hist.each(func(task string, h *api.History) {
		if want != "" && task != want {
			return
		}
		if c, ok := h.Checkpoint(id); ok {
			found = append(found, soCheckpoint{Checkpoint: c, IDText: flow.CheckpointText(id), Task: task})
		}
	})
	if len(found) == 0 {
		of := "any task"
		if want != "" {
			of = "task " + want
		}
		api.WriteError(w, http.StatusNotFound, fmt.Sprintf("checkpoint %s is not among the last %d of %s of instance %s", flow.CheckpointText(id), soHistoryPerTask, of, a.so.instance))
		return
	}
	slices.SortStableFunc(found, func(x, y soCheckpoint) int { return cmp.Compare(y.TriggerTimestamp, x.TriggerTimestamp) })
	var others []string
	for _, c := range found[1:] {
		others = append(others, c.Task)
	}
	api.WriteJSON(w, http.StatusOK, struct {
		soCheckpoint
		Others []string `json:"also-in-tasks,omitempty"`
	}{found[0], others})
}

// soException is a task failure in /exceptions: the single-process
// API's fields (timestamp, attempt, restart_delay, exception), with the
// task.
type soException struct {
	api.Exception
	Task      string `json:"task"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Stage     int    `json:"stage"`
	Restarts  bool   `json:"restarts"`
	Down      string `json:"down,omitempty"`
}

// exceptions lists the failures of the instance's tasks, newest first
// (scaleout.Instance.Failures keeps the last 100), and the failure that
// stops the instance.
func (a *soAPI) exceptions(w http.ResponseWriter, _ *http.Request) {
	out := []soException{}
	for _, f := range a.so.in.Failures() {
		x := soException{Exception: api.Exception{Timestamp: f.Time.UnixMilli(), Attempt: f.Attempt, Message: f.Err},
			Task: f.Task, Topic: f.Partition.Topic, Partition: f.Partition.Partition, Stage: f.Stage, Restarts: f.Restarts, Down: f.Down}
		if f.Restarts {
			x.DelayMs = f.RestartAt.Sub(f.Time).Milliseconds()
		}
		out = append(out, x)
	}
	var ended *api.Exception
	if err := a.so.in.Failed(); err != nil {
		ended = &api.Exception{Timestamp: time.Now().UnixMilli(), Message: err.Error()}
		if len(out) > 0 && !out[0].Restarts {
			ended.Timestamp = out[0].Timestamp // the failure that stopped it
		}
	}
	api.WriteJSON(w, http.StatusOK, map[string]any{"restarts": out, "failure": ended,
		"scale-out": map[string]any{"instance": a.so.instance, "note": "the failures of this instance's tasks, newest first; the instance restarts a task under the job's restart strategy"}})
}

// config is the job's configuration as the single-process API shows it
// (the job file as onceflow validate describes it, the checkpoint
// settings), and the instance's part of the scale-out: its name, group,
// and the stages with their topics.
func (a *soAPI) config(w http.ResponseWriter, _ *http.Request) {
	var desc strings.Builder
	describeJob(&desc, a.so.jf)
	// The instance restarts a failed task under the job's strategy
	// (scaleout.Config.Restart), exponential-delay unless the file names one.
	restart := "exponential-delay (default)"
	if a.so.jf.RestartSet {
		restart = a.so.jf.Restart.Describe()
	}
	parts := a.so.in.RepartitionPartitions()
	stages := []map[string]any{}
	for _, seg := range a.so.segs {
		st := map[string]any{"stage": seg.Index, "topics": seg.Topics, "co-partitioned": seg.CoPartitioned, "steps": len(seg.Steps)}
		if seg.CoPartitioned {
			st["anchor"] = seg.Anchor
		}
		if seg.Index > 0 {
			st["repartition-partitions"] = parts[seg.Topics[0]]
		}
		if seg.Out != "" {
			st["writes"], st["writes-key"] = seg.Out, seg.OutKey
		}
		stages = append(stages, st)
	}
	out := map[string]any{"name": a.so.jf.Job, "job-config": strings.Split(strings.TrimRight(desc.String(), "\n"), "\n"),
		"scale-out": map[string]any{"instance": a.so.instance, "group": a.so.group, "stages": stages, "restart": restart}}
	if c := a.so.hist.checkpointing(); c != nil {
		out["checkpointing"] = api.CheckpointingJSON(*c)
	}
	api.WriteJSON(w, http.StatusOK, out)
}

func (a *soAPI) startOp(w http.ResponseWriter, r *http.Request, stop bool) {
	var req struct {
		Dir string `json:"target-directory"`
	}
	if r.ContentLength != 0 {
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil {
			api.WriteError(w, http.StatusBadRequest, fmt.Sprintf("request body: %v; send {\"target-directory\": \"DIR\"} or nothing", err))
			return
		}
	}
	kind := "savepoint"
	if stop {
		kind = "stop"
	}
	a.mu.Lock()
	a.next++
	op := &soOp{ID: fmt.Sprintf("%s-%d", kind, a.next), Kind: kind, Status: "IN_PROGRESS", Dir: req.Dir}
	a.ops[op.ID] = op
	a.mu.Unlock()
	go func() {
		loc, err := a.so.in.Savepoint(context.Background(), req.Dir, stop)
		a.mu.Lock()
		defer a.mu.Unlock()
		if err != nil {
			op.Status, op.Failure = "FAILED", err.Error()
			return
		}
		op.Status, op.Location = "COMPLETED", loc
	}()
	api.WriteJSON(w, http.StatusAccepted, map[string]string{"request-id": op.ID})
}

func (a *soAPI) opStatus(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	op, ok := a.ops[r.PathValue("id")]
	var cp soOp
	if ok {
		cp = *op
		op.reported = op.Status != "IN_PROGRESS"
	}
	a.mu.Unlock()
	if !ok {
		api.WriteError(w, http.StatusNotFound, fmt.Sprintf("no savepoint request %q at this instance (ask the instance that was asked for it)", r.PathValue("id")))
		return
	}
	api.WriteJSON(w, http.StatusOK, map[string]any{"status": map[string]string{"id": cp.Status}, "operation": cp})
}

// linger waits, at most d, until the outcome of every stop asked through
// this instance has been read: the instance has stopped, and the client
// that asked polls for the savepoint's location.
func (a *soAPI) linger(d time.Duration) {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		a.mu.Lock()
		waiting := false
		for _, op := range a.ops {
			waiting = waiting || (op.Kind == "stop" && !op.reported)
		}
		a.mu.Unlock()
		if !waiting {
			return
		}
	}
}

// loopbackAddr says whether addr (host:port) listens on loopback only.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// soStatus is the scale-out part of GET /jobs/{job} at an instance.
type soStatus struct {
	Instance   string   `json:"instance"`
	Group      string   `json:"group"`
	Generation int32    `json:"generation"`
	Tasks      []soTask `json:"tasks"`
}

// printScaleOutAPIStatus is onceflow status --api at a scale-out
// instance: the instance's tasks, then the job across its instances
// (the group's view, which the instance reads from Kafka: /group).
func printScaleOutAPIStatus(ctx context.Context, w io.Writer, client func() (*apiClient, error), name, state string, records map[string]int64, restarts int64, so *soStatus) error {
	fmt.Fprintf(w, "job %s (scale-out): instance %s is %s, group %s generation %d, %d tasks here, %d task restarts\n",
		name, so.Instance, state, so.Group, so.Generation, len(so.Tasks), restarts)
	fmt.Fprintf(w, "records of its tasks' current runs: %d read, %d written\n", records["read"], records["written"])
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tSTAGE\tSTATE\tCHECKPOINT\tRESTARTS\tREAD\tWRITTEN\tPROBLEM")
	for _, t := range so.Tasks {
		st := "running"
		switch {
		case t.Paused:
			st = "paused (savepoint)"
		case t.Savepointed != "":
			st = "stopped (savepoint)"
		case t.Problem != "":
			st = "problem"
		case !t.Running:
			st = "starting"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%d\t%d\t%s\n", t.Task, t.Stage, st, flow.CheckpointText(t.LastCheckpoint), t.Restarts, t.RecordsIn, t.RecordsOut, t.Problem)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	c, err := client()
	if err != nil {
		return err
	}
	var g groupStatus
	if err := c.call(ctx, "GET", "/group", nil, &g); err != nil {
		return fmt.Errorf("the job across its instances: %w", err)
	}
	fmt.Fprintln(w)
	return printGroupStatus(w, g, nil)
}
