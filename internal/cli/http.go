package cli

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/api"
	"github.com/onceflow/onceflow/internal/compile"
	"github.com/onceflow/onceflow/internal/jobfile"
	"github.com/onceflow/onceflow/metrics"
)

// TokenEnv is the environment variable that holds the HTTP API's bearer
// token; it takes precedence over http.token-file.
const TokenEnv = "ONCEFLOW_HTTP_TOKEN"

// httpOptions are the run flags of the HTTP server; empty fields take the
// job file's http section.
type httpOptions struct{ listen, tokenFile, cert, key string }

func httpFlags(fs *flag.FlagSet) func() httpOptions {
	listen := fs.String("http", "", "serve Prometheus metrics (/metrics) and the REST API (/jobs/...) on `ADDR` (host:port; a bare port\n"+
		"listens on 127.0.0.1). Off unless given here or as http.listen in the job file")
	token := fs.String("http-token-file", "", "`FILE` holding the bearer token the endpoints that change the job (savepoints, stop) need;\n"+
		"required when ADDR is not a loopback address ("+TokenEnv+" overrides it)")
	cert := fs.String("http-tls-cert", "", "PEM certificate `FILE`: serve HTTPS (needs --http-tls-key)")
	key := fs.String("http-tls-key", "", "PEM key `FILE` of --http-tls-cert")
	return func() httpOptions { return httpOptions{*listen, *token, *cert, *key} }
}

// merged is o over the job file's http section.
func (o httpOptions) merged(h jobfile.HTTPConfig) httpOptions {
	pick := func(a, b string) string {
		if a != "" {
			return a
		}
		return b
	}
	return httpOptions{pick(o.listen, h.Listen), pick(o.tokenFile, h.TokenFile), pick(o.cert, h.TLSCert), pick(o.key, h.TLSKey)}
}

// newHTTPServer returns the job's HTTP server, or nil when none is asked
// for. It listens at once, so a port in use fails the start.
func newHTTPServer(e *env, jf *jobfile.JobFile, o httpOptions) (*api.Server, error) {
	o = o.merged(jf.HTTP)
	if o.listen == "" {
		return nil, nil
	}
	token := os.Getenv(TokenEnv)
	if token == "" && o.tokenFile != "" {
		b, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("http token: %w", err)
		}
		if token = strings.TrimSpace(string(b)); token == "" {
			return nil, fmt.Errorf("http token file %s is empty", o.tokenFile)
		}
	}
	var desc strings.Builder
	describeJob(&desc, jf)
	spRoot := filepath.Join(jf.State.Dir, jf.Job, "savepoints")
	return api.New(api.Config{
		Addr: o.listen, Token: token, CertFile: o.cert, KeyFile: o.key,
		Job: jf.Job, JobConfig: strings.Split(strings.TrimRight(desc.String(), "\n"), "\n"), Logger: e.log,
		SavepointDir: func() string {
			return filepath.Join(spRoot, "savepoint-"+time.Now().UTC().Format("20060102T150405.000"))
		},
	})
}

// serveJob registers what the pipeline counts besides the engine, attaches
// the job and starts answering.
func serveJob(e *env, srv *api.Server, jf *jobfile.JobFile, job *flow.Job, m *compile.PipelineMetrics) {
	if m != nil {
		srv.Registry().MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Name: "dedupe_duplicates_dropped_total",
			Help:        "Records the pipeline's dedupe steps dropped as duplicates (its rate is the duplicate rate).",
			ConstLabels: prometheus.Labels{"job_name": jf.Job},
		}, func() float64 { return float64(m.DuplicatesDropped.Load()) }))
		srv.Registry().MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Name: "window_late_records_total",
			Help:        "Records the pipeline's window steps took as later than their allowed lateness, and its interval-join, window-join and temporal-join steps as later than the watermark (sent to the late topic, or dropped).",
			ConstLabels: prometheus.Labels{"job_name": jf.Job},
		}, func() float64 { return float64(m.LateRecords.Load()) }))
	}
	srv.Attach(job)
	go srv.Serve()
	e.log.Info("serving metrics and the REST API", "metrics", srv.URL()+"/metrics", "api", srv.URL()+"/jobs/"+jf.Job)
}
