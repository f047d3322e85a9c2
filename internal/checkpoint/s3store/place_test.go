package s3store

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The place of scale-out job savepoints: whole-object reads and writes,
// an exclusive create, listing one level, and locations as s3:// URLs; a
// missing object is fs.ErrNotExist named s3://bucket/key, and a
// directory without a savepoint manifest does not download as one.
func TestPlace(t *testing.T) {
	f := startS3(t)
	p, err := OpenPlace(context.Background(), "s3://"+testBucket+"/prefix", Options{Endpoint: f.url, Transport: f.cut})
	if err != nil {
		t.Fatal(err)
	}
	root := "s3://" + testBucket + "/prefix"
	if p.Root() != root || p.Join(root, "j.savepoints", "request.json") != root+"/j.savepoints/request.json" {
		t.Fatalf("Root %s, Join %s", p.Root(), p.Join(root, "j.savepoints", "request.json"))
	}
	for _, bad := range []string{"/data/sp", "sp", "s3://" + testBucket, "s3://" + testBucket + "/a//b"} {
		if _, err := p.Locate(bad); err == nil {
			t.Errorf("Locate(%q) accepted", bad)
		}
	}
	if loc, err := p.Locate(root + "/sp/"); err != nil || loc != root+"/sp" {
		t.Errorf("Locate: %q, %v", loc, err)
	}
	missing := root + "/j.savepoints/request.json"
	if _, err := p.ReadFile(missing); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("reading a missing object: %v; want fs.ErrNotExist naming %s", err, missing)
	}
	if err := p.WriteFile(missing, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := p.WriteFile(missing, []byte("two")); err != nil {
		t.Fatal(err)
	}
	if b, err := p.ReadFile(missing); err != nil || string(b) != "two" {
		t.Errorf("read back %q, %v", b, err)
	}
	marker := root + "/j.savepoints/restore-000001.json"
	if created, err := p.CreateFile(marker, []byte("mine")); !created || err != nil {
		t.Fatalf("first create: %v, %v", created, err)
	}
	if created, err := p.CreateFile(marker, []byte("theirs")); created || err != nil {
		t.Fatalf("second create: %v, %v; want it refused", created, err)
	}
	if b, _ := p.ReadFile(marker); string(b) != "mine" {
		t.Errorf("the marker holds %q after a second create", b)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "sub/b"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	task := root + "/j.savepoints/sp/task-0"
	if err := p.Upload(dir, task); err != nil {
		t.Fatal(err)
	}
	if names, err := p.List(root + "/j.savepoints"); err != nil || !slices.Equal(names, []string{"request.json", "restore-000001.json", "sp"}) {
		t.Errorf("List: %v, %v", names, err)
	}
	if names, err := p.List(task); err != nil || !slices.Equal(names, []string{"a", "sub"}) {
		t.Errorf("List of the uploaded directory: %v, %v", names, err)
	}
	err = p.Download(task, filepath.Join(t.TempDir(), "x"))
	if !errors.Is(err, fs.ErrInvalid) || !strings.Contains(err.Error(), task+"/_manifest") {
		t.Errorf("downloading a directory without a manifest: %v; want it damaged, naming %s/_manifest", err, task)
	}
	if err := p.Download(root+"/nothing", filepath.Join(t.TempDir(), "y")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("downloading nothing: %v", err)
	}
}
