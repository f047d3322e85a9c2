package s3store

import (
	"context"
	"crypto/rand"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/onceflow/onceflow/internal/checkpoint/storage"
	"github.com/onceflow/onceflow/internal/checkpoint/storage/storagetest"
)

// TestBehaviour runs the behaviour tests every storage.Storage passes
// (the local store runs the same ones).
func TestBehaviour(t *testing.T) {
	f := startS3(t)
	storagetest.Run(t, storagetest.Harness{
		New: func(t *testing.T) storage.Storage { return f.open(t, Options{}) },
		Reopen: func(t *testing.T, s storage.Storage) storage.Storage {
			return f.openJob(t, s.Root()[strings.LastIndexByte(s.Root(), '/')+1:], Options{})
		},
		Join:   func(dir, name string) string { return dir + "/" + name },
		Read:   f.read,
		Write:  f.write,
		Delete: f.delete,
	})
}

func TestParseURL(t *testing.T) {
	for _, tc := range []struct{ url, bucket, prefix string }{
		{"s3://bucket", "bucket", ""},
		{"s3://bucket/", "bucket", ""},
		{"s3://my-bucket/a/b/", "my-bucket", "a/b"},
		{"s3://my.bucket.1/prod", "my.bucket.1", "prod"},
	} {
		bucket, prefix, err := ParseURL(tc.url)
		if err != nil || bucket != tc.bucket || prefix != tc.prefix {
			t.Errorf("ParseURL(%q) = %q, %q, %v; want %q, %q", tc.url, bucket, prefix, err, tc.bucket, tc.prefix)
		}
	}
	for _, bad := range []string{"", "bucket/prefix", "/data/checkpoints", "S3://bucket", "s3://", "s3:///prefix", "s3://ab/x", "s3://-bucket/x", "s3://b/a//b", "s3://bucket/a/../b", "gs://bucket/x"} {
		if _, _, err := ParseURL(bad); err == nil || !strings.Contains(err.Error(), "s3://bucket/prefix") {
			t.Errorf("ParseURL(%q): %v; want an error showing the form s3://bucket/prefix", bad, err)
		}
	}
}

func TestOpenReadsTheEnvironment(t *testing.T) {
	f := startS3(t)
	t.Setenv("AWS_ENDPOINT_URL", f.url)
	t.Setenv("AWS_REGION", "eu-central-1")
	s, err := Open(context.Background(), "s3://"+testBucket+"/team/", "orders", Options{Transport: f.tls})
	if err != nil {
		t.Fatalf("Open with the endpoint from AWS_ENDPOINT_URL: %v", err)
	}
	if s.Root() != "s3://"+testBucket+"/team/orders" || s.Dir(3) != s.Root()+"/checkpoints/chk-00000000000000000003" {
		t.Errorf("Root %s, Dir(3) %s", s.Root(), s.Dir(3))
	}
	if got := s.client.EndpointURL().Host; !strings.Contains(f.url, got) {
		t.Errorf("endpoint %s, want the one of AWS_ENDPOINT_URL (%s)", got, f.url)
	}
	for _, tc := range []struct {
		o          Options
		host       string
		secure     bool
		wantRegion string
	}{
		{Options{Endpoint: "minio.local:9000"}, "minio.local:9000", true, "eu-central-1"},
		{Options{Endpoint: "minio.local:9000", Insecure: true}, "minio.local:9000", false, "eu-central-1"},
		{Options{Endpoint: "https://s3.example.com/", Region: "xx-1"}, "s3.example.com", true, "xx-1"},
	} {
		host, secure, err := tc.o.endpoint()
		if err != nil || host != tc.host || secure != tc.secure || tc.o.region() != tc.wantRegion {
			t.Errorf("%+v: endpoint %s, %v, %v; region %s", tc.o, host, secure, err, tc.o.region())
		}
	}
	for _, bad := range []string{"ftp://host", "http://host/bucket", "host/bucket"} {
		if _, _, err := (Options{Endpoint: bad}).endpoint(); err == nil {
			t.Errorf("endpoint %q accepted", bad)
		}
	}
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("AWS_REGION", "")
	if host, secure, _ := (Options{}).endpoint(); host != "s3.amazonaws.com" || !secure || (Options{}).region() != "us-east-1" {
		t.Errorf("defaults: %s, %v, %s", host, secure, (Options{}).region())
	}
}

