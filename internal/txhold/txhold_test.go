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
	// Each batch's name is as long as it has rows.
	h := New(5, func(b string) int64 { return int64(len(b)) })
	var out []string
	write := func(b string) error { out = append(out, b); return nil }

	if h.MustHold(1) {
		t.Fatal("nothing prepared, yet epoch 1 must wait")
	}
	h.Prepared(1)
	if h.MustHold(1) || !h.MustHold(2) {
		t.Fatal("after Prepared(1): epoch 1 goes in, epoch 2 waits")
	}
	if !h.Add(2, "aa") || !h.Add(2, "bb") {
		t.Fatal("room for 4 of 5 rows refused")
	}
	if h.Add(3, "cc") {
		t.Fatal("a batch beyond the bound was held")
	}
	wake := h.Released()
	if err := h.Release(-1, write); err != nil || len(out) != 0 {
		t.Fatalf("released %v while checkpoint 1 is unresolved", out)
	}
	// Checkpoint 1 commits: epoch 2 may go into the next transaction.
	h.Committed(1)
	if err := h.Release(-1, write); err != nil || !slices.Equal(out, []string{"aa", "bb"}) || h.Size() != 0 {
		t.Fatalf("after the commit of 1: released %v, %d rows still held", out, h.Size())
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
	h.Add(3, "c")
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
	h.Add(4, "d")
	h.Add(5, "e")
	h.Add(4, "f")
	if err := h.Release(4, write); err != nil || !slices.Equal(out, []string{"d", "f"}) {
		t.Fatalf("Release(4): %v", out)
	}
	boom := errors.New("boom")
	h.Committed(4)
	h.Add(5, "g")
	n := 0
	err := h.Release(-1, func(string) error { n++; return boom })
	if !errors.Is(err, boom) || n != 1 || h.Size() != 1 {
		t.Fatalf("a failed write: err %v after %d writes, %d rows held; want the error after one, one held", err, n, h.Size())
	}

	h.Reset(9)
	if h.Size() != 0 || h.LastCommitted() != 9 || h.MustHold(10) {
		t.Fatal("Reset kept something")
	}
}

// boundScenario fills a hold of bound max with batches of epoch 2 (waiting
// for checkpoint 1) until Add refuses, and checks that the held size came
// within one batch of the bound without passing it; then that a release
// makes room, and that a batch larger than the bound alone is still held
// when the hold is empty (a writer must never wait forever).
func boundScenario[B any](t *testing.T, max int64, sizeOf func(B) int64, batches []B, huge B) {
	t.Helper()
	h := New(max, sizeOf)
	h.Prepared(1)
	added := 0
	for _, b := range batches {
		if !h.Add(2, b) {
			break
		}
		added++
		if h.Size() > max {
			t.Fatalf("after %d batches %d held, over the bound %d", added, h.Size(), max)
		}
	}
	if added == len(batches) {
		t.Fatalf("all %d batches (%d) were held under a bound of %d", added, h.Size(), max)
	}
	next := sizeOf(batches[added])
	if h.Size()+next <= max {
		t.Fatalf("Add refused a batch of %d with %d of %d held: there was room", next, h.Size(), max)
	}
	wake := h.Released()
	h.Committed(1)
	released := 0
	if err := h.Release(-1, func(B) error { released++; return nil }); err != nil {
		t.Fatal(err)
	}
	h.Wake()
	if released != added || h.Size() != 0 {
		t.Fatalf("the commit of 1 released %d of %d batches, %d still held", released, added, h.Size())
	}
	select {
	case <-wake:
	default:
		t.Fatal("a writer waiting for room was not woken")
	}
	if !h.Add(2, batches[added]) {
		t.Fatal("the refused batch does not fit in the emptied hold")
	}
	h.Prepared(2)
	if h.Add(3, huge) {
		t.Fatal("a batch larger than the bound was held beside another")
	}
	h.Committed(2)
	if err := h.Release(-1, func(B) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if !h.Add(3, huge) || h.Size() != sizeOf(huge) {
		t.Fatalf("a batch larger than the bound alone was refused by an empty hold (%d held)", h.Size())
	}
}

// The row bound of the database sinks: a batch counts its rows.
func TestRowBound(t *testing.T) {
	type batch struct{ rows int }
	var batches []batch
	for i := range 100 {
		batches = append(batches, batch{rows: 1 + i%7})
	}
	boundScenario(t, 50, func(b batch) int64 { return int64(b.rows) }, batches, batch{rows: 51})
}

// The byte bound of the Kafka sink: a record counts its bytes, whatever
// the number of records.
func TestByteBound(t *testing.T) {
	var recs [][]byte
	for i := range 1000 {
		recs = append(recs, make([]byte, 100+i*37%900))
	}
	boundScenario(t, 10_000, func(r []byte) int64 { return int64(len(r)) }, recs, make([]byte, 20_000))
}

// Drop forgets the batches it picks, keeps the order of the rest and
// gives their room back.
func TestDrop(t *testing.T) {
	h := New(10, func(b string) int64 { return int64(len(b)) })
	h.Prepared(1)
	for _, b := range []string{"a1", "b1", "a2", "b2"} {
		if !h.Add(2, b) {
			t.Fatalf("%s refused", b)
		}
	}
	h.Drop(func(b string) bool { return b[0] == 'a' })
	if h.Size() != 4 {
		t.Fatalf("%d held after dropping half of 8", h.Size())
	}
	h.Committed(1)
	var out []string
	if err := h.Release(-1, func(b string) error { out = append(out, b); return nil }); err != nil || !slices.Equal(out, []string{"b1", "b2"}) {
		t.Fatalf("released %v after the drop, want [b1 b2]", out)
	}
}
