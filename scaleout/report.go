package scaleout

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/onceflow/onceflow/flow"
)

// Instance reports (docs/design.md, "Scale-out", "Operations"): every
// ReportInterval an instance writes what it runs into the shared
// checkpoint directory, <Checkpoints>/<Job>.savepoints/instances/
// <instance>.json, next to the savepoint requests, so `onceflow status`
// shows every instance's tasks — which instance runs which task, its
// state, newest checkpoint and problem — from any instance or from the
// job file alone, without a registry of the instances' addresses. With
// checkpoints on S3 (Config.CheckpointStorage) nothing is written; status
// shows what the group and the committed offsets say.

// ReportInterval is how often an instance writes its report.
const ReportInterval = 2 * time.Second

// InstanceReport is what an instance last said about itself.
type InstanceReport struct {
	Instance string    `json:"instance"`
	Job      string    `json:"job"`
	Updated  time.Time `json:"updated"`
	// Generation is the group generation the instance's member is in,
	// -1 before it joined.
	Generation int32 `json:"generation"`
	// Stopped says the instance stopped (its last report).
	Stopped bool `json:"stopped,omitempty"`
	// Failed is the task failure that stops the instance (Instance.Failed).
	Failed string       `json:"failed,omitempty"`
	Tasks  []TaskReport `json:"tasks"`
}

// TaskReport is a task in an instance's report.
type TaskReport struct {
	Task      string `json:"task"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Stage     int    `json:"stage"`
	// State is running, starting, restarting, down, paused (a running
	// savepoint of several stages) or stopped (a stop with a savepoint).
	State string `json:"state"`
	// Checkpoint is the newest checkpoint the task committed (0 before
	// one), CheckpointText the same as epoch:sequence
	// (flow.CheckpointText).
	Checkpoint     int64  `json:"checkpoint"`
	CheckpointText string `json:"checkpoint-text"`
	Restarts       int64  `json:"restarts"`
	Problem        string `json:"problem,omitempty"`
}

// Stale says the report is older than three intervals at now: its
// instance is gone, paused or cannot write.
func (r InstanceReport) Stale(now time.Time) bool {
	return !r.Stopped && now.Sub(r.Updated) > 3*ReportInterval
}

func reportsDir(checkpoints, job string) string {
	return filepath.Join(checkpoints, job+".savepoints", "instances")
}

// taskState is the one-word state of a task in a report.
func taskState(t TaskStatus) string {
	switch {
	case t.Down != "":
		return "down"
	case !t.RestartAt.IsZero():
		return "restarting"
	case t.Paused:
		return "paused"
	case t.Savepointed != "":
		return "stopped"
	case t.Running:
		return "running"
	}
	return "starting"
}

// report is the instance's report now.
func (in *Instance) report(stopped bool) InstanceReport {
	gen, _ := in.Generation()
	r := InstanceReport{Instance: in.cfg.Instance, Job: in.cfg.Job, Updated: time.Now().UTC(), Generation: gen, Stopped: stopped, Tasks: []TaskReport{}}
	if err := in.Failed(); err != nil {
		r.Failed = err.Error()
	}
	if stopped {
		return r
	}
	// Nothing here asks the brokers (a source's metrics may, and a
	// broker that is down would hold up the savepoint requests this
	// goroutine also follows, and the instance's stop).
	for _, t := range in.Tasks() {
		r.Tasks = append(r.Tasks, TaskReport{Task: t.Name, Topic: t.Partition.Topic, Partition: t.Partition.Partition, Stage: t.Stage, State: taskState(t),
			Checkpoint: t.LastCheckpoint, CheckpointText: flow.CheckpointText(t.LastCheckpoint), Restarts: t.Restarts, Problem: t.Problem})
	}
	return r
}

// writeReport writes the instance's report; a failure is logged once a
// minute at most (status then shows the report as stale).
func (in *Instance) writeReport(stopped bool) {
	if in.cfg.CheckpointStorage != nil {
		return
	}
	dir := reportsDir(in.cfg.Checkpoints, in.cfg.Job)
	err := os.MkdirAll(dir, 0o755)
	if err == nil {
		err = writeJSONFile(filepath.Join(dir, in.cfg.Instance+".json"), in.report(stopped))
	}
	if err != nil && time.Since(in.reportWarned) > time.Minute {
		in.reportWarned = time.Now()
		in.log.Warn("cannot write the instance's report for onceflow status", "dir", dir, "err", err)
	}
}

// ReadInstanceReports reads the reports of the instances of job whose
// tasks checkpoint into the directory checkpoints (Config.Checkpoints),
// by instance name; none when no instance wrote one.
func ReadInstanceReports(checkpoints, job string) ([]InstanceReport, error) {
	dir := reportsDir(checkpoints, job)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []InstanceReport
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") || strings.Contains(e.Name(), ".tmp-") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return out, err
		}
		var r InstanceReport
		if err := json.Unmarshal(b, &r); err != nil {
			return out, fmt.Errorf("instance report %s: %w", filepath.Join(dir, e.Name()), err)
		}
		if r.Job == job {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b InstanceReport) int { return strings.Compare(a.Instance, b.Instance) })
	return out, nil
}
