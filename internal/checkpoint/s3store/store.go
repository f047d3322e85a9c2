package s3store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/onceflow/onceflow/internal/checkpoint/storage"
)

// Store holds the checkpoints of one job under s3://bucket/<root>/, laid
// out as storage.CheckpointsDir describes. Its methods are safe for
// concurrent use; GC may run while a newer checkpoint is being written.
// The methods document only where they differ from the local store's
// (storage.Store), whose semantics they share.
type Store struct {
	client   *minio.Client
	bucket   string
	root     string // key prefix of the job, without a trailing slash
	endpoint string // the server, for messages
	region   string
	partSize uint64 // multipart part size; 0: the client's default (16 MiB)
	// staleUpload: GC aborts unfinished multipart uploads older than this.
	staleUpload time.Duration
}

var _ storage.Storage = (*Store)(nil)

// Root returns s3://bucket/prefix/<job>.
func (s *Store) Root() string { return s.url(s.root) }

// Dir returns s3://bucket/prefix/<job>/checkpoints/chk-<id>.
func (s *Store) Dir(id int64) string { return s.url(s.dirKey(id)) }

func (s *Store) url(key string) string { return "s3://" + s.bucket + "/" + key }

func (s *Store) dirKey(id int64) string {
	return s.root + "/" + storage.CheckpointsDir + "/" + storage.DirName(id)
}

func (s *Store) sharedKey(name string) string {
	return s.root + "/" + storage.SharedDir + "/" + name
}

// fileKey returns the key of the file name of m, a checkpoint in this
// store's bucket: in m's directory or, when shared, in the shared area of
// the store m's directory belongs to.
func (s *Store) fileKey(m *storage.Manifest, name string, shared bool) (string, error) {
	if err := storage.CheckFileName(name); err != nil {
		return "", fmt.Errorf("s3store: %s: %w", m.Dir, err)
	}
	dir, ok := strings.CutPrefix(m.Dir, "s3://"+s.bucket+"/")
	if !ok {
		return "", fmt.Errorf("s3store: %s is not in the bucket %s", m.Dir, s.bucket)
	}
	if !shared {
		return dir + "/" + name, nil
	}
	// dir is <root>/checkpoints/chk-<id>, as for the local store.
	return path.Dir(path.Dir(dir)) + "/" + storage.SharedDir + "/" + name, nil
}

// inS3 tells a checkpoint of object storage from a savepoint, which is a
// local directory.
func inS3(m *storage.Manifest) bool { return strings.HasPrefix(m.Dir, "s3://") }

// Commit uploads m as the manifest of checkpoint m.CheckpointID: the
// commit point. It refuses m if a state file it names is not stored with
// the recorded size.
func (s *Store) Commit(m *storage.Manifest) error {
	if err := storage.CheckCommit(m, false); err != nil {
		return err
	}
	_, err := s.writeManifest(m, storage.ManifestName)
	return err
}

// WritePending uploads m as the pending manifest of checkpoint
// m.CheckpointID and returns the hex SHA-256 of the object.
func (s *Store) WritePending(m *storage.Manifest) (string, error) {
	if err := storage.CheckCommit(m, true); err != nil {
		return "", err
	}
	return s.writeManifest(m, storage.PendingName)
}

func (s *Store) writeManifest(m *storage.Manifest, name string) (string, error) {
	dir := s.dirKey(m.CheckpointID)
	var sizes, shared map[string]int64
	data, err := storage.EncodeManifest(m, func(file string, isShared bool) (int64, error) {
		prefix, have := dir+"/", &sizes
		if isShared {
			prefix, have = s.sharedKey(""), &shared
		}
		if *have == nil {
			var err error
			if *have, err = s.sizes(prefix); err != nil {
				return 0, err
			}
		}
		n, ok := (*have)[file]
		if !ok {
			return 0, &fs.PathError{Op: "stat", Path: s.url(prefix + file), Err: fs.ErrNotExist}
		}
		return n, nil
	})
	if err != nil {
		return "", err
	}
	if err := s.put(dir+"/"+name, bytes.NewReader(data), int64(len(data))); err != nil {
		return "", err
	}
	m.Dir = s.url(dir)
	return sha256Hex(data), nil
}

func sha256Hex(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}

