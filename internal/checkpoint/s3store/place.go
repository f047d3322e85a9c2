package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/minio/minio-go/v7"

	"github.com/onceflow/onceflow/internal/checkpoint/storage"
)

// Place keeps a scale-out job's savepoints, and the objects that
// coordinate them, in object storage: it is the scaleout.SavepointPlace
// of a job whose checkpoints live there (docs/design.md, "Savepoints of
// the whole job"). Its locations are s3:// URLs on one server; the job's
// own are under its root, s3://bucket/prefix/<job>.savepoints/. Every
// write is one PUT, which S3 makes visible whole or not at all, so a
// reader never sees a part of a request or a result; CreateFile is a
// conditional PUT (If-None-Match), which a server without conditional
// writes turns into a plain one.
type Place struct {
	s *Store // the client; root is the place's key prefix
}

// OpenPlace returns the place under url (s3://bucket/prefix: the job's
// checkpoints location), checking that the bucket exists and that the
// server accepts the credentials, as Open does. ctx bounds only this
// check.
func OpenPlace(ctx context.Context, url string, o Options) (*Place, error) {
	s, err := dial(url, o)
	if err != nil {
		return nil, err
	}
	if err := s.checkAccess(ctx); err != nil {
		return nil, err
	}
	return &Place{s: s}, nil
}

// Root is s3://bucket/prefix.
func (p *Place) Root() string { return strings.TrimSuffix(p.s.url(p.s.root), "/") }

// Locate checks that loc is an s3:// URL with a key prefix and writes it
// without a trailing slash.
func (p *Place) Locate(loc string) (string, error) {
	if !strings.HasPrefix(loc, "s3://") {
		return "", fmt.Errorf("%q is not an object storage location, and this job keeps its checkpoints and savepoints in %s: name one such as %s/NAME, or leave it out for the default", loc, p.Root(), p.Root())
	}
	bucket, prefix, err := ParseURL(loc)
	if err != nil {
		return "", err
	}
	if prefix == "" {
		return "", fmt.Errorf("%s names a bucket alone: a savepoint needs a key prefix of its own, such as s3://%s/savepoints/NAME", loc, bucket)
	}
	return "s3://" + bucket + "/" + prefix, nil
}

// Join appends elem to loc with slashes.
func (p *Place) Join(loc string, elem ...string) string {
	rel := filepath.ToSlash(path.Join(elem...))
	return strings.TrimSuffix(loc, "/") + "/" + strings.TrimPrefix(rel, "/")
}

// LocalPath: object storage is no filesystem.
func (p *Place) LocalPath(string) (string, bool) { return "", false }

// MakeDir does nothing: object storage has no directories.
func (p *Place) MakeDir(string) error { return nil }

// at is the store of loc's bucket and loc's key.
func (p *Place) at(loc string) (*Store, string, error) {
	bucket, key, err := ParseURL(loc)
	if err != nil {
		return nil, "", err
	}
	s := *p.s
	s.bucket, s.root = bucket, ""
	return &s, key, nil
}

// List names the objects and the key prefixes directly under loc.
func (p *Place) List(loc string) ([]string, error) {
	s, key, err := p.at(loc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	var out []string
	for obj := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: key + "/"}) {
		if obj.Err != nil {
			return nil, s.fail("list", key+"/", obj.Err)
		}
		if name := strings.TrimSuffix(obj.Key[len(key)+1:], "/"); name != "" {
			out = append(out, name)
		}
	}
	return out, nil
}

// ReadFile downloads loc; a missing object matches fs.ErrNotExist and is
// named s3://bucket/key.
func (p *Place) ReadFile(loc string) ([]byte, error) {
	s, key, err := p.at(loc)
	if err != nil {
		return nil, err
	}
	return s.get(key)
}

// WriteFile uploads data as loc in one PUT.
func (p *Place) WriteFile(loc string, data []byte) error {
	s, key, err := p.at(loc)
	if err != nil {
		return err
	}
	return s.put(key, bytes.NewReader(data), int64(len(data)))
}

