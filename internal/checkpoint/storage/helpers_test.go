package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const testMaxParallelism = 128

func newStore(t testing.TB) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "job"))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// payloads returns state for every step-th key group of first..last; the
// bytes name checkpoint, operator and group so that a mix-up shows.
func payloads(id int64, op string, first, last, step int) map[int][]byte {
	m := make(map[int][]byte)
	for g := first; g <= last; g += step {
		m[g] = []byte(strings.Repeat(fmt.Sprintf("chk%d/%s/kg%d;", id, op, g), 1+g%3))
	}
	return m
}

// writeCheckpoint writes and commits checkpoint id of a job with a keyed
// operator "counter" (two subtasks, sparse groups) and a source with blobs.
func writeCheckpoint(t testing.TB, s *Store, id int64) *Manifest {
	t.Helper()
	m := &Manifest{
		Job:            "orders",
		CheckpointID:   id,
		CreatedAt:      time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(id) * time.Minute),
		MaxParallelism: testMaxParallelism,
		Operators: map[string]*OperatorState{
			"counter": {Parallelism: 2},
			"source": {Parallelism: 1, Blobs: map[string][]byte{
				"orders-0": fmt.Appendf(nil, "offset=%d", 100*id),
				"orders-1": fmt.Appendf(nil, "offset=%d", 200*id),
			}},
		},
	}
	for i, r := range [][2]int{{0, 63}, {64, 127}} {
		f, err := s.WriteKeyedFile(id, fmt.Sprintf("counter-%d.state", i), r[0], r[1], payloads(id, "counter", r[0], r[1], 3))
		if err != nil {
			t.Fatalf("WriteKeyedFile: %v", err)
		}
		m.Operators["counter"].Keyed = append(m.Operators["counter"].Keyed, f)
	}
	if err := s.Commit(m); err != nil {
		t.Fatalf("Commit(%d): %v", id, err)
	}
	return m
}

func flipBit(t testing.TB, path string, off int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[off] ^= 1 << (off % 8)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// wantCorrupt asserts that err is a *CorruptError naming path.
func wantCorrupt(t testing.TB, err error, path string) *CorruptError {
	t.Helper()
	var ce *CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("got error %v, want *CorruptError for %s", err, path)
	}
	if ce.Path != path {
		t.Fatalf("CorruptError names %s, want %s (error: %v)", ce.Path, path, err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error message does not name %s: %v", path, err)
	}
	return ce
}

func mustWrite(t testing.TB, path string, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func exists(t testing.TB, path string) bool {
	t.Helper()
	_, err := os.Stat(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}