// Confirm makes checkpoint id committed: it checks that the pending
// manifest has checksum sum, writes the bytes it checked as _manifest and
// deletes the pending object. Repeating it after any step is safe.
func (s *Store) Confirm(id int64, sum string) error {
	dir := s.dirKey(id)
	urlOf := func(name string) string { return s.url(dir + "/" + name) }
	var pending []byte // the pending manifest, once its checksum is known
	return storage.ConfirmPending(id, sum, s.Dir(id), urlOf, func(name string) (string, error) {
		data, err := s.get(dir + "/" + name)
		if err != nil {
			return "", err
		}
		if name == storage.PendingName {
			pending = data
		}
		return sha256Hex(data), nil
	}, func() error {
		if err := s.put(dir+"/"+storage.ManifestName, bytes.NewReader(pending), int64(len(pending))); err != nil {
			return fmt.Errorf("s3store: confirm checkpoint %d: %w", id, err)
		}
		// Tidying up: a pending manifest beside a committed one counts for
		// nothing (Pending skips it), and GC removes it with its checkpoint.
		_ = s.remove(dir + "/" + storage.PendingName)
		return nil
	})
}

// LoadCommitted confirms checkpoint id (Confirm), then loads it (Load).
func (s *Store) LoadCommitted(id int64, sum string) (*storage.Manifest, error) {
	if err := s.Confirm(id, sum); err != nil {
		return nil, err
	}
	return s.Load(id)
}

// Load returns committed checkpoint id after downloading and checking its
// manifest and every file it references.
func (s *Store) Load(id int64) (*storage.Manifest, error) {
	if id < 0 {
		return nil, fmt.Errorf("s3store: load: checkpoint id %d is negative", id)
	}
	key := s.dirKey(id) + "/" + storage.ManifestName
	data, err := s.get(key)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("s3store: %s: %w", s.Dir(id), storage.ErrNoManifest)
	}
	if err != nil {
		return nil, err
	}
	m, err := storage.DecodeManifest(data, s.url(key), storage.Owner{CheckpointID: id})
	if err != nil {
		return nil, err
	}
	m.Dir = s.Dir(id)
	if err := storage.CheckCheckpoint(m, id, s.url(key)); err != nil {
		return nil, err
	}
	o := storage.OwnerOf(m)
	err = m.EachFile(func(_ string, f storage.KeyedFile) error {
		_, err := s.readKeyed(m, f, o, 0, -1)
		return err
	}, func(_ string, f storage.DBFile) error {
		return s.fetchDB(m, f, io.Discard)
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Latest returns the newest committed checkpoint (see storage.Store.Latest).
func (s *Store) Latest(opts storage.LatestOptions) (*storage.Manifest, *storage.FallbackReport, error) {
	ids, err := s.List()
	if err != nil {
		return nil, nil, err
	}
	return storage.FindLatest(ids, s.Load, opts, s.url(s.root+"/"+storage.CheckpointsDir))
}

// WriteKeyedFile uploads one state file of checkpoint id (see
// storage.Store.WriteKeyedFile); it exists once the upload completes.
func (s *Store) WriteKeyedFile(id int64, name string, first, last int, groups map[int][]byte) (storage.KeyedFile, error) {
	kf, content, err := storage.EncodeKeyedFile(id, name, first, last, groups)
	if err != nil {
		return storage.KeyedFile{}, err
	}
	if err := s.put(s.dirKey(id)+"/"+name, content, kf.Size); err != nil {
		return storage.KeyedFile{}, err
	}
	return kf, nil
}

// ReadKeyed reads the key groups lo..hi of state file f of m, downloading
// the whole file to check it; a savepoint's is read from its directory.
func (s *Store) ReadKeyed(m *storage.Manifest, f storage.KeyedFile, lo, hi int) (map[int][]byte, error) {
	if !inS3(m) {
		return storage.ReadKeyedFile(m.Dir, f, lo, hi)
	}
	if lo > hi {
		return nil, fmt.Errorf("s3store: read state file %s: empty key-group range %d..%d", f.Path, lo, hi)
	}
	return s.readKeyed(m, f, storage.OwnerOf(m), lo, hi)
}

func (s *Store) readKeyed(m *storage.Manifest, f storage.KeyedFile, o storage.Owner, lo, hi int) (map[int][]byte, error) {
	key, err := s.fileKey(m, f.Path, false)
	if err != nil {
		return nil, err
	}
	obj, size, err := s.open(key)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, o.MissingStateFile(s.url(key))
	}
	if err != nil {
		return nil, err
	}
	defer obj.Close()
	return storage.ParseKeyedFile(obj, size, f, s.url(key), o, lo, hi)
}

// PutDBFile uploads the local file src as f for checkpoint id: under
// shared/ when f.Shared, otherwise into the checkpoint's directory (see
// storage.Store.PutDBFile). Files above the client's part size go up in
// parts; an interrupted upload leaves no object.
func (s *Store) PutDBFile(id int64, src string, f storage.DBFile) (storage.DBFile, error) {
	if err := storage.CheckDBFilePut(id, f); err != nil {
		return storage.DBFile{}, err
	}
	key := s.dirKey(id) + "/" + f.Path
	if f.Shared {
		key = s.sharedKey(f.Path)
	}
	in, err := os.Open(src)
	if err != nil {
		return storage.DBFile{}, fmt.Errorf("s3store: store database file %s: %w", f.Name, err)
	}
	defer in.Close()
	h := sha256.New()
	n, err := io.Copy(h, in)
	if err == nil {
		_, err = in.Seek(0, io.SeekStart)
	}
	if err != nil {
		return storage.DBFile{}, fmt.Errorf("s3store: read %s: %w", src, err)
	}
	if err := s.put(key, in, n); err != nil {
		return storage.DBFile{}, err
	}
	f.Size, f.SHA256 = n, hex.EncodeToString(h.Sum(nil))
	return f, nil
}

// GetDBFile downloads file f of m to the local path dst (which must not
// exist), checking its size and SHA-256 (see storage.Store.GetDBFile); a
// savepoint's is copied from its directory.
func (s *Store) GetDBFile(m *storage.Manifest, f storage.DBFile, dst string) error {
	if !inS3(m) {
		return storage.RestoreDBFile(m, f, dst)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("s3store: restore database file: %w", err)
	}
	err = s.fetchDB(m, f, out)
	if cerr := out.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("s3store: restore database file: %w", cerr)
	}
	if err != nil {
		_ = os.Remove(dst)
	}
	return err
}

