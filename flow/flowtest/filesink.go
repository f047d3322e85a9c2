package flowtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/onceflow/onceflow/flow"
)

// FileSink is a durable transactional sink for process-level tests (a job
// that is SIGKILLed and restarted): Prepare writes the epoch's records to
// DIR/sub-<subtask>/<id>.pending and syncs it; Commit renames it to
// <id>.committed. Records are one line each, as encoded by the encode
// function (which must not produce newlines).
type FileSink[T any] struct {
	dir    string
	encode func(T) []byte
}

// NewFileSink returns a file sink writing under dir.
func NewFileSink[T any](dir string, encode func(T) []byte) *FileSink[T] {
	return &FileSink[T]{dir: dir, encode: encode}
}

func pendingName(id int64) string { return fmt.Sprintf("%020d.pending", id) }

// Open implements flow.Sink. It deletes the pending files of the subtasks it
// now covers with an id above the restored checkpoint: they never reached a
// commit point.
func (s *FileSink[T]) Open(_ context.Context, sc flow.SinkContext) (flow.SinkWriter[T], error) {
	subs, _ := filepath.Glob(filepath.Join(s.dir, "sub-*"))
	for _, sub := range subs {
		idx, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(sub), "sub-"))
		if err != nil || idx%sc.Parallelism != sc.Subtask {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(sub, "*.pending"))
		for _, f := range files {
			id, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(f), ".pending"), 10, 64)
			if err == nil && id > sc.RestoredCheckpoint {
				if err := os.Remove(f); err != nil {
					return nil, err
				}
			}
		}
	}
	dir := filepath.Join(s.dir, "sub-"+strconv.Itoa(sc.Subtask))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &fileWriter[T]{s: s, dir: dir}, nil
}

// Committer implements flow.Sink.
func (s *FileSink[T]) Committer(context.Context, string, string) (flow.SinkCommitter, error) {
	return fileCommitter{s.dir}, nil
}

type fileCommitter struct{ dir string }

// Commit renames the pending file named by handle; done already is fine.
func (c fileCommitter) Commit(_ context.Context, id int64, handle []byte) error {
	pending := filepath.Join(c.dir, string(handle))
	committed := strings.TrimSuffix(pending, ".pending") + ".committed"
	if _, err := os.Stat(committed); err == nil {
		return nil
	}
	if err := os.Rename(pending, committed); err != nil {
		return fmt.Errorf("commit checkpoint %d: %w", id, err)
	}
	return syncDir(filepath.Dir(committed))
}

func (c fileCommitter) Close() error { return nil }

type fileWriter[T any] struct {
	s   *FileSink[T]
	dir string
	buf bytes.Buffer
}

func (w *fileWriter[T]) Write(_ context.Context, rec T) error {
	w.buf.Write(w.s.encode(rec))
	w.buf.WriteByte('\n')
	return nil
}

func (w *fileWriter[T]) Prepare(_ context.Context, id int64) ([]byte, error) {
	path := filepath.Join(w.dir, pendingName(id))
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(w.buf.Bytes()); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	if err := syncDir(w.dir); err != nil {
		return nil, err
	}
	w.buf.Reset()
	rel, _ := filepath.Rel(w.s.dir, path)
	return []byte(rel), nil
}

func (w *fileWriter[T]) Commit(ctx context.Context, id int64, h []byte) error {
	return fileCommitter{w.s.dir}.Commit(ctx, id, h)
}

func (w *fileWriter[T]) Close() error { w.buf.Reset(); return nil }

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ReadCommitted returns the committed lines of a FileSink directory, per
// subtask in checkpoint order, subtasks in index order.
func ReadCommitted(dir string) ([][]byte, error) {
	subs, err := filepath.Glob(filepath.Join(dir, "sub-*"))
	if err != nil {
		return nil, err
	}
	sort.Strings(subs)
	var out [][]byte
	for _, sub := range subs {
		files, _ := filepath.Glob(filepath.Join(sub, "*.committed"))
		sort.Strings(files)
		for _, f := range files {
			fh, err := os.Open(f)
			if err != nil {
				return nil, err
			}
			sc := bufio.NewScanner(fh)
			sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
			for sc.Scan() {
				out = append(out, append([]byte(nil), sc.Bytes()...))
			}
			err = errors.Join(sc.Err(), fh.Close())
			if err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