// Open says what to fix when the server refuses.
func TestOpenExplainsRefusals(t *testing.T) {
	f := startS3(t)
	for _, tc := range []struct {
		key, bucket string
		want        []string
	}{
		{"AKIDUNKNOWN", testBucket, []string{"InvalidAccessKeyId", "refused the credentials", "access key AKIDUNKNOWN from AWS_ACCESS_KEY_ID", "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"}},
		{badSecretKey, testBucket, []string{"SignatureDoesNotMatch", "refused the credentials", "access key " + badSecretKey + " from AWS_ACCESS_KEY_ID", "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"}},
		{otherRegionKey, testBucket, []string{"not in region us-east-1", "expecting 'eu-west-1'", "set AWS_REGION"}},
		{testKey, deniedBucket, []string{"denied access to s3://" + deniedBucket + "/p/job", "s3:ListBucket", "access key " + testKey}},
	} {
		t.Setenv("AWS_ACCESS_KEY_ID", tc.key)
		_, err := Open(context.Background(), "s3://"+tc.bucket+"/p", "job", Options{Endpoint: f.url, Transport: f.tls})
		if err == nil {
			t.Fatalf("Open with access key %s succeeded", tc.key)
		}
		for _, want := range tc.want {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		if strings.Contains(err.Error(), testSecret) {
			t.Errorf("the error shows the secret key: %v", err)
		}
	}
}

func TestOpenMissingBucket(t *testing.T) {
	f := startS3(t)
	_, err := Open(context.Background(), "s3://no-such-bucket/p", "job", Options{Endpoint: f.url, Transport: f.tls})
	if err == nil || !strings.Contains(err.Error(), `bucket "no-such-bucket" does not exist`) {
		t.Fatalf("Open of a missing bucket: %v; want an error naming it", err)
	}
}

func TestOpenUnreachable(t *testing.T) {
	startS3(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, err = Open(context.Background(), "s3://"+testBucket+"/p", "job", Options{Endpoint: "http://" + addr, MaxRetries: 1})
	if err == nil || !strings.Contains(err.Error(), "cannot reach") || !strings.Contains(err.Error(), "AWS_ENDPOINT_URL") {
		t.Fatalf("Open of a closed port: %v", err)
	}
	if _, err := Open(context.Background(), "s3://"+testBucket+"/p", "a/b", Options{Endpoint: "http://" + addr}); err == nil {
		t.Error("a job name with a slash was accepted")
	}
}

// A bare host:port with Insecure talks plain HTTP (path-style, as MinIO wants).
func TestPlainHTTP(t *testing.T) {
	f := startS3(t)
	srv := httptest.NewServer(f.handler)
	defer srv.Close()
	s, err := Open(context.Background(), "s3://"+testBucket+"/plain", "job", Options{Endpoint: strings.TrimPrefix(srv.URL, "http://"), Insecure: true, PathStyle: true})
	if err != nil {
		t.Fatalf("Open over plain HTTP: %v", err)
	}
	m := keyedCheckpoint(t, s, 1, map[int][]byte{2: []byte("two")})
	if err := s.Commit(m); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ReadKeyed(m, m.Operators["count"].Keyed[0], 0, 7); err != nil || string(got[2]) != "two" {
		t.Fatalf("ReadKeyed = %v, %v", got, err)
	}
}

// Damage found on restore names the object as s3://bucket/key.
func TestRestoreNamesTheDamagedObject(t *testing.T) {
	f := startS3(t)
	s := f.open(t, Options{})
	m := keyedCheckpoint(t, s, 5, map[int][]byte{1: []byte("one"), 6: []byte("six")})
	if err := s.Commit(m); err != nil {
		t.Fatal(err)
	}
	kf := m.Operators["count"].Keyed[0]
	object := "s3://" + testBucket + "/prefix/" + s.root[strings.LastIndexByte(s.root, '/')+1:] + "/checkpoints/chk-00000000000000000005/count-0.state"
	manifest := s.Dir(5) + "/_manifest"

	data := f.read(t, object)
	data[len(data)-1] ^= 1
	f.write(t, object, data)
	_, err := s.Load(5)
	if ce := wantCorrupt(t, err, object); !strings.Contains(ce.Reason, "SHA-256 mismatch") || ce.CheckpointID != 5 {
		t.Errorf("reason %q, checkpoint %d", ce.Reason, ce.CheckpointID)
	}
	f.delete(t, object)
	_, err = s.ReadKeyed(m, kf, 0, 7)
	if ce := wantCorrupt(t, err, object); !strings.Contains(ce.Reason, "missing") {
		t.Errorf("reason %q", ce.Reason)
	}
	f.write(t, manifest, []byte("onceflow-manifest sha256=00\n{}"))
	_, _, err = s.Latest(storage.LatestOptions{})
	wantCorrupt(t, err, manifest)
}

// keyedCheckpoint writes the one state file (key groups 0..7) of
// checkpoint id and returns the manifest naming it, not committed.
func keyedCheckpoint(t *testing.T, s *Store, id int64, groups map[int][]byte) *storage.Manifest {
	t.Helper()
	kf, err := s.WriteKeyedFile(id, "count-0.state", 0, 7, groups)
	if err != nil {
		t.Fatal(err)
	}
	return &storage.Manifest{Job: "j", CheckpointID: id, MaxParallelism: 8,
		Operators: map[string]*storage.OperatorState{"count": {Parallelism: 1, Keyed: []storage.KeyedFile{kf}}}}
}

func wantCorrupt(t *testing.T, err error, path string) *storage.CorruptError {
	t.Helper()
	var ce *storage.CorruptError
	if !errors.As(err, &ce) || ce.Path != path || !strings.Contains(err.Error(), path) {
		t.Fatalf("got %v, want a *storage.CorruptError naming %s", err, path)
	}
	return ce
}

// Files larger than a part go up as multipart uploads.
func TestMultipartUpload(t *testing.T) {
	f := startS3(t)
	s := f.open(t, Options{partSize: 64 << 10})
	src := writeRandom(t, 300<<10)
	df, err := s.PutDBFile(3, src, storage.DBFile{Name: "000007.sst", Path: storage.SharedName(3, "db-000007.sst"), Shared: true})
	if err != nil {
		t.Fatalf("PutDBFile: %v", err)
	}
	_, requests := f.cut.stats()
	if parts := countMatching(requests, "partNumber="); parts != 5 {
		t.Errorf("%d part uploads, want 5 parts of 64 KiB for 300 KiB", parts)
	}
	m := &storage.Manifest{Job: "j", CheckpointID: 3, MaxParallelism: 8, Operators: map[string]*storage.OperatorState{
		"dedupe": {Parallelism: 1, DB: []storage.DBSnapshot{{FirstKeyGroup: 0, LastKeyGroup: 7, Files: []storage.DBFile{df}}}}}}
	if err := s.Commit(m); err != nil {
		t.Fatal(err)
	}
	loaded, err := s.Load(3)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	dst := filepath.Join(t.TempDir(), df.Name)
	if err := s.GetDBFile(loaded, df, dst); err != nil {
		t.Fatalf("GetDBFile: %v", err)
	}
	want, _ := os.ReadFile(src)
	if got, _ := os.ReadFile(dst); string(got) != string(want) {
		t.Error("the downloaded file differs from the uploaded one")
	}
}

func writeRandom(t *testing.T, n int) string {
	t.Helper()
	data := make([]byte, n)
	_, _ = rand.Read(data)
	path := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func countMatching(requests []string, part string) int {
	n := 0
	for _, r := range requests {
		if strings.Contains(r, part) {
			n++
		}
	}
	return n
}

// An upload cut off midway fails with an error naming the object and
// leaves nothing a loader accepts: no object, no checkpoint.
func TestInterruptedUploads(t *testing.T) {
	f := startS3(t)
	s := f.open(t, Options{partSize: 64 << 10, MaxRetries: 1})
	if err := s.Commit(keyedCheckpoint(t, s, 1, nil)); err != nil {
		t.Fatal(err)
	}
	keyOf := func(name string) func(r *http.Request) bool {
		return func(r *http.Request) bool {
			return r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/"+name)
		}
	}
	wantFailed := func(what string, err error, object string) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: the cut upload succeeded", what)
		}
		if cuts, _ := f.cut.stats(); cuts == 0 {
			t.Fatalf("%s: no request was cut", what)
		}
		if !strings.Contains(err.Error(), object) || !strings.Contains(err.Error(), errCut.Error()) {
			t.Errorf("%s: error %q does not name %s and the cause", what, err, object)
		}
		if f.exists(t, object) {
			t.Errorf("%s: the interrupted upload left %s", what, object)
		}
		if m, _, err := s.Latest(storage.LatestOptions{}); err != nil || m.CheckpointID != 1 {
			t.Errorf("%s: Latest = %v, %v; want checkpoint 1", what, m, err)
		}
		if ids, err := s.List(); err != nil || !slices.Equal(ids, []int64{1}) {
			t.Errorf("%s: List = %v, %v", what, ids, err)
		}
		f.cut.cutWhen(0, nil)
	}

	// A state file (one PUT).
	f.cut.cutWhen(100, keyOf("count-0.state"))
	_, err := s.WriteKeyedFile(2, "count-0.state", 0, 7, map[int][]byte{3: make([]byte, 5000)})
	wantFailed("state file", err, s.Dir(2)+"/count-0.state")

	// The manifest: the commit point never happened.
	m2 := keyedCheckpoint(t, s, 2, map[int][]byte{3: make([]byte, 5000)})
	f.cut.cutWhen(50, keyOf("_manifest"))
	wantFailed("manifest", s.Commit(m2), s.Dir(2)+"/_manifest")
	f.cut.cutWhen(50, keyOf("_manifest.pending"))
	_, err = s.WritePending(m2)
	wantFailed("pending manifest", err, s.Dir(2)+"/_manifest.pending")
	if p, err := s.Pending(); err != nil || len(p) != 0 {
		t.Errorf("Pending = %v, %v after a failed WritePending", p, err)
	}

	// A large database file: the third part of a multipart upload.
	src := writeRandom(t, 300<<10)
	f.cut.cutWhen(10<<10, func(r *http.Request) bool { return r.URL.Query().Get("partNumber") == "3" })
	_, err = s.PutDBFile(2, src, storage.DBFile{Name: "9.sst", Path: storage.SharedName(2, "db-9.sst"), Shared: true})
	wantFailed("multipart upload", err, s.Root()+"/shared/"+storage.SharedName(2, "db-9.sst"))
	for u := range s.client.ListIncompleteUploads(context.Background(), testBucket, "prefix/", true) {
		if u.Err != nil {
			t.Fatal(u.Err)
		}
		t.Errorf("the failed multipart upload of %s was not aborted", u.Key)
	}

	// Nothing is lost: the retried checkpoint commits and loads.
	if err := s.Commit(m2); err != nil {
		t.Fatalf("Commit after the failures: %v", err)
	}
	if m, err := s.Load(2); err != nil || m.CheckpointID != 2 {
		t.Fatalf("Load(2) = %v, %v", m, err)
	}
}

// Two processes creating the state id at once agree on one.
func TestStateIDIsCreatedOnce(t *testing.T) {
	f := startS3(t)
	s := f.openJob(t, "orders", Options{})
	other := f.openJob(t, "orders", Options{})
	f.write(t, s.Root()+"/"+storage.StateIDName, []byte("0123456789abcdef0123456789abcdef\n"))
	created, err := other.create(other.root+"/"+storage.StateIDName, []byte("ffffffffffffffffffffffffffffffff\n"))
	if err != nil || created {
		t.Fatalf("create over an existing state id: created %v, %v", created, err)
	}
	if id, err := s.StateID(); err != nil || id != "0123456789abcdef0123456789abcdef" {
		t.Errorf("StateID = %q, %v", id, err)
	}
}

// A multipart upload a dead process left unfinished is aborted by GC once
// it is stale; a recent one and one outside the job's root are left alone.
func TestGCAbortsStaleUploads(t *testing.T) {
	f := startS3(t)
	s := f.open(t, Options{})
	if err := s.Commit(keyedCheckpoint(t, s, 1, nil)); err != nil {
		t.Fatal(err)
	}
	core := minio.Core{Client: f.client}
	ctx := context.Background()
	start := func(key string) {
		t.Helper()
		if _, err := core.NewMultipartUpload(ctx, testBucket, key, minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	unfinished := func() []string {
		t.Helper()
		var keys []string
		for u := range f.client.ListIncompleteUploads(ctx, testBucket, "", true) {
			if u.Err != nil {
				t.Fatal(u.Err)
			}
			keys = append(keys, u.Key)
		}
		slices.Sort(keys)
		return keys
	}
	mine := s.root + "/shared/7-dead-000042.sst"
	others := "elsewhere/shared/000042.sst"
	start(mine)
	start(others)

	if _, err := s.GC(1); err != nil {
		t.Fatal(err)
	}
	if got := unfinished(); !slices.Equal(got, []string{others, mine}) {
		t.Fatalf("GC aborted a recent upload: unfinished %v", got)
	}
	s.staleUpload = 0
	if _, err := s.GC(1); err != nil {
		t.Fatal(err)
	}
	if got := unfinished(); !slices.Equal(got, []string{others}) {
		t.Fatalf("after GC with every upload stale: unfinished %v, want only %s", got, others)
	}
}