// CopyTo makes a savepoint of checkpoint m in the local directory dir,
// downloading every file and checking it on the way (see storage.CopyTo).
func (s *Store) CopyTo(m *storage.Manifest, dir string) (*storage.Manifest, error) {
	if !inS3(m) {
		return storage.CopyTo(m, dir)
	}
	return storage.CopyFrom(m, dir, func(m *storage.Manifest, name string, shared bool) (io.ReadCloser, int64, string, error) {
		key, err := s.fileKey(m, name, shared)
		if err != nil {
			return nil, 0, m.Dir, err
		}
		obj, size, err := s.open(key)
		if err != nil {
			return nil, 0, s.url(key), err
		}
		return obj, size, s.url(key), nil
	})
}

// fetchDB downloads file f of m into w and checks it.
func (s *Store) fetchDB(m *storage.Manifest, f storage.DBFile, w io.Writer) error {
	key, err := s.fileKey(m, f.Path, f.Shared)
	if err != nil {
		return err
	}
	o, path := storage.OwnerOf(m), s.url(key)
	obj, size, err := s.open(key)
	if errors.Is(err, fs.ErrNotExist) {
		return o.MissingDBFile(path, f)
	}
	if err != nil {
		return err
	}
	defer obj.Close()
	if err := storage.CheckDBFile(f, path, o, size, ""); err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), obj)
	if err != nil {
		return fmt.Errorf("s3store: download %s: %w", path, err)
	}
	return storage.CheckDBFile(f, path, o, n, hex.EncodeToString(h.Sum(nil)))
}

// listing is what a store holds, by checkpoint id, ascending each.
type listing struct {
	committed, uncommitted, pending []int64
	has                             map[int64]map[string]bool // file names by checkpoint
}

// scan lists the checkpoint directories. Keys Dir would not have produced
// are not ours and are left out.
func (s *Store) scan() (listing, error) {
	prefix := s.root + "/" + storage.CheckpointsDir + "/"
	l := listing{has: map[int64]map[string]bool{}}
	err := s.list(prefix, func(key string, _ int64) {
		dir, name, ok := strings.Cut(strings.TrimPrefix(key, prefix), "/")
		id, isChk := storage.ParseDirName(dir)
		if !ok || !isChk {
			return
		}
		if l.has[id] == nil {
			l.has[id] = map[string]bool{}
		}
		l.has[id][name] = true
	})
	if err != nil {
		return listing{}, err
	}
	for _, id := range slices.Sorted(maps.Keys(l.has)) {
		switch {
		case l.has[id][storage.ManifestName]:
			l.committed = append(l.committed, id)
		case l.has[id][storage.PendingName]:
			l.pending = append(l.pending, id)
			l.uncommitted = append(l.uncommitted, id)
		default:
			l.uncommitted = append(l.uncommitted, id)
		}
	}
	return l, nil
}

// List returns the ids of the checkpoints that have a manifest, ascending.
func (s *Store) List() ([]int64, error) {
	l, err := s.scan()
	return l.committed, err
}

// Pending returns the ids of checkpoints with a pending manifest and no
// committed one, ascending.
func (s *Store) Pending() ([]int64, error) {
	l, err := s.scan()
	return l.pending, err
}

// HighestID returns the highest id of any checkpoint directory, committed
// or not, 0 if there is none.
func (s *Store) HighestID() (int64, error) {
	l, err := s.scan()
	if err != nil {
		return 0, err
	}
	return storage.Highest(l.committed, l.uncommitted), nil
}

