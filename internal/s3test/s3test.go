// Package s3test starts an S3 protocol server in the test process for
// tests of jobs whose checkpoints live in object storage: gofakes3 with an
// in-memory backend, on 127.0.0.1, spoken to over real HTTP by the same
// client (minio-go) a real server gets. Tests only import it.
package s3test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Bucket is the bucket every Server holds, empty at the start.
const Bucket = "onceflow-test"

// Credentials the server's clients use (the server checks none).
const (
	AccessKey = "onceflow-test-key"
	SecretKey = "onceflow-test-secret"
)

// Server is a running S3 server.
type Server struct {
	// URL is the endpoint, http(s)://127.0.0.1:port.
	URL string
	// Transport trusts the server's certificate (TLS servers only).
	Transport http.RoundTripper
}

// Start starts a server holding Bucket until the test ends and points the
// environment's AWS credentials at it. With tls, it serves HTTPS with a
// certificate that only Transport trusts: use it for multipart uploads,
// which gofakes3 mangles over plain HTTP (it keeps the per-chunk
// signatures in the parts).
//
// wrap, if given, wraps the server's handler (a test that answers some
// requests itself, such as refusing credentials).
func Start(t testing.TB, tls bool, wrap ...func(http.Handler) http.Handler) *Server {
	t.Helper()
	for _, env := range []string{"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_SESSION_TOKEN"} {
		t.Setenv(env, "")
	}
	t.Setenv("AWS_ACCESS_KEY_ID", AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", SecretKey)
	backend := s3mem.New()
	if err := backend.CreateBucket(Bucket); err != nil {
		t.Fatal(err)
	}
	h := gofakes3.New(backend).Server()
	for _, w := range wrap {
		h = w(h)
	}
	var srv *httptest.Server
	if tls {
		srv = httptest.NewTLSServer(h)
	} else {
		srv = httptest.NewServer(h)
	}
	t.Cleanup(srv.Close)
	return &Server{URL: srv.URL, Transport: srv.Client().Transport}
}
