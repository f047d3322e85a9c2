// Package api serves a running job over HTTP: Prometheus metrics at
// /metrics and a REST API modelled on Flink's (job overview and config,
// checkpoint history, savepoints, stop with a savepoint, per-task load,
// restarts and errors). docs/design.md ("Metrics and the REST API") has
// the endpoints with examples.
//
// Reading is open to whoever reaches the address; the endpoints that
// change the job (savepoints, stop) need the bearer token when one is set,
// and a server on an address other than loopback must have one.
package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/metrics"
)

// indexHTML is the web UI: one page that polls the REST API.
//
//go:embed ui/index.html
var indexHTML []byte

// Config configures a Server.
type Config struct {
	// Addr is the host:port to listen on; a bare port or ":port" listens
	// on 127.0.0.1.
	Addr string
	// Token, when set, must be sent as "Authorization: Bearer TOKEN" to
	// the endpoints that change the job. Required when Addr is not a
	// loopback address.
	Token string
	// CertFile and KeyFile turn on TLS.
	CertFile, KeyFile string
	// Job is the job's name; Config is what /jobs/{job}/config shows.
	Job       string
	JobConfig any
	// SavepointDir returns the directory of a savepoint whose request
	// names none.
	SavepointDir func() string
	Logger       *slog.Logger
}

// Server is the HTTP server of one job. Register Metrics and History as
// the job's hooks before it starts, then Attach the job.
type Server struct {
	cfg      Config
	Metrics  *metrics.Collector
	History  *History
	registry *prometheus.Registry
	ln       net.Listener
	srv      *http.Server
	started  time.Time

	mu   sync.Mutex
	job  *flow.Job
	ops  map[string]*operation
	next int
}

// operation is a savepoint or stop-with-savepoint request.
type operation struct {
	ID       string `json:"request-id"`
	Kind     string `json:"kind"`   // savepoint, stop
	Status   string `json:"status"` // IN_PROGRESS, COMPLETED, FAILED
	Location string `json:"location,omitempty"`
	Failure  string `json:"failure-cause,omitempty"`
	Dir      string `json:"target-directory"`
	Started  int64  `json:"trigger_timestamp"`
	// reported is set once a client read the outcome.
	reported bool
}

// Hooks are the job hooks the server needs.
func (s *Server) Hooks() []flow.Hook { return []flow.Hook{s.Metrics, s.History} }