// StateID returns the store's id, creating STATE_ID on first use. The
// object is created only if it does not exist (If-None-Match), so that two
// processes starting at once agree on one id.
func (s *Store) StateID() (string, error) {
	key := s.root + "/" + storage.StateIDName
	data, err := s.get(key)
	if err == nil {
		return storage.ParseStateID(data, s.url(key))
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	id, err := storage.NewStateID()
	if err != nil {
		return "", err
	}
	created, err := s.create(key, []byte(id+"\n"))
	if err != nil {
		return "", err
	}
	if !created {
		return s.StateID() // another process was first
	}
	return id, nil
}

// GC removes the checkpoints storage.PlanGC chooses, then the shared files
// no remaining manifest references (see storage.Store.GC). A committed
// checkpoint loses its manifest first, so that an interrupted GC leaves
// an uncommitted checkpoint (garbage) rather than a damaged one.
func (s *Store) GC(retain int, keep ...int64) ([]int64, error) {
	l, err := s.scan()
	if err != nil {
		return nil, err
	}
	plan, err := storage.PlanGC(l.committed, l.uncommitted, retain, keep)
	if err != nil || len(l.committed) == 0 {
		return nil, err
	}
	var removed []int64
	var errs []error
	for _, id := range plan {
		dir := s.dirKey(id)
		if _, committed := slices.BinarySearch(l.committed, id); committed {
			if err := s.remove(dir + "/" + storage.ManifestName); err != nil {
				errs = append(errs, fmt.Errorf("s3store: gc checkpoint %d: %w", id, err))
				continue
			}
		}
		if err := s.removeAll(dir + "/"); err != nil {
			errs = append(errs, fmt.Errorf("s3store: gc checkpoint %d: %w", id, err))
			continue
		}
		removed = append(removed, id)
	}
	if err := s.gcShared(l.committed[len(l.committed)-1]); err != nil {
		errs = append(errs, err)
	}
	if err := s.abortStaleUploads(time.Now().Add(-s.staleUpload)); err != nil {
		errs = append(errs, err)
	}
	return removed, errors.Join(errs...)
}

// DefaultStaleUpload is how old an unfinished multipart upload under the
// job's root must be before GC aborts it. A process that dies while it
// uploads a large file leaves the parts stored (and billed) until the
// upload is aborted; the upload of one file of a checkpoint takes seconds,
// so an hour-old one belongs to a process long gone. (A bucket lifecycle
// rule, AbortIncompleteMultipartUpload, does the same for every prefix.)
const DefaultStaleUpload = time.Hour

// abortStaleUploads aborts the unfinished multipart uploads under the
// job's root that were started before cutoff.
func (s *Store) abortStaleUploads(cutoff time.Time) error {
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	core := minio.Core{Client: s.client}
	var errs []error
	for u := range s.client.ListIncompleteUploads(ctx, s.bucket, s.root+"/", true) {
		if u.Err != nil {
			if minio.ToErrorResponse(u.Err).Code == "NoSuchUpload" {
				return nil // some servers' answer for a bucket that never had one
			}
			return s.fail("list unfinished uploads", s.root+"/", u.Err)
		}
		if !u.Initiated.Before(cutoff) {
			continue
		}
		if err := core.AbortMultipartUpload(ctx, s.bucket, u.Key, u.UploadID); err != nil {
			errs = append(errs, s.fail("abort the unfinished upload of", u.Key, err))
		}
	}
	return errors.Join(errs...)
}

// gcShared removes the shared files storage.PlanSharedGC chooses.
func (s *Store) gcShared(newest int64) error {
	names, err := s.SharedFiles()
	if err != nil || len(names) == 0 {
		return err
	}
	l, err := s.scan()
	if err != nil {
		return err
	}
	refs, ok := storage.SharedRefs(slices.Concat(l.committed, l.uncommitted), func(id int64, name string) ([]byte, string, error) {
		key := s.dirKey(id) + "/" + name
		if !l.has[id][name] {
			return nil, s.url(key), fs.ErrNotExist
		}
		data, err := s.get(key)
		return data, s.url(key), err
	})
	if !ok {
		// A manifest could not be read: its references are unknown, so
		// keep everything until the damage is dealt with.
		return nil
	}
	var errs []error
	for _, name := range storage.PlanSharedGC(names, newest, refs) {
		if err := s.remove(s.sharedKey(name)); err != nil {
			errs = append(errs, fmt.Errorf("s3store: gc shared file: %w", err))
		}
	}
	return errors.Join(errs...)
}

// SharedFiles lists the names in the shared area, ascending (for tests and
// diagnostics).
func (s *Store) SharedFiles() ([]string, error) {
	prefix := s.sharedKey("")
	var names []string
	err := s.list(prefix, func(key string, _ int64) {
		if name := strings.TrimPrefix(key, prefix); !strings.Contains(name, "/") {
			names = append(names, name)
		}
	})
	slices.Sort(names)
	return names, err
}
