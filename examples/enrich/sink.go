package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/onceflow/onceflow/connector"
	"github.com/onceflow/onceflow/flow"
)

// epochFilesSpec declares the sink to the connector registry, from this
// module, the way onceflow's own connectors do in their spec.go: the
// registry is open to code outside onceflow.
var epochFilesSpec = connector.Spec{
	Name:    "epoch-files",
	Summary: "Writes each checkpoint's records of each subtask to a file, made visible when the checkpoint commits (an example of a sink registered from outside onceflow).",
	Doc: "Prepare writes the epoch to `<dir>/pending/<subtask>-<checkpoint>.tmp` and syncs it; " +
		"Commit renames it to `<dir>/out/`, idempotently; Open deletes what was prepared after the restored checkpoint. " +
		"It is not a commit point: the checkpoint manifest (or another sink's transaction) is, and this sink takes part in it.",
	Sink: &connector.Side{
		Section: "sink.epoch-files",
		Fields: []connector.Field{
			{Name: "dir", Type: "path", Required: true, Doc: "The directory holding pending/ and out/."},
		},
	},
	Deliveries: []connector.Delivery{connector.ExactlyOnce, connector.TwoPhase},
	GoPackage:  "github.com/onceflow/onceflow/examples/enrich",
}

func init() { connector.Register(epochFilesSpec) }

// epochFiles is an exactly-once sink on the two-phase-commit contract of
// flow.Sink (see the package comment). Each line it writes is one record.
type epochFiles struct{ dir string }

var _ flow.Sink[string] = epochFiles{}

func (s epochFiles) pending(h string) string { return filepath.Join(s.dir, "pending", h+".tmp") }
func (s epochFiles) final(h string) string   { return filepath.Join(s.dir, "out", h+".txt") }

// handleOf names the epoch of checkpoint id of subtask sub.
func handleOf(sub int, id int64) string { return fmt.Sprintf("%d-%020d", sub, id) }

func parseHandle(h string) (sub int, id int64, err error) {
	a, b, ok := strings.Cut(h, "-")
	if ok {
		sub, err = strconv.Atoi(a)
		if err == nil {
			id, err = strconv.ParseInt(b, 10, 64)
		}
	}
	if !ok || err != nil {
		return 0, 0, fmt.Errorf("bad handle %q", h)
	}
	return sub, id, nil
}

// Open aborts what this subtask (or, after a lower parallelism, a former
// subtask it now covers) prepared for checkpoints after the restored one:
// those never reached the commit point and the restored job writes their
// records again.
func (s epochFiles) Open(_ context.Context, sc flow.SinkContext) (flow.SinkWriter[string], error) {
	for _, d := range []string{"pending", "out"} {
		if err := os.MkdirAll(filepath.Join(s.dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	files, err := filepath.Glob(filepath.Join(s.dir, "pending", "*.tmp"))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		sub, id, err := parseHandle(strings.TrimSuffix(filepath.Base(f), ".tmp"))
		if err != nil {
			return nil, err
		}
		if sub%sc.Parallelism == sc.Subtask && id > sc.RestoredCheckpoint {
			if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
		}
	}
	return &epochWriter{s: s, subtask: sc.Subtask}, nil
}

// Committer commits the handles of the restored checkpoint on recovery,
// before any writer is open.
func (s epochFiles) Committer(context.Context, string, string) (flow.SinkCommitter, error) {
	return epochCommitter{s}, nil
}

// commit moves a prepared epoch into place. It is idempotent: recovery
// commits the handles of the restored checkpoint again, and a handle whose
// pending file is gone while its final file exists was committed before.
func (s epochFiles) commit(handle []byte) error {
	if len(handle) == 0 {
		return nil // an empty epoch
	}
	h := string(handle)
	if _, _, err := parseHandle(h); err != nil {
		return err
	}
	err := os.Rename(s.pending(h), s.final(h))
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(s.final(h)); serr == nil {
			return nil // committed before
		}
	}
	if err != nil {
		return fmt.Errorf("commit %s: %w", h, err)
	}
	return syncDir(filepath.Join(s.dir, "out"))
}

type epochCommitter struct{ s epochFiles }

func (c epochCommitter) Commit(_ context.Context, _ int64, h []byte) error { return c.s.commit(h) }
func (epochCommitter) Close() error                                        { return nil }

type epochWriter struct {
	s       epochFiles
	subtask int
	buf     []byte
}

func (w *epochWriter) Write(_ context.Context, line string) error {
	w.buf = append(append(w.buf, line...), '\n')
	return nil
}

// Prepare makes the epoch durable but invisible, and names it.
func (w *epochWriter) Prepare(_ context.Context, id int64) ([]byte, error) {
	if len(w.buf) == 0 {
		return nil, nil
	}
	h := handleOf(w.subtask, id)
	if err := writeFileSync(w.s.pending(h), w.buf); err != nil {
		return nil, fmt.Errorf("prepare checkpoint %d: %w", id, err)
	}
	w.buf = w.buf[:0]
	return []byte(h), nil
}

func (w *epochWriter) Commit(_ context.Context, _ int64, h []byte) error { return w.s.commit(h) }

// Close drops what was written but not prepared.
func (w *epochWriter) Close() error { w.buf = nil; return nil }

func writeFileSync(path string, data []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