// CreateFile uploads data as loc unless loc exists.
func (p *Place) CreateFile(loc string, data []byte) (bool, error) {
	s, key, err := p.at(loc)
	if err != nil {
		return false, err
	}
	return s.create(key, data)
}

// Upload uploads every file below the local directory dir to loc/<its
// path below dir>, the savepoint's manifest (storage.ManifestName) last:
// a savepoint in the bucket has its manifest only once its files are
// there.
func (p *Place) Upload(dir, loc string) error {
	s, key, err := p.at(loc)
	if err != nil {
		return err
	}
	var files []string
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		files = append(files, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		return fmt.Errorf("s3store: upload %s: %w", dir, err)
	}
	slices.SortStableFunc(files, func(a, b string) int {
		switch {
		case a == storage.ManifestName && b != a:
			return 1
		case b == storage.ManifestName && b != a:
			return -1
		}
		return 0
	})
	for _, rel := range files {
		if err := uploadFile(s, filepath.Join(dir, filepath.FromSlash(rel)), key+"/"+rel); err != nil {
			return err
		}
	}
	return nil
}

func uploadFile(s *Store, file, key string) error {
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("s3store: upload: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("s3store: upload: %w", err)
	}
	return s.put(key, f, st.Size())
}

// Download downloads every object under loc into the local directory dir
// and checks the savepoint there: its manifest, and every file it names
// with its size and checksum. Nothing under loc is an error matching
// fs.ErrNotExist; a damaged or missing object one matching fs.ErrInvalid,
// both naming s3://bucket/key.
func (p *Place) Download(loc, dir string) error {
	s, key, err := p.at(loc)
	if err != nil {
		return err
	}
	sizes, err := s.sizes(key + "/")
	if err != nil {
		return err
	}
	if len(sizes) == 0 {
		return &fs.PathError{Op: "download", Path: s.url(key), Err: fs.ErrNotExist}
	}
	if _, ok := sizes[storage.ManifestName]; !ok {
		return fmt.Errorf("s3store: the savepoint %s has no manifest (%s is missing): %w", s.url(key), s.url(key+"/"+storage.ManifestName), fs.ErrInvalid)
	}
	for rel, size := range sizes {
		parts := strings.Split(rel, "/")
		if slices.Contains(parts, "..") || slices.Contains(parts, "") || strings.Contains(rel, "\\") {
			return fmt.Errorf("s3store: the savepoint %s holds an object whose name cannot be a file: %s: %w", s.url(key), s.url(key+"/"+rel), fs.ErrInvalid)
		}
		if err := downloadFile(s, key+"/"+rel, filepath.Join(dir, filepath.FromSlash(rel)), size); err != nil {
			return err
		}
	}
	m, err := storage.LoadManifest(dir)
	if err == nil {
		err = storage.Verify(m)
	}
	if err != nil {
		obj := s.url(key + "/" + storage.ManifestName)
		var ce *storage.CorruptError
		if errors.As(err, &ce) {
			if rel, rerr := filepath.Rel(dir, ce.Path); rerr == nil && !strings.HasPrefix(rel, "..") {
				obj = s.url(key + "/" + filepath.ToSlash(rel))
			}
			err = errors.New(ce.Reason)
		}
		return fmt.Errorf("s3store: the savepoint %s is damaged: %s: %v: %w", s.url(key), obj, err, fs.ErrInvalid)
	}
	return nil
}

func downloadFile(s *Store, key, file string, size int64) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	obj, _, err := s.open(key)
	if err != nil {
		return err
	}
	defer obj.Close()
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, obj)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return s.fail("download", key, err)
	}
	if n != size {
		return fmt.Errorf("s3store: download %s: %d bytes of %d: %w", s.url(key), n, size, fs.ErrInvalid)
	}
	return nil
}
