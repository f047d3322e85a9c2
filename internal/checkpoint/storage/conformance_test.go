package storage_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/onceflow/onceflow/internal/checkpoint/storage"
	"github.com/onceflow/onceflow/internal/checkpoint/storage/storagetest"
)

// TestBehaviour runs the behaviour tests every Storage passes on the local
// store; internal/checkpoint/s3store runs them on object storage.
func TestBehaviour(t *testing.T) {
	open := func(t *testing.T, root string) storage.Storage {
		s, err := storage.Open(root)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	storagetest.Run(t, storagetest.Harness{
		New:    func(t *testing.T) storage.Storage { return open(t, filepath.Join(t.TempDir(), "job")) },
		Reopen: func(t *testing.T, s storage.Storage) storage.Storage { return open(t, s.Root()) },
		Join:   func(dir, name string) string { return filepath.Join(dir, name) },
		Read: func(t *testing.T, path string) []byte {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			return data
		},
		// Write replaces the file rather than writing into it: a shared
		// database file may be a hard link to the database's own.
		Write: func(t *testing.T, path string, data []byte) {
			if err := os.WriteFile(path+".new", data, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(path+".new", path); err != nil {
				t.Fatal(err)
			}
		},
		Delete: func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		},
	})
}
