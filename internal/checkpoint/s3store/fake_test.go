package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/onceflow/onceflow/internal/s3test"
)

// The tests talk S3 over HTTPS to gofakes3, an S3 protocol server running
// in the test process on 127.0.0.1, through the same client and code a
// real server gets. (Over plain HTTP the client signs every chunk of an
// upload, and gofakes3 keeps those signatures in the parts of multipart
// uploads; over HTTPS the client sends the bytes as they are, as it does
// to every real server on https.)

const (
	testBucket = s3test.Bucket
	testKey    = s3test.AccessKey
	testSecret = s3test.SecretKey
	// badSecretKey is an access key the fake knows but whose signatures it
	// refuses, as a server does when the secret key is wrong.
	badSecretKey = "key-with-wrong-secret"
	// otherRegionKey signs for a region the fake says is wrong.
	otherRegionKey = "key-for-another-region"
	// deniedBucket is a bucket testKey may not read.
	deniedBucket = "someone-elses-bucket"
)

type fakeS3 struct {
	url     string // https://127.0.0.1:port
	handler http.Handler
	tls     http.RoundTripper // trusts the server's certificate
	client  *minio.Client     // the test's own
	cut     *cutter
	jobs    atomic.Int64
}

// startS3 starts an S3 server holding an empty bucket testBucket, and
// points the environment at the test's credentials only.
func startS3(t *testing.T) *fakeS3 {
	t.Helper()
	for _, env := range []string{"AWS_ACCESS_KEY", "AWS_SECRET_KEY"} {
		t.Setenv(env, "")
	}
	var handler http.Handler
	srv := s3test.Start(t, true, func(h http.Handler) http.Handler {
		handler = checkAccessKey(h)
		return handler
	})
	client, err := minio.New(strings.TrimPrefix(srv.URL, "https://"), &minio.Options{
		Creds: credentials.NewStaticV4(testKey, testSecret, ""), Secure: true, Region: "us-east-1", Transport: srv.Transport,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &fakeS3{url: srv.URL, handler: handler, tls: srv.Transport, client: client, cut: &cutter{next: srv.Transport}}
}

// open opens the store of a new job under s3://testBucket/prefix.
func (f *fakeS3) open(t *testing.T, o Options) *Store {
	t.Helper()
	return f.openJob(t, fmt.Sprintf("job-%d", f.jobs.Add(1)), o)
}

func (f *fakeS3) openJob(t *testing.T, job string, o Options) *Store {
	t.Helper()
	if o.Endpoint == "" {
		o.Endpoint = f.url
	}
	o.Transport = f.cut
	s, err := Open(context.Background(), "s3://"+testBucket+"/prefix", job, o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// key returns the key an s3://testBucket/ URL names.
func key(t *testing.T, url string) string {
	t.Helper()
	k, ok := strings.CutPrefix(url, "s3://"+testBucket+"/")
	if !ok {
		t.Fatalf("%s is not in the test bucket", url)
	}
	return k
}

// read, write, delete and exists reach behind the store, with a client
// of their own, to check and damage what it holds.
func (f *fakeS3) read(t *testing.T, url string) []byte {
	t.Helper()
	obj, err := f.client.GetObject(context.Background(), testBucket, key(t, url), minio.GetObjectOptions{})
	if err != nil {
		t.Fatalf("read %s: %v", url, err)
	}
	defer obj.Close()
	data, err := io.ReadAll(obj)
	if err != nil {
		t.Fatalf("read %s: %v", url, err)
	}
	return data
}

func (f *fakeS3) write(t *testing.T, url string, data []byte) {
	t.Helper()
	if _, err := f.client.PutObject(context.Background(), testBucket, key(t, url), bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatalf("write %s: %v", url, err)
	}
}

func (f *fakeS3) delete(t *testing.T, url string) {
	t.Helper()
	if err := f.client.RemoveObject(context.Background(), testBucket, key(t, url), minio.RemoveObjectOptions{}); err != nil {
		t.Fatalf("delete %s: %v", url, err)
	}
}

func (f *fakeS3) exists(t *testing.T, url string) bool {
	t.Helper()
	_, err := f.client.StatObject(context.Background(), testBucket, key(t, url), minio.StatObjectOptions{})
	if err != nil && minio.ToErrorResponse(err).Code != "NoSuchKey" {
		t.Fatal(err)
	}
	return err == nil
}

// checkAccessKey answers as S3 does for credentials it does not accept:
// the fake itself checks none.
func checkAccessKey(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, cred, _ := strings.Cut(r.Header.Get("Authorization"), "Credential=")
		switch key, _, _ := strings.Cut(cred, "/"); key {
		case testKey:
			if strings.HasPrefix(r.URL.Path, "/"+deniedBucket) {
				s3Error(w, r, "AccessDenied", "Access Denied")
				return
			}
			next.ServeHTTP(w, r)
		case otherRegionKey:
			s3Error(w, r, "AuthorizationHeaderMalformed", "The authorization header is malformed; the region 'us-east-1' is wrong; expecting 'eu-west-1'")
		case badSecretKey:
			s3Error(w, r, "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided. Check your key and signing method.")
		default:
			s3Error(w, r, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.")
		}
	})
}

func s3Error(w http.ResponseWriter, r *http.Request, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusForbidden)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+`<Error><Code>%s</Code><Message>%s</Message><Resource>%s</Resource><RequestId>1</RequestId></Error>`, code, msg, r.URL.Path)
}

// cutter is the client's transport: it cuts the body of the requests
// that match after a number of bytes, as a connection lost in the middle
// of an upload does, and counts the requests it sees.
type cutter struct {
	next http.RoundTripper

	mu       sync.Mutex
	match    func(r *http.Request) bool
	after    int64
	cuts     int
	requests []string // method and URL of every request
}

func (c *cutter) cutWhen(after int64, match func(r *http.Request) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.match, c.after, c.cuts = match, after, 0
}

func (c *cutter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.requests = append(c.requests, r.Method+" "+r.URL.String())
	cut := c.match != nil && r.Body != nil && c.match(r)
	if cut {
		c.cuts++
		r = r.Clone(r.Context())
		r.Body = &cutBody{body: r.Body, left: c.after}
	}
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

func (c *cutter) stats() (cuts int, requests []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cuts, append([]string(nil), c.requests...)
}

type cutBody struct {
	body io.ReadCloser
	left int64
}

var errCut = errors.New("test: connection lost in the middle of the upload")

func (b *cutBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errCut
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.body.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cutBody) Close() error { return b.body.Close() }
