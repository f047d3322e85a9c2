package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/minio/minio-go/v7"
)

// Requests carry no deadline of their own (storage.Storage has no
// context): the client's transport gives up on a server that sends no
// answer within a minute, and retries what can be retried.
var bg = context.Background()

// fail names the object of a failed request; a missing object matches
// fs.ErrNotExist.
func (s *Store) fail(op, key string, err error) error {
	if code := minio.ToErrorResponse(err).Code; code == "NoSuchKey" || code == "NotFound" {
		return &fs.PathError{Op: op, Path: s.url(key), Err: fs.ErrNotExist}
	}
	return fmt.Errorf("s3store: %s %s: %w", op, s.url(key), err)
}

// open starts downloading key and returns the object and its size.
func (s *Store) open(key string) (*minio.Object, int64, error) {
	obj, err := s.client.GetObject(bg, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, 0, s.fail("read", key, err)
	}
	st, err := obj.Stat()
	if err != nil {
		_ = obj.Close()
		return nil, 0, s.fail("read", key, err)
	}
	return obj, st.Size, nil
}

// get downloads a small object whole.
func (s *Store) get(key string) ([]byte, error) {
	obj, _, err := s.open(key)
	if err != nil {
		return nil, err
	}
	defer obj.Close()
	data, err := io.ReadAll(obj)
	if err != nil {
		return nil, s.fail("read", key, err)
	}
	return data, nil
}

// put uploads size bytes from r as key, in parts when they are more than
// the part size. The object exists only once the upload has completed; a
// failed multipart upload is aborted.
func (s *Store) put(key string, r io.Reader, size int64) error {
	info, err := s.client.PutObject(bg, s.bucket, key, r, size, minio.PutObjectOptions{PartSize: s.partSize})
	if err != nil {
		return s.fail("upload", key, err)
	}
	if info.Size != size {
		return fmt.Errorf("s3store: upload %s: the server stored %d bytes of %d", s.url(key), info.Size, size)
	}
	return nil
}

// create uploads data as key unless key exists; created is false when it
// did. A server that does not support conditional writes overwrites.
func (s *Store) create(key string, data []byte) (created bool, err error) {
	opts := minio.PutObjectOptions{}
	opts.SetMatchETagExcept("*")
	_, err = s.client.PutObject(bg, s.bucket, key, bytes.NewReader(data), int64(len(data)), opts)
	switch minio.ToErrorResponse(err).Code {
	case "":
		if err != nil {
			return false, s.fail("upload", key, err)
		}
		return true, nil
	case "PreconditionFailed", "ConditionalRequestConflict":
		return false, nil
	case "NotImplemented":
		return true, s.put(key, bytes.NewReader(data), int64(len(data)))
	}
	return false, s.fail("upload", key, err)
}

// list calls each for every object under prefix with its size.
func (s *Store) list(prefix string, each func(key string, size int64)) error {
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	for obj := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			return s.fail("list", prefix, obj.Err)
		}
		each(obj.Key, obj.Size)
	}
	return nil
}

// sizes returns the sizes of the objects under prefix by name below it.
func (s *Store) sizes(prefix string) (map[string]int64, error) {
	out := map[string]int64{}
	err := s.list(prefix, func(key string, size int64) { out[key[len(prefix):]] = size })
	return out, err
}

// remove deletes key; a missing key is no error.
func (s *Store) remove(key string) error {
	if err := s.client.RemoveObject(bg, s.bucket, key, minio.RemoveObjectOptions{}); err != nil {
		if err = s.fail("delete", key, err); !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// removeAll deletes every object under prefix.
func (s *Store) removeAll(prefix string) error {
	var keys []string
	if err := s.list(prefix, func(key string, _ int64) { keys = append(keys, key) }); err != nil {
		return err
	}
	if len(keys) == 0 {
		return nil
	}
	objs := make(chan minio.ObjectInfo, len(keys))
	for _, k := range keys {
		objs <- minio.ObjectInfo{Key: k}
	}
	close(objs)
	var errs []error
	for e := range s.client.RemoveObjects(bg, s.bucket, objs, minio.RemoveObjectsOptions{}) {
		errs = append(errs, s.fail("delete", e.ObjectName, e.Err))
	}
	return errors.Join(errs...)
}
