package scaleout

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// SavepointPlace keeps a scale-out job's savepoints and the files that
// coordinate them (docs/design.md, "Savepoints of the whole job"): the
// request every instance reads, each task's result, the job savepoint's
// manifest, the restore markers, and the tasks' savepoints themselves.
// The instances share it as they share their checkpoints. Without
// CheckpointStorage it is the directory Config.Checkpoints; with
// checkpoints in object storage it is that storage
// (s3.SavepointPlace of package checkpoint/s3, Config.SavepointPlace).
//
// A location is an absolute path, or a URL such as s3://bucket/key, as
// the place writes it (Locate, Join). The protocol needs nothing but
// whole-file reads and writes: WriteFile replaces a file atomically (a
// reader sees the old content or the new, never a part), CreateFile
// writes one only if it does not exist.
type SavepointPlace interface {
	// Root is the location the job's savepoints are kept under by
	// default: <Root>/<job>.savepoints.
	Root() string
	// Locate turns a location a user named (a path, relative to the
	// working directory, or a URL) into the place's own form, or says
	// why the place cannot keep a savepoint there.
	Locate(loc string) (string, error)
	// Join names loc's descendant elem (slash-separated).
	Join(loc string, elem ...string) string
	// LocalPath is loc on this machine's filesystem, ok false when the
	// place is not a filesystem: then a task takes its savepoint into a
	// local directory and Uploads it, and Downloads it to restore.
	LocalPath(loc string) (path string, ok bool)
	// MakeDir makes loc ready to hold files (a directory; nothing in
	// object storage).
	MakeDir(loc string) error
	// List names what is directly under loc; none when loc is missing.
	List(loc string) ([]string, error)
	// ReadFile reads loc whole; an error matching fs.ErrNotExist when
	// it does not exist.
	ReadFile(loc string) ([]byte, error)
	// WriteFile replaces loc with data atomically.
	WriteFile(loc string, data []byte) error
	// CreateFile writes data as loc unless loc exists; created is false
	// when it did.
	CreateFile(loc string, data []byte) (created bool, err error)
	// Upload copies the local directory dir, with everything below it,
	// to loc.
	Upload(dir, loc string) error
	// Download copies loc, a directory Upload wrote, into the local
	// directory dir, which must not exist; an error matching
	// fs.ErrNotExist when loc holds nothing, fs.ErrInvalid when what it
	// holds is damaged (a restart cannot mend either).
	Download(loc, dir string) error
}

// DirPlace is the SavepointPlace of a directory every instance mounts:
// the default, Config.Checkpoints.
func DirPlace(root string) SavepointPlace { return dirPlace{root: root} }

type dirPlace struct{ root string }

func (p dirPlace) Root() string { return p.root }

func (p dirPlace) Locate(loc string) (string, error) {
	if strings.Contains(loc, "://") {
		return "", fmt.Errorf("%s is a URL, but this job keeps its checkpoints and savepoints in the directory %s: name a directory every instance reaches, or leave it out", loc, p.root)
	}
	return filepath.Abs(loc)
}

func (dirPlace) Join(loc string, elem ...string) string {
	return filepath.Join(append([]string{loc}, elem...)...)
}

func (dirPlace) LocalPath(loc string) (string, bool) { return loc, true }

func (dirPlace) MakeDir(loc string) error { return os.MkdirAll(loc, 0o755) }

func (dirPlace) List(loc string) ([]string, error) {
	ents, err := os.ReadDir(loc)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out, err
}

func (dirPlace) ReadFile(loc string) ([]byte, error) { return os.ReadFile(loc) }

// WriteFile writes a temporary file and renames it.
func (dirPlace) WriteFile(loc string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(loc), 0o755); err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.tmp-%d", loc, time.Now().UnixNano())
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, loc); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// CreateFile writes a temporary file and hard-links it: a link fails if
// the name exists, so one of several instances creates it.
func (p dirPlace) CreateFile(loc string, data []byte) (bool, error) {
	if err := os.MkdirAll(filepath.Dir(loc), 0o755); err != nil {
		return false, err
	}
	tmp := fmt.Sprintf("%s.tmp-%d", loc, time.Now().UnixNano())
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return false, err
	}
	err := os.Link(tmp, loc)
	_ = os.Remove(tmp)
	if errors.Is(err, os.ErrExist) {
		return false, nil
	}
	return err == nil, err
}

func (dirPlace) Upload(dir, loc string) error { return copyTree(dir, loc) }

func (dirPlace) Download(loc, dir string) error {
	if _, err := os.Stat(loc); err != nil {
		return err
	}
	return copyTree(loc, dir)
}

// copyTree copies the directory from, with everything below it, to to.
func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(dst)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			_ = out.Close()
			return err
		}
		return out.Close()
	})
}