// ListenAddr normalizes addr: a bare port or ":port" means 127.0.0.1.
func ListenAddr(addr string) (string, error) {
	if _, err := strconv.Atoi(addr); err == nil {
		addr = ":" + addr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("http address %q: %w (write host:port, such as 127.0.0.1:8081)", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// isLoopback reports whether host names only this machine.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// New checks cfg and listens; Serve starts answering.
func New(cfg Config) (*Server, error) {
	addr, err := ListenAddr(cfg.Addr)
	if err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(addr)
	if !isLoopback(host) && cfg.Token == "" {
		return nil, fmt.Errorf("http address %s is reachable from other machines: set a token for the endpoints that change the job (savepoints, stop) with --http-token-file or ONCEFLOW_HTTP_TOKEN, or listen on 127.0.0.1", addr)
	}
	if (cfg.CertFile == "") != (cfg.KeyFile == "") {
		return nil, errors.New("http TLS needs both a certificate and a key file")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{cfg: cfg, Metrics: metrics.New(), History: NewHistory(100), registry: prometheus.NewRegistry(), started: time.Now(), ops: map[string]*operation{}}
	s.registry.MustRegister(s.Metrics, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var tlsCfg *tls.Config
	if cfg.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("http TLS: %w", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("http: %w (is another job using the port? choose another with --http)", err)
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	s.ln = ln
	s.srv = &http.Server{Handler: s.routes(), ReadHeaderTimeout: 10 * time.Second}
	return s, nil
}

// Registry is the server's Prometheus registry (the job's collector, Go
// runtime and process metrics); callers may add their own.
func (s *Server) Registry() *prometheus.Registry { return s.registry }

// URL is the server's base URL.
func (s *Server) URL() string {
	scheme := "http"
	if s.cfg.CertFile != "" {
		scheme = "https"
	}
	return scheme + "://" + s.ln.Addr().String()
}

// Serve answers requests until Close.
func (s *Server) Serve() {
	if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		s.cfg.Logger.Error("http server failed", "err", err)
	}
}

// Close stops the server, letting requests in flight finish for a second.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}

// Linger keeps answering, for at most d, until the outcome of every stop
// requested through the API has been read: the job has ended, and the
// client that asked for the stop polls for the savepoint's location.
func (s *Server) Linger(d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		waiting := false
		for _, op := range s.ops {
			waiting = waiting || (op.Kind == "stop" && !op.reported)
		}
		s.mu.Unlock()
		if !waiting {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Attach gives the server the running job.
func (s *Server) Attach(j *flow.Job) {
	s.mu.Lock()
	s.job = j
	s.mu.Unlock()
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /jobs/overview", s.overview)
	jobs := "/jobs/" + s.cfg.Job
	mux.HandleFunc("GET "+jobs, s.jobDetail)
	mux.HandleFunc("GET "+jobs+"/config", s.config)
	mux.HandleFunc("GET "+jobs+"/checkpoints", s.checkpoints)
	mux.HandleFunc("GET "+jobs+"/checkpoints/details/{id}", s.checkpointDetail)
	mux.HandleFunc("GET "+jobs+"/exceptions", s.exceptions)
	mux.HandleFunc("POST "+jobs+"/savepoints", s.mutating(s.triggerSavepoint))
	mux.HandleFunc("GET "+jobs+"/savepoints/{id}", s.savepointStatus)
	mux.HandleFunc("POST "+jobs+"/stop", s.mutating(s.stop))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'")
		_, _ = w.Write(indexHTML)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s %s; the job's endpoints are under %s (see docs/design.md, \"Metrics and the REST API\")", r.Method, r.URL.Path, jobs))
	})
	return mux
}

// mutating wraps a handler that changes the job: with a token set, the
// request must carry it.
func (s *Server) mutating(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Token != "" && !HasToken(w, r, s.cfg.Token) {
			return
		}
		h(w, r)
	}
}

// HasToken tells whether r carries token as "Authorization: Bearer
// TOKEN" (compared in constant time); if not, it answers 401 saying how
// to send it. Every server that changes a job checks its token so.
func HasToken(w http.ResponseWriter, r *http.Request, token string) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(token))
	if !ok || subtle.ConstantTimeCompare(a[:], b[:]) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="onceflow"`)
		WriteError(w, http.StatusUnauthorized, "this endpoint changes the job: send the token as \"Authorization: Bearer TOKEN\"")
		return false
	}
	return true
}

// WriteJSON answers with v as indented JSON.
func WriteJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// WriteError answers with Flink's error shape: {"errors": [message]}.
func WriteError(w http.ResponseWriter, code int, msg string) {
	WriteJSON(w, code, map[string][]string{"errors": {msg}})
}

func (s *Server) current() *flow.Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.job
}

// state is the job's state in Flink's words.
func state(j *flow.Job, st flow.Stats) string {
	if j == nil {
		return "INITIALIZING"
	}
	select {
	case <-j.Done():
		if j.Wait() != nil {
			return "FAILED"
		}
		return "FINISHED"
	default:
	}
	if st.Running {
		return "RUNNING"
	}
	return "RESTARTING"
}

type jobSummary struct {
	Name       string `json:"name"`
	State      string `json:"state"`
	StartTime  int64  `json:"start-time"`
	DurationMs int64  `json:"duration"`
	Tasks      int    `json:"tasks"`
}

func (s *Server) summary() (jobSummary, flow.Stats) {
	j := s.current()
	var st flow.Stats
	if j != nil {
		st = j.Stats()
	}
	return jobSummary{Name: s.cfg.Job, State: state(j, st), StartTime: s.started.UnixMilli(), DurationMs: time.Since(s.started).Milliseconds(), Tasks: len(st.Tasks)}, st
}

func (s *Server) overview(w http.ResponseWriter, _ *http.Request) {
	sum, _ := s.summary()
	WriteJSON(w, http.StatusOK, map[string]any{"jobs": []jobSummary{sum}})
}

// vertex is a task (a chain of operators) with its load.
type vertex struct {
	ID                  string  `json:"id"`
	Name                string  `json:"name"`
	Parallelism         int     `json:"parallelism"`
	RecordsIn           int64   `json:"read-records"`
	RecordsOut          int64   `json:"write-records"`
	InPerSecond         float64 `json:"read-records-per-second"`
	OutPerSecond        float64 `json:"write-records-per-second"`
	BusyMsPerSecond     float64 `json:"busy-time-ms-per-second"`
	IdleMsPerSecond     float64 `json:"idle-time-ms-per-second"`
	BackpressuredPerSec float64 `json:"backpressured-time-ms-per-second"`
	BackpressureLevel   string  `json:"backpressure-level"`
	// Watermark is the task's input watermark in ms, absent without one.
	Watermark *int64 `json:"watermark,omitempty"`
	// Operators are the operators the task's time is sampled in, in chain
	// order (docs/design.md, "Metrics and the REST API").
	Operators []vertexOperator `json:"operators"`
}

// vertexOperator is an operator of a task and the percentage of the
// task's time, over the last 5 s, its subtasks spent in it: a sink
// blocked on a lock shows near 100, the source chained before it near 0.
type vertexOperator struct {
	ID          string  `json:"id"`
	Name        string  `json:"name"`
	TimePercent float64 `json:"time-percent"`
}

func (s *Server) jobDetail(w http.ResponseWriter, _ *http.Request) {
	sum, st := s.summary()
	loads := s.Metrics.Loads()
	vs := []vertex{}
	for _, t := range st.Tasks {
		v := vertex{ID: t.UID, Name: t.Name, Parallelism: t.Parallelism, RecordsIn: t.RecordsIn, RecordsOut: t.RecordsOut, Operators: []vertexOperator{}}
		for _, op := range t.Operators {
			v.Operators = append(v.Operators, vertexOperator{ID: op.UID, Name: op.Name, TimePercent: math.Round(op.Share*1000) / 10})
		}
		if wm := t.Watermark; wm != flow.NoWatermark && wm != flow.MaxWatermark {
			v.Watermark = &wm
		}
		if l, ok := loads[t.UID]; ok {
			v.InPerSecond, v.OutPerSecond = l.InPerSecond, l.OutPerSecond
			v.BusyMsPerSecond, v.IdleMsPerSecond, v.BackpressuredPerSec = l.Busy, l.Idle, l.Backpressured
			v.BackpressureLevel = l.Level()
		}
		vs = append(vs, v)
	}
	lag := map[string]any{}
	if j := s.current(); j != nil {
		parts := []map[string]any{}
		j.ReportMetrics(func(op string, m flow.Metric) {
			switch m.Name {
			case "source_pending_records":
				lag[op] = m.Value
			case "source_records_lag":
				p := map[string]any{"operator": op, "lag": m.Value}
				for _, l := range m.Labels {
					p[l.Name] = l.Value
				}
				parts = append(parts, p)
			}
		})
		lag["partitions"] = parts
	}
	WriteJSON(w, http.StatusOK, map[string]any{
		"name": sum.Name, "state": sum.State, "start-time": sum.StartTime, "duration": sum.DurationMs,
		"vertices": vs,
		"lag":      lag,
		"records": map[string]int64{
			"read": st.RecordsIn, "written": st.RecordsOut, "committed": st.RecordsCommitted,
			"skipped": st.RecordsSkipped, "dead-lettered": st.RecordsDeadLettered,
		},
		"restarts": st.Restarts,
	})
}

func (s *Server) config(w http.ResponseWriter, _ *http.Request) {
	out := map[string]any{"name": s.cfg.Job, "job-config": s.cfg.JobConfig}
	if j := s.current(); j != nil {
		out["checkpointing"] = CheckpointingJSON(j.Checkpointing())
	}
	WriteJSON(w, http.StatusOK, out)
}

// CheckpointingJSON is a job's checkpoint settings as GET
// /jobs/{job}/config shows them.
func CheckpointingJSON(c flow.CheckpointSettings) map[string]any {
	return map[string]any{
		"interval": c.Interval.String(), "mode": c.Mode.String(), "timeout": c.Timeout.String(),
		"min-pause": c.MinPause.String(), "tolerable-failures": c.TolerableFailures, "retained": c.NumRetained,
	}
}

func (s *Server) checkpoints(w http.ResponseWriter, _ *http.Request) {
	_, st := s.summary()
	hist := s.History.checkpointsCopy()
	latest := map[string]any{"restored": s.History.restore()}
	AddLatest(latest, hist, func(c Checkpoint) Checkpoint { return c })
	WriteJSON(w, http.StatusOK, map[string]any{
		"counts": map[string]int64{
			"completed": st.CheckpointsCompleted, "failed": st.CheckpointsFailed, "in_progress": st.CheckpointsInProgress,
			"restored": boolInt(st.RestoredCheckpoint > 0),
		},
		"latest":  latest,
		"history": hist,
	})
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func (s *Server) checkpointDetail(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		WriteError(w, http.StatusBadRequest, fmt.Sprintf("checkpoint id %q is not a number", r.PathValue("id")))
		return
	}
	c, ok := s.History.checkpoint(id)
	if !ok {
		WriteError(w, http.StatusNotFound, fmt.Sprintf("checkpoint %d is not among the last %d this process saw", id, s.History.max))
		return
	}
	WriteJSON(w, http.StatusOK, c)
}

func (s *Server) exceptions(w http.ResponseWriter, _ *http.Request) {
	restarts, ended := s.History.exceptions()
	WriteJSON(w, http.StatusOK, map[string]any{"restarts": restarts, "failure": ended})
}

// savepointRequest is the body of POST savepoints and stop.
type savepointRequest struct {
	Dir string `json:"target-directory"`
}

func (s *Server) triggerSavepoint(w http.ResponseWriter, r *http.Request) {
	s.startOp(w, r, "savepoint")
}
func (s *Server) stop(w http.ResponseWriter, r *http.Request) { s.startOp(w, r, "stop") }

func (s *Server) startOp(w http.ResponseWriter, r *http.Request, kind string) {
	var req savepointRequest
	if r.ContentLength != 0 {
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil {
			WriteError(w, http.StatusBadRequest, fmt.Sprintf("request body: %v; send {\"target-directory\": \"DIR\"} or nothing", err))
			return
		}
	}
	j := s.current()
	if j == nil {
		WriteError(w, http.StatusServiceUnavailable, "the job has not started yet; try again")
		return
	}
	if req.Dir == "" && s.cfg.SavepointDir != nil {
		req.Dir = s.cfg.SavepointDir()
	}
	if req.Dir == "" {
		WriteError(w, http.StatusBadRequest, "name the savepoint's directory: {\"target-directory\": \"DIR\"}")
		return
	}
	s.mu.Lock()
	s.next++
	op := &operation{ID: fmt.Sprintf("%s-%d", kind, s.next), Kind: kind, Status: "IN_PROGRESS", Dir: req.Dir, Started: time.Now().UnixMilli()}
	s.ops[op.ID] = op
	s.mu.Unlock()
	go func() {
		ctx := context.Background()
		var loc string
		var err error
		if kind == "stop" {
			loc, err = j.StopWithSavepoint(ctx, req.Dir)
		} else {
			loc, err = j.TriggerSavepoint(ctx, req.Dir)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if err != nil {
			op.Status, op.Failure = "FAILED", err.Error()
			s.cfg.Logger.Warn("savepoint failed", "request", op.ID, "err", err)
			return
		}
		op.Status, op.Location = "COMPLETED", loc
		s.cfg.Logger.Info("savepoint completed", "request", op.ID, "location", loc)
	}()
	WriteJSON(w, http.StatusAccepted, map[string]string{"request-id": op.ID})
}

func (s *Server) savepointStatus(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	op, ok := s.ops[r.PathValue("id")]
	var cp operation
	if ok {
		cp = *op
		op.reported = op.Status != "IN_PROGRESS"
	}
	s.mu.Unlock()
	if !ok {
		WriteError(w, http.StatusNotFound, fmt.Sprintf("no savepoint request %q in this process", r.PathValue("id")))
		return
	}
	WriteJSON(w, http.StatusOK, map[string]any{
		"status":    map[string]string{"id": cp.Status},
		"operation": cp,
	})
}

// AddLatest fills latest's "completed", "savepoint" and "failed" with the
// first of hist (newest first) of each kind, as /jobs/{id}/checkpoints
// shows them; of gives each entry's checkpoint (a scale-out task's
// checkpoint embeds one).
func AddLatest[T any](latest map[string]any, hist []T, of func(T) Checkpoint) {
	for _, c := range hist {
		k := of(c)
		switch {
		case k.Status == "COMPLETED" && !k.Savepoint && latest["completed"] == nil:
			latest["completed"] = c
		case k.Status == "COMPLETED" && k.Savepoint && latest["savepoint"] == nil:
			latest["savepoint"] = c
		case k.Status == "FAILED" && latest["failed"] == nil:
			latest["failed"] = c
		}
	}
}
