package cli

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/api"
)

// A scale-out instance serves, with --http (or http.listen), what a
// process supervisor and Prometheus need; all of it read-only:
//
//	GET /healthz    200 while the instance runs and every task it was
//	                given runs or is starting; 503 naming each task that
//	                is down or restarting (or restarted and has not yet
//	                completed a checkpoint), with its last error
//	GET /readyz     200 once the instance is a member of its group and
//	                every task it was given runs its job (readiness)
//	GET /           a page showing the three below and the tasks' recent
//	                failures (/jobs/{job}/exceptions), live
//	GET /instance   the instance, its group generation and its tasks
//	GET /group      the job's instances and who holds which partition
//	                (what onceflow status JOB.yaml prints)
//	GET /metrics    every task's metrics (label job_name: the task's job),
//	                its pipeline's counters (late records of its windows,
//	                duplicates of its dedupes), Go runtime and process
//	                metrics

//go:embed instanceui/index.html
var instancePage []byte

// taskView is a task in /instance.
type taskView struct {
	Task           string `json:"task"`
	Topic          string `json:"topic"`
	Partition      int32  `json:"partition"`
	Running        bool   `json:"running"`
	Runs           int64  `json:"runs"`
	Restarts       int64  `json:"restarts"`
	LastCheckpoint int64  `json:"last-checkpoint"`
	// LastCheckpointText is LastCheckpoint for people, epoch:sequence
	// (flow.CheckpointText).
	LastCheckpointText string `json:"last-checkpoint-text"`
	Since              int64  `json:"since"`
	// LastError is the task's last failure, "" for none; Problem what is
	// wrong with the task now, "" for nothing (scaleout.TaskStatus).
	LastError string `json:"last-error,omitempty"`
	Problem   string `json:"problem,omitempty"`
}

// serveInstance starts the instance's HTTP server on addr; the returned
// function closes it.
func (so *scaleOut) serveInstance(o httpOptions) (func(), error) {
	addr, err := api.ListenAddr(o.listen)
	if err != nil {
		return nil, err
	}
	token, err := instanceToken(o)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), so.in.Metrics(), &so.pipelines)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if msg := so.unhealthy(); msg != "" {
			http.Error(w, msg, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if msg := so.notReady(); msg != "" {
			http.Error(w, msg, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.HandleFunc("GET /instance", func(w http.ResponseWriter, _ *http.Request) {
		gen, member := so.in.Generation()
		var ts []taskView
		for _, t := range so.in.Tasks() { // by topic and partition
			ts = append(ts, taskView{Task: t.Name, Topic: t.Partition.Topic, Partition: t.Partition.Partition, Running: t.Running, Runs: t.Runs,
				Restarts: t.Restarts, LastCheckpoint: t.LastCheckpoint, LastCheckpointText: flow.CheckpointText(t.LastCheckpoint), Since: t.Since.UnixMilli(), LastError: t.LastError, Problem: t.Problem})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"job": so.jf.Job, "instance": so.instance, "group": so.group,
			"generation": gen, "member": member, "tasks": ts})
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /group", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		st, err := readGroupStatus(ctx, so.cc, so.jf)
		w.Header().Set("Content-Type", "application/json")
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		_ = json.NewEncoder(w).Encode(st)
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(instancePage)
	})
	rest := &soAPI{so: so, token: token, local: loopbackAddr(addr), started: time.Now(), ops: map[string]*soOp{}}
	rest.routes(mux)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			so.log.Warn("the instance's HTTP server stopped", "err", err)
		}
	}()
	so.log.Info("serving health, readiness, metrics and the job's REST API", "url", "http://"+ln.Addr().String(), "endpoints", "/healthz /readyz /instance /metrics /jobs/"+so.jf.Job)
	return func() {
		// A stop asked here: its client reads the outcome first.
		rest.linger(5 * time.Second)
		_ = srv.Close()
	}, nil
}

// notReady says why the instance is not ready, "" when it is.
func (so *scaleOut) notReady() string {
	if gen, _ := so.in.Generation(); gen < 0 {
		return "not a member of the group yet\n"
	}
	for _, t := range so.in.Tasks() {
		switch {
		case t.Paused:
			return "task of " + t.Partition.String() + " is paused for a savepoint of the job (" + t.Savepointed + "): it runs again once the stage reading its output has taken its own\n"
		case t.Savepointed != "":
			return "task of " + t.Partition.String() + " stopped with a savepoint of the job (" + t.Savepointed + ")\n"
		case !t.Running:
			return "task of " + t.Partition.String() + " is starting\n"
		}
	}
	return ""
}

// unhealthy says what is wrong with the instance, a line per problem, ""
// when nothing is: a task failure stops it, or a task is down, waits to
// restart, or restarted and has not completed a checkpoint since
// (scaleout.TaskStatus.Problem). A supervisor's liveness probe then
// restarts the instance, or a person reads why.
func (so *scaleOut) unhealthy() string {
	var b strings.Builder
	if err := so.in.Failed(); err != nil {
		fmt.Fprintf(&b, "the instance stops: %v\n", err)
	}
	for _, t := range so.in.Tasks() {
		if t.Problem != "" {
			b.WriteString(t.Problem + "\n")
		}
	}
	return b.String()
}
