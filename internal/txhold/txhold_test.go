package txhold

import (
	"errors"
	"slices"
	"testing"
)

// The life of held rows: rows after a prepared barrier wait for its
// checkpoint; a commit or an abort releases them in order; a commit
// covers what waited for it; the hold has a bound; a failed write keeps
// the rest.
func TestHold(t *testing.T) {
	h := New[string](5)
	var out []string
	write := func(b string) error { out = append(out, b); return nil }

	if h.MustHold(1) {
		t.Fatal("nothing prepared, yet epoch 1 must wait")
	}
	h.Prepared(1)
	if h.MustHold(1) || !h.MustHold(2) {
		t.Fatal("after Prepared(1): epoch 1 goes in, epoch 2 waits")
	}
	if !h.Add(2, "a", 2) || !h.Add(2, "b", 2) {
		t.Fatal("room for 4 of 5 rows refused")
	}
	if h.Add(3, "c", 2) {
		t.Fatal("a batch beyond the bound was held")
	}
	wake := h.Released()
	if err := h.Release(-1, write); err != nil || len(out) != 0 {
		t.Fatalf("released %v while checkpoint 1 is unresolved", out)
	}
	// Checkpoint 1 commits: epoch 2 may go into the next transaction.
	h.Committed(1)
	if err := h.Release(-1, write); err != nil || !slices.Equal(out, []string{"a", "b"}) || h.Rows() != 0 {
		t.Fatalf("after the commit of 1: released %v, %d rows still held", out, h.Rows())
	}
	h.Wake()
	select {
	case <-wake:
	default:
		t.Fatal("Wake did not close the channel a waiter got before")
	}

	// Checkpoint 2 prepared, then aborted: what waited for it is free,
	// and a late Prepared(2) holds nothing.
	out = nil
	h.Prepared(2)
	h.Add(3, "c", 1)
	h.Aborted(2)
	h.Prepared(2)
	if h.MustHold(3) {
		t.Fatal("epoch 3 waits for the aborted checkpoint 2")
	}
	if err := h.Release(-1, write); err != nil || !slices.Equal(out, []string{"c"}) {
		t.Fatalf("after the abort of 2: released %v", out)
	}

	// The commit of 4 covers epochs up to 4 even while 3 and 4 are
	// unresolved; epoch 5 stays. A failed write keeps what follows.
	out = nil
	h.Prepared(3)
	h.Prepared(4)
	h.Add(4, "d", 1)
	h.Add(5, "e", 1)
	h.Add(4, "f", 1)
	if err := h.Release(4, write); err != nil || !slices.Equal(out, []string{"d", "f"}) {
		t.Fatalf("Release(4): %v", out)
	}
	boom := errors.New("boom")
	h.Committed(4)
	h.Add(5, "g", 1)
	n := 0
	err := h.Release(-1, func(string) error { n++; return boom })
	if !errors.Is(err, boom) || n != 1 || h.Rows() != 1 {
		t.Fatalf("a failed write: err %v after %d writes, %d rows held; want the error after one, one held", err, n, h.Rows())
	}

	h.Reset(9)
	if h.Rows() != 0 || h.LastCommitted() != 9 || h.MustHold(10) {
		t.Fatal("Reset kept something")
	}
}
